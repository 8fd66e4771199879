//! One reconcile of an Install, as a short sequence of named steps, each in the module of what it reads or writes.
//! Observe: assign the account (`account`), resolve the content (`resolve`), read what it takes over (`takeover`),
//! measure what the account lacks and what the policies say of it (`measure`). Decide: `plan::decide` (pure). Write:
//! hold over a policy, await approval, require the webhook's guard (`steps`); grant exactly the approved rules
//! (`grants`); apply as the account and prune (`apply`); report (`report`). This file holds the sequence, what a
//! pass knows ([`Pass`]), the controller's settings and context: a step that cannot go on answers why ([`Stop`]),
//! and the sequence has `report` write it.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::cluster::{Cluster, ClusterError};
use super::conditions::Outcome;
use super::content::install_namespace;
use super::objects::ApplyError;
use super::resolve::{self, Resolver};
use super::{account, apply, grants, measure, plan, report, steps, takeover};
use crate::api::component::component_label_key;
use crate::api::v2alpha1::{Install, InstallStatus, ADOPTED_FROM_ANNOTATION};
use crate::category::Categorized;
use crate::controller::runner::Basics;
use crate::webhook::configuration::WebhookService;

/// Installed reason while the approval webhook does not guard Installs.
pub const APPROVAL_WEBHOOK_UNAVAILABLE: &str = "ApprovalWebhookUnavailable";

/// Settings of the Install controller.
#[derive(Clone, Debug)]
pub struct InstallOptions {
    /// Where eponymous ServiceAccounts are created: the controller's own namespace.
    pub controller_namespace: String,
    /// Where the approval webhook is reached; nothing is granted or applied unless its configurations send
    /// Installs there and it answers.
    pub webhook: WebhookService,
}

/// What a reconcile needs.
pub struct Context {
    pub cluster: Cluster,
    pub resolver: Resolver,
    pub options: InstallOptions,
    /// The metrics, and the pace: a settled object looked at again every `resync` (drift, moved tags, changed
    /// RBAC, catalog polling), a failed or rolling-out one after `retry`.
    pub basics: Basics,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Apply(#[from] ApplyError),
}

impl Categorized for ReconcileError {
    fn category(&self) -> &'static str {
        match self {
            Self::Cluster(error) => error.category(),
            Self::Apply(error) => error.category(),
        }
    }

    /// The reconcile only lost a race with a change of the Install, which the next one sees.
    fn is_conflict(&self) -> bool {
        matches!(self, Self::Cluster(error) if error.is_conflict())
    }
}

/// The name of the Operator owning an Install, whose component label everything it applies carries.
pub fn owning_operator(install: &Install) -> Option<String> {
    install
        .owner_references()
        .iter()
        .find(|owner| owner.kind == "Operator" && owner.api_version == "operators.coreos.com/v2alpha1")
        .map(|owner| owner.name.clone())
}

/// What the pass knows of the Install, and the status it builds to write at its end.
pub struct Pass<'a> {
    pub install: &'a Install,
    pub name: String,
    pub uid: String,
    /// The status as the pass found it.
    pub previous: InstallStatus,
    /// The namespace the content goes to (its OperatorGroups assign the account).
    pub namespace: String,
    /// The component label of the Operator owning the Install, which everything it applies carries.
    pub label: Option<String>,
    /// The status being built.
    pub status: InstallStatus,
}

impl<'a> Pass<'a> {
    pub fn new(install: &'a Install) -> Self {
        let previous = install.status.clone().unwrap_or_default();
        let status = InstallStatus {
            resolved: previous.resolved.clone(),
            pending: previous.pending.clone(),
            applied: previous.applied.clone(),
            granted: previous.granted.clone(),
            approved_content: previous.approved_content.clone(),
            adopted_from: install.annotations().get(ADOPTED_FROM_ANNOTATION).cloned(),
            ..InstallStatus::default()
        };
        Self {
            install,
            name: install.name_any(),
            uid: install.uid().unwrap_or_default(),
            namespace: install_namespace(&install.spec.namespaces),
            label: owning_operator(install).as_deref().map(component_label_key),
            previous,
            status,
        }
    }
}

/// Why a step ended the pass: the outcome to report, when to look again, and the Install's resourceVersion the
/// status may only be written at (when the step voided an approval or shows a pending set: an approval given since
/// must not be answered with a status judged without it).
pub struct Stop {
    pub outcome: Outcome,
    pub requeue: Duration,
    pub precondition: Option<String>,
}

impl Stop {
    pub fn new(outcome: Outcome, requeue: Duration) -> Self {
        Self { outcome, requeue, precondition: None }
    }

    /// The same stop, its status written only while the Install is at `precondition`.
    pub fn at(self, precondition: Option<String>) -> Self {
        Self { precondition, ..self }
    }
}

/// Goes on to the next step with `T`, or ends the pass ([`Stop`]).
pub type Step<T> = std::ops::ControlFlow<Stop, T>;

/// The value a step went on with; or, the step's stop reported, the end of the pass.
macro_rules! step {
    ($ctx:expr, $pass:expr, $step:expr) => {
        match $step {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(stop) => return report::finish(&$ctx, &$pass, stop).await,
        }
    };
}

/// Reconciles one Install: observe (the account, the content, what it takes over, what the account lacks, the
/// policies), decide (the gate), then the write steps in order; any step may end the pass, its reason reported.
pub async fn reconcile(install: Arc<Install>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if install.metadata.deletion_timestamp.is_some() {
        // Garbage collection removes what the Install owns.
        return Ok(Action::await_change());
    }
    let (person, changed_by) = plan::person_required(install.annotations());
    let mut pass = Pass::new(&install);
    // Observe.
    let account = step!(ctx, pass, account::assign_account(&ctx, &mut pass).await?);
    let content = step!(ctx, pass, resolve::resolve_content(&ctx, &pass, &account).await?);
    let taken = takeover::taken_over(&ctx, &pass).await?;
    let measured = step!(ctx, pass, measure::measure_permissions(&ctx, &pass, &account, &content).await?);
    measure::evaluate_policies(&ctx, &mut pass, &content, &measured, taken.as_ref()).await?;
    // Decide.
    let decision = plan::decide(&plan::Observed {
        approval: install.spec.approval,
        generation: install.metadata.generation,
        previous: &pass.previous,
        policy: pass.status.policy.as_ref(),
        resolved: &content.resolved,
        objects: &content.objects,
        to_approve: &measured.split.to_approve,
        follows: &measured.split.follows,
        needed: &measured.needed,
        own_grants: &measured.own_grants,
        person,
    });
    // Write, each step able to end the pass; the status being built records what was resolved and granted.
    pass.status.resolved = content.resolved.clone();
    pass.status.granted = decision.granted;
    step!(ctx, pass, steps::hold_over_policy(&ctx, &mut pass, decision.held).await?);
    let grant = step!(
        ctx,
        pass,
        steps::await_approval(&ctx, &mut pass, decision.gate, &measured, &account, changed_by.clone()).await?
    );
    step!(ctx, pass, steps::require_guard(&ctx, &pass, &grant, &content).await?);
    step!(ctx, pass, grants::grant(&ctx, &mut pass, &account, &content, &measured, &grant).await?);
    let applied = step!(
        ctx,
        pass,
        apply::apply_content(&ctx, &pass, &account, &content, taken.as_ref(), decision.same_content).await?
    );
    report::report_applied(&ctx, pass, &account, &content, applied, changed_by).await
}

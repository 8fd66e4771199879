//! One reconcile of an Install, as a short sequence of named steps: observe (`observe`: assign its ServiceAccount,
//! resolve its content, measure what the account lacks, read what it takes over and the policies), decide (`gate`,
//! and `plan` for the rest: pure), then write (`steps`: hold over a policy, await approval, require the webhook's
//! guard, grant exactly the approved rules, apply as the account and prune, report). This file holds the sequence,
//! the controller's settings and context, and the status report every step ends with.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::apply::ApplyError;
use super::cluster::{Cluster, ClusterError};
use super::conditions::{self, Outcome};
use super::gate::{gate, GateInput};
use super::observe::{self, Pass};
use super::plan;
use super::resolve::Resolver;
use super::steps;
use crate::api::v2alpha1::{Install, InstallStatus};
use crate::category::Categorized;
use crate::controller::next;
use crate::webhook::configuration::WebhookService;

/// Installed reason while the approval webhook does not guard Installs.
pub const APPROVAL_WEBHOOK_UNAVAILABLE: &str = "ApprovalWebhookUnavailable";

/// Settings of the Install controller.
#[derive(Clone, Debug)]
pub struct InstallOptions {
    /// Where eponymous ServiceAccounts are created: the controller's own namespace.
    pub controller_namespace: String,
    /// How often a settled Install is checked again (drift, moved tags, changed RBAC).
    pub resync: Duration,
    /// How soon a failed or rolling-out Install is tried again.
    pub retry: Duration,
    /// Where the approval webhook is reached; nothing is granted or applied unless its configurations send
    /// Installs there and it answers.
    pub webhook: WebhookService,
}

/// What a reconcile needs.
pub struct Context {
    pub cluster: Cluster,
    pub resolver: Resolver,
    pub options: InstallOptions,
    pub metrics: Arc<crate::metrics::Metrics>,
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

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Writes the status for `outcome` (only while the Install is at `precondition`, when given) and records its events;
/// answers the Install as written.
pub(super) async fn report(
    ctx: &Context,
    install: &Install,
    mut status: InstallStatus,
    outcome: &Outcome,
    precondition: Option<&str>,
) -> Result<Install, ReconcileError> {
    let previous = install.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let generation = install.metadata.generation;
    status.conditions = conditions::conditions(outcome, status.policy.as_ref(), &previous, generation, &now());
    status.state = Some(conditions::state(outcome));
    status.observed_generation = generation;
    if install.status.as_ref() == Some(&status) {
        // The status says it already: no write (kube-apiserver would store nothing, but a request is a request, and a
        // start would make one per Install).
        return Ok(install.clone());
    }
    let written = ctx.cluster.write_status(install, &status, precondition).await?;
    ctx.cluster.events.publish(install, &conditions::transitions(&previous, &status.conditions)).await;
    Ok(written)
}

/// Reconciles one Install: observe (the account, the content, what the account lacks, what is taken over, the
/// policies), decide (the gate), then the write steps in order; any step may end the pass, its reason reported.
pub async fn reconcile(install: Arc<Install>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if install.metadata.deletion_timestamp.is_some() {
        // Garbage collection removes what the Install owns.
        return Ok(Action::await_change());
    }
    let mut pass = Pass::new(&install);
    let account = next!(observe::assign_account(&ctx, &mut pass).await?);
    let content = next!(observe::resolve_content(&ctx, &pass, &account).await?);
    let measured = next!(observe::measure_permissions(&ctx, &mut pass, &account, &content).await?);
    let (person, changed_by) = plan::person_required(install.annotations());
    let same_content = plan::same_content(&pass.previous, &content.resolved, install.metadata.generation);
    let recorded_pending = pass.previous.pending.as_ref().map(|p| p.permissions.clone()).unwrap_or_default();
    let decision = gate(&GateInput {
        approval: install.spec.approval,
        recorded_pending: &recorded_pending,
        recorded_content: &pass.previous.resolved,
        approved_content: &pass.previous.approved_content,
        resolved: &content.resolved,
        missing: &measured.split.to_approve,
        follows: &measured.split.follows,
        needed: &measured.needed,
        person,
    });
    pass.status.resolved = content.resolved.clone();
    let taken = observe::takeover(&ctx, &pass).await?;
    observe::evaluate_policies(&ctx, &mut pass, &content, &measured, taken.as_ref()).await?;

    next!(steps::hold_over_policy(&ctx, &mut pass, &content, &decision).await?);
    let grant = next!(steps::await_approval(&ctx, &mut pass, decision, &measured, &account, changed_by.clone()).await?);
    next!(steps::require_guard(&ctx, &pass, &grant, &content).await?);
    next!(steps::grant(&ctx, &mut pass, &account, &content, &measured, &grant).await?);
    let applied = next!(steps::apply_content(&ctx, &mut pass, &account, &content, taken.as_ref(), same_content).await?);
    steps::report_applied(&ctx, pass, &account, &content, applied, changed_by).await
}

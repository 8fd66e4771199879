//! One reconcile of an Install: assign its ServiceAccount, resolve its content, compute what the account lacks,
//! gate on approval, grant exactly the approved rules, apply as the account, prune, and report. The decisions are
//! the pure functions of the sibling modules; this file sequences the reads and writes around them.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::Value;

use super::account::{assign_service_account, Assignment};
use super::apply::{self, service_account_user, ApplyError};
use super::cluster::{Cluster, ClusterError};
use super::conditions::{self, Outcome};
use super::content::{self, decorate, install_namespace, sort_for_apply, Decoration};
use super::crd_safety;
use super::drift;
use super::follows;
use super::gate::{add_grants, gate, Gate, GateInput, PersonRequired};
use super::grants::{grant_objects, GrantOwner, FOLLOWED_ANNOTATION};
use super::resolve::{Resolved, Resolver, StoredCertificates};
use super::takeover;
use crate::api::component::component_label_key;
use crate::api::v2alpha1::{
    Approval, Install, InstallState, InstallStatus, PendingPermissions, ADOPTED_FROM_ANNOTATION,
    CONTENT_CHANGED_BY_ANNOTATION, MANUAL_APPROVAL_ANNOTATION,
};
use crate::category::Categorized;
use crate::controller::conditions::Transition;
use crate::rbac::{
    disclose, missing_permissions, required_permissions, KindIndex, RbacSnapshot, RequiredPermissions, UserInfo,
};
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
async fn report(
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

/// Reconciles one Install.
pub async fn reconcile(install: Arc<Install>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if install.metadata.deletion_timestamp.is_some() {
        // Garbage collection removes what the Install owns.
        return Ok(Action::await_change());
    }
    let name = install.name_any();
    let uid = install.uid().unwrap_or_default();
    let previous = install.status.clone().unwrap_or_default();
    let namespace = install_namespace(&install.spec.namespaces);
    let operator = owning_operator(&install);
    let label = operator.as_deref().map(component_label_key);

    let groups = ctx.cluster.operator_groups(&namespace).await?;
    let assignment = assign_service_account(
        previous.service_account_ref.as_ref(),
        &name,
        &uid,
        &namespace,
        &groups,
        &ctx.options.controller_namespace,
    );
    let account = assignment.account().clone();
    let mut status = InstallStatus {
        service_account_ref: Some(account.clone()),
        resolved: previous.resolved.clone(),
        pending: previous.pending.clone(),
        applied: previous.applied.clone(),
        granted: previous.granted.clone(),
        approved_content: previous.approved_content.clone(),
        adopted_from: install.annotations().get(ADOPTED_FROM_ANNOTATION).cloned(),
        ..InstallStatus::default()
    };
    if let Assignment::Eponymous(account) = &assignment {
        match ctx.cluster.ensure_service_account(&install, account, label.as_deref()).await {
            Ok(()) => {}
            Err(error @ ClusterError::ServiceAccountTaken { .. }) => {
                tracing::warn!(install = %name, %error, "refusing a ServiceAccount not created for this Install");
                let outcome = Outcome::ApplyFailed { reason: error.category(), message: error.to_string() };
                report(&ctx, &install, status, &outcome, None).await?;
                return Ok(Action::requeue(ctx.options.retry));
            }
            Err(error) => return Err(error.into()),
        }
    }
    // An OperatorGroup's account lends what it held before only where the Install's creator may use it, and whoever
    // named it in the group could run as it; otherwise, like the Install's own account, only what was granted for
    // this Install's uid counts as approved.
    let lends_existing_rights = match &assignment {
        Assignment::OperatorGroup { account, group } => {
            let group = groups.iter().find(|candidate| candidate.name_any() == *group);
            ctx.cluster.creator_may_use(&install, account).await? && ctx.cluster.namer_may_use(group, account).await?
        }
        Assignment::Eponymous(_) => false,
    };
    let user = service_account_user(&account);

    let kinds = ctx.cluster.kinds(false).await?;
    let client = ctx.cluster.as_account(&account)?;
    let certificates = StoredCertificates::from_secrets(&apply::applied_secrets(&client, &previous.applied).await);
    let resolved = match ctx.resolver.resolve(&install, &kinds, &groups, &certificates).await {
        Ok(resolved) => resolved,
        Err(error) => {
            let message = crate::error::report(&error);
            let outcome = if error.is_import_failure() {
                Outcome::ImportFailed { message }
            } else {
                Outcome::Invalid { reason: error.category(), message }
            };
            report(&ctx, &install, status, &outcome, None).await?;
            return Ok(Action::requeue(ctx.options.retry));
        }
    };
    let Resolved { mut objects, resolved: resolved_content, csvs } = resolved;
    decorate(&mut objects, &Decoration { install: &name, uid: &uid, component_label: label.as_deref() });
    sort_for_apply(&mut objects);

    // Content defines only new APIs: a CRD naming a resource the cluster serves with no CRD behind it (a built-in,
    // an aggregated API) is refused, before anything counts the rules on that resource as the content's own.
    for reference in crd_safety::crds_naming_served_apis(&objects, &kinds, &previous.applied) {
        if apply::get(&ctx.cluster.client, &kinds, &reference).await?.is_none() {
            let message = format!(
                "CustomResourceDefinition {} names a resource the API server already serves (a built-in or aggregated API): content may define only new APIs",
                reference.name
            );
            let outcome = Outcome::Invalid { reason: "CrdNamesServedApi", message };
            report(&ctx, &install, status, &outcome, None).await?;
            return Ok(Action::requeue(ctx.options.resync));
        }
    }
    let mut kinds = kinds;
    kinds.add_crds(objects.iter());
    if objects.iter().any(|object| !known(&kinds, object)) {
        kinds = ctx.cluster.kinds(true).await?;
        kinds.add_crds(objects.iter());
    }
    let (rbac, snapshot) = ctx.cluster.rbac_objects().await?;
    let required = match required_permissions(&objects, &kinds, &snapshot.roles) {
        Ok(required) => required,
        Err(error) => {
            let outcome = Outcome::Invalid { reason: error.category(), message: error.to_string() };
            report(&ctx, &install, status, &outcome, None).await?;
            return Ok(Action::requeue(ctx.options.resync));
        }
    };
    // Whom the content's bindings bind and what its aggregated roles gather, shown beside the rules to approve.
    let disclosure = match disclose(&objects, &snapshot.roles) {
        Ok(disclosure) => disclosure,
        Err(error) => {
            let outcome = Outcome::Invalid { reason: error.category(), message: error.to_string() };
            report(&ctx, &install, status, &outcome, None).await?;
            return Ok(Action::requeue(ctx.options.resync));
        }
    };
    let account_user = UserInfo::service_account(&account.namespace, &account.name);
    let owned = rbac.owned_by(&uid);
    // What was granted for this Install, read from the grants themselves: a pass that failed after granting still
    // leaves them counted, here and by the webhook.
    let own_grants = owned.granted_rules();
    status.granted = add_grants(&status.granted, &own_grants);
    let lent = if lends_existing_rights { rbac.without_other_installs(&uid) } else { owned.clone() };
    let held = lent.snapshot();
    // What the content's own Roles and bindings pass on must have been approved by a person: verbs that only
    // followed from a `create` never count for them (`follows`).
    let approved = lent.without_annotated(FOLLOWED_ANNOTATION).snapshot();
    let content_apply = RequiredPermissions { apply: required.apply.clone(), grants: Vec::new() };
    let content_rbac = RequiredPermissions { apply: Vec::new(), grants: required.grants.clone() };
    let missing_for_rbac = missing_permissions(&content_rbac, &approved, &account_user);
    let mut missing = missing_permissions(&content_apply, &held, &account_user);
    missing.permissions = add_grants(&missing.permissions, &missing_for_rbac.permissions);
    missing.missing_roles.extend(missing_for_rbac.missing_roles.iter().cloned());
    // The per-object verbs on objects not there yet whose create was granted for this Install follow from it.
    let candidates = follows::candidates(&missing.permissions, &own_grants, &missing_for_rbac.permissions);
    let absent = if candidates.is_empty() {
        BTreeSet::new()
    } else {
        apply::absent(&client, &ctx.cluster.client, &kinds, &objects, &candidates, &follows::existing_rbac(&rbac))
            .await?
    };
    let split = follows::split(&missing.permissions, &own_grants, &absent);
    let needed = missing_permissions(&required, &RbacSnapshot::default(), &account_user);
    let recorded_pending = previous.pending.as_ref().map(|p| p.permissions.clone()).unwrap_or_default();
    let same_content =
        previous.resolved == resolved_content && previous.observed_generation == install.metadata.generation;
    let manual = install.annotations().get(MANUAL_APPROVAL_ANNOTATION).is_some_and(|value| value == "true");
    let changed_by = install.annotations().get(CONTENT_CHANGED_BY_ANNOTATION).cloned();
    let person = if changed_by.is_some() {
        Some(PersonRequired::ContentChanged)
    } else if manual {
        Some(PersonRequired::Manual)
    } else {
        None
    };
    let decision = gate(&GateInput {
        approval: install.spec.approval,
        recorded_pending: &recorded_pending,
        recorded_content: &previous.resolved,
        approved_content: &previous.approved_content,
        resolved: &resolved_content,
        missing: &split.to_approve,
        follows: &split.follows,
        needed: &needed.permissions,
        person,
    });
    status.resolved = resolved_content.clone();
    // An Install made for an operator OLM v0 installed takes over what was made for its CSV, on its first apply, and
    // only while that CSV is the one recorded.
    let takeover = match takeover::first_apply(&install, &previous.applied) {
        Some(takeover) => ctx.cluster.taken_csv(&takeover).await?.map(|csv| (takeover, csv)),
        None => None,
    };
    let content_crds = takeover::owned_crds(&objects);
    // Every grant and apply measures against the policies of the moment; their ceilings are the cluster's own
    // ClusterRoles, never those an Install applied (content must not widen what it is measured against).
    let policies = ctx.cluster.install_policies().await?;
    if !policies.is_empty() {
        let ceiling_roles = crate::policy::ceiling::ceiling_roles(&rbac);
        // The content's own APIs are its CRDs that do not exist yet, or that it made (or takes over): read now,
        // as the controller, since grants come before the apply's own refusal to take over a CRD.
        let mut own_crds = BTreeSet::new();
        for crd in objects.iter().filter(|object| object["kind"] == "CustomResourceDefinition") {
            let reference = content::applied_ref(crd);
            let live = apply::get(&ctx.cluster.client, &kinds, &reference).await?;
            let taken_over = |live: &Value| {
                takeover
                    .as_ref()
                    .is_some_and(|(takeover, csv)| takeover::made_for_csv(live, takeover, csv, &content_crds, &name))
            };
            if content::own_crd(live.as_ref(), &name, &uid, taken_over) {
                own_crds.insert(reference.name);
            }
        }
        let own = crate::policy::ceiling::own_api_rules(&objects, &own_crds);
        status.policy = crate::policy::evaluate(&policies, &ceiling_roles, &kinds, &objects, &needed.permissions, &own);
    }
    if let Some(violations) = status.policy.as_ref().filter(|p| crate::policy::exceeds(Some(p))) {
        // Content let through before a policy tightened keeps running where it was, re-applied with what it holds
        // and nothing more; anything else over a policy waits, whatever was approved.
        let grant = match &decision {
            Gate::Apply { grant } => Some(grant.as_slice()),
            Gate::AwaitApproval { .. } => None,
        };
        let placed: Vec<_> = objects.iter().map(content::applied_ref).collect();
        let running = grant.is_some_and(|grant| {
            crate::policy::runs_on(grant, &resolved_content, &previous.approved_content, &placed, &previous.applied)
        });
        if !running {
            let summary = crate::policy::summary(&violations.violations);
            tracing::info!(install = %name, "content exceeds an InstallPolicy: {summary}");
            // No approval stands for content over a policy: one given before the policy changed is void.
            let mut read_at = install.resource_version();
            if install.spec.approval == Approval::Approved {
                read_at = ctx.cluster.revoke_approval(&install).await?.resource_version();
            }
            status.pending = Some(PendingPermissions::default());
            let outcome = Outcome::ExceedsPolicy { summary, installed_before: !previous.applied.is_empty() };
            report(&ctx, &install, status, &outcome, read_at.as_deref()).await?;
            return Ok(Action::requeue(ctx.options.resync));
        }
    }

    let grant = match decision {
        Gate::AwaitApproval { pending, reason, revoke_approval } => {
            // The approval goes before the new pending set is shown, and the set is shown only if no approval came
            // since the Install was read: an approval stands for the pending set it was judged against, never for
            // one written after it.
            let mut read_at = install.resource_version();
            if revoke_approval {
                read_at = ctx.cluster.revoke_approval(&install).await?.resource_version();
            }
            let count = pending.len();
            status.pending = Some(PendingPermissions {
                count: count as i64,
                permissions: pending,
                reason: Some(reason),
                bindings: disclosure.bindings,
                aggregations: disclosure.aggregations,
            });
            let outcome = Outcome::AwaitingApproval {
                count,
                reason,
                changed_by,
                account: format!("{}/{}", account.namespace, account.name),
                installed_before: !previous.applied.is_empty(),
            };
            report(&ctx, &install, status, &outcome, read_at.as_deref()).await?;
            return Ok(Action::requeue(ctx.options.resync));
        }
        Gate::Apply { grant } => grant,
    };

    // The guard matters where an approval lets something through: a grant, or content not let through before. A
    // settled Install applying the same content again (drift, resync) relies on no approval, and skips the three
    // requests.
    let lets_through = !grant.is_empty() || resolved_content != previous.approved_content;
    let problems =
        if lets_through { ctx.cluster.approval_guard(&install, &ctx.options.webhook).await? } else { Vec::new() };
    if !problems.is_empty() {
        let message = format!(
            "refusing to grant or apply while the approval webhook does not guard Installs: {}",
            problems.join("; ")
        );
        tracing::warn!(install = %name, "{message}");
        // An approval standing now may have been given while nothing checked it: it is void, and must be given
        // again once the webhook guards (the revocation itself fails, and is retried, while the webhook is down).
        let mut read_at = None;
        if install.spec.approval == Approval::Approved {
            read_at = ctx.cluster.revoke_approval(&install).await?.resource_version();
        }
        let outcome = Outcome::ApplyFailed { reason: APPROVAL_WEBHOOK_UNAVAILABLE, message };
        report(&ctx, &install, status, &outcome, read_at.as_deref()).await?;
        return Ok(Action::requeue(ctx.options.retry));
    }
    if !split.follows.is_empty() {
        // Every grant the gate lets through carries them.
        let note = format!(
            "granting get, patch, update and delete on objects this Install creates, following from the create it \
             was granted: {}",
            absent.iter().map(follows::describe).collect::<Vec<_>>().join(", ")
        );
        tracing::info!(install = %name, "{note}");
        let transition = Transition { warning: false, reason: "GrantFollowsCreate".into(), note };
        ctx.cluster.events.publish(&*install, &[transition]).await;
    }
    // What followed from a `create` is granted apart, marked so.
    let (followed, approved_grant): (Vec<_>, Vec<_>) = grant.iter().cloned().partition(|p| split.follows.contains(p));
    for (rules, followed) in [(approved_grant, false), (followed, true)] {
        let owner = GrantOwner { install: &name, uid: &uid, component_label: label.as_deref(), followed };
        for object in grant_objects(&owner, &account, &rules) {
            match apply::apply(&ctx.cluster.client, "the controller", &kinds, &object).await {
                Ok(live) => ctx.cluster.wrote(&live),
                Err(error) => return fail(&ctx, &install, status, error).await,
            }
        }
    }
    status.pending = Some(PendingPermissions::default());
    status.granted = add_grants(&status.granted, &grant);
    status.approved_content = resolved_content;

    let settled = matches!(previous.state, Some(InstallState::Installed | InstallState::Applying));
    let mut diverged = Vec::new();
    // An Operator that came to own the Install (an adopted Subscription's) labels its objects: applied again, but
    // not drift, which is someone changing what the Install applied.
    let mut relabel = false;
    if same_content && settled {
        for object in &objects {
            let live = apply::get(&client, &kinds, &content::applied_ref(object)).await?;
            match live {
                Some(live) if drift::holds(object, &live) => {}
                Some(live) if drift::holds(&drift::without_label(object, label.as_deref()), &live) => relabel = true,
                _ => diverged.push(apply::describe(object)),
            }
        }
    }
    let mut deployments = Vec::new();
    let mut disown = Vec::new();
    if !(same_content && settled && diverged.is_empty() && !relabel) {
        for object in &objects {
            let reference = content::applied_ref(object);
            let owned_before = previous.applied.contains(&reference);
            let is_crd = object["kind"] == "CustomResourceDefinition";
            if !owned_before || is_crd {
                if let Some(live) = apply::get(&client, &kinds, &reference).await? {
                    // What the Install applied before is its own; anything else that exists is never taken over.
                    let taken_over = takeover.as_ref().is_some_and(|(takeover, csv)| {
                        takeover::made_for_csv(&live, takeover, csv, &content_crds, &name)
                    });
                    if !owned_before && !content::created_by(&live, &name, &uid) && !taken_over {
                        let error = ApplyError::NotOwned { object: apply::describe(object) };
                        return fail(&ctx, &install, status, error).await;
                    }
                    // (Also when a pass that failed halfway applied it already.)
                    if taken_over && takeover::labelled_by_olm(&live) && !takeover::labelled_by_olm(object) {
                        disown.push(object.clone());
                    }
                    if let Some(version) = crd_safety::dropped_stored_version(&live, object) {
                        let error = ApplyError::UnsafeCrdUpgrade { crd: reference.name.clone(), version };
                        return fail(&ctx, &install, status, error).await;
                    }
                    if is_crd {
                        match apply::check_existing_resources(&client, &user, &live, object).await {
                            Ok(None) => {}
                            Ok(Some(warning)) => {
                                tracing::warn!(install = %name, "{warning}");
                                let transition =
                                    Transition { warning: true, reason: "CRDValidation".into(), note: warning };
                                ctx.cluster.events.publish(&*install, &[transition]).await;
                            }
                            Err(error) => return fail(&ctx, &install, status, error).await,
                        }
                    }
                }
            }
            match apply::apply(&client, &user, &kinds, object).await {
                Ok(live) => {
                    ctx.cluster.wrote(&live);
                    deployments.extend((live["kind"] == "Deployment").then_some(live));
                }
                Err(error) => return fail(&ctx, &install, status, error).await,
            }
        }
        for object in &disown {
            if let Err(error) = apply::disown(&client, &user, &kinds, object).await {
                return fail(&ctx, &install, status, error).await;
            }
        }
        if !disown.is_empty() {
            tracing::info!(install = %name, objects = disown.len(), "took over objects OLM v0 made for a CSV");
        }
        for stale in content::to_prune(&previous.applied, &objects) {
            if let Err(error) = apply::prune(&client, &user, &kinds, &stale).await {
                return fail(&ctx, &install, status, error).await;
            }
        }
    } else {
        for object in objects.iter().filter(|object| object["kind"] == "Deployment") {
            deployments.extend(apply::get(&client, &kinds, &content::applied_ref(object)).await?);
        }
    }
    status.applied = objects.iter().map(content::applied_ref).collect();
    let rolling_out: Vec<String> = deployments
        .iter()
        .filter(|live| !apply::deployment_available(live))
        .map(|live| live["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    let (phase, reason, message) = if rolling_out.is_empty() {
        ("Succeeded", "InstallSucceeded", "install strategy completed with no errors".to_owned())
    } else {
        (
            "Installing",
            "InstallWaiting",
            format!("waiting for deployments {} to become available", rolling_out.join(", ")),
        )
    };
    for csv in &csvs {
        ctx.cluster.write_csv_phase(&namespace, csv, phase, reason, &message).await?;
    }
    let requeue = if rolling_out.is_empty() { ctx.options.resync } else { ctx.options.retry };
    let outcome = Outcome::Applied {
        objects: objects.len(),
        account: format!("{}/{}", account.namespace, account.name),
        rolling_out,
        diverged,
    };
    let written = report(&ctx, &install, status, &outcome, None).await?;
    if changed_by.is_some() {
        // The changed content was approved by a person holding all it uses, and is applied: the mark has done its
        // work. Cleared only if nothing changed since the status was written (a new change brings a new mark).
        ctx.cluster.clear_content_change(&written).await?;
    }
    Ok(Action::requeue(requeue))
}

fn known(kinds: &KindIndex, object: &Value) -> bool {
    kinds
        .resolve(object["apiVersion"].as_str().unwrap_or_default(), object["kind"].as_str().unwrap_or_default())
        .is_some()
}

/// Reports a failed grant or apply and retries; the CSV records say the install failed.
async fn fail(
    ctx: &Context,
    install: &Install,
    status: InstallStatus,
    error: ApplyError,
) -> Result<Action, ReconcileError> {
    let outcome = Outcome::ApplyFailed { reason: error.category(), message: crate::error::report(&error) };
    report(ctx, install, status, &outcome, None).await?;
    Ok(Action::requeue(ctx.options.retry))
}

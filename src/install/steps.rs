//! The writing half of an Install's pass (`reconcile`), each step carrying out a decision of `gate` or `plan`: hold
//! content over a policy ([`hold_over_policy`]), show what awaits approval ([`await_approval`]), refuse while the
//! approval webhook does not guard ([`require_guard`]), grant exactly what was approved ([`grant`]), apply and prune
//! as the account ([`apply_content`]), and report ([`report_applied`]). A step that stops reports why and ends the
//! pass (`observe::Step`).

use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::Value;

use super::apply::{self, ApplyError};
use super::conditions::Outcome;
use super::content;
use super::drift;
use super::follows;
use super::gate::{add_grants, Gate};
use super::grants::{grant_objects, GrantOwner};
use super::observe::{Account, Content, Measured, Pass, Step};
use super::plan::{self, Existing};
use super::reconcile::{report, Context, ReconcileError, APPROVAL_WEBHOOK_UNAVAILABLE};
use super::takeover::{self, TakenCsv, Takeover};
use crate::api::v2alpha1::{Approval, InstallState, PendingPermission, PendingPermissions};
use crate::category::Categorized;
use crate::controller::conditions::Transition;

/// Content over an InstallPolicy that may not run on waits: any approval standing is void, nothing is pending.
pub async fn hold_over_policy(
    ctx: &Context,
    pass: &mut Pass<'_>,
    content: &Content,
    decision: &Gate,
) -> Result<Step<()>, ReconcileError> {
    let placed: Vec<_> = content.objects.iter().map(content::applied_ref).collect();
    let held = plan::held_by_policy(pass.status.policy.as_ref(), decision, &content.resolved, &pass.previous, &placed);
    let Some(summary) = held else { return Ok(Step::Continue(())) };
    tracing::info!(install = %pass.name, "content exceeds an InstallPolicy: {summary}");
    // No approval stands for content over a policy: one given before the policy changed is void.
    let mut read_at = pass.install.resource_version();
    if pass.install.spec.approval == Approval::Approved {
        read_at = ctx.cluster.revoke_approval(pass.install).await?.resource_version();
    }
    pass.status.pending = Some(PendingPermissions::default());
    let outcome = Outcome::ExceedsPolicy { summary, installed_before: !pass.previous.applied.is_empty() };
    report(ctx, pass.install, pass.status.clone(), &outcome, read_at.as_deref()).await?;
    Ok(Step::Break(Action::requeue(ctx.options.resync)))
}

/// What the gate let through, or the pending set shown for a person to approve (after voiding an approval that does
/// not cover it).
pub async fn await_approval(
    ctx: &Context,
    pass: &mut Pass<'_>,
    decision: Gate,
    measured: &Measured,
    account: &Account,
    changed_by: Option<String>,
) -> Result<Step<Vec<PendingPermission>>, ReconcileError> {
    let (pending, reason, revoke_approval) = match decision {
        Gate::Apply { grant } => return Ok(Step::Continue(grant)),
        Gate::AwaitApproval { pending, reason, revoke_approval } => (pending, reason, revoke_approval),
    };
    // The approval goes before the new pending set is shown, and the set is shown only if no approval came since the
    // Install was read: an approval stands for the pending set it was judged against, never for one written after it.
    let mut read_at = pass.install.resource_version();
    if revoke_approval {
        read_at = ctx.cluster.revoke_approval(pass.install).await?.resource_version();
    }
    let count = pending.len();
    pass.status.pending = Some(PendingPermissions {
        count: count as i64,
        permissions: pending,
        reason: Some(reason),
        bindings: measured.disclosure.bindings.clone(),
        aggregations: measured.disclosure.aggregations.clone(),
    });
    let outcome = Outcome::AwaitingApproval {
        count,
        reason,
        changed_by,
        account: account.describe(),
        installed_before: !pass.previous.applied.is_empty(),
    };
    report(ctx, pass.install, pass.status.clone(), &outcome, read_at.as_deref()).await?;
    Ok(Step::Break(Action::requeue(ctx.options.resync)))
}

/// Nothing an approval stands for is let through while the approval webhook does not guard Installs; an approval
/// standing then is void.
pub async fn require_guard(
    ctx: &Context,
    pass: &Pass<'_>,
    grant: &[PendingPermission],
    content: &Content,
) -> Result<Step<()>, ReconcileError> {
    // A settled Install applying the same content again skips the three requests of the check.
    if !plan::lets_through(grant, &content.resolved, &pass.previous.approved_content) {
        return Ok(Step::Continue(()));
    }
    let problems = ctx.cluster.approval_guard(pass.install, &ctx.options.webhook).await?;
    if problems.is_empty() {
        return Ok(Step::Continue(()));
    }
    let message = format!(
        "refusing to grant or apply while the approval webhook does not guard Installs: {}",
        problems.join("; ")
    );
    tracing::warn!(install = %pass.name, "{message}");
    // An approval standing now may have been given while nothing checked it: it is void, and must be given again
    // once the webhook guards (the revocation itself fails, and is retried, while the webhook is down).
    let mut read_at = None;
    if pass.install.spec.approval == Approval::Approved {
        read_at = ctx.cluster.revoke_approval(pass.install).await?.resource_version();
    }
    let outcome = Outcome::ApplyFailed { reason: APPROVAL_WEBHOOK_UNAVAILABLE, message };
    report(ctx, pass.install, pass.status.clone(), &outcome, read_at.as_deref()).await?;
    Ok(Step::Break(Action::requeue(ctx.options.retry)))
}

/// Grants `grant` to the account, what followed from a `create` apart and marked so (told in an event), as the
/// controller; the status records it as granted and the content as let through.
pub async fn grant(
    ctx: &Context,
    pass: &mut Pass<'_>,
    account: &Account,
    content: &Content,
    measured: &Measured,
    grant: &[PendingPermission],
) -> Result<Step<()>, ReconcileError> {
    if !measured.split.follows.is_empty() {
        let note = format!(
            "granting get, patch, update and delete on objects this Install creates, following from the create it \
             was granted: {}",
            measured.absent.iter().map(follows::describe).collect::<Vec<_>>().join(", ")
        );
        tracing::info!(install = %pass.name, "{note}");
        let transition = Transition { warning: false, reason: "GrantFollowsCreate".into(), note };
        ctx.cluster.events.publish(pass.install, &[transition]).await;
    }
    let (followed, approved): (Vec<_>, Vec<_>) =
        grant.iter().cloned().partition(|rule| measured.split.follows.contains(rule));
    for (rules, followed) in [(approved, false), (followed, true)] {
        let owner =
            GrantOwner { install: &pass.name, uid: &pass.uid, component_label: pass.label.as_deref(), followed };
        for object in grant_objects(&owner, &account.reference, &rules) {
            match apply::apply(&ctx.cluster.client, "the controller", &content.kinds, &object).await {
                Ok(live) => ctx.cluster.wrote(&live),
                Err(error) => return fail(ctx, pass, error).await,
            }
        }
    }
    pass.status.pending = Some(PendingPermissions::default());
    pass.status.granted = add_grants(&pass.status.granted, grant);
    pass.status.approved_content = content.resolved.clone();
    Ok(Step::Continue(()))
}

/// What the apply found: the content's Deployments as they are, and the objects someone changed.
pub struct Applied {
    pub deployments: Vec<Value>,
    pub diverged: Vec<String>,
}

/// Applies the content as the account (unless a settled Install finds everything as applied), never over an object
/// someone else made, nor a CRD losing a stored version; takes over what OLM v0 made for the operator's CSV, and
/// prunes what the content no longer has.
pub async fn apply_content(
    ctx: &Context,
    pass: &mut Pass<'_>,
    account: &Account,
    content: &Content,
    taken: Option<&(Takeover, TakenCsv)>,
    same_content: bool,
) -> Result<Step<Applied>, ReconcileError> {
    let (client, kinds, objects) = (&account.client, &content.kinds, &content.objects);
    let settled = matches!(pass.previous.state, Some(InstallState::Installed | InstallState::Applying));
    let mut diverged = Vec::new();
    // An Operator that came to own the Install (an adopted Subscription's) labels its objects: applied again, but
    // not drift, which is someone changing what the Install applied.
    let mut relabel = false;
    if same_content && settled {
        for object in objects {
            match apply::get(client, kinds, &content::applied_ref(object)).await? {
                Some(live) if drift::holds(object, &live) => {}
                Some(live) if drift::holds(&drift::without_label(object, pass.label.as_deref()), &live) => {
                    relabel = true
                }
                _ => diverged.push(apply::describe(object)),
            }
        }
    }
    let mut deployments = Vec::new();
    if same_content && settled && diverged.is_empty() && !relabel {
        for object in objects.iter().filter(|object| object["kind"] == "Deployment") {
            deployments.extend(apply::get(client, kinds, &content::applied_ref(object)).await?);
        }
        return Ok(Step::Continue(Applied { deployments, diverged }));
    }
    let content_crds = takeover::owned_crds(objects);
    let mut disown = Vec::new();
    for object in objects {
        let reference = content::applied_ref(object);
        let owned_before = pass.previous.applied.contains(&reference);
        if !owned_before || object["kind"] == "CustomResourceDefinition" {
            if let Some(live) = apply::get(client, kinds, &reference).await? {
                let taken_over = taken.is_some_and(|(takeover, csv)| {
                    takeover::made_for_csv(&live, takeover, csv, &content_crds, &pass.name)
                });
                let created = content::created_by(&live, &pass.name, &pass.uid);
                match plan::existing(object, &live, owned_before, created, taken_over) {
                    Existing::NotOwned => {
                        return fail(ctx, pass, ApplyError::NotOwned { object: apply::describe(object) }).await
                    }
                    Existing::DropsStoredVersion(version) => {
                        let error = ApplyError::UnsafeCrdUpgrade { crd: reference.name.clone(), version };
                        return fail(ctx, pass, error).await;
                    }
                    Existing::Apply { disown: take, check_crd } => {
                        // (Also when a pass that failed halfway applied it already.)
                        if take {
                            disown.push(object.clone());
                        }
                        if check_crd {
                            if let Err(error) = check_crd_resources(ctx, pass, account, &live, object).await {
                                return fail(ctx, pass, error).await;
                            }
                        }
                    }
                }
            }
        }
        match apply::apply(client, &account.user, kinds, object).await {
            Ok(live) => {
                ctx.cluster.wrote(&live);
                deployments.extend((live["kind"] == "Deployment").then_some(live));
            }
            Err(error) => return fail(ctx, pass, error).await,
        }
    }
    for object in &disown {
        if let Err(error) = apply::disown(client, &account.user, kinds, object).await {
            return fail(ctx, pass, error).await;
        }
    }
    if !disown.is_empty() {
        tracing::info!(install = %pass.name, objects = disown.len(), "took over objects OLM v0 made for a CSV");
    }
    for stale in content::to_prune(&pass.previous.applied, objects) {
        if let Err(error) = apply::prune(client, &account.user, kinds, &stale).await {
            return fail(ctx, pass, error).await;
        }
    }
    Ok(Step::Continue(Applied { deployments, diverged }))
}

/// A CRD replacing `live`: its existing resources read against the new schema, a warning told as an event.
async fn check_crd_resources(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
    live: &Value,
    object: &Value,
) -> Result<(), ApplyError> {
    if let Some(warning) = apply::check_existing_resources(&account.client, &account.user, live, object).await? {
        tracing::warn!(install = %pass.name, "{warning}");
        let transition = Transition { warning: true, reason: "CRDValidation".into(), note: warning };
        ctx.cluster.events.publish(pass.install, &[transition]).await;
    }
    Ok(())
}

/// Reports the content applied (its CSVs' phase with it), and clears a content change's mark once what a person
/// approved after it is applied.
pub async fn report_applied(
    ctx: &Context,
    mut pass: Pass<'_>,
    account: &Account,
    content: &Content,
    applied: Applied,
    changed_by: Option<String>,
) -> Result<Action, ReconcileError> {
    pass.status.applied = content.objects.iter().map(content::applied_ref).collect();
    let rolling_out: Vec<String> = applied
        .deployments
        .iter()
        .filter(|live| !apply::deployment_available(live))
        .map(|live| live["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    let (phase, reason, message) = plan::csv_phase(&rolling_out);
    for csv in &content.csvs {
        ctx.cluster.write_csv_phase(&pass.namespace, csv, phase, reason, &message).await?;
    }
    let requeue = if rolling_out.is_empty() { ctx.options.resync } else { ctx.options.retry };
    let outcome = Outcome::Applied {
        objects: content.objects.len(),
        account: account.describe(),
        rolling_out,
        diverged: applied.diverged,
    };
    let written = report(ctx, pass.install, pass.status, &outcome, None).await?;
    if changed_by.is_some() {
        // The changed content was approved by a person holding all it uses, and is applied: the mark has done its
        // work. Cleared only if nothing changed since the status was written (a new change brings a new mark).
        ctx.cluster.clear_content_change(&written).await?;
    }
    Ok(Action::requeue(requeue))
}

/// Reports a failed grant or apply and ends the pass, to try again soon.
async fn fail<T>(ctx: &Context, pass: &Pass<'_>, error: ApplyError) -> Result<Step<T>, ReconcileError> {
    let outcome = Outcome::ApplyFailed { reason: error.category(), message: crate::category::report(&error) };
    super::observe::stop(ctx, pass, &outcome, ctx.options.retry).await
}

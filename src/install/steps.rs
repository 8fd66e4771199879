//! The steps of an Install's pass (`reconcile`) that carry out the gate's decision before anything is granted: hold
//! content over a policy ([`hold_over_policy`]), show what awaits approval ([`await_approval`]), refuse while the
//! approval webhook does not guard ([`require_guard`]). Granting is `grants`'s step, applying `apply`'s, and the
//! report once the content is applied `reconcile`'s.

use kube::ResourceExt;

use super::account::Account;

use super::conditions::Outcome;
use super::gate::Gate;
use super::measure::Measured;
use super::plan;
use super::reconcile::{Context, Pass, ReconcileError, Step, Stop, APPROVAL_WEBHOOK_UNAVAILABLE};
use super::resolve::Content;
use crate::api::v2alpha1::{Approval, PendingPermission, PendingPermissions};

/// Content held over an InstallPolicy (`gate::held_by_policy`: the summary of what it exceeds) waits: any approval
/// standing is void, nothing is pending.
pub async fn hold_over_policy(
    ctx: &Context,
    pass: &mut Pass<'_>,
    held: Option<String>,
) -> Result<Step<()>, ReconcileError> {
    let Some(summary) = held else { return Ok(Step::Continue(())) };
    tracing::info!(install = %pass.name, "content exceeds an InstallPolicy: {summary}");
    // No approval stands for content over a policy: one given before the policy changed is void.
    let mut read_at = pass.install.resource_version();
    if pass.install.spec.approval == Approval::Approved {
        read_at = ctx.cluster.revoke_approval(pass.install).await?.resource_version();
    }
    pass.status.pending = Some(PendingPermissions::default());
    let outcome = Outcome::ExceedsPolicy { summary, installed_before: !pass.previous.applied.is_empty() };
    Ok(Step::Break(Stop::new(outcome, ctx.basics.resync).at(read_at)))
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
    Ok(Step::Break(Stop::new(outcome, ctx.basics.resync).at(read_at)))
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
    Ok(Step::Break(Stop::new(outcome, ctx.basics.retry).at(read_at)))
}

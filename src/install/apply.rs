//! The pass's apply step ([`apply_content`]): it reads what it must judge of the content's objects as they are
//! live, decides with `plan` (drift, what exists and whose it is, what is taken over from OLM v0, what to prune),
//! then writes as the account (`objects`, whose RBAC the API server judges each write with): the CRD upgrade checks,
//! the apply, OLM v0's owner labels removed from what was taken over, the pruning. Nothing is written before every
//! object is judged, so a refusal leaves the cluster as the pass found it.

use std::time::Duration;

use serde_json::Value;

use super::account::Account;
use super::conditions::Outcome;
use super::objects::{ApplyError, ObjectClient};
use super::plan::{self, ApplyDecision, ApplyPlan, Ownership};
use super::reconcile::{Context, Pass, ReconcileError, Step, Stop};
use super::resolve::Content;
use super::takeover::{TakenCsv, Takeover};
use crate::api::v2alpha1::{AppliedObject, InstallState};
use crate::category::Categorized;
use crate::controller::conditions::Transition;

/// Whether a live Deployment is available at its current generation.
pub fn deployment_available(live: &Value) -> bool {
    let generation = live["metadata"]["generation"].as_i64().unwrap_or(0);
    let observed = live["status"]["observedGeneration"].as_i64().unwrap_or(-1);
    let available = live["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|condition| condition["type"] == "Available" && condition["status"] == "True");
    observed >= generation && available
}

/// What the apply found: the content's Deployments as they are, and the objects someone changed.
pub struct Applied {
    pub deployments: Vec<Value>,
    pub diverged: Vec<String>,
}

/// The pass's apply step: applies the content as the account (unless a settled Install finds everything as
/// applied), never over an object someone else made, nor a CRD losing a stored version; takes over what OLM v0
/// made for the operator's CSV, and prunes what the content no longer has.
pub async fn apply_content(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
    content: &Content,
    taken: Option<&(Takeover, TakenCsv)>,
    same_content: bool,
) -> Result<Step<Applied>, ReconcileError> {
    let objects = account.objects(&content.kinds);
    let settled = matches!(pass.previous.state, Some(InstallState::Installed | InstallState::Applying));
    let compare = same_content && settled;
    let live = read_live(&objects, &content.objects, &pass.previous.applied, compare).await?;
    let ownership = Ownership { applied_before: &pass.previous.applied, install: &pass.name, uid: &pass.uid, taken };
    let (plan, diverged) = match plan::decide_apply(&content.objects, &live, compare, pass.label.as_deref(), &ownership)
    {
        ApplyDecision::Unchanged => {
            let deployments = live.into_iter().flatten().filter(|live| live["kind"] == "Deployment").collect();
            return Ok(Step::Continue(Applied { deployments, diverged: Vec::new() }));
        }
        ApplyDecision::Refused(refusal) => return Ok(Step::Break(failed(&refusal, ctx.basics.retry))),
        ApplyDecision::Apply { plan, diverged } => (plan, diverged),
    };
    Ok(match write(ctx, pass, &objects, &content.objects, &live, &plan).await {
        Ok(deployments) => Step::Continue(Applied { deployments, diverged }),
        Err(error) => Step::Break(failed(&error, ctx.basics.retry)),
    })
}

/// The content's objects as they are live, where the apply step judges them (`plan::must_read`), each read at a
/// version served now (`plan::read_at`); `None` for one absent or not read.
async fn read_live(
    objects: &ObjectClient<'_>,
    content: &[Value],
    applied_before: &[AppliedObject],
    compare: bool,
) -> Result<Vec<Option<Value>>, ApplyError> {
    let mut live: Vec<Option<Value>> = Vec::with_capacity(content.len());
    let mut crds: Vec<usize> = Vec::new();
    for (index, object) in content.iter().enumerate() {
        let at = plan::must_read(object, applied_before, compare)
            .then(|| {
                let read: Vec<(&Value, Option<&Value>)> =
                    crds.iter().map(|&i| (&content[i], live[i].as_ref())).collect();
                plan::read_at(object, &read)
            })
            .flatten();
        live.push(match at {
            Some(reference) => objects.get(&reference).await?,
            None => None,
        });
        if object["kind"] == "CustomResourceDefinition" {
            crds.push(index);
        }
    }
    Ok(live)
}

/// Carries out the apply plan as the account, in order: the CRD upgrade checks (a warning told as an event), every
/// object applied, OLM v0's owner labels removed from what was taken over (so the taken-over CSV's finalizer spares
/// it), what the content no longer has pruned. The first failure is the answer; otherwise the Deployments as applied.
async fn write(
    ctx: &Context,
    pass: &Pass<'_>,
    objects: &ObjectClient<'_>,
    content: &[Value],
    live: &[Option<Value>],
    plan: &ApplyPlan,
) -> Result<Vec<Value>, ApplyError> {
    for &index in &plan.check_crds {
        let Some(current) = &live[index] else { continue };
        if let Some(warning) = objects.check_existing_resources(current, &content[index]).await? {
            tracing::warn!(install = %pass.name, "{warning}");
            let transition = Transition { warning: true, reason: "CRDValidation".into(), note: warning };
            ctx.cluster.events.publish(pass.install, &[transition]).await;
        }
    }
    let mut deployments = Vec::new();
    for object in content {
        let applied = objects.apply(object).await?;
        ctx.cluster.wrote(&applied);
        deployments.extend((applied["kind"] == "Deployment").then_some(applied));
    }
    for &index in &plan.disown {
        objects.disown(&content[index]).await?;
    }
    if !plan.disown.is_empty() {
        tracing::info!(install = %pass.name, objects = plan.disown.len(), "took over objects OLM v0 made for a CSV");
    }
    for stale in &plan.prune {
        objects.prune(stale).await?;
    }
    Ok(deployments)
}

/// How a failed grant or apply ends the pass: reported, to try again after `retry`.
pub fn failed(error: &ApplyError, retry: Duration) -> Stop {
    let outcome = Outcome::ApplyFailed { reason: error.category(), message: crate::category::report(error) };
    Stop::new(outcome, retry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployments_are_available_only_at_their_generation() {
        let mut live = json!({"metadata": {"generation": 2}, "status": {"observedGeneration": 2, "conditions": [{"type": "Available", "status": "True"}]}});
        assert!(deployment_available(&live));
        live["status"]["observedGeneration"] = json!(1);
        assert!(!deployment_available(&live));
        assert!(!deployment_available(&json!({"metadata": {"generation": 1}})));
    }
}

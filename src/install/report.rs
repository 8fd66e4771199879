//! The pass's last step: the Install's status written for how the pass ended, with its events — after a step
//! stopped it ([`finish`]), or once the content is applied ([`report_applied`], which tells the content's CSV
//! records the rollout's phase first and clears a content change's mark after). What the status says is
//! `conditions`' (pure); this writes it, as the controller.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;

use super::account::Account;
use super::apply::{deployment_available, Applied};
use super::conditions::{self, Outcome};
use super::objects::applied_ref;
use super::plan;
use super::reconcile::{Context, Pass, ReconcileError, Stop};
use super::resolve::Content;
use crate::api::v2alpha1::{Install, InstallStatus};

/// Reports why a step stopped the pass, and ends it.
pub async fn finish(ctx: &Context, pass: &Pass<'_>, stop: Stop) -> Result<Action, ReconcileError> {
    report(ctx, pass.install, pass.status.clone(), &stop.outcome, stop.precondition.as_deref()).await?;
    Ok(Action::requeue(stop.requeue))
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Writes the status for `outcome` (only while the Install is at `precondition`, when given) and records its events;
/// answers the Install as written.
pub async fn report(
    ctx: &Context,
    install: &Install,
    mut status: InstallStatus,
    outcome: &Outcome,
    precondition: Option<&str>,
) -> Result<Install, ReconcileError> {
    let previous = install.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let generation = install.metadata.generation;
    let reported = conditions::reported(outcome, status.policy.as_ref(), &previous, generation, &now());
    status.conditions = reported.conditions;
    status.state = Some(reported.state);
    status.observed_generation = generation;
    if install.status.as_ref() == Some(&status) {
        // The status says it already: no write (kube-apiserver would store nothing, but a request is a request, and a
        // start would make one per Install).
        return Ok(install.clone());
    }
    let written = ctx.cluster.write_status(install, &status, precondition).await?;
    ctx.cluster.events.publish(install, &reported.transitions).await;
    Ok(written)
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
    pass.status.applied = content.objects.iter().map(applied_ref).collect();
    let rolling_out: Vec<String> = applied
        .deployments
        .iter()
        .filter(|live| !deployment_available(live))
        .map(|live| live["metadata"]["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    let (phase, reason, message) = plan::csv_phase(&rolling_out);
    for csv in &content.csvs {
        ctx.cluster.write_csv_phase(&pass.namespace, csv, phase, reason, &message).await?;
    }
    let requeue = if rolling_out.is_empty() { ctx.basics.resync } else { ctx.basics.retry };
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

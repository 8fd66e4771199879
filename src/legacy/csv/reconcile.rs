//! One pass over an original CSV, as a short sequence of named steps: the steps that end a pass early (copies and
//! Install records are left alone, the finalizer, OLM's API labels), then observe (`observe`: its group, the CSVs of
//! its chain, requirements, Deployments, whether its author may install), decide (`phase::transition`, and `plan`
//! for the status and when to come back: pure), and the write steps in OLM's order (`steps`, `api_roles`).

use std::ops::ControlFlow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::cleanup::{add_finalizer, finalize, has_finalizer};
use super::phase::transition;
use super::{api_roles, observe, plan, steps, Context, Place, ReconcileError};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::controller::next;
use crate::legacy::apis::provided_apis;

/// Reconciles one CSV: the early steps, observe, decide, then the write steps in order.
pub async fn reconcile(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Action, ReconcileError> {
    if !plan::runs(csv, has_finalizer(csv)) {
        return Ok(Action::await_change());
    }
    let place = Place { namespace: csv.namespace().unwrap_or_default(), name: csv.name_any() };
    if csv.metadata.deletion_timestamp.is_some() {
        ctx.forget_warnings(csv);
        return finalize(ctx, csv, &place).await;
    }
    if !has_finalizer(csv) {
        // The write wakes the next pass, which sees the CSV with its finalizer.
        add_finalizer(ctx, csv, &place).await?;
        return Ok(Action::await_change());
    }
    let provided = next!(readable_apis(csv, &place));
    next!(steps::label_apis(ctx, csv, &provided, &place).await?);

    let status = csv.status.clone().unwrap_or_default();
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    let seen = observe::observe(ctx, csv, &status, &provided, &place, &now).await?;
    let group = seen.group.as_ref();
    let outcome = transition(&status, seen.observed);

    steps::annotate(ctx, csv, group, &outcome, &place).await?;
    steps::change_group_apis(ctx, group, &provided, &outcome, &place).await?;
    next!(steps::delete_replaced(ctx, &outcome, &place).await?);
    steps::remove_deployments(ctx, csv, &outcome, &place).await?;
    let rotated = steps::install(ctx, csv, &outcome, &place).await?;
    let (next, event) = plan::next_status(&status, &outcome, rotated, &now);
    steps::write_status(ctx, csv, (&status, &next), event, &place).await?;
    api_roles::ensure_api_roles(ctx, csv, &outcome, &place).await?;
    steps::copy_to_targets(ctx, csv, group, &next, &place).await?;
    Ok(plan::next_action(&status, &next, &outcome, ctx.basics.resync, ctx.basics.retry))
}

/// The APIs the CSV provides; a CSV whose APIs cannot be read waits for a change of it (OLM logs and skips it).
fn readable_apis(
    csv: &ClusterServiceVersion,
    place: &Place,
) -> ControlFlow<Action, std::collections::BTreeSet<crate::legacy::apis::ApiKey>> {
    match provided_apis(csv) {
        Ok(provided) => ControlFlow::Continue(provided),
        Err(error) => {
            tracing::warn!(csv = %place.name, namespace = %place.namespace, %error, "unable to retrieve operator information from CSV");
            ControlFlow::Break(Action::await_change())
        }
    }
}

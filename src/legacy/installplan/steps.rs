//! One pass over an InstallPlan, as a sequence of named steps: start it once approved, observe what `execute`
//! decides on (the Subscriptions pointing at it, their Installs, the CSVs OLM v0 installed), decide, then create the
//! dependencies' Subscriptions and the Installs, move the Installs to new content, and write the status.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::ResourceExt;

use super::execute::{self, decide, install_name, Decision, Observed};
use super::{move_install, Context, InstallPlanLoopError};
use crate::api::v1alpha1::{ClusterServiceVersion, InstallPlan, InstallPlanPhase, InstallPlanStatus, Subscription};
use crate::api::v2alpha1::Install;
use crate::controller::client::ClientError;
use crate::controller::next;
use crate::legacy::membership::{is_copied, is_install_record, COPIED_FROM_LABEL};

/// The plan a pass is over, naming its errors.
struct Place {
    namespace: String,
    name: String,
}

impl Place {
    fn read(&self, what: &'static str) -> impl FnOnce(ClientError) -> InstallPlanLoopError + '_ {
        move |source| InstallPlanLoopError::Read {
            what,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    fn write(&self, action: &str) -> impl FnOnce(ClientError) -> InstallPlanLoopError + '_ {
        let action = action.to_owned();
        move |source| InstallPlanLoopError::Write {
            action,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }
}

/// What a pass read beside the plan.
struct Read {
    subscriptions: Vec<Subscription>,
    /// The Installs of those Subscriptions, by name.
    installs: BTreeMap<String, Install>,
    /// The namespace's CSVs no Install applied, by name: uid.
    installed_by_olm: BTreeMap<String, String>,
}

pub(super) async fn reconcile(ctx: &Context, plan: &InstallPlan) -> Result<Action, InstallPlanLoopError> {
    let place = Place { namespace: plan.namespace().unwrap_or_default(), name: plan.name_any() };
    next!(start_when_approved(ctx, plan, &place).await?);
    let read = next!(observe(ctx, plan, &place).await?);
    let decision = decide(
        &Observed {
            plan,
            subscriptions: &read.subscriptions,
            installs: &read.installs,
            retry_timeout: ctx.retry_timeout,
            installed_by_olm: &read.installed_by_olm,
        },
        &Time(k8s_openapi::jiff::Timestamp::now()),
    );
    create_subscriptions(ctx, &decision, &place).await?;
    create_installs(ctx, &decision, &place).await?;
    move_installs(ctx, &decision, &place).await?;
    write_status(ctx, plan, &decision.status, &place).await?;
    Ok(execute::next_action(&decision, ctx.basics.retry, ctx.basics.resync))
}

/// Goes on with a plan that is Installing; moves an approved plan from RequiresApproval to Installing (the write
/// wakes the next pass); leaves every other plan alone.
async fn start_when_approved(
    ctx: &Context,
    plan: &InstallPlan,
    place: &Place,
) -> Result<ControlFlow<Action>, InstallPlanLoopError> {
    let Some(status) = plan.status.clone() else { return Ok(ControlFlow::Break(Action::await_change())) };
    match status.phase {
        InstallPlanPhase::Installing => Ok(ControlFlow::Continue(())),
        InstallPlanPhase::RequiresApproval if plan.spec.approved => {
            let next = InstallPlanStatus { phase: InstallPlanPhase::Installing, message: None, ..status };
            write_status(ctx, plan, &next, place).await?;
            Ok(ControlFlow::Break(Action::await_change()))
        }
        _ => Ok(ControlFlow::Break(Action::await_change())),
    }
}

/// Reads what the decision needs. A plan no Subscription points at (superseded by a newer one, or not yet pointed
/// at: the Subscription's status write wakes it) moves nothing.
async fn observe(
    ctx: &Context,
    plan: &InstallPlan,
    place: &Place,
) -> Result<ControlFlow<Action, Read>, InstallPlanLoopError> {
    let namespace = place.namespace.as_str();
    let subscriptions: Vec<Subscription> = ctx
        .client
        .namespaced::<Subscription>(namespace)
        .list_with(&ListParams::default())
        .await
        .map_err(place.read("Subscriptions"))?;
    if !subscriptions.iter().any(|subscription| execute::references(subscription, plan)) {
        return Ok(ControlFlow::Break(Action::await_change()));
    }
    let mut installs = BTreeMap::new();
    for subscription in &subscriptions {
        let name = install_name(&subscription.spec.name, namespace);
        if let Some(install) = ctx.client.all::<Install>().get_opt(&name).await.map_err(place.read("Installs"))? {
            installs.insert(name, install);
        }
    }
    let originals = ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}"));
    let csvs = ctx
        .client
        .namespaced::<ClusterServiceVersion>(namespace)
        .list_with(&originals)
        .await
        .map_err(place.read("CSVs"))?;
    let installed_by_olm = csvs
        .iter()
        .filter(|csv| !is_install_record(csv) && !is_copied(csv))
        .filter_map(|csv| Some((csv.name_any(), csv.uid()?)))
        .collect();
    Ok(ControlFlow::Continue(Read { subscriptions, installs, installed_by_olm }))
}

/// Creates the Subscriptions of the plan's dependencies (OLM's Subscription steps); one already there is kept.
async fn create_subscriptions(ctx: &Context, decision: &Decision, place: &Place) -> Result<(), InstallPlanLoopError> {
    for subscription in &decision.create_subscriptions {
        let typed: Subscription = serde_json::from_value(subscription.clone())
            .map_err(|error| place.write("encode a generated Subscription")(ClientError::Encode(error)))?;
        match ctx.client.namespaced::<Subscription>(&place.namespace).create(&typed).await {
            Ok(_) => tracing::info!(subscription = %typed.name_any(), "Subscription generated for a dependency"),
            Err(error) if error.code() == Some(409) => {}
            Err(error) => return Err(place.write("create a Subscription")(error)),
        }
    }
    Ok(())
}

/// Creates the Installs the plan's bundles are installed through; one already there is kept.
async fn create_installs(ctx: &Context, decision: &Decision, place: &Place) -> Result<(), InstallPlanLoopError> {
    for install in &decision.create_installs {
        let typed: Install = serde_json::from_value(install.clone())
            .map_err(|error| place.write("encode an Install")(ClientError::Encode(error)))?;
        match ctx.client.all::<Install>().create(&typed).await {
            Ok(_) => tracing::info!(install = %typed.name_any(), "Install created"),
            Err(error) if error.code() == Some(409) => {}
            Err(error) => return Err(place.write("create an Install")(error)),
        }
    }
    Ok(())
}

/// Moves the Subscriptions' Installs to the plan's bundles (`move_install`: unmarked only when the Subscription's
/// author could make the change).
async fn move_installs(ctx: &Context, decision: &Decision, place: &Place) -> Result<(), InstallPlanLoopError> {
    for step in &decision.update_installs {
        move_install(&ctx.client, &ctx.controller_namespace, step).await.map_err(|source| {
            InstallPlanLoopError::Move { namespace: place.namespace.clone(), name: place.name.clone(), source }
        })?;
        tracing::info!(install = %step.install.name_any(), csv = %step.csv, "Install moved to a new bundle");
    }
    Ok(())
}

/// Writes `status` when the plan does not have it already.
async fn write_status(
    ctx: &Context,
    plan: &InstallPlan,
    status: &InstallPlanStatus,
    place: &Place,
) -> Result<(), InstallPlanLoopError> {
    if plan.status.as_ref() == Some(status) {
        return Ok(());
    }
    ctx.client
        .namespaced::<InstallPlan>(&place.namespace)
        .apply_status(&place.name, status, None)
        .await
        .map_err(place.write("write the status"))?;
    Ok(())
}

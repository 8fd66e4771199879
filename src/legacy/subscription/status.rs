//! A Subscription's status, as OLM v0's loops write it: `catalogHealth` and the `CatalogSourcesUnhealthy` condition
//! (OLM's catalog health reconciler, its reasons and messages), `ResolutionFailed` (OLM's `setSubsCond`: no
//! transition time, removed on success), `currentCSV` from the resolution, and `installedCSV` / `state` from the CSV
//! `currentCSV` names (OLM's `ensureSubscriptionCSVState`: `AtLatestKnown` once it exists, `UpgradePending` until
//! then). Every field moves only when what it says changed, so an idle namespace costs no write.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::resolution::{Outcome, Resolved};
use crate::api::v1alpha1::{
    InstallPlan, InstallPlanPhase, InstallPlanReference, SubscriptionCatalogHealth, SubscriptionCondition,
    SubscriptionState, SubscriptionStatus,
};

pub const CATALOG_SOURCES_UNHEALTHY: &str = "CatalogSourcesUnhealthy";
pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
pub const INSTALL_PLAN_PENDING: &str = "InstallPlanPending";
pub const INSTALL_PLAN_FAILED: &str = "InstallPlanFailed";
pub const INSTALL_PLAN_MISSING: &str = "InstallPlanMissing";

/// A CatalogSource the namespace resolves from, and whether its catalog is served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CatalogView {
    pub name: String,
    pub namespace: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub healthy: bool,
}

fn reference(catalog: &CatalogView) -> ObjectReference {
    ObjectReference {
        api_version: Some("operators.coreos.com/v1alpha1".into()),
        kind: Some("CatalogSource".into()),
        name: Some(catalog.name.clone()),
        namespace: Some(catalog.namespace.clone()),
        uid: catalog.uid.clone(),
        resource_version: catalog.resource_version.clone(),
        field_path: None,
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> SubscriptionCondition {
    SubscriptionCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..SubscriptionCondition::default()
    }
}

/// Whether two conditions say the same (OLM's `SubscriptionCondition.Equals`: type, status, reason, message).
fn same(a: &SubscriptionCondition, b: &SubscriptionCondition) -> bool {
    a.type_ == b.type_ && a.status == b.status && a.reason == b.reason && a.message == b.message
}

/// `conditions` with `wanted` in place of the condition of its type (appended when there was none).
fn set_condition(conditions: &mut Vec<SubscriptionCondition>, wanted: SubscriptionCondition) {
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        Some(existing) => *existing = wanted,
        None => conditions.push(wanted),
    }
}

/// The catalog health and its condition (OLM's `catalogHealthReconciler` and `SetCatalogHealth`): `catalogs` sorted
/// by namespace then name; unchanged health keeps the status as it was.
pub fn with_catalog_health(
    status: &mut SubscriptionStatus,
    source: &str,
    source_namespace: &str,
    catalogs: &[CatalogView],
    now: &Time,
) {
    let mut catalogs: Vec<&CatalogView> = catalogs.iter().collect();
    catalogs.sort_by(|a, b| format!("{}{}", a.namespace, a.name).cmp(&format!("{}{}", b.namespace, b.name)));
    let previous = status.conditions.iter().find(|c| c.type_ == CATALOG_SOURCES_UNHEALTHY).cloned();
    let mut message = previous.as_ref().and_then(|c| c.message.clone()).unwrap_or_default();
    let mut healthy = true;
    let mut target_found = false;
    for catalog in &catalogs {
        healthy &= catalog.healthy;
        if catalog.name == source && catalog.namespace == source_namespace {
            target_found = true;
            if !catalog.healthy {
                message = format!("targeted catalogsource {source_namespace}/{source} unhealthy");
            }
        }
    }
    if !target_found {
        message = format!("targeted catalogsource {source_namespace}/{source} missing");
        healthy = false;
    }
    let (mut state, mut reason) = if healthy {
        message = "all available catalogsources are healthy".into();
        ("False", "AllCatalogSourcesHealthy")
    } else {
        ("True", "UnhealthyCatalogSourceFound")
    };
    let uids: BTreeSet<&str> = catalogs.iter().filter_map(|c| c.uid.as_deref()).collect();
    let old = &status.catalog_health;
    if uids.len() > old.len() {
        reason = "CatalogSourcesAdded";
    } else if uids.len() < old.len() {
        reason = "CatalogSourcesDeleted";
    } else if uids.is_empty() {
        reason = "NoCatalogSourcesFound";
        message = "dependency resolution requires at least one catalogsource".into();
        state = "True";
    } else if old.iter().any(|entry| {
        let uid = entry.catalog_source_ref.uid.as_deref();
        !catalogs.iter().any(|c| c.uid.as_deref() == uid && c.healthy == entry.healthy)
    }) {
        reason = "CatalogSourcesUpdated";
    }
    let wanted = condition(CATALOG_SOURCES_UNHEALTHY, state, reason, &message);
    let count_changed = uids.len() != old.len();
    if !count_changed && previous.as_ref().is_some_and(|p| same(p, &wanted)) {
        return;
    }
    set_condition(&mut status.conditions, SubscriptionCondition { last_transition_time: Some(now.clone()), ..wanted });
    status.catalog_health = catalogs
        .iter()
        .map(|catalog| SubscriptionCatalogHealth {
            catalog_source_ref: reference(catalog),
            last_updated: Some(now.clone()),
            healthy: catalog.healthy,
        })
        .collect();
    status.last_updated = Some(now.clone());
}

/// The resolution's part of a Subscription's status: `ResolutionFailed` set (without a transition time, as OLM's
/// `setSubsCond`) or removed, and `currentCSV` moved to the bundle resolved for it.
pub fn with_resolution(status: &mut SubscriptionStatus, resolved: Option<&Resolved>, outcome: &Outcome, now: &Time) {
    match outcome {
        Outcome::Failed { reason, message } => {
            let wanted = condition(RESOLUTION_FAILED, "True", reason, message);
            if !status.conditions.iter().any(|c| same(c, &wanted)) {
                set_condition(&mut status.conditions, wanted);
                status.last_updated = Some(now.clone());
            }
        }
        Outcome::Resolved { .. } => {
            let before = status.conditions.len();
            status.conditions.retain(|c| c.type_ != RESOLUTION_FAILED);
            let mut changed = status.conditions.len() != before;
            if let Some(resolved) = resolved {
                if status.current_csv.as_deref() != Some(resolved.bundle.as_str()) {
                    status.current_csv = Some(resolved.bundle.clone());
                    changed = true;
                }
            }
            if changed {
                status.last_updated = Some(now.clone());
            }
        }
    }
}

/// `installedCSV` and `state` from whether the CSV `currentCSV` names exists (OLM's `ensureSubscriptionCSVState`):
/// `AtLatestKnown` with `installedCSV` once it does, `UpgradePending` until then, or `UpgradeFailed` when the plan
/// it waits on failed and its OperatorGroup's `upgradeStrategy` is `TechPreviewUnsafeFailForward` (`plan_failed`
/// is only ever true then); nothing without a `currentCSV`.
pub fn with_csv_state(status: &mut SubscriptionStatus, current_exists: bool, plan_failed: bool, now: &Time) {
    let Some(current) = status.current_csv.clone() else { return };
    let state = match (current_exists, plan_failed) {
        (true, _) => SubscriptionState::AtLatestKnown,
        (false, true) => SubscriptionState::UpgradeFailed,
        (false, false) => SubscriptionState::UpgradePending,
    };
    if status.state == state {
        return;
    }
    status.state = state;
    if current_exists {
        status.installed_csv = Some(current);
    }
    status.last_updated = Some(now.clone());
}

/// Whether an InstallPlan's phase is `Failed`.
pub fn plan_failed(plan: &InstallPlan) -> bool {
    plan.status.as_ref().is_some_and(|status| status.phase == InstallPlanPhase::Failed)
}

/// The message an InstallPlan gives its Subscriptions: its `Installed` condition's, when known (OLM's
/// `extractMessage`; this controller records no pending bundle lookups).
fn plan_message(plan: &InstallPlan) -> String {
    let status = plan.status.clone().unwrap_or_default();
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "Installed" && c.status != "Unknown")
        .and_then(|c| c.message.clone())
        .unwrap_or_default()
}

/// The conditions a Subscription's InstallPlan gives it (OLM's `installPlanReconciler`): `InstallPlanPending`
/// with the plan's phase as reason while it is planned, waits or installs, `InstallPlanFailed` when it failed,
/// `InstallPlanMissing` when it is gone (a Subscription still waiting on it forgets it, so the namespace resolves
/// again), none once complete. Written only when a condition changed (transition times aside).
pub fn with_install_plan(status: &mut SubscriptionStatus, plan: Option<&InstallPlan>, now: &Time) {
    if status.install_plan_ref.is_none() {
        return;
    }
    let before = status.conditions.clone();
    status.conditions.retain(|c| c.type_ != INSTALL_PLAN_PENDING && c.type_ != INSTALL_PLAN_FAILED);
    match plan {
        None if status.state == SubscriptionState::UpgradePending => {
            status.install_plan_ref = None;
            status.install_plan = None;
            status.current_csv = None;
            status.state = SubscriptionState::None;
            status.last_updated = Some(now.clone());
            return;
        }
        None => set_condition(
            &mut status.conditions,
            SubscriptionCondition {
                type_: INSTALL_PLAN_MISSING.into(),
                status: "True".into(),
                reason: Some("ReferencedInstallPlanNotFound".into()),
                ..SubscriptionCondition::default()
            },
        ),
        Some(plan) => {
            status.conditions.retain(|c| c.type_ != INSTALL_PLAN_MISSING);
            let message = plan_message(plan);
            let phase = plan.status.as_ref().map(|s| s.phase).unwrap_or_default();
            let reason = match phase {
                InstallPlanPhase::None => Some((INSTALL_PLAN_PENDING, "InstallPlanNotYetReconciled".to_owned())),
                InstallPlanPhase::Planning => Some((INSTALL_PLAN_PENDING, "Planning".to_owned())),
                InstallPlanPhase::Installing => Some((INSTALL_PLAN_PENDING, "Installing".to_owned())),
                InstallPlanPhase::RequiresApproval => Some((INSTALL_PLAN_PENDING, "RequiresApproval".to_owned())),
                InstallPlanPhase::Failed => {
                    let installed =
                        plan.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Installed"));
                    let reason = installed.filter(|c| c.status == "False").and_then(|c| c.reason.clone());
                    Some((INSTALL_PLAN_FAILED, reason.unwrap_or_else(|| "InstallPlanFailed".into())))
                }
                InstallPlanPhase::Complete => None,
            };
            if let Some((type_, reason)) = reason {
                set_condition(&mut status.conditions, condition(type_, "True", &reason, &message));
            }
        }
    }
    let unchanged =
        before.len() == status.conditions.len() && before.iter().all(|b| status.conditions.iter().any(|c| same(b, c)));
    if unchanged {
        status.conditions = before;
        return;
    }
    for condition in &mut status.conditions {
        if !before.iter().any(|b| same(b, condition)) {
            condition.last_transition_time = Some(now.clone());
        }
    }
    status.last_updated = Some(now.clone());
}

/// A Subscription pointed at the InstallPlan made for it (OLM's `setIPReference`).
pub fn with_plan_reference(
    status: &mut SubscriptionStatus,
    current_csv: &str,
    plan: &InstallPlan,
    fail_forward: bool,
    now: &Time,
) {
    let name = plan.metadata.name.clone().unwrap_or_default();
    let uid = plan.metadata.uid.clone().unwrap_or_default();
    status.current_csv = Some(current_csv.to_owned());
    status.install_plan_ref = Some(k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("operators.coreos.com/v1alpha1".into()),
        kind: Some("InstallPlan".into()),
        name: Some(name.clone()),
        namespace: plan.metadata.namespace.clone(),
        uid: Some(uid.clone()),
        resource_version: plan.metadata.resource_version.clone(),
        field_path: None,
    });
    status.install_plan = Some(InstallPlanReference {
        api_version: "operators.coreos.com/v1alpha1".into(),
        kind: "InstallPlan".into(),
        name,
        uuid: uid,
    });
    status.state = if fail_forward && plan_failed(plan) {
        SubscriptionState::UpgradeFailed
    } else {
        SubscriptionState::UpgradePending
    };
    status.install_plan_generation = plan.spec.generation;
    status.last_updated = Some(now.clone());
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;

//! Tests of a Subscription's status decisions.

use super::*;
use k8s_openapi::jiff::Timestamp;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("a time"))
}

fn catalog(name: &str, namespace: &str, uid: &str, healthy: bool) -> CatalogView {
    CatalogView {
        name: name.into(),
        namespace: namespace.into(),
        uid: Some(uid.into()),
        resource_version: Some("1".into()),
        healthy,
    }
}

fn health_condition(status: &SubscriptionStatus) -> (String, String, String) {
    let c = status.conditions.iter().find(|c| c.type_ == CATALOG_SOURCES_UNHEALTHY).expect("the condition");
    (c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default())
}

#[test]
fn a_new_subscription_sees_its_catalogs_added_then_healthy_as_in_olm() {
    let mut status = SubscriptionStatus::default();
    let catalogs = [catalog("community", "olm", "u1", true), catalog("local", "ops", "u2", true)];
    with_catalog_health(&mut status, "community", "olm", &catalogs, &at(1));
    assert_eq!(
        health_condition(&status),
        ("False".into(), "CatalogSourcesAdded".into(), "all available catalogsources are healthy".into())
    );
    let names: Vec<_> = status.catalog_health.iter().map(|h| h.catalog_source_ref.name.clone().unwrap()).collect();
    assert_eq!(names, ["community", "local"], "sorted by namespace then name: olm before ops");
    assert_eq!(status.catalog_health[0].catalog_source_ref.kind.as_deref(), Some("CatalogSource"));
    assert_eq!(status.last_updated, Some(at(1)));
    with_catalog_health(&mut status, "community", "olm", &catalogs, &at(2));
    assert_eq!(
        health_condition(&status),
        ("False".into(), "AllCatalogSourcesHealthy".into(), "all available catalogsources are healthy".into())
    );
    let settled = status.clone();
    with_catalog_health(&mut status, "community", "olm", &catalogs, &at(3));
    assert_eq!(status, settled, "nothing changed: nothing written");
}

#[test]
fn the_targeted_catalog_unhealthy_or_missing_is_named() {
    let mut status = SubscriptionStatus::default();
    with_catalog_health(&mut status, "community", "olm", &[catalog("community", "olm", "u1", true)], &at(1));
    with_catalog_health(&mut status, "community", "olm", &[catalog("community", "olm", "u1", false)], &at(2));
    assert_eq!(
        health_condition(&status),
        ("True".into(), "CatalogSourcesUpdated".into(), "targeted catalogsource olm/community unhealthy".into())
    );
    assert!(!status.catalog_health[0].healthy);
    with_catalog_health(&mut status, "community", "olm", &[catalog("community", "olm", "u1", false)], &at(3));
    assert_eq!(health_condition(&status).1, "UnhealthyCatalogSourceFound");
    // The catalog recovers, but the Subscription names one that is not there; the recovery is an update.
    with_catalog_health(&mut status, "gone", "olm", &[catalog("community", "olm", "u1", true)], &at(4));
    assert_eq!(
        health_condition(&status),
        ("True".into(), "CatalogSourcesUpdated".into(), "targeted catalogsource olm/gone missing".into())
    );
    with_catalog_health(&mut status, "gone", "olm", &[catalog("community", "olm", "u1", true)], &at(5));
    assert_eq!(health_condition(&status).1, "UnhealthyCatalogSourceFound");
}

#[test]
fn another_unhealthy_catalog_keeps_the_previous_message_as_olm_does() {
    let mut status = SubscriptionStatus::default();
    let healthy = [catalog("community", "olm", "u1", true), catalog("other", "olm", "u2", true)];
    with_catalog_health(&mut status, "community", "olm", &healthy, &at(1));
    let other_down = [catalog("community", "olm", "u1", true), catalog("other", "olm", "u2", false)];
    with_catalog_health(&mut status, "community", "olm", &other_down, &at(2));
    assert_eq!(
        health_condition(&status),
        ("True".into(), "CatalogSourcesUpdated".into(), "all available catalogsources are healthy".into())
    );
}

#[test]
fn no_catalog_at_all_is_olm_s_no_catalog_sources_found() {
    let mut status = SubscriptionStatus::default();
    with_catalog_health(&mut status, "community", "olm", &[], &at(1));
    assert_eq!(
        health_condition(&status),
        (
            "True".into(),
            "NoCatalogSourcesFound".into(),
            "dependency resolution requires at least one catalogsource".into()
        )
    );
    with_catalog_health(&mut status, "community", "olm", &[catalog("community", "olm", "u1", true)], &at(2));
    assert_eq!(health_condition(&status).1, "CatalogSourcesAdded");
    with_catalog_health(&mut status, "community", "olm", &[], &at(3));
    assert_eq!(health_condition(&status).1, "CatalogSourcesDeleted");
}

fn resolved(bundle: &str) -> Resolved {
    Resolved { bundle: bundle.into(), package: "plumbus".into(), source: Some(0) }
}

#[test]
fn a_resolution_failure_is_set_once_without_a_transition_time_and_cleared_by_success() {
    let mut status = SubscriptionStatus::default();
    let failed =
        Outcome::Failed { reason: "ConstraintsNotSatisfiable", message: "constraints not satisfiable: x".into() };
    with_resolution(&mut status, None, &failed, &at(1));
    let condition = status.conditions.iter().find(|c| c.type_ == RESOLUTION_FAILED).expect("set");
    assert_eq!(condition.status, "True");
    assert_eq!(condition.reason.as_deref(), Some("ConstraintsNotSatisfiable"));
    assert_eq!(condition.last_transition_time, None, "OLM's setSubsCond sets none");
    let once = status.clone();
    with_resolution(&mut status, None, &failed, &at(2));
    assert_eq!(status, once, "the same failure is not written again");
    let ok = Outcome::Resolved { subscriptions: Default::default(), dependencies: Vec::new() };
    with_resolution(&mut status, Some(&resolved("plumbus.v2")), &ok, &at(3));
    assert!(status.conditions.is_empty());
    assert_eq!(status.current_csv.as_deref(), Some("plumbus.v2"));
    assert_eq!(status.last_updated, Some(at(3)));
}

#[test]
fn the_state_follows_the_csv_current_csv_names() {
    let mut status = SubscriptionStatus { current_csv: Some("plumbus.v2".into()), ..SubscriptionStatus::default() };
    with_csv_state(&mut status, false, false, &at(1));
    assert_eq!(status.state, SubscriptionState::UpgradePending);
    assert_eq!(status.installed_csv, None);
    with_csv_state(&mut status, true, false, &at(2));
    assert_eq!(status.state, SubscriptionState::AtLatestKnown);
    assert_eq!(status.installed_csv.as_deref(), Some("plumbus.v2"));
    assert_eq!(status.last_updated, Some(at(2)));
    let settled = status.clone();
    with_csv_state(&mut status, true, false, &at(3));
    assert_eq!(status, settled);
    let mut nothing = SubscriptionStatus::default();
    with_csv_state(&mut nothing, true, false, &at(1));
    assert_eq!(nothing, SubscriptionStatus::default(), "nothing resolved yet: no state");
}

#[test]
fn under_unsafe_fail_forward_a_failed_plan_is_an_upgrade_failed() {
    let mut status = SubscriptionStatus { current_csv: Some("plumbus.v2".into()), ..SubscriptionStatus::default() };
    with_csv_state(&mut status, false, true, &at(1));
    assert_eq!(status.state, SubscriptionState::UpgradeFailed);
    assert_eq!(status.last_updated, Some(at(1)));
    with_csv_state(&mut status, true, true, &at(2));
    assert_eq!(status.state, SubscriptionState::AtLatestKnown, "the CSV there wins, as in OLM");
    let mut generated = SubscriptionStatus::default();
    with_plan_reference(&mut generated, "plumbus.v2", &plan("Failed", None), true, &at(1));
    assert_eq!(generated.state, SubscriptionState::UpgradeFailed);
    with_plan_reference(&mut generated, "plumbus.v2", &plan("Failed", None), false, &at(1));
    assert_eq!(generated.state, SubscriptionState::UpgradePending, "without fail forward, pending as before");
    assert!(plan_failed(&plan("Failed", None)) && !plan_failed(&plan("Installing", None)));
}

fn plan(phase: &str, installed: Option<(&str, &str, &str)>) -> InstallPlan {
    let mut status = serde_json::json!({"phase": phase, "catalogSources": []});
    if let Some((state, reason, message)) = installed {
        status["conditions"] =
            serde_json::json!([{"type": "Installed", "status": state, "reason": reason, "message": message}]);
    }
    serde_json::from_value(serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": "install-abcde", "namespace": "ops", "uid": "ip-uid", "resourceVersion": "9"},
        "spec": {"clusterServiceVersionNames": ["plumbus.v2"], "approval": "Automatic", "approved": true, "generation": 4},
        "status": status}))
    .expect("an InstallPlan")
}

fn plan_conditions(status: &SubscriptionStatus) -> Vec<(String, String, String)> {
    status
        .conditions
        .iter()
        .map(|c| (c.type_.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
        .collect()
}

#[test]
fn a_subscription_points_at_its_plan_as_olm_records_it() {
    let mut status = SubscriptionStatus::default();
    with_plan_reference(&mut status, "plumbus.v2", &plan("Installing", None), false, &at(1));
    assert_eq!(status.current_csv.as_deref(), Some("plumbus.v2"));
    assert_eq!(status.state, SubscriptionState::UpgradePending);
    assert_eq!(status.install_plan_generation, Some(4));
    let reference = status.install_plan_ref.clone().expect("a reference");
    assert_eq!((reference.kind.as_deref(), reference.name.as_deref()), (Some("InstallPlan"), Some("install-abcde")));
    assert_eq!(reference.uid.as_deref(), Some("ip-uid"));
    let legacy = status.install_plan.clone().expect("the deprecated reference");
    assert_eq!((legacy.name.as_str(), legacy.uuid.as_str()), ("install-abcde", "ip-uid"));
}

#[test]
fn the_plan_s_phase_is_the_subscription_s_condition() {
    let mut status = SubscriptionStatus::default();
    with_plan_reference(&mut status, "plumbus.v2", &plan("Installing", None), false, &at(1));
    let waiting = plan("Installing", Some(("False", "InstallWaiting", "Install plumbus.ops waits for approval")));
    with_install_plan(&mut status, Some(&waiting), &at(2));
    assert_eq!(
        plan_conditions(&status),
        [(INSTALL_PLAN_PENDING.into(), "Installing".into(), "Install plumbus.ops waits for approval".into())]
    );
    assert_eq!(status.conditions[0].last_transition_time, Some(at(2)));
    let settled = status.clone();
    with_install_plan(&mut status, Some(&waiting), &at(3));
    assert_eq!(status, settled, "nothing changed: nothing written");
    with_install_plan(&mut status, Some(&plan("RequiresApproval", None)), &at(4));
    assert_eq!(plan_conditions(&status), [(INSTALL_PLAN_PENDING.into(), "RequiresApproval".into(), String::new())]);
    let failed = plan("Failed", Some(("False", "InstallComponentFailed", "boom")));
    with_install_plan(&mut status, Some(&failed), &at(5));
    assert_eq!(
        plan_conditions(&status),
        [(INSTALL_PLAN_FAILED.into(), "InstallComponentFailed".into(), "boom".into())]
    );
    with_install_plan(&mut status, Some(&plan("Complete", Some(("True", "", "")))), &at(6));
    assert!(status.conditions.is_empty(), "complete: no plan condition");
}

#[test]
fn a_missing_plan_is_forgotten_while_waiting_on_it_and_reported_otherwise() {
    let mut status = SubscriptionStatus::default();
    with_plan_reference(&mut status, "plumbus.v2", &plan("Installing", None), false, &at(1));
    with_install_plan(&mut status, None, &at(2));
    assert_eq!(status.install_plan_ref, None);
    assert_eq!(status.current_csv, None);
    assert_eq!(status.state, SubscriptionState::None);
    let mut installed = SubscriptionStatus::default();
    with_plan_reference(&mut installed, "plumbus.v2", &plan("Complete", None), false, &at(1));
    installed.state = SubscriptionState::AtLatestKnown;
    with_install_plan(&mut installed, None, &at(2));
    assert_eq!(
        plan_conditions(&installed),
        [(INSTALL_PLAN_MISSING.into(), "ReferencedInstallPlanNotFound".into(), String::new())]
    );
    assert!(installed.install_plan_ref.is_some());
}

//! Subscriptions as OLM v0 users apply and read them (rewritten from the intent of OLM's `subscription_e2e_test.go`):
//! a Subscription applied with the real kubectl against a CatalogSource in the global catalog namespace (`olm`),
//! serving a real File-Based Catalog of `../shared/testdata/fbc` from a real registry. Asserted in OLM's words:
//! `catalogHealth` and `CatalogSourcesUnhealthy`, `currentCSV` from a resolution of the whole namespace,
//! `installedCSV` / `state` moving with the CSV, an upgrade resolved from the installed CSV, and `ResolutionFailed`
//! (`ConstraintsNotSatisfiable`, `ErrorPreventedResolution`) with its Warning event on the Namespace.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use olmv2::api::v1alpha1::{InstallPlan, InstallPlanPhase, Subscription, SubscriptionState};

use super::{apply, kubectl, serve_catalog};
use crate::support::harness::Harness;

async fn start(name: &str) -> Harness {
    Harness::start("legacy", name, &["ops", "olm"], Duration::from_secs(30)).await
}

/// The test data's catalogs of `packages` pushed as `catalog:latest`, served by CatalogSource `olm/community`.
async fn community_catalog(harness: &Harness, packages: &[&str]) {
    let configs = harness.dir.join("configs");
    for package in packages {
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/fbc").join(package);
        std::fs::create_dir_all(configs.join(package)).unwrap();
        std::fs::copy(source.join("catalog.yaml"), configs.join(package).join("catalog.yaml")).unwrap();
    }
    serve_catalog(harness, &configs).await;
}

const GROUP: &str = "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: ops}\nspec: {targetNamespaces: [ops]}\n";

fn subscription(name: &str, package: &str, channel: &str, starting: Option<&str>) -> String {
    let starting = starting.map(|csv| format!(", startingCSV: {csv}")).unwrap_or_default();
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: Subscription\nmetadata: {{name: {name}, namespace: ops}}\n\
         spec: {{source: community, sourceNamespace: olm, name: {package}, channel: {channel}{starting}}}\n"
    )
}

fn subscriptions(harness: &Harness) -> Api<Subscription> {
    Api::namespaced(harness.admin.clone(), "ops")
}

fn condition(sub: &Subscription, type_: &str) -> Option<(String, String, String)> {
    let c = sub.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default(), c.message.clone().unwrap_or_default()))
}

/// Polls Subscription `name` until `done`, for up to ten seconds: well within the 30 s resync, so what is waited
/// for must have been woken by the change itself.
async fn soon(harness: &Harness, name: &str, what: &str, done: impl Fn(&Subscription) -> bool) -> Subscription {
    for _ in 0..100 {
        if let Some(sub) = subscriptions(harness).get_opt(name).await.unwrap() {
            if done(&sub) {
                return sub;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{name} was not {what} within 10 s: {:?}", subscriptions(harness).get_opt(name).await.unwrap());
}

fn current_csv(sub: &Subscription) -> Option<String> {
    sub.status.as_ref()?.current_csv.clone()
}

/// A hand-applied CSV named `name` at `version` (what an InstallPlan would have created).
fn csv(name: &str, version: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata: {{name: {name}, namespace: ops}}\n\
         spec:\n  version: {version}\n  installModes: [{{type: OwnNamespace, supported: true}}]\n  install: {{strategy: deployment, spec: {{deployments: []}}}}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_resolves_from_the_global_catalog_and_follows_its_csv_as_in_olm() {
    let harness = start("subscription").await;
    community_catalog(&harness, &["trident-operator"]).await;
    apply(&harness, GROUP);
    apply(&harness, &subscription("trident", "trident-operator", "stable", Some("trident-operator.v26.2.0")));

    let pending = harness
        .wait_for(&subscriptions(&harness), "trident", "resolved", |s| {
            current_csv(s).is_some()
                && condition(s, "CatalogSourcesUnhealthy")
                    .is_some_and(|(_, reason, _)| reason == "AllCatalogSourcesHealthy")
        })
        .await;
    let status = pending.status.clone().unwrap();
    assert_eq!(status.current_csv.as_deref(), Some("trident-operator.v26.2.0"), "startingCSV is the first install");
    assert_eq!(status.state, SubscriptionState::UpgradePending, "no CSV of that name yet");
    assert_eq!(status.installed_csv, None);
    assert_eq!(
        condition(&pending, "CatalogSourcesUnhealthy"),
        Some(("False".into(), "AllCatalogSourcesHealthy".into(), "all available catalogsources are healthy".into()))
    );
    assert_eq!(status.catalog_health.len(), 1);
    let health = &status.catalog_health[0];
    assert!(health.healthy);
    assert_eq!(health.catalog_source_ref.name.as_deref(), Some("community"));
    assert_eq!(health.catalog_source_ref.namespace.as_deref(), Some("olm"));
    assert!(health.catalog_source_ref.uid.is_some());
    assert!(status.last_updated.is_some());
    assert_eq!(condition(&pending, "ResolutionFailed"), None);

    // kubectl get shows OLM's columns.
    let listed = kubectl(&harness, &["get", "subscriptions", "-n", "ops"]);
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "PACKAGE", "SOURCE", "CHANNEL"]);
    assert!(
        listed.contains("trident-operator") && listed.contains("community") && listed.contains("stable"),
        "{listed}"
    );

    // The CSV appears (an InstallPlan's work in OLM): installed, then the upgrade from it is resolved.
    apply(&harness, &csv("trident-operator.v26.2.0", "26.2.0"));
    let upgraded = soon(&harness, "trident", "resolving the upgrade", |s| {
        current_csv(s).as_deref() == Some("trident-operator.v26.2.1")
    })
    .await;
    let status = upgraded.status.unwrap();
    assert_eq!(status.installed_csv.as_deref(), Some("trident-operator.v26.2.0"));
    assert_eq!(status.state, SubscriptionState::UpgradePending);
    apply(&harness, &csv("trident-operator.v26.2.1", "26.2.1"));
    let latest = soon(&harness, "trident", "at the latest known", |s| {
        s.status.as_ref().is_some_and(|s| s.state == SubscriptionState::AtLatestKnown)
    })
    .await;
    assert_eq!(latest.status.unwrap().installed_csv.as_deref(), Some("trident-operator.v26.2.1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn resolution_failures_are_olm_s_conditions_on_every_subscription_and_an_event_on_the_namespace() {
    let harness = start("subscription-failures").await;
    community_catalog(&harness, &["trident-operator", "shipwright-operator"]).await;
    apply(&harness, GROUP);
    apply(&harness, &subscription("trident", "trident-operator", "stable", None));
    harness
        .wait_for(&subscriptions(&harness), "trident", "resolved", |s| {
            current_csv(s).as_deref() == Some("trident-operator.v26.2.1")
        })
        .await;

    // A package the catalog does not hold: OLM's message, on the whole namespace.
    apply(&harness, &subscription("ghost", "ghost", "stable", None));
    let expected = "constraints not satisfiable: no operators found in package ghost in the catalog referenced by \
                    subscription ghost, subscription ghost exists";
    for name in ["ghost", "trident"] {
        let failed = soon(&harness, name, "failing to resolve", |s| condition(s, "ResolutionFailed").is_some()).await;
        assert_eq!(
            condition(&failed, "ResolutionFailed"),
            Some(("True".into(), "ConstraintsNotSatisfiable".into(), expected.into())),
            "{name}"
        );
    }
    let events = Api::<Event>::namespaced(harness.admin.clone(), "default");
    let mut recorded = None;
    for _ in 0..100 {
        let listed = events.list(&ListParams::default()).await.unwrap().items;
        recorded = listed.into_iter().find(|e| {
            e.reason.as_deref() == Some("ResolutionFailed")
                && e.regarding
                    .as_ref()
                    .is_some_and(|r| r.kind.as_deref() == Some("Namespace") && r.name.as_deref() == Some("ops"))
        });
        if recorded.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let event = recorded.expect("a ResolutionFailed event on Namespace ops");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.note.as_deref(), Some(expected));

    // Deleting the bad Subscription lets the namespace resolve again, and the condition goes.
    kubectl(&harness, &["delete", "subscription", "ghost", "-n", "ops"]);
    soon(&harness, "trident", "resolving again", |s| condition(s, "ResolutionFailed").is_none()).await;

    // A real package whose bundle requires APIs no catalog provides (cert-manager's, Tekton's): the chain is named.
    apply(&harness, &subscription("shipwright", "shipwright-operator", "alpha", None));
    let blocked = harness
        .wait_for(&subscriptions(&harness), "shipwright", "unsatisfiable", |s| {
            condition(s, "ResolutionFailed").is_some()
        })
        .await;
    let (status, reason, message) = condition(&blocked, "ResolutionFailed").unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "ConstraintsNotSatisfiable"));
    assert!(message.starts_with("constraints not satisfiable: "), "{message}");
    assert!(
        message.contains("shipwright-operator") && message.contains("Certificate (cert-manager.io/v1)"),
        "{message}"
    );
    kubectl(&harness, &["delete", "subscription", "shipwright", "-n", "ops"]);
    // Until the namespace resolves again, the other Subscriptions carry shipwright's failure.
    soon(&harness, "trident", "resolving again", |s| condition(s, "ResolutionFailed").is_none()).await;

    // A second OperatorGroup: the namespace cannot resolve, and says why.
    apply(&harness, &GROUP.replace("name: og,", "name: og2,"));
    let blocked =
        soon(&harness, "trident", "blocked by two groups", |s| condition(s, "ResolutionFailed").is_some()).await;
    assert_eq!(
        condition(&blocked, "ResolutionFailed"),
        Some((
            "True".into(),
            "ErrorPreventedResolution".into(),
            "expected 1 OperatorGroup in the namespace, found 2".into()
        ))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_waiting_for_its_catalog_resolves_as_soon_as_the_catalog_serves() {
    let harness = start("subscription-late-catalog").await;
    apply(&harness, GROUP);
    apply(&harness, &subscription("trident", "trident-operator", "stable", None));
    let waiting = soon(&harness, "trident", "without a catalog", |s| {
        condition(s, "CatalogSourcesUnhealthy").is_some_and(|(_, reason, _)| reason == "NoCatalogSourcesFound")
    })
    .await;
    assert_eq!(current_csv(&waiting), None);
    // The catalog appears in the global namespace: its change (not a resync) wakes the Subscription.
    community_catalog(&harness, &["trident-operator"]).await;
    soon(&harness, "trident", "resolved", |s| current_csv(s).as_deref() == Some("trident-operator.v26.2.1")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn under_unsafe_fail_forward_a_failed_plan_makes_the_subscription_upgrade_failed() {
    let harness = start("fail-forward").await;
    // The test data's trident catalog, its bundle images moved to a repository of the local registry that has none.
    let configs = harness.dir.join("configs");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/fbc/trident-operator/catalog.yaml");
    let absent = harness.registry.reference("absent/trident-operator");
    let text = std::fs::read_to_string(source)
        .unwrap()
        .replace("quay.io/community-operator-pipeline-prod/trident-operator", &absent);
    std::fs::create_dir_all(configs.join("trident-operator")).unwrap();
    std::fs::write(configs.join("trident-operator/catalog.yaml"), text).unwrap();
    serve_catalog(&harness, &configs).await;
    let group = GROUP.replace(
        "{targetNamespaces: [ops]}",
        "{targetNamespaces: [ops], upgradeStrategy: TechPreviewUnsafeFailForward}",
    );
    apply(&harness, &group);
    apply(&harness, &subscription("trident", "trident-operator", "stable", Some("trident-operator.v26.2.0")));
    // The bundle image is not there: the plan's Install fails to pull, and the plan fails.
    let failed = harness
        .wait_for(&subscriptions(&harness), "trident", "UpgradeFailed", |s| {
            s.status.as_ref().is_some_and(|s| s.state == SubscriptionState::UpgradeFailed)
        })
        .await;
    let (status, reason, _) = condition(&failed, "InstallPlanFailed").expect("the plan's failure");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "InstallComponentFailed"));
    assert_eq!(current_csv(&failed).as_deref(), Some("trident-operator.v26.2.0"));
    assert_eq!(failed.status.as_ref().unwrap().installed_csv, None);
    let listed = kubectl(&harness, &["get", "subscriptions", "-n", "ops", "-o", "jsonpath={.items[0].status.state}"]);
    assert_eq!(listed, "UpgradeFailed");
    // The plan failed for good once its retry timeout passed (OLM's --install-plan-retry-timeout; 5 s here).
    let name = failed.status.as_ref().unwrap().install_plan_ref.as_ref().unwrap().name.clone().unwrap();
    let plan = Api::<InstallPlan>::namespaced(harness.admin.clone(), "ops").get(&name).await.unwrap();
    let status = plan.status.unwrap();
    assert_eq!(status.phase, InstallPlanPhase::Failed);
    let message = status.message.unwrap_or_default();
    assert!(message.starts_with(&format!("Install trident-operator.ops: failed to pull {absent}")), "{message}");
}

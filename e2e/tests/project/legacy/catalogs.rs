//! CatalogSources as OLM v0 users watch them (rewritten from the intent of OLM's `catalog_e2e_test.go`): applied with
//! the real kubectl, served from real File-Based Catalog images of `../shared/testdata/fbc` in a real registry or
//! from a ConfigMap, and read back in OLM's fields: `connectionState.lastObservedState` READY (waited on with
//! `kubectl wait`, as OLM's users script it), `latestImageRegistryPoll` moving with a due poll and a new digest
//! picked up, OLM's reasons and messages for what fails, and the `Serving` condition and its events.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use olmv2::api::v1alpha1::CatalogSource;

use super::{apply, kubectl, start};
use crate::support::harness::Harness;

fn testdata_catalog(package: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/fbc").join(package)
}

/// Pushes a catalog image holding the File-Based Catalogs of `packages` (from the test data) as `catalog:latest`;
/// answers its digest.
async fn push_catalog(harness: &Harness, packages: &[&str]) -> String {
    let configs = harness.dir.join(format!("configs-{}", packages.join("-")));
    for package in packages {
        let dir = configs.join(package);
        std::fs::create_dir_all(&dir).expect("configs");
        std::fs::copy(testdata_catalog(package).join("catalog.yaml"), dir.join("catalog.yaml")).expect("copied");
    }
    let image = harness.registry.reference("catalog:latest");
    harness.images().push_catalog(&configs, &image).await.expect("catalog pushed")
}

fn catalog_source(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: {name}, namespace: ops}}\nspec:\n{spec}"
    )
}

fn sources(harness: &Harness) -> Api<CatalogSource> {
    Api::namespaced(harness.admin.clone(), "ops")
}

fn state(source: &CatalogSource) -> Option<String> {
    source.status.as_ref()?.connection_state.as_ref().map(|c| c.last_observed_state.clone())
}

fn address(source: &CatalogSource) -> String {
    let connection = source.status.as_ref().and_then(|s| s.connection_state.as_ref());
    connection.and_then(|c| c.address.clone()).unwrap_or_default()
}

fn reason(source: &CatalogSource) -> Option<String> {
    source.status.as_ref()?.reason.clone()
}

fn message(source: &CatalogSource) -> String {
    source.status.as_ref().and_then(|s| s.message.clone()).unwrap_or_default()
}

fn serving(source: &CatalogSource) -> Option<(String, String, String)> {
    let condition = source.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Serving")?;
    Some((condition.status.clone(), condition.reason.clone(), condition.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_catalog_image_is_served_ready_and_a_new_digest_is_picked_up_when_the_poll_is_due() {
    let harness = start("catalog-image").await;
    let first = push_catalog(&harness, &["shipwright-operator"]).await;
    let image = harness.registry.reference("catalog:latest");
    apply(
        &harness,
        &catalog_source(
            "community",
            &format!(
                "  sourceType: grpc\n  image: {image}\n  displayName: Community Operators\n  publisher: Example\n  \
                 priority: 10\n  updateStrategy: {{registryPoll: {{interval: 2s}}}}\n"
            ),
        ),
    );
    // OLM v0's users wait on exactly this.
    let waited = kubectl(
        &harness,
        &[
            "wait",
            "-n",
            "ops",
            "catalogsource/community",
            "--for=jsonpath={.status.connectionState.lastObservedState}=READY",
            "--timeout=60s",
        ],
    );
    assert!(waited.contains("condition met"), "{waited}");
    let source = sources(&harness).get("community").await.expect("the CatalogSource");
    let digest = first.rsplit('@').next().unwrap_or(&first).to_owned();
    assert!(address(&source).ends_with(&format!("@{digest}")), "pinned to the pushed digest: {}", address(&source));
    assert_eq!(reason(&source), None);
    let (status, serving_reason, serving_message) = serving(&source).expect("a Serving condition");
    assert_eq!((status.as_str(), serving_reason.as_str()), ("True", "Available"));
    assert!(serving_message.starts_with("serving 1 package(s) from "), "{serving_message}");
    let status = source.status.clone().unwrap();
    assert!(status.connection_state.as_ref().unwrap().last_connect_time.is_some());
    assert_eq!(status.resolved_image.as_deref(), Some(address(&source).as_str()));

    // kubectl get shows OLM's columns.
    let listed = kubectl(&harness, &["get", "catsrc", "-n", "ops"]);
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "DISPLAY", "TYPE", "PUBLISHER", "AGE"]);
    assert!(
        listed.contains("Community Operators") && listed.contains("grpc") && listed.contains("Example"),
        "{listed}"
    );

    // The poll is due every 2 s: its time is recorded, and a new image under the same tag is picked up.
    let polled = harness
        .wait_for(&sources(&harness), "community", "polled", |s| {
            s.status.as_ref().is_some_and(|s| s.latest_image_registry_poll.is_some())
        })
        .await;
    let first_poll = polled.status.unwrap().latest_image_registry_poll.unwrap();
    let second = push_catalog(&harness, &["shipwright-operator", "kairos-operator"]).await;
    assert_ne!(first, second);
    let moved = harness
        .wait_for(&sources(&harness), "community", "serving the new digest", |s| {
            serving(s).is_some_and(|(_, _, message)| message.starts_with("serving 2 package(s)"))
        })
        .await;
    let second_digest = second.rsplit('@').next().unwrap().to_owned();
    assert!(address(&moved).ends_with(&second_digest), "{}", address(&moved));
    assert!(moved.status.unwrap().latest_image_registry_poll.unwrap().0 > first_poll.0, "a later poll found it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn what_cannot_be_served_is_reported_in_olm_s_reasons_and_messages() {
    let harness = start("catalog-failures").await;
    // An image that is not there: a transient failure, retried, and a Warning event.
    let missing = harness.registry.reference("nothing:latest");
    apply(&harness, &catalog_source("missing", &format!("  sourceType: grpc\n  image: {missing}\n")));
    let failing = harness
        .wait_for(&sources(&harness), "missing", "failing", |s| state(s).as_deref() == Some("TRANSIENT_FAILURE"))
        .await;
    assert_eq!(reason(&failing).as_deref(), Some("RegistryServerError"));
    assert!(message(&failing).contains(&missing), "{}", message(&failing));
    assert_eq!(address(&failing), missing);
    assert_eq!(
        serving(&failing).map(|(status, reason, _)| (status, reason)),
        Some(("False".into(), "RegistryServerError".into()))
    );
    let event = harness.wait_event("ops", "RegistryServerError").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // Once the image exists, the retry finds it.
    let image = harness.images();
    let configs = harness.dir.join("late");
    std::fs::create_dir_all(configs.join("kairos-operator")).unwrap();
    std::fs::copy(
        testdata_catalog("kairos-operator").join("catalog.yaml"),
        configs.join("kairos-operator/catalog.yaml"),
    )
    .unwrap();
    image.push_catalog(&configs, &missing).await.expect("pushed");
    let recovered =
        harness.wait_for(&sources(&harness), "missing", "ready", |s| state(s).as_deref() == Some("READY")).await;
    assert_eq!(reason(&recovered), None, "the reason is cleared, as OLM clears it");

    // Neither image nor address: OLM's validation message, word for word.
    apply(&harness, &catalog_source("empty", "  sourceType: grpc\n"));
    let invalid = harness
        .wait_for(&sources(&harness), "empty", "invalid", |s| reason(s).as_deref() == Some("SpecInvalidError"))
        .await;
    assert_eq!(message(&invalid), "image and address unset: at least one must be set for sourcetype: grpc");
    apply(&harness, &catalog_source("nameless", "  sourceType: configmap\n"));
    let invalid = harness
        .wait_for(&sources(&harness), "nameless", "invalid", |s| reason(s).as_deref() == Some("SpecInvalidError"))
        .await;
    assert_eq!(message(&invalid), "configmap name unset: must be set for sourcetype: configmap");

    // The address of a running registry server is not served here, and says so.
    apply(&harness, &catalog_source("remote", "  sourceType: grpc\n  address: registry.olm.svc:50051\n"));
    let remote = harness
        .wait_for(&sources(&harness), "remote", "unsupported", |s| reason(s).as_deref() == Some("Unsupported"))
        .await;
    assert!(
        message(&remote).contains("registry.olm.svc:50051") && message(&remote).contains("spec.image"),
        "{}",
        message(&remote)
    );
    assert_eq!(state(&remote), None, "no connection is claimed");

    // An interval OLM cannot parse: the catalog is served, polled every 15 minutes, and OLM's message says so.
    push_catalog(&harness, &["kairos-operator"]).await;
    let image = harness.registry.reference("catalog:latest");
    apply(
        &harness,
        &catalog_source(
            "sloppy",
            &format!(
                "  sourceType: grpc\n  image: {image}\n  updateStrategy: {{registryPoll: {{interval: \"10\"}}}}\n"
            ),
        ),
    );
    let sloppy = harness
        .wait_for(&sources(&harness), "sloppy", "reporting the interval", |s| {
            reason(s).as_deref() == Some("InvalidIntervalError")
        })
        .await;
    assert_eq!(
        message(&sloppy),
        "error parsing spec.updateStrategy.registryPoll.interval. Using the default value of 15m0s instead. Error: \
         time: missing unit in duration \"10\""
    );
    assert_eq!(state(&sloppy).as_deref(), Some("READY"));
}

const CATALOG_CRDS: &str = r#"
- apiVersion: apiextensions.k8s.io/v1
  kind: CustomResourceDefinition
  metadata: {name: plumbuses.example.com}
  spec:
    group: example.com
    names: {kind: Plumbus, plural: plumbuses}
    scope: Namespaced
    versions: [{name: v1, served: true, storage: true}]
"#;

fn catalog_config_map(current: &str, versions: &[(&str, &str, Option<&str>)]) -> ConfigMap {
    let csvs: Vec<String> = versions
        .iter()
        .map(|(name, version, replaces)| {
            let replaces = replaces.map(|r| format!("\n    replaces: {r}")).unwrap_or_default();
            format!(
                "- apiVersion: operators.coreos.com/v1alpha1\n  kind: ClusterServiceVersion\n  metadata: {{name: {name}}}\n  \
                 spec:\n    version: {version}{replaces}\n    customresourcedefinitions:\n      owned: [{{name: plumbuses.example.com, version: v1, kind: Plumbus}}]\n"
            )
        })
        .collect();
    let packages = format!(
        "- packageName: plumbus\n  defaultChannel: stable\n  channels: [{{name: stable, currentCSV: {current}}}]\n"
    );
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plumbus-catalog", "namespace": "ops"},
        "data": {"customResourceDefinitions": CATALOG_CRDS, "clusterServiceVersions": csvs.concat(), "packages": packages}
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_configmap_catalog_is_read_as_olm_reads_it_and_followed_when_it_changes() {
    let harness = start("catalog-configmap").await;
    // The ConfigMap does not exist yet: OLM's ConfigMapError.
    apply(&harness, &catalog_source("inline", "  sourceType: configmap\n  configMap: plumbus-catalog\n"));
    let waiting = harness
        .wait_for(&sources(&harness), "inline", "missing its ConfigMap", |s| {
            reason(s).as_deref() == Some("ConfigMapError")
        })
        .await;
    assert!(
        message(&waiting).starts_with("failed to get catalog config map plumbus-catalog: "),
        "{}",
        message(&waiting)
    );

    // Created, it is read: its reference and version in the status, one package served.
    let config_maps = Api::<ConfigMap>::namespaced(harness.admin.clone(), "ops");
    let written = catalog_config_map("plumbus.v1.0.0", &[("plumbus.v1.0.0", "1.0.0", None)]);
    apply(&harness, &serde_yaml_ng::to_string(&written).unwrap());
    let ready = harness.wait_for(&sources(&harness), "inline", "ready", |s| state(s).as_deref() == Some("READY")).await;
    let stored = config_maps.get("plumbus-catalog").await.unwrap();
    let reference = ready.status.as_ref().unwrap().config_map_reference.clone().expect("a reference");
    assert_eq!((reference.name.as_str(), reference.namespace.as_str()), ("plumbus-catalog", "ops"));
    assert_eq!(reference.uid, stored.metadata.uid);
    assert_eq!(reference.resource_version, stored.metadata.resource_version);
    assert!(reference.last_update_time.is_some());
    assert_eq!(address(&ready), "configmap ops/plumbus-catalog");
    assert_eq!(reason(&ready), None);
    // Unlike OLM, nothing is written to the ConfigMap: deleting the CatalogSource must not garbage-collect it.
    assert_eq!(stored.metadata.owner_references, None);

    // A new version in the ConfigMap is followed (its watch wakes the CatalogSource).
    let updated = catalog_config_map(
        "plumbus.v2.0.0",
        &[("plumbus.v1.0.0", "1.0.0", None), ("plumbus.v2.0.0", "2.0.0", Some("plumbus.v1.0.0"))],
    );
    apply(&harness, &serde_yaml_ng::to_string(&updated).unwrap());
    let stored = config_maps.get("plumbus-catalog").await.unwrap();
    // Well before the 30 s resync: the change itself woke it.
    let mut followed = false;
    for _ in 0..100 {
        let source = sources(&harness).get("inline").await.unwrap();
        let reference = source.status.as_ref().and_then(|s| s.config_map_reference.as_ref());
        if reference.and_then(|r| r.resource_version.clone()) == stored.metadata.resource_version {
            followed = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(followed, "the ConfigMap's change was not followed within 10 s");

    // A ConfigMap that is no catalog is named so.
    apply(
        &harness,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: ops}\ndata: {password: hunter2}\n",
    );
    apply(&harness, &catalog_source("settings", "  sourceType: configmap\n  configMap: settings\n"));
    let refused = harness
        .wait_for(&sources(&harness), "settings", "refused", |s| reason(s).as_deref() == Some("ConfigMapError"))
        .await;
    assert!(message(&refused).contains("couldn't find expected key customResourceDefinitions in configmap"));
    assert!(
        !message(&refused).contains("hunter2"),
        "nothing of the ConfigMap's content is shown: {}",
        message(&refused)
    );
}

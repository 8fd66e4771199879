//! PackageManifests (`packages.operators.coreos.com/v1`, OLM v0's packageserver API) through the test control plane's
//! aggregation layer with the real kubectl, from real File-Based Catalog images of `../shared/testdata/fbc` in a real
//! registry: `kubectl get packagemanifests` with OLM's columns in every namespace for the global catalog and in its
//! own namespace only for a namespaced one, OLM's fields and labels, selectors, the `icon` subresource, `explain`,
//! and writes refused.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::legacy::{apply, kubectl};
use crate::support::harness::Harness;

/// Pushes a catalog image of the test data's `packages` as `catalog:<tag>`; answers the image.
pub(crate) async fn push(harness: &Harness, tag: &str, packages: &[&str]) -> String {
    let configs = harness.dir.join(format!("configs-{tag}"));
    for package in packages {
        let dir = configs.join(package);
        std::fs::create_dir_all(&dir).unwrap();
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata/fbc").join(package);
        std::fs::copy(source.join("catalog.yaml"), dir.join("catalog.yaml")).unwrap();
    }
    let image = harness.registry.reference(&format!("catalog:{tag}"));
    harness.images().push_catalog(&configs, &image).await.unwrap();
    image
}

pub(crate) fn catalog_source(namespace: &str, name: &str, display: &str, image: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: CatalogSource\nmetadata: {{name: {name}, namespace: {namespace}, labels: {{team: {name}}}}}\n\
         spec: {{sourceType: grpc, image: \"{image}\", displayName: \"{display}\", publisher: Example}}\n"
    )
}

/// Polls `kubectl get packagemanifests <args>` until its output holds `expected`.
async fn wait_listed(harness: &Harness, args: &[&str], expected: &str) -> String {
    let mut all = vec!["get", "packagemanifests"];
    all.extend_from_slice(args);
    harness.wait_kubectl(&all, expected).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_gets_package_manifests_of_the_catalogs_a_namespace_sees() {
    let harness = Harness::start("packages", "kubectl", &["olm", "team-a", "team-b"], Duration::from_secs(30)).await;
    let community = push(&harness, "community", &["visionone-containersecurity", "kairos-operator"]).await;
    let private = push(&harness, "private", &["project-onboarding-operator"]).await;
    apply(&harness, &catalog_source("olm", "community", "Community Operators", &community));
    apply(&harness, &catalog_source("team-b", "private", "Team B", &private));

    // The global catalog's packages in every namespace, with OLM's columns.
    let table = wait_listed(&harness, &["-n", "team-a"], "visionone-containersecurity").await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CATALOG", "AGE"]);
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 2, "{table}");
    assert!(rows[0].starts_with("kairos-operator") && rows[0].contains("Community Operators"), "{table}");
    assert!(rows[1].starts_with("visionone-containersecurity"), "{table}");
    // A namespaced catalog's only in its namespace.
    let team_b = wait_listed(&harness, &["-n", "team-b"], "project-onboarding-operator").await;
    assert!(team_b.contains("Team B") && team_b.contains("kairos-operator"), "{team_b}");
    let mine = kubectl(&harness, &["get", "packagemanifests", "-n", "team-b", "-l", "catalog=private", "-o", "name"]);
    assert_eq!(mine.trim(), "packagemanifest.packages.operators.coreos.com/project-onboarding-operator");
    let elsewhere = harness.admin_kubectl(&["get", "packagemanifests", "-n", "team-a", "-l", "catalog=private"], None);
    assert!(String::from_utf8_lossy(&elsewhere.stderr).contains("No resources found in team-a namespace."));

    // OLM's fields and labels.
    let manifest: Value = serde_json::from_str(&kubectl(
        &harness,
        &["get", "packagemanifest", "visionone-containersecurity", "-n", "team-a", "-o", "json"],
    ))
    .unwrap();
    assert_eq!(manifest["kind"], "PackageManifest");
    assert_eq!(manifest["metadata"]["namespace"], "team-a", "shown in the namespace asked");
    let labels = &manifest["metadata"]["labels"];
    assert_eq!(labels["catalog"], "community");
    assert_eq!(labels["catalog-namespace"], "olm");
    assert_eq!(labels["team"], "community", "the CatalogSource's own labels");
    let status = &manifest["status"];
    assert_eq!(status["catalogSource"], "community");
    assert_eq!(status["catalogSourceDisplayName"], "Community Operators");
    assert_eq!(status["catalogSourcePublisher"], "Example");
    assert_eq!(status["catalogSourceNamespace"], "olm");
    assert_eq!(status["packageName"], "visionone-containersecurity");
    let default = status["defaultChannel"].as_str().unwrap();
    let channel = status["channels"].as_array().unwrap().iter().find(|c| c["name"] == default).unwrap();
    let head = channel["currentCSV"].as_str().unwrap();
    assert!(head.starts_with("visionone-containersecurity.v"), "{head}");
    assert_eq!(channel["currentCSVDesc"]["version"], head.trim_start_matches("visionone-containersecurity.v"));
    assert!(channel["currentCSVDesc"].get("icon").is_none(), "icons are stripped from get and list");
    let by_name = kubectl(
        &harness,
        &["get", "packagemanifests", "-A", "--field-selector", "metadata.name=kairos-operator", "-o", "name"],
    );
    assert_eq!(by_name.trim(), "packagemanifest.packages.operators.coreos.com/kairos-operator");

    // The icon subresource: the image itself, as OLM serves it.
    let icon = harness.admin_kubectl(
        &["get", "--raw", "/apis/packages.operators.coreos.com/v1/namespaces/team-a/packagemanifests/visionone-containersecurity/icon"],
        None,
    );
    assert!(icon.status.success(), "{}", String::from_utf8_lossy(&icon.stderr));
    assert!(icon.stdout.starts_with(b"\x89PNG"), "the catalog's PNG icon, decoded");

    let explained = kubectl(&harness, &["explain", "packagemanifests.status.defaultChannel"]);
    assert!(explained.contains("KIND:       PackageManifest"), "{explained}");
    let manifest = "apiVersion: packages.operators.coreos.com/v1\nkind: PackageManifest\nmetadata: {name: forged, namespace: team-a}\n";
    let created = harness.admin_kubectl(&["create", "-f", "-"], Some(manifest));
    assert!(String::from_utf8_lossy(&created.stderr).contains("MethodNotAllowed"));
}

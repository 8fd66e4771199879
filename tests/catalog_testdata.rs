//! The File-Based Catalogs under `../shared/testdata/fbc` (real catalogs written by others): every one loads,
//! every channel has a head, and from every bundle of a channel the upgrade edges (replaces, skips, skipRange) lead
//! to that head. A catalog image built from one, pushed to a real registry and read through a CatalogSource, is
//! the same catalog.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use olmv2::api::v1alpha1::CatalogSource;
use olmv2::bundle::image::{ImageClient, RegistryOptions};
use olmv2::catalog::resolve::{head, next_upgrade, resolve, Selection};
use olmv2::catalog::{Catalog, CatalogCache};
use olmv2::category::Categorized;
use serde_json::json;
use support::registry::Registry;

fn fbc_dirs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root).expect("testdata fbc").flatten().map(|e| e.path()).collect();
    dirs.sort();
    dirs
}

#[test]
fn every_testdata_catalog_loads_and_every_bundle_upgrades_to_its_channel_head() {
    let dirs = fbc_dirs();
    assert_eq!(dirs.len(), 5);
    let mut bundles = 0;
    for dir in dirs {
        let catalog = Catalog::load_dir(&dir).unwrap_or_else(|error| panic!("{}: {error}", dir.display()));
        for package in catalog.packages.values() {
            bundles += package.bundles.len();
            let default = package.default_channel.as_deref().expect("default channel");
            assert!(package.channels.contains_key(default), "{}: default channel {default}", package.name);
            for channel in package.channels.values() {
                let head = head(package, channel).unwrap_or_else(|e| panic!("{}/{}: {e}", package.name, channel.name));
                for entry in &channel.entries {
                    let mut current = package.bundles.get(&entry.name).expect("channel entries are bundles").clone();
                    for _ in 0..channel.entries.len() {
                        match next_upgrade(package, channel, &current).expect("upgrade edges resolve") {
                            Some(next) => {
                                assert!(next.version > current.version || next.name != current.name);
                                current = next.clone();
                            }
                            None => break,
                        }
                    }
                    assert_eq!(current.name, head.name, "{}/{}: from {}", package.name, channel.name, entry.name);
                }
            }
        }
    }
    assert_eq!(bundles, 24, "the testdata README counts 24 bundles");
}

#[test]
fn known_edges_of_the_testdata_catalogs() {
    let dir = |name: &str| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc").join(name);
    let kairos = Catalog::load_dir(&dir("kairos-operator")).expect("kairos");
    let select = Selection { package: Some("kairos-operator"), channel: None, entrypoint: None };
    assert_eq!(resolve(&kairos, select, None).expect("head").bundle.name, "kairos-operator.v2.2.0");
    let skipping = resolve(&kairos, select, Some("kairos-operator.v2.1.0")).expect("upgrade");
    assert_eq!(skipping.bundle.name, "kairos-operator.v2.2.0", "v2.2.0 skips v2.1.0");
    let shipwright = Catalog::load_dir(&dir("shipwright-operator")).expect("shipwright");
    let select = Selection {
        package: Some("shipwright-operator"),
        channel: Some("alpha"),
        entrypoint: Some("shipwright-operator.v0.9.0"),
    };
    let first = resolve(&shipwright, select, None).expect("entrypoint");
    assert_eq!(first.bundle.name, "shipwright-operator.v0.9.0");
    assert!(first.bundle.image.starts_with("quay.io/openshift-community-operators/shipwright-operator@sha256:"));
    assert_eq!(
        resolve(&shipwright, select, Some("shipwright-operator.v0.9.0")).unwrap().bundle.name,
        "shipwright-operator.v0.13.0"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_testdata_catalog_image_reads_back_through_a_catalog_source() {
    let registry = Registry::start("catalog-testdata").expect("docker-registry starts");
    let options = RegistryOptions { insecure_registries: vec![registry.host.clone()], ..RegistryOptions::default() };
    let images = Arc::new(ImageClient::new(options));
    let dir = fbc_dirs().into_iter().find(|d| d.ends_with("trident-operator")).expect("trident");
    let reference = registry.reference("trident-catalog:latest");
    images.push_catalog(&dir, &reference).await.expect("catalog pushed");
    let cache = std::env::temp_dir().join(format!("olmv2-catalog-testdata-{}", std::process::id()));
    // No cluster: an image catalog reads none (only ConfigMap catalogs do).
    let nowhere = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap())).unwrap();
    let catalogs = CatalogCache::new(images, nowhere, cache.clone(), Duration::from_secs(600));
    let source: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "trident", "namespace": "catalogs"},
        "spec": {"sourceType": "grpc", "image": reference}
    }))
    .unwrap();
    let loaded = catalogs.catalog_of(&source).await.expect("catalog read");
    assert_eq!(*loaded.catalog, Catalog::load_dir(&dir).expect("local"));
    assert!(loaded.digest.starts_with("sha256:"));
    let again = catalogs.catalog_of(&source).await.expect("cached");
    assert!(Arc::ptr_eq(&loaded.catalog, &again.catalog), "within the poll interval the loaded catalog is reused");
    let no_image: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "address", "namespace": "catalogs"}, "spec": {"sourceType": "grpc", "address": "x:50051"}
    }))
    .unwrap();
    assert_eq!(catalogs.catalog_of(&no_image).await.expect_err("no image").category(), "CatalogSourceUnsupported");
    // A catalog that cannot be pulled is not pulled again by every loop asking at once: its failure is remembered.
    let missing: CatalogSource = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": "missing", "namespace": "catalogs"},
        "spec": {"sourceType": "grpc", "image": registry.reference("nothing:latest")}
    }))
    .unwrap();
    let first = catalogs.catalog_of(&missing).await.expect_err("not there");
    let again = catalogs.catalog_of(&missing).await.expect_err("still not there");
    assert!(matches!(again, olmv2::catalog::CatalogSourceError::RecentlyFailed { .. }), "{again:?}");
    assert_eq!(again.category(), first.category());
    assert_eq!(
        again.to_string(),
        olmv2::category::report(&first),
        "the same words, so statuses repeating it stay as they are"
    );
    let _ = std::fs::remove_dir_all(cache);
}

//! Helpers shared by the integration tests: where the shared test data is, its bundles, and a real registry.

#![allow(dead_code, clippy::expect_used, clippy::unwrap_used, clippy::panic)] // each test crate uses some of these

#[path = "../../e2e/src/registry.rs"]
pub mod registry;

use std::path::{Path, PathBuf};

/// `../shared/testdata`, beside the checkout.
pub fn testdata() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata");
    assert!(dir.is_dir(), "the shared test data is expected at {}", dir.display());
    dir
}

/// Every registry+v1 bundle directory of the test data (those with `manifests/`), sorted.
pub fn testdata_bundles() -> Vec<PathBuf> {
    let root = testdata();
    let mut dirs = Vec::new();
    for family in ["community-bundles", "upgrade-chains"] {
        for operator in std::fs::read_dir(root.join(family)).expect("readable").flatten() {
            for version in std::fs::read_dir(operator.path()).into_iter().flatten().flatten() {
                if version.path().join("manifests").is_dir() {
                    dirs.push(version.path());
                }
            }
        }
    }
    dirs.sort();
    dirs
}

/// The one test-data bundle whose metadata is truly invalid YAML, and the file that is.
pub const INVALID_TESTDATA_BUNDLE: (&str, &str) = ("eventing-kogito", "metadata/dependencies.yaml");

pub fn is_invalid_testdata_bundle(bundle: &Path) -> bool {
    bundle.components().any(|c| c.as_os_str() == INVALID_TESTDATA_BUNDLE.0)
}

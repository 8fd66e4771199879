//! The CRD YAML committed under `crds/` is exactly what the Rust types generate.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;

#[test]
fn committed_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(olmv2::crdgen::CRD_DIR);
    let staleness = olmv2::crdgen::check(&dir).expect("crds/ is readable");
    assert!(
        staleness.is_fresh(),
        "crds/ is stale (outdated {:?}, unexpected {:?}); run `cargo run -- crds write`",
        staleness.outdated,
        staleness.unexpected
    );
}

//! Replays every input kept under `tests/fuzz-regressions/<target>/` (fuzzer findings, fixed, and hand-made seeds)
//! through the same harness the fuzz targets under `fuzz/` run.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

#[path = "../fuzz/harness.rs"]
mod harness;

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-regressions").join(target);
    let mut inputs: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .expect("regression directory")
        .flatten()
        .map(|entry| (entry.file_name().to_string_lossy().into_owned(), std::fs::read(entry.path()).expect("input")))
        .collect();
    inputs.sort();
    inputs
}

#[test]
fn unpack_layer_regressions() {
    let inputs = inputs("unpack_layer");
    assert!(!inputs.is_empty());
    for (_, data) in inputs {
        harness::unpack_layer_input(&data);
    }
}

#[test]
fn load_bundle_regressions() {
    let inputs = inputs("load_bundle");
    assert!(!inputs.is_empty());
    for (_, data) in inputs {
        harness::load_bundle_input(&data);
    }
}

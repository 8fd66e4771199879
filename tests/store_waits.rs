//! A store's first list is waited for through `controller::listing` alone (its `ready` and `listed` for a store no
//! controller runs on, a controller's `Listing` for its own). kube-runtime's `Store::wait_until_ready` wakes only the
//! task that polled it last, so where several passes of a loop wait on one store at once (just after a start), all
//! but one waited forever: copies of an adopted operator were left behind on real Kubernetes that way. This keeps
//! any other module from calling it again.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            sources(&path, found);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn only_the_listing_module_waits_for_a_stores_first_list() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 50, "the sources were found: {}", files.len());
    let waiting: Vec<String> = files
        .iter()
        .filter(|path| !path.ends_with("controller/listing.rs"))
        .filter(|path| std::fs::read_to_string(path).expect("a source file").contains(".wait_until_ready()"))
        .map(|path| path.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(waiting.is_empty(), "call controller::listing instead of Store::wait_until_ready in {waiting:?}");
}

//! What each fuzz target does with one input, shared with `tests/fuzz_regressions.rs`, which replays every input the
//! fuzzers found and every seed kept under `tests/fuzz-regressions/`.

use std::path::{Path, PathBuf};

use olmv2::bundle::unpack::{unpack_layer, Compression, Totals, UnpackLimits};
use olmv2::bundle::{render, Bundle, RenderOptions};
use olmv2::tls::CertificateAuthority;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("olmv2-fuzz-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Every symbolic link under `root` stays inside it, and nothing but `root` exists beside it.
fn assert_contained(sandbox: &Path, root: &Path) {
    let canonical_root = root.canonicalize().expect("root");
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable").flatten() {
            let path = entry.path();
            let metadata = std::fs::symlink_metadata(&path).expect("metadata");
            if metadata.file_type().is_symlink() {
                if let Ok(target) = path.canonicalize() {
                    assert!(target.starts_with(&canonical_root), "{} escapes to {}", path.display(), target.display());
                }
            } else if metadata.is_dir() {
                stack.push(path);
            }
        }
    }
    let beside: Vec<_> = std::fs::read_dir(sandbox).expect("sandbox").flatten().map(|e| e.file_name()).collect();
    assert_eq!(beside.len(), 1, "something was written beside the root: {beside:?}");
}

/// Unpacks the input as a layer (gzip when it starts like gzip), under small limits.
pub fn unpack_layer_input(data: &[u8]) {
    let sandbox = scratch("unpack");
    let root = sandbox.join("root");
    std::fs::create_dir_all(&root).expect("root");
    let limits = UnpackLimits {
        max_total_bytes: 1 << 20,
        max_entries: 200,
        max_file_bytes: 1 << 19,
        max_compression_ratio: 100,
    };
    let compression = if data.starts_with(&[0x1f, 0x8b]) { Compression::Gzip } else { Compression::None };
    let _ = unpack_layer(data, compression, None, &root, limits, &mut Totals::default());
    assert_contained(&sandbox, &root);
    let _ = std::fs::remove_dir_all(sandbox);
}

const CSV: &str = include_str!("../bundles/grumbo/1.0.0/manifests/grumbo.clusterserviceversion.yaml");
const CRD: &str = include_str!("../bundles/grumbo/1.0.0/manifests/grumbos.manufacturing.how.theydoit.com.crd.yaml");
const ANNOTATIONS: &str = include_str!("../bundles/grumbo/1.0.0/metadata/annotations.yaml");

/// The first byte chooses which file of a valid bundle the rest replaces; the bundle is then loaded and, when it
/// loads, rendered in two install modes.
pub fn load_bundle_input(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest).into_owned();
    let sandbox = scratch("bundle");
    let mut files = vec![
        ("manifests/grumbo.clusterserviceversion.yaml", CSV.to_owned()),
        ("manifests/grumbos.crd.yaml", CRD.to_owned()),
        ("metadata/annotations.yaml", ANNOTATIONS.to_owned()),
    ];
    match selector % 5 {
        0 => files[0].1 = text,
        1 => files[1].1 = text,
        2 => files[2].1 = text,
        3 => files.push(("metadata/dependencies.yaml", text)),
        _ => files.push(("manifests/extra.yaml", text)),
    }
    for (path, content) in &files {
        let path = sandbox.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dirs");
        std::fs::write(path, content).expect("write");
    }
    if let Ok(bundle) = Bundle::load(&sandbox) {
        let authority = CertificateAuthority::new("fuzz").expect("CA");
        for targets in [vec![String::new()], vec!["operators".to_owned()]] {
            let options = RenderOptions {
                install_namespace: "operators",
                target_namespaces: &targets,
                certificates: &authority,
                deployment_config: None,
            };
            let _ = render(&bundle, &options);
        }
    }
    let _ = std::fs::remove_dir_all(sandbox);
}

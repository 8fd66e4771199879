//! Unpacking hostile layers: each attack gives a clear error, writes nothing outside the target directory and never
//! panics; well-formed layers, links that stay inside and whiteouts across layers unpack exactly.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::io::Write;
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use olmv2::bundle::unpack::{hex, unpack_layer, Compression, Totals, UnpackError, UnpackLimits};
use olmv2::category::Categorized;
use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

/// A fresh sandbox: `root` to unpack into, beside `outside`, which no test may ever write to.
struct Sandbox {
    dir: PathBuf,
}

impl Sandbox {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("olmv2-unpack-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("root/nested")).expect("root");
        std::fs::create_dir_all(dir.join("outside")).expect("outside");
        Self { dir }
    }
    fn root(&self) -> PathBuf {
        self.dir.join("root")
    }
    fn outside_is_untouched(&self) -> bool {
        std::fs::read_dir(self.dir.join("outside")).expect("outside").next().is_none()
            && std::fs::read_dir(&self.dir).expect("dir").count() == 2
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A raw tar entry; the name is written byte for byte, so hostile names survive.
fn entry(tar: &mut Vec<u8>, name: &str, kind: EntryType, link: &str, content: &[u8]) {
    let mut header = Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    header.set_entry_type(kind);
    header.set_size(content.len() as u64);
    header.set_mode(0o644);
    header.set_cksum();
    tar.extend_from_slice(header.as_bytes());
    tar.extend_from_slice(content);
    tar.resize(tar.len().div_ceil(512) * 512, 0);
}

fn finish(mut tar: Vec<u8>) -> Vec<u8> {
    tar.extend_from_slice(&[0; 1024]);
    tar
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).expect("compress");
    encoder.finish().expect("finish")
}

fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

fn unpack(root: &Path, layer: &[u8], limits: UnpackLimits) -> Result<(), UnpackError> {
    let compressed = gzip(layer);
    unpack_layer(
        compressed.as_slice(),
        Compression::Gzip,
        Some(&digest(&compressed)),
        root,
        limits,
        &mut Totals::default(),
    )
}

fn refused(name: &str, build: impl FnOnce(&mut Vec<u8>), limits: UnpackLimits) -> (UnpackError, Sandbox) {
    let sandbox = Sandbox::new(name);
    let mut tar = Vec::new();
    build(&mut tar);
    let error = unpack(&sandbox.root(), &finish(tar), limits).expect_err("refused");
    assert!(sandbox.outside_is_untouched(), "{name} wrote outside the root");
    (error, sandbox)
}

#[test]
fn a_well_formed_layer_unpacks_exactly() {
    let sandbox = Sandbox::new("ok");
    let mut tar = Vec::new();
    entry(&mut tar, "./manifests/", EntryType::Directory, "", b"");
    entry(&mut tar, "./manifests/csv.yaml", EntryType::Regular, "", b"kind: ClusterServiceVersion\n");
    entry(&mut tar, "metadata/annotations.yaml", EntryType::Regular, "", b"annotations: {}\n");
    entry(&mut tar, "metadata/same.yaml", EntryType::Link, "metadata/annotations.yaml", b"");
    entry(&mut tar, "metadata/alias.yaml", EntryType::Symlink, "annotations.yaml", b"");
    unpack(&sandbox.root(), &finish(tar), UnpackLimits::default()).expect("unpacks");
    let read = |path: &str| std::fs::read_to_string(sandbox.root().join(path)).expect(path);
    assert_eq!(read("manifests/csv.yaml"), "kind: ClusterServiceVersion\n");
    assert_eq!(read("metadata/same.yaml"), "annotations: {}\n");
    assert_eq!(read("metadata/alias.yaml"), "annotations: {}\n");
}

#[test]
fn absolute_paths_are_refused() {
    let (error, _sandbox) =
        refused("absolute", |tar| entry(tar, "/tmp/olmv2-evil", EntryType::Regular, "", b"x"), UnpackLimits::default());
    assert!(matches!(error, UnpackError::AbsolutePath { .. }), "{error}");
    assert!(!Path::new("/tmp/olmv2-evil").exists());
}

#[test]
fn parent_directory_traversal_is_refused() {
    let (error, _sandbox) = refused(
        "dotdot",
        |tar| entry(tar, "nested/../../outside/evil", EntryType::Regular, "", b"x"),
        UnpackLimits::default(),
    );
    assert_eq!(error.to_string(), "entry \"nested/../../outside/evil\" leaves the image root");
    assert_eq!(error.category(), "LayerPathUnsafe");
}

#[test]
fn symlinks_leaving_the_root_are_refused() {
    let (error, _s) = refused(
        "symlink-up",
        |tar| entry(tar, "escape", EntryType::Symlink, "../outside", b""),
        UnpackLimits::default(),
    );
    assert!(matches!(error, UnpackError::LinkEscapes { .. }), "{error}");
    let (error, _s) =
        refused("symlink-abs", |tar| entry(tar, "escape", EntryType::Symlink, "/etc", b""), UnpackLimits::default());
    assert!(matches!(error, UnpackError::LinkEscapes { .. }), "{error}");
}

#[test]
fn writing_through_a_link_is_refused() {
    let (error, _s) = refused(
        "through-link",
        |tar| {
            entry(tar, "nested/dir", EntryType::Directory, "", b"");
            entry(tar, "alias", EntryType::Symlink, "nested/dir", b"");
            entry(tar, "alias/file", EntryType::Regular, "", b"x");
        },
        UnpackLimits::default(),
    );
    assert_eq!(error.to_string(), "entry \"alias/file\" would be written through the link \"alias\"");
}

#[test]
fn hardlinks_leaving_the_root_are_refused() {
    let (error, _s) = refused(
        "hardlink",
        |tar| entry(tar, "copy", EntryType::Link, "../outside/secret", b""),
        UnpackLimits::default(),
    );
    assert!(matches!(error, UnpackError::LinkEscapes { .. }), "{error}");
    let (error, _s) =
        refused("hardlink-abs", |tar| entry(tar, "copy", EntryType::Link, "/etc/passwd", b""), UnpackLimits::default());
    assert!(matches!(error, UnpackError::LinkEscapes { .. }), "{error}");
}

#[test]
fn device_files_are_refused() {
    let (error, _s) =
        refused("device", |tar| entry(tar, "dev/null", EntryType::Char, "", b""), UnpackLimits::default());
    assert_eq!(error.to_string(), "entry \"dev/null\" is a character device, which a bundle may not contain");
    let (error, _s) = refused("fifo", |tar| entry(tar, "pipe", EntryType::Fifo, "", b""), UnpackLimits::default());
    assert!(matches!(error, UnpackError::SpecialFile { kind: "FIFO", .. }), "{error}");
}

#[test]
fn a_gzip_bomb_stops_at_the_ratio_limit() {
    let sandbox = Sandbox::new("bomb");
    let mut tar = Vec::new();
    entry(&mut tar, "zeros", EntryType::Regular, "", &vec![0u8; 64 << 20]);
    let layer = gzip(&finish(tar));
    assert!(layer.len() < 200_000, "the bomb compresses well: {}", layer.len());
    let limits = UnpackLimits { max_compression_ratio: 100, ..UnpackLimits::default() };
    let error =
        unpack_layer(layer.as_slice(), Compression::Gzip, None, &sandbox.root(), limits, &mut Totals::default())
            .expect_err("refused");
    assert!(matches!(error, UnpackError::CompressionRatio { limit: 100 }), "{error}");
    assert!(sandbox.outside_is_untouched());
}

#[test]
fn size_and_count_limits_hold() {
    let small = UnpackLimits { max_file_bytes: 1000, max_total_bytes: 2500, max_entries: 4, ..UnpackLimits::default() };
    let (error, _s) = refused("big-file", |tar| entry(tar, "big", EntryType::Regular, "", &[1; 1001]), small);
    assert_eq!(error.to_string(), "entry \"big\" is 1001 bytes, over the limit of 1000");
    let (error, _s) = refused(
        "total",
        |tar| (0..3).for_each(|i| entry(tar, &format!("f{i}"), EntryType::Regular, "", &[1; 900])),
        small,
    );
    assert!(matches!(error, UnpackError::TooLarge { limit: 2500 }), "{error}");
    let (error, _s) =
        refused("count", |tar| (0..5).for_each(|i| entry(tar, &format!("f{i}"), EntryType::Regular, "", b"")), small);
    assert!(matches!(error, UnpackError::TooManyEntries { limit: 4 }), "{error}");
}

#[test]
fn a_layer_whose_digest_does_not_match_is_refused() {
    let sandbox = Sandbox::new("digest");
    let mut tar = Vec::new();
    entry(&mut tar, "file", EntryType::Regular, "", b"content");
    let layer = gzip(&finish(tar));
    let wrong = digest(b"something else");
    let error = unpack_layer(
        layer.as_slice(),
        Compression::Gzip,
        Some(&wrong),
        &sandbox.root(),
        UnpackLimits::default(),
        &mut Totals::default(),
    )
    .expect_err("refused");
    assert!(matches!(error, UnpackError::DigestMismatch { .. }), "{error}");
    assert_eq!(error.category(), "LayerDigestMismatch");
}

#[test]
fn whiteouts_apply_across_layers() {
    let sandbox = Sandbox::new("whiteout");
    let mut lower = Vec::new();
    entry(&mut lower, "a/x", EntryType::Regular, "", b"x");
    entry(&mut lower, "a/y", EntryType::Regular, "", b"y");
    entry(&mut lower, "b/z", EntryType::Regular, "", b"z");
    let mut upper = Vec::new();
    entry(&mut upper, "a/.wh.x", EntryType::Regular, "", b"");
    entry(&mut upper, "b/new", EntryType::Regular, "", b"new");
    entry(&mut upper, "b/.wh..wh..opq", EntryType::Regular, "", b"");
    let mut totals = Totals::default();
    for layer in [finish(lower), finish(upper)] {
        unpack_layer(layer.as_slice(), Compression::None, None, &sandbox.root(), UnpackLimits::default(), &mut totals)
            .expect("unpacks");
    }
    let root = sandbox.root();
    assert!(!root.join("a/x").exists() && root.join("a/y").exists());
    assert!(!root.join("b/z").exists() && root.join("b/new").exists());
    assert!(!root.join("a/.wh.x").exists());
}

#[test]
fn garbage_is_a_malformed_layer_not_a_panic() {
    let sandbox = Sandbox::new("garbage");
    for garbage in
        [b"not a tar stream at all, just text".to_vec(), gzip(b"plain text, gzipped"), vec![0x1f, 0x8b, 0x08, 0x00]]
    {
        let result = unpack_layer(
            garbage.as_slice(),
            Compression::Gzip,
            None,
            &sandbox.root(),
            UnpackLimits::default(),
            &mut Totals::default(),
        );
        assert!(matches!(result, Err(UnpackError::Malformed(_))), "{result:?}");
    }
}

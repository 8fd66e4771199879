//! Unpacking of image layers (tar, optionally gzip) into a directory, streaming and in bounded memory, safe against
//! hostile images: limits on total size, file count, file size and compression ratio, and on the compressed bytes
//! of all layers (which never legitimately exceed what they inflate to by more than the framing); no absolute
//! paths, no `..`, no links leaving the root, no device files, no writing through links; whiteouts applied across
//! layers; the layer's digest verified.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};
use tar::EntryType;

use crate::category::Categorized;

/// Limits on what one image may unpack to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnpackLimits {
    /// Bytes of file content across all layers.
    pub max_total_bytes: u64,
    /// Entries (files, directories, links) across all layers.
    pub max_entries: u64,
    /// Bytes of one file.
    pub max_file_bytes: u64,
    /// Uncompressed bytes per compressed byte, checked once a layer has inflated past 1 MiB.
    pub max_compression_ratio: u64,
}

impl Default for UnpackLimits {
    fn default() -> Self {
        Self { max_total_bytes: 512 << 20, max_entries: 20_000, max_file_bytes: 128 << 20, max_compression_ratio: 200 }
    }
}

/// How a layer is compressed, from its media type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Gzip,
    None,
}

#[derive(Debug, thiserror::Error)]
pub enum UnpackError {
    #[error("entry {path:?} has an absolute path")]
    AbsolutePath { path: String },
    #[error("entry {path:?} leaves the image root")]
    PathEscapes { path: String },
    #[error("link {path:?} points to {target:?}, outside the image root")]
    LinkEscapes { path: String, target: String },
    #[error("entry {path:?} is a {kind}, which a bundle may not contain")]
    SpecialFile { path: String, kind: &'static str },
    #[error("entry {path:?} would be written through the link {link:?}")]
    ThroughLink { path: String, link: String },
    #[error("entry {path:?} is {size} bytes, over the limit of {limit}")]
    FileTooLarge { path: String, size: u64, limit: u64 },
    #[error("the image unpacks to more than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("the image holds more than {limit} entries")]
    TooManyEntries { limit: u64 },
    #[error("the layer inflates more than {limit} times its compressed size")]
    CompressionRatio { limit: u64 },
    #[error("the image's layers are more than {limit} bytes compressed")]
    CompressedTooLarge { limit: u64 },
    #[error("the layer's digest is {actual}, not {expected}")]
    DigestMismatch { expected: String, actual: String },
    #[error("the layer is not a valid tar stream")]
    Malformed(#[source] io::Error),
    #[error("failed to write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Categorized for UnpackError {
    fn category(&self) -> &'static str {
        match self {
            Self::AbsolutePath { .. }
            | Self::PathEscapes { .. }
            | Self::LinkEscapes { .. }
            | Self::ThroughLink { .. } => "LayerPathUnsafe",
            Self::SpecialFile { .. } => "LayerSpecialFile",
            Self::FileTooLarge { .. }
            | Self::TooLarge { .. }
            | Self::TooManyEntries { .. }
            | Self::CompressionRatio { .. }
            | Self::CompressedTooLarge { .. } => "LayerOverLimit",
            Self::DigestMismatch { .. } => "LayerDigestMismatch",
            Self::Malformed(_) => "LayerMalformed",
            Self::Write { .. } => "LayerWriteFailed",
        }
    }
}

/// Counts across the layers of one image.
#[derive(Debug, Default)]
pub struct Totals {
    bytes: u64,
    entries: u64,
    /// Compressed bytes of the layers before this one.
    compressed: u64,
}

/// The most compressed bytes an image's layers may hold under `limits`: what they may inflate to (content and tar
/// framing), and a MiB for gzip's headers and blocks. Compressed data is never legitimately larger than that; a
/// gzip stream of empty blocks is (it inflates to nothing while the download and the inflater run on), and the
/// limits on inflated bytes and the ratio never see it.
pub fn max_compressed_bytes(limits: UnpackLimits) -> u64 {
    limits.max_total_bytes.saturating_add(limits.max_entries.saturating_mul(2048)).saturating_add(1 << 20)
}

/// Counts the bytes read through it and hashes them.
struct Measured<R> {
    inner: R,
    count: u64,
    hasher: Option<Sha256>,
}

impl<R: Read> Read for Measured<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.count += read as u64;
        if let Some(hasher) = self.hasher.as_mut() {
            hasher.update(&buffer[..read]);
        }
        Ok(read)
    }
}

/// Enforces the total-size and ratio limits on the inflated stream, so that a bomb stops early.
struct Inflated<R> {
    inner: R,
    count: u64,
    limits: UnpackLimits,
    compressed: std::rc::Rc<std::cell::Cell<u64>>,
}

const RATIO_FLOOR: u64 = 1 << 20;

impl<R: Read> Read for Inflated<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.count += read as u64;
        // The tar framing adds at most a few headers per file on top of content.
        if self.count > self.limits.max_total_bytes.saturating_add(self.limits.max_entries.saturating_mul(1024)) {
            return Err(io::Error::other(LimitHit::Total));
        }
        let compressed = self.compressed.get().max(1);
        if self.count > RATIO_FLOOR && self.count / compressed > self.limits.max_compression_ratio {
            return Err(io::Error::other(LimitHit::Ratio));
        }
        Ok(read)
    }
}

#[derive(Debug, thiserror::Error)]
enum LimitHit {
    #[error("total size limit")]
    Total,
    #[error("compression ratio limit")]
    Ratio,
    #[error("compressed size limit")]
    Compressed,
}

/// Counts compressed bytes into a shared cell, for the ratio check, and stops at the image's compressed limit
/// (`before`: the layers before this one).
struct CountInto<R> {
    inner: R,
    count: std::rc::Rc<std::cell::Cell<u64>>,
    before: u64,
    limit: u64,
}

impl<R: Read> Read for CountInto<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.count.set(self.count.get() + read as u64);
        if self.before.saturating_add(self.count.get()) > self.limit {
            return Err(io::Error::other(LimitHit::Compressed));
        }
        Ok(read)
    }
}

/// The entry's path relative to the root, with `.` components dropped; refuses absolute paths and `..`.
fn relative_path(raw: &Path) -> Result<PathBuf, UnpackError> {
    let shown = raw.to_string_lossy().into_owned();
    let mut relative = PathBuf::new();
    for component in raw.components() {
        match component {
            Component::Normal(part) => relative.push(part),
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err(UnpackError::AbsolutePath { path: shown }),
            Component::ParentDir => return Err(UnpackError::PathEscapes { path: shown }),
        }
    }
    Ok(relative)
}

/// Where a relative symlink target lands, relative to the root, or `None` when it leaves the root.
fn resolve_link(entry: &Path, target: &Path) -> Option<PathBuf> {
    if target.is_absolute() {
        return None;
    }
    let mut resolved: Vec<&std::ffi::OsStr> = entry.parent().map(|p| p.iter().collect()).unwrap_or_default();
    for component in target.components() {
        match component {
            Component::Normal(part) => resolved.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(resolved.iter().collect())
}

/// Refuses to create `relative` if any existing ancestor under `root` is a symbolic link.
fn ensure_no_link_on_path(root: &Path, relative: &Path) -> Result<(), UnpackError> {
    let mut current = root.to_path_buf();
    let mut shown = PathBuf::new();
    for part in relative.parent().into_iter().flat_map(Path::iter) {
        current.push(part);
        shown.push(part);
        match fs::symlink_metadata(&current) {
            Ok(metadata) if metadata.file_type().is_symlink() => {
                return Err(UnpackError::ThroughLink {
                    path: relative.to_string_lossy().into_owned(),
                    link: shown.to_string_lossy().into_owned(),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

fn write_error(path: &Path) -> impl FnOnce(io::Error) -> UnpackError + '_ {
    move |source| UnpackError::Write { path: path.to_owned(), source }
}

fn remove_any(path: &Path) -> Result<(), UnpackError> {
    match fs::symlink_metadata(path) {
        Ok(metadata) if metadata.is_dir() => fs::remove_dir_all(path).map_err(write_error(path)),
        Ok(_) => fs::remove_file(path).map_err(write_error(path)),
        Err(_) => Ok(()),
    }
}

/// Unpacks one layer onto `root`, on top of the layers before it. `expected_digest` (`sha256:<hex>`) is checked
/// against the compressed bytes as they stream; on any error the caller discards `root`.
pub fn unpack_layer(
    blob: impl Read,
    compression: Compression,
    expected_digest: Option<&str>,
    root: &Path,
    limits: UnpackLimits,
    totals: &mut Totals,
) -> Result<(), UnpackError> {
    let compressed = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut measured = Measured { inner: blob, count: 0, hasher: expected_digest.map(|_| Sha256::new()) };
    {
        let counted = CountInto {
            inner: &mut measured,
            count: compressed.clone(),
            before: totals.compressed,
            limit: max_compressed_bytes(limits),
        };
        let decompressed: Box<dyn Read + '_> = match compression {
            Compression::Gzip => Box::new(GzDecoder::new(counted)),
            Compression::None => Box::new(counted),
        };
        let inflated = Inflated { inner: decompressed, count: 0, limits, compressed: compressed.clone() };
        let mut archive = tar::Archive::new(inflated);
        let entries = archive.entries().map_err(classify(limits))?;
        let mut created_here: HashSet<PathBuf> = HashSet::new();
        for entry in entries {
            let mut entry = entry.map_err(classify(limits))?;
            unpack_entry(&mut entry, root, limits, totals, &mut created_here)?;
        }
        // Drain what follows the end-of-archive marker, so the digest covers the whole blob.
        let mut rest = archive.into_inner();
        io::copy(&mut rest, &mut io::sink()).map_err(classify(limits))?;
    }
    totals.compressed = totals.compressed.saturating_add(compressed.get());
    if let (Some(expected), Some(hasher)) = (expected_digest, measured.hasher.take()) {
        let actual = format!("sha256:{}", hex(&hasher.finalize()));
        if actual != expected {
            return Err(UnpackError::DigestMismatch { expected: expected.to_owned(), actual });
        }
    }
    Ok(())
}

/// Turns a read error into the limit it signals, or a malformed stream.
fn classify(limits: UnpackLimits) -> impl Fn(io::Error) -> UnpackError {
    move |error| match limit_hit(&error) {
        Some(LimitHit::Ratio) => UnpackError::CompressionRatio { limit: limits.max_compression_ratio },
        Some(LimitHit::Total) => UnpackError::TooLarge { limit: limits.max_total_bytes },
        Some(LimitHit::Compressed) => UnpackError::CompressedTooLarge { limit: max_compressed_bytes(limits) },
        None => UnpackError::Malformed(error),
    }
}

/// The limit a read error signals, wherever in its chain: the inflater and the tar reader may wrap the error of the
/// reader beneath them.
fn limit_hit(error: &io::Error) -> Option<&LimitHit> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = error.get_ref().map(|inner| inner as _);
    while let Some(inner) = cause {
        if let Some(hit) = inner.downcast_ref::<LimitHit>() {
            return Some(hit);
        }
        cause = match inner.downcast_ref::<io::Error>() {
            Some(io) => io.get_ref().map(|inner| inner as _),
            None => inner.source(),
        };
    }
    None
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unpack_entry<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    root: &Path,
    limits: UnpackLimits,
    totals: &mut Totals,
    created_here: &mut HashSet<PathBuf>,
) -> Result<(), UnpackError> {
    let raw = entry.path().map_err(UnpackError::Malformed)?.into_owned();
    let relative = relative_path(&raw)?;
    let shown = relative.to_string_lossy().into_owned();
    let kind = entry.header().entry_type();
    if relative.as_os_str().is_empty() {
        return Ok(());
    }
    if matches!(kind, EntryType::XGlobalHeader | EntryType::XHeader | EntryType::GNULongName | EntryType::GNULongLink) {
        return Ok(());
    }
    totals.entries += 1;
    if totals.entries > limits.max_entries {
        return Err(UnpackError::TooManyEntries { limit: limits.max_entries });
    }
    ensure_no_link_on_path(root, &relative)?;
    let destination = root.join(&relative);

    if apply_whiteout(root, &relative, created_here)? {
        return Ok(());
    }

    if let Some(parent) = destination.parent() {
        fs::create_dir_all(parent).map_err(write_error(parent))?;
    }
    match kind {
        EntryType::Directory => {
            if fs::symlink_metadata(&destination).is_ok_and(|m| !m.is_dir()) {
                remove_any(&destination)?;
            }
            fs::create_dir_all(&destination).map_err(write_error(&destination))?;
        }
        EntryType::Regular | EntryType::Continuous => write_file(entry, &destination, shown, limits, totals)?,
        EntryType::Symlink => write_symlink(entry, &relative, &destination, shown)?,
        EntryType::Link => copy_hard_link(entry, root, &destination, shown, limits, totals)?,
        EntryType::Char => return Err(UnpackError::SpecialFile { path: shown, kind: "character device" }),
        EntryType::Block => return Err(UnpackError::SpecialFile { path: shown, kind: "block device" }),
        EntryType::Fifo => return Err(UnpackError::SpecialFile { path: shown, kind: "FIFO" }),
        _ => return Err(UnpackError::SpecialFile { path: shown, kind: "special entry" }),
    }
    created_here.insert(relative);
    Ok(())
}

/// Applies the entry at `relative` when it is a whiteout (`.wh.<name>` removes what lower layers put at `<name>`,
/// `.wh..wh..opq` what they put in its directory), answering whether it was one: a whiteout is a mark, never
/// unpacked itself.
fn apply_whiteout(root: &Path, relative: &Path, created_here: &HashSet<PathBuf>) -> Result<bool, UnpackError> {
    let Some(name) = relative.file_name().and_then(|n| n.to_str()) else { return Ok(false) };
    let Some(hidden) = name.strip_prefix(".wh.") else { return Ok(false) };
    let parent = relative.parent().map(Path::to_path_buf).unwrap_or_default();
    if hidden == ".wh..opq" {
        // An opaque directory hides what lower layers put in it, but not what this layer adds.
        for child in fs::read_dir(root.join(&parent)).into_iter().flatten().flatten() {
            let child_relative = parent.join(child.file_name());
            if !created_here.contains(&child_relative) {
                remove_any(&child.path())?;
            }
        }
    } else {
        remove_any(&root.join(parent.join(hidden)))?;
    }
    Ok(true)
}

/// Writes a regular file at `destination`, refused before anything of it is written when it is over the limit on
/// one file or brings the image over its total; the copy itself stops at the stream's limits (`classify`).
fn write_file<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    destination: &Path,
    shown: String,
    limits: UnpackLimits,
    totals: &mut Totals,
) -> Result<(), UnpackError> {
    let size = entry.header().size().map_err(UnpackError::Malformed)?;
    if size > limits.max_file_bytes {
        return Err(UnpackError::FileTooLarge { path: shown, size, limit: limits.max_file_bytes });
    }
    totals.bytes += size;
    if totals.bytes > limits.max_total_bytes {
        return Err(UnpackError::TooLarge { limit: limits.max_total_bytes });
    }
    remove_any(destination)?;
    let mut file = File::create(destination).map_err(write_error(destination))?;
    io::copy(&mut entry.take(size), &mut file).map_err(classify(limits))?;
    Ok(())
}

/// Makes a symbolic link at `destination`, refused when its target leaves the root (`resolve_link`), so that no
/// later read through it reaches outside the image.
fn write_symlink<R: Read>(
    entry: &tar::Entry<'_, R>,
    relative: &Path,
    destination: &Path,
    shown: String,
) -> Result<(), UnpackError> {
    let target = entry.link_name().map_err(UnpackError::Malformed)?.map(|t| t.into_owned()).unwrap_or_default();
    if resolve_link(relative, &target).is_none() {
        return Err(UnpackError::LinkEscapes { path: shown, target: target.to_string_lossy().into_owned() });
    }
    remove_any(destination)?;
    std::os::unix::fs::symlink(&target, destination).map_err(write_error(destination))?;
    Ok(())
}

/// Makes a hard link at `destination` as a copy of the regular file it names, which must lie in the root and be
/// reached through no link; its size counts towards the image's total as a file's does.
fn copy_hard_link<R: Read>(
    entry: &tar::Entry<'_, R>,
    root: &Path,
    destination: &Path,
    shown: String,
    limits: UnpackLimits,
    totals: &mut Totals,
) -> Result<(), UnpackError> {
    let target = entry.link_name().map_err(UnpackError::Malformed)?.map(|t| t.into_owned()).unwrap_or_default();
    let escapes = || UnpackError::LinkEscapes { path: shown.clone(), target: target.to_string_lossy().into_owned() };
    let target_relative = relative_path(&target).map_err(|_| escapes())?;
    ensure_no_link_on_path(root, &target_relative.join("x"))?;
    let source = root.join(&target_relative);
    let metadata = fs::symlink_metadata(&source).map_err(|_| escapes())?;
    if !metadata.is_file() {
        return Err(escapes());
    }
    totals.bytes += metadata.len();
    if totals.bytes > limits.max_total_bytes {
        return Err(UnpackError::TooLarge { limit: limits.max_total_bytes });
    }
    remove_any(destination)?;
    // A copy, not a hard link, so that nothing in the cache shares an inode with anything else.
    fs::copy(&source, destination).map_err(write_error(destination))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gzip layer holding one small file, led by `padding` empty deflate blocks (five bytes each, inflating to
    /// nothing), written by hand: a compressor makes no such stream.
    fn padded_layer(padding: usize) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(5);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, "file", b"hello".as_slice()).expect("tar");
        let tar = tar.into_inner().expect("tar");
        let length = u16::try_from(tar.len()).expect("one stored block");
        let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        for _ in 0..padding {
            // Not final, stored, aligned; length 0 and its complement.
            gzip.extend_from_slice(&[0, 0, 0, 0xff, 0xff]);
        }
        gzip.push(1);
        gzip.extend_from_slice(&length.to_le_bytes());
        gzip.extend_from_slice(&(!length).to_le_bytes());
        gzip.extend_from_slice(&tar);
        let mut crc = flate2::Crc::new();
        crc.update(&tar);
        gzip.extend_from_slice(&crc.sum().to_le_bytes());
        gzip.extend_from_slice(&(tar.len() as u32).to_le_bytes());
        gzip
    }

    fn unpack(layer: &[u8], limits: UnpackLimits) -> Result<(), UnpackError> {
        let root = std::env::temp_dir().join(format!("olmv2-unpack-padded-{}-{}", std::process::id(), layer.len()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("root");
        let result = unpack_layer(layer, Compression::Gzip, None, &root, limits, &mut Totals::default());
        let _ = fs::remove_dir_all(&root);
        result
    }

    #[test]
    fn a_layer_padded_with_empty_deflate_blocks_stops_at_the_compressed_limit() {
        let limits =
            UnpackLimits { max_total_bytes: 4096, max_entries: 4, max_file_bytes: 4096, max_compression_ratio: 200 };
        let limit = max_compressed_bytes(limits);
        assert_eq!(limit, 4096 + 4 * 2048 + (1 << 20));
        unpack(&padded_layer(1000), limits).expect("a little padding passes");
        let layer = padded_layer(300_000);
        assert!(layer.len() as u64 > limit, "{} bytes", layer.len());
        let error = unpack(&layer, limits).expect_err("refused");
        assert!(matches!(error, UnpackError::CompressedTooLarge { limit: l } if l == limit), "{error:?}");
        assert_eq!(error.category(), "LayerOverLimit");
    }

    #[test]
    fn the_compressed_limit_counts_every_layer_of_the_image() {
        let limits =
            UnpackLimits { max_total_bytes: 4096, max_entries: 8, max_file_bytes: 4096, max_compression_ratio: 200 };
        let layer = padded_layer(150_000);
        assert!((layer.len() as u64) < max_compressed_bytes(limits));
        let root = std::env::temp_dir().join(format!("olmv2-unpack-layers-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).expect("root");
        let mut totals = Totals::default();
        unpack_layer(layer.as_slice(), Compression::Gzip, None, &root, limits, &mut totals).expect("one passes");
        let second = unpack_layer(layer.as_slice(), Compression::Gzip, None, &root, limits, &mut totals);
        let _ = fs::remove_dir_all(&root);
        assert!(matches!(second, Err(UnpackError::CompressedTooLarge { .. })), "{second:?}");
    }
}

//! The blobs of one catalog file, read as a stream: a JSON file value by value, a YAML file document by document,
//! each parsed alone and handed on before the next is read, so that a load holds one blob's text and value at a time
//! whatever the file's size. A blob larger than the limit is refused while it is read, before it is parsed. Each
//! blob comes with its offset in the file, so that one blob can be read again alone (`read_at`).
//!
//! A YAML stream is cut at its document markers: a line that is `---` or `...` (alone or followed by a space) ends a
//! document wherever it stands, as the YAML spec says (no scalar may hold such a line), so each piece is a document
//! of its own (with the directives and comments before its `---`).

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::rc::Rc;

use serde::Deserialize;
use serde_json::Value;

use super::fbc::CatalogError;
use super::limits::OverLimit;

/// Whether `each` wants the next blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    Continue,
    Stop,
}

/// Reads the blobs of `path` from `offset` on, handing each (with its offset) to `each` until it says stop. A JSON
/// file (`.json`) is a stream of values; any other file a YAML stream, whose empty documents are skipped.
pub fn read(
    path: &Path,
    offset: u64,
    max_blob_bytes: u64,
    each: impl FnMut(u64, Value) -> Result<Next, CatalogError>,
) -> Result<(), CatalogError> {
    let mut file = File::open(path).map_err(read_error(path))?;
    if offset > 0 {
        file.seek(SeekFrom::Start(offset)).map_err(read_error(path))?;
    }
    let reader = BufReader::with_capacity(1 << 16, file);
    if path.extension().is_some_and(|extension| extension == "json") {
        read_json(path, reader, offset, max_blob_bytes, each)
    } else {
        read_yaml(path, reader, offset, max_blob_bytes, each)
    }
}

/// The blob at `offset` of `path` (where `read` said it was).
pub fn read_at(path: &Path, offset: u64, max_blob_bytes: u64) -> Result<Option<Value>, CatalogError> {
    let mut found = None;
    read(path, offset, max_blob_bytes, |_, blob| {
        found = Some(blob);
        Ok(Next::Stop)
    })?;
    Ok(found)
}

fn read_error(path: &Path) -> impl Fn(io::Error) -> CatalogError + '_ {
    move |source| CatalogError::Read { path: path.to_owned(), source }
}

fn over_limit(path: &Path, max_blob_bytes: u64) -> CatalogError {
    CatalogError::OverLimit { path: path.to_owned(), limit: OverLimit::Blob(max_blob_bytes) }
}

/// Counts the bytes read through it and refuses to read past `limit` bytes beyond `start`, the start of the blob
/// being read (moved by the caller after each blob).
struct Bounded<R> {
    inner: R,
    /// Where the reader is in the file.
    read: u64,
    /// Where the blob being read began.
    start: Rc<Cell<u64>>,
    limit: u64,
    over: Rc<Cell<bool>>,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let allowed = (self.start.get().saturating_add(self.limit).saturating_add(1)).saturating_sub(self.read);
        if allowed == 0 {
            self.over.set(true);
            return Err(io::Error::other("blob over the limit"));
        }
        let end = buffer.len().min(usize::try_from(allowed).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buffer[..end])?;
        self.read += read as u64;
        Ok(read)
    }
}

fn read_json(
    path: &Path,
    reader: impl Read,
    offset: u64,
    max_blob_bytes: u64,
    mut each: impl FnMut(u64, Value) -> Result<Next, CatalogError>,
) -> Result<(), CatalogError> {
    let start = Rc::new(Cell::new(offset));
    let over = Rc::new(Cell::new(false));
    let bounded =
        Bounded { inner: reader, read: offset, start: start.clone(), limit: max_blob_bytes, over: over.clone() };
    let mut stream = serde_json::Deserializer::from_reader(bounded).into_iter::<Value>();
    while let Some(blob) = stream.next() {
        let blob = match blob {
            Ok(blob) => blob,
            Err(_) if over.get() => return Err(over_limit(path, max_blob_bytes)),
            Err(error) => return Err(CatalogError::Parse { path: path.to_owned(), reason: error.to_string() }),
        };
        // The blob began where the one before ended (the whitespace between them is skipped when it is read again).
        let at = start.get();
        start.set(offset + stream.byte_offset() as u64);
        if each(at, blob)? == Next::Stop {
            break;
        }
    }
    Ok(())
}

/// Whether `line` is a document marker (`---` or `...`, alone or followed by a space), and which.
fn marker(line: &str) -> Option<&'static str> {
    let line = line.strip_prefix('\u{feff}').unwrap_or(line);
    ["---", "..."].into_iter().find(|marker| {
        line.strip_prefix(marker).is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t', '\r', '\n']))
    })
}

/// Whether `line` holds part of a document's content (not a blank line, a comment, a directive or a bare marker).
fn has_content(line: &str) -> bool {
    let text = match marker(line) {
        Some(marker) => line.strip_prefix('\u{feff}').unwrap_or(line)[marker.len()..].trim(),
        None if line.starts_with('%') => return false,
        None => line.trim(),
    };
    !text.is_empty() && !text.starts_with('#')
}

fn read_yaml(
    path: &Path,
    mut reader: impl BufRead,
    offset: u64,
    max_blob_bytes: u64,
    mut each: impl FnMut(u64, Value) -> Result<Next, CatalogError>,
) -> Result<(), CatalogError> {
    let limit = usize::try_from(max_blob_bytes).unwrap_or(usize::MAX);
    let (mut document, mut line) = (String::new(), Vec::new());
    let (mut position, mut document_start, mut content) = (offset, offset, false);
    loop {
        line.clear();
        // A line is read at most up to the limit, so that a file without line breaks is not read whole.
        let room = (limit - document.len()).saturating_add(1) as u64;
        let read = reader.by_ref().take(room).read_until(b'\n', &mut line).map_err(read_error(path))?;
        if read == 0 {
            break;
        }
        if document.len() + line.len() > limit {
            return Err(over_limit(path, max_blob_bytes));
        }
        let line = std::str::from_utf8(&line).map_err(|_| CatalogError::Parse {
            path: path.to_owned(),
            reason: format!("byte {position}: not UTF-8"),
        })?;
        let marker = marker(line);
        if marker == Some("---") && content {
            if parse_document(path, &document, document_start, &mut each)? == Next::Stop {
                return Ok(());
            }
            document.clear();
            content = false;
            document_start = position;
        }
        document.push_str(line);
        position += read as u64;
        content |= has_content(line);
        if marker == Some("...") {
            if parse_document(path, &document, document_start, &mut each)? == Next::Stop {
                return Ok(());
            }
            document.clear();
            content = false;
            document_start = position;
        }
    }
    parse_document(path, &document, document_start, &mut each).map(|_| ())
}

/// Parses one piece of a YAML stream (a document, or nothing but comments) and hands its blob on.
fn parse_document(
    path: &Path,
    text: &str,
    offset: u64,
    each: &mut impl FnMut(u64, Value) -> Result<Next, CatalogError>,
) -> Result<Next, CatalogError> {
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let blob = Value::deserialize(document).map_err(|error| CatalogError::Parse {
            path: path.to_owned(),
            reason: format!("the document at byte {offset}: {error}"),
        })?;
        if !blob.is_null() && each(offset, blob)? == Next::Stop {
            return Ok(Next::Stop);
        }
    }
    Ok(Next::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> (tempdir::Dir, std::path::PathBuf) {
        let dir = tempdir::Dir::new();
        let path = dir.0.join(name);
        std::fs::write(&path, text).expect("written");
        (dir, path)
    }

    /// A directory removed on drop.
    mod tempdir {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let path = std::env::temp_dir().join(format!(
                    "olmv2-blobs-{}-{}",
                    std::process::id(),
                    NEXT.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&path).expect("dir");
                Self(path)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn all(path: &Path, limit: u64) -> Result<Vec<(u64, Value)>, CatalogError> {
        let mut blobs = Vec::new();
        read(path, 0, limit, |offset, blob| {
            blobs.push((offset, blob));
            Ok(Next::Continue)
        })?;
        Ok(blobs)
    }

    #[test]
    fn json_values_come_one_by_one_with_their_offsets_and_each_reads_again_alone() {
        let text = "{\"name\": \"a\"}\n{\n  \"name\": \"b\"\n}\n\n{\"name\": \"c\"}";
        let (_dir, path) = file("index.json", text);
        let blobs = all(&path, 1 << 20).expect("read");
        let names: Vec<&str> = blobs.iter().map(|(_, blob)| blob["name"].as_str().unwrap_or_default()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        for (offset, blob) in &blobs {
            assert_eq!(read_at(&path, *offset, 1 << 20).expect("read again").as_ref(), Some(blob));
        }
    }

    #[test]
    fn yaml_documents_come_one_by_one_with_their_offsets_and_each_reads_again_alone() {
        let text = "# a catalog\n---\nname: a\ndescription: |\n  text\n  --- not a marker: indented\n---\n---\nname: b\n...\n%YAML 1.1\n--- {name: c}\n";
        let (_dir, path) = file("catalog.yaml", text);
        let blobs = all(&path, 1 << 20).expect("read");
        let names: Vec<String> =
            blobs.iter().map(|(_, blob)| blob.get("name").and_then(Value::as_str).unwrap_or("?").to_owned()).collect();
        assert_eq!(names, ["a", "b", "c"], "{blobs:?}");
        assert_eq!(blobs[0].1["description"], "text\n--- not a marker: indented\n");
        for (offset, blob) in &blobs {
            assert_eq!(read_at(&path, *offset, 1 << 20).expect("read again").as_ref(), Some(blob));
        }
        let (_dir, plain) = file("catalog.yml", "name: a\n---\nname: b\n");
        assert_eq!(all(&plain, 1 << 20).expect("read").len(), 2, "no leading marker");
    }

    #[test]
    fn a_blob_over_the_limit_is_refused_before_it_is_parsed() {
        let big = format!("{{\"name\": \"{}\"}}", "x".repeat(200));
        let (_dir, json) = file("index.json", &format!("{{\"name\": \"a\"}}\n{big}\n"));
        let error = all(&json, 100).expect_err("refused");
        assert!(matches!(error, CatalogError::OverLimit { limit: OverLimit::Blob(100), .. }), "{error:?}");
        assert_eq!(all(&json, 300).expect("within").len(), 2);
        let (_dir, yaml) = file("catalog.yaml", &format!("name: a\n---\nname: {}\n", "x".repeat(200)));
        let error = all(&yaml, 100).expect_err("refused");
        assert!(matches!(error, CatalogError::OverLimit { limit: OverLimit::Blob(100), .. }), "{error:?}");
        let (_dir, one_line) = file("catalog.yaml", &"x".repeat(10_000));
        assert!(matches!(all(&one_line, 100), Err(CatalogError::OverLimit { .. })), "a line is not read whole");
    }

    #[test]
    fn what_does_not_parse_names_the_file() {
        let (_dir, json) = file("index.json", "{\"name\": \"a\"}\n{");
        assert!(matches!(all(&json, 1 << 20), Err(CatalogError::Parse { .. })));
        let (_dir, yaml) = file("catalog.yaml", "name: a\n---\nname: [\n");
        let error = all(&yaml, 1 << 20).expect_err("broken");
        assert!(error.to_string().contains("catalog.yaml"), "{error}");
        let (_dir, binary) = file("catalog.yaml", "");
        std::fs::write(&binary, [0xff, 0xfe, b'\n']).expect("written");
        assert!(matches!(all(&binary, 1 << 20), Err(CatalogError::Parse { .. })), "not UTF-8 is content, not I/O");
    }
}

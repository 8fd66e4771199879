//! Image references (`registry/repository[:tag][@digest]`) parsed by the distribution grammar into oci-client's
//! `Reference`, with its normalisation (`docker.io`, `library/`, the `latest` tag) and its errors.
//!
//! Why not `Reference::from_str`: oci-spec matches the grammar with one regular expression whose `\w` is Unicode;
//! compiled, it holds about 7 MB, and every thread that parses keeps a search cache of a few MB more — about a
//! third of the controller's memory budget, kept for the life of the process, to read a string of a few dozen
//! characters. The grammar is small enough to read by hand; the tests check this parser against oci-spec's on
//! every case they list. One deliberate difference: a tag is ASCII (`[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`, as the
//! distribution specification writes it), where oci-spec's regular expression would take any Unicode word character.

use oci_client::{ParseError, Reference};

/// The longest repository path a registry takes.
const NAME_TOTAL_LENGTH_MAX: usize = 255;
const DOCKER_HUB: &str = "docker.io";
const DOCKER_HUB_LEGACY: &str = "index.docker.io";
const OFFICIAL_REPOSITORIES: &str = "library";
const DEFAULT_TAG: &str = "latest";
const TAG_LENGTH_MAX: usize = 128;
/// The hex length of each digest algorithm a registry names content by.
const DIGEST_LENGTHS: [(&str, usize); 3] = [("sha256", 64), ("sha384", 96), ("sha512", 128)];

/// Parses `reference` as oci-spec's `Reference::from_str` does.
pub fn parse(reference: &str) -> Result<Reference, ParseError> {
    if reference.is_empty() {
        return Err(ParseError::NameEmpty);
    }
    let (named, digest) = match reference.split_once('@') {
        Some((named, digest)) => (named, Some(digest)),
        None => (reference, None),
    };
    // A `:` after the last `/` starts the tag: a registry's port is always followed by the repository's `/`.
    let (name, tag) = match named.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (named, None),
    };
    if !valid_name(name) || !tag.is_none_or(valid_tag) || !digest.is_none_or(valid_digest_format) {
        return Err(ParseError::ReferenceInvalidFormat);
    }
    let (registry, repository) = split_registry(name);
    if repository.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(ParseError::NameTooLong);
    }
    if let Some(digest) = digest {
        let (algorithm, hex) = digest.split_once(':').ok_or(ParseError::DigestInvalidFormat)?;
        match DIGEST_LENGTHS.iter().find(|(name, _)| *name == algorithm) {
            Some((_, length)) if hex.len() == *length => {}
            Some(_) => return Err(ParseError::DigestInvalidLength),
            None => return Err(ParseError::DigestUnsupported),
        }
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.to_owned(), digest.to_owned())
        }
        (Some(tag), None) => Reference::with_tag(registry, repository, tag.to_owned()),
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.to_owned()),
        (None, None) => Reference::with_tag(registry, repository, DEFAULT_TAG.to_owned()),
    })
}

/// `[domain '/'] path ('/' path)*`: a first part that is a registry's host (and port) is allowed only before
/// another part.
fn valid_name(name: &str) -> bool {
    let parts: Vec<&str> = name.split('/').collect();
    let paths_from = |first: usize| parts[first..].iter().all(|part| valid_path_component(part));
    paths_from(0) || (parts.len() > 1 && valid_domain(parts[0]) && paths_from(1))
}

/// `[a-z0-9]+` runs joined by `.`, `_`, `__` or any number of `-`.
fn valid_path_component(part: &str) -> bool {
    let bytes = part.as_bytes();
    let alphanumeric = |byte: u8| byte.is_ascii_lowercase() || byte.is_ascii_digit();
    let mut index = 0;
    loop {
        let run = bytes[index..].iter().take_while(|byte| alphanumeric(**byte)).count();
        if run == 0 {
            return false;
        }
        index += run;
        if index == bytes.len() {
            return true;
        }
        let separator = bytes[index..].iter().take_while(|byte| !alphanumeric(**byte)).count();
        let valid = match &bytes[index..index + separator] {
            b"." | b"_" | b"__" => true,
            dashes => dashes.iter().all(|byte| *byte == b'-'),
        };
        if !valid {
            return false;
        }
        index += separator;
    }
}

/// Host labels (`[a-zA-Z0-9]`, inner `-`) joined by `.`, then an optional `:port`.
fn valid_domain(part: &str) -> bool {
    let (host, port) = match part.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (part, None),
    };
    let label = |label: &str| {
        let bytes = label.as_bytes();
        !bytes.is_empty()
            && bytes.iter().all(|byte| byte.is_ascii_alphanumeric() || *byte == b'-')
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
    };
    host.split('.').all(label) && port.is_none_or(|port| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()))
}

fn valid_tag(tag: &str) -> bool {
    let word = |byte: u8| byte.is_ascii_alphanumeric() || byte == b'_';
    let bytes = tag.as_bytes();
    (1..=TAG_LENGTH_MAX).contains(&bytes.len())
        && word(bytes[0])
        && bytes[1..].iter().all(|byte| word(*byte) || *byte == b'.' || *byte == b'-')
}

/// `algorithm:hex`, the algorithm `[A-Za-z][A-Za-z0-9]*` parts joined by `-`, `_`, `+` or `.`, at least 32 hex
/// digits. (Which algorithms and lengths are supported is checked after.)
fn valid_digest_format(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else { return false };
    let component = |part: &str| {
        part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic) && part.bytes().all(|b| b.is_ascii_alphanumeric())
    };
    algorithm.split(['-', '_', '+', '.']).all(component)
        && hex.len() >= 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The registry and repository of a valid name: the first part is a registry only if it looks like a host (a `.`
/// or `:`, or `localhost`); Docker Hub's legacy name and its official repositories' `library/` are normalised.
fn split_registry(name: &str) -> (String, String) {
    let (mut registry, mut repository) = match name.split_once('/') {
        Some((first, rest)) if first.contains(['.', ':']) || first == "localhost" => {
            (first.to_owned(), rest.to_owned())
        }
        _ => (DOCKER_HUB.to_owned(), name.to_owned()),
    };
    if registry == DOCKER_HUB_LEGACY {
        registry = DOCKER_HUB.to_owned();
    }
    if registry == DOCKER_HUB && !repository.contains('/') {
        repository = format!("{OFFICIAL_REPOSITORIES}/{repository}");
    }
    (registry, repository)
}

#[cfg(test)]
#[path = "reference_tests.rs"]
mod tests;

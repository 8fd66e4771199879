use super::parse;
use oci_client::{ParseError, Reference};
use proptest::prelude::*;

/// oci-spec's own parse (its regular expression), the behaviour this parser keeps.
fn oci_spec(reference: &str) -> Result<Reference, ParseError> {
    reference.parse::<Reference>()
}

fn fields(reference: &Reference) -> (String, String, Option<String>, Option<String>, String) {
    (
        reference.registry().to_owned(),
        reference.repository().to_owned(),
        reference.tag().map(str::to_owned),
        reference.digest().map(str::to_owned),
        reference.whole(),
    )
}

fn agrees(reference: &str) {
    let ours = parse(reference).map(|r| fields(&r));
    let theirs = oci_spec(reference).map(|r| fields(&r));
    assert_eq!(ours, theirs, "{reference:?}");
}

const SHA256: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

#[test]
fn agrees_with_oci_spec_on_listed_references() {
    let long = "a".repeat(256);
    let long_tag = "t".repeat(129);
    let listed = [
        "busybox".to_owned(),
        "library/busybox".to_owned(),
        "docker.io/busybox".to_owned(),
        "index.docker.io/busybox:1.36".to_owned(),
        "quay.io/operatorhubio/etcd:v0.9.4".to_owned(),
        "localhost/bundle".to_owned(),
        "localhost:5000/bundle:1.0.0".to_owned(),
        "127.0.0.1:41234/grumbo:1.0.0".to_owned(),
        format!("127.0.0.1:41234/grumbo@{SHA256}"),
        format!("127.0.0.1:41234/grumbo:1.0.0@{SHA256}"),
        "test.com:tag".to_owned(),
        "test.com:5000".to_owned(),
        "Foo/bar".to_owned(),
        "foo/Bar".to_owned(),
        "my-registry.example.com/team/a.b_c__d---e/f:Tag_1.0-x".to_owned(),
        "a___b".to_owned(),
        "a._b".to_owned(),
        "a-".to_owned(),
        "-a".to_owned(),
        "a//b".to_owned(),
        "/a".to_owned(),
        "a/".to_owned(),
        "host-/repo".to_owned(),
        "ho-st.example/repo".to_owned(),
        "host:/repo".to_owned(),
        "host:5x/repo".to_owned(),
        ":tag".to_owned(),
        "repo:".to_owned(),
        "repo:.tag".to_owned(),
        "repo:-tag".to_owned(),
        "repo:_tag".to_owned(),
        format!("repo:{long_tag}"),
        format!("repo:{}", &long_tag[1..]),
        long.clone(),
        format!("example.com/{}", &long[1..]),
        "repo@sha256:abc".to_owned(),
        "repo@sha256:0123456789abcdef0123456789abcdef".to_owned(),
        "repo@sha512:0123456789abcdef0123456789abcdef".to_owned(),
        "repo@md5:0123456789abcdef0123456789abcdef".to_owned(),
        format!("repo@{}", SHA256.to_uppercase().replace("SHA256", "sha256")),
        format!("repo@{SHA256}@{SHA256}"),
        format!("repo@{SHA256}:x"),
        "repo@sha256+x.y-z_w:0123456789abcdef0123456789abcdef".to_owned(),
        "repo@sha256--x:0123456789abcdef0123456789abcdef".to_owned(),
        "repo@1sha:0123456789abcdef0123456789abcdef".to_owned(),
        "a:b:c".to_owned(),
        "host:1/a:b:c".to_owned(),
        "a b".to_owned(),
        "a\n".to_owned(),
        "résumé".to_owned(),
    ];
    for reference in &listed {
        agrees(reference);
    }
    assert_eq!(parse("").map(|r| fields(&r)), Err(ParseError::NameEmpty));
}

#[test]
fn normalises_as_oci_spec_does() {
    let parsed = parse("busybox").unwrap();
    assert_eq!(fields(&parsed).4, "docker.io/library/busybox:latest");
    let parsed = parse(&format!("localhost:5000/grumbo@{SHA256}")).unwrap();
    assert_eq!(
        (parsed.registry(), parsed.repository(), parsed.tag(), parsed.digest()),
        ("localhost:5000", "grumbo", None, Some(SHA256))
    );
}

#[test]
fn a_tag_is_ascii_where_oci_spec_takes_any_word_character() {
    assert!(oci_spec("repo:tág").is_ok());
    assert_eq!(parse("repo:tág").map(|r| fields(&r)), Err(ParseError::ReferenceInvalidFormat));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Shaped like references, with the grammar's edges: separators, ports, case, tags and digests of every length.
    #[test]
    fn agrees_with_oci_spec_on_reference_shapes(
        reference in "([a-zA-Z0-9.-]{1,8}(:[0-9x]{0,5})?/)?[a-zA-Z0-9._-]{1,8}(/[a-z0-9._-]{0,6}){0,2}\
                      (:[A-Za-z0-9._-]{0,10})?(@(sha256|sha512|md5|a-b)?:[0-9a-fA-F]{0,2}(0123456789abcdef){2,8})?"
    ) {
        agrees(&reference);
    }

    /// Any string of the characters the grammar gives meaning to.
    #[test]
    fn agrees_with_oci_spec_on_any_string(reference in "[a-zA-Z0-9._:/@+ -]{0,30}") {
        agrees(&reference);
    }
}

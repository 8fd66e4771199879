//! Tests of a Subscription's candidates.

use super::*;
use crate::catalog::Catalog;
use serde_json::{json, Value};
use std::path::PathBuf;

fn entry(name: &str, replaces: Option<&str>, skips: &[&str], skip_range: Option<&str>) -> ChannelEntry {
    ChannelEntry {
        name: name.into(),
        replaces: replaces.map(str::to_owned),
        skips: skips.iter().map(|s| (*s).to_owned()).collect(),
        skip_range: skip_range.map(str::to_owned),
    }
}

fn names(entries: &[&ChannelEntry]) -> Vec<String> {
    entries.iter().map(|e| e.name.clone()).collect()
}

#[test]
fn a_channel_is_ordered_newest_first_along_replaces_leaving_skipped_entries_out() {
    let v1 = entry("a.v1", None, &[], None);
    let v2 = entry("a.v2", Some("a.v1"), &[], None);
    let v3 = entry("a.v3", Some("a.v2"), &["a.v2"], None);
    let sorted = sort_channel("a", "stable", &[&v1, &v3, &v2]).expect("one chain");
    assert_eq!(names(&sorted), ["a.v3", "a.v1"], "v2 is skipped: walked through, left out");
}

#[test]
fn channel_errors_are_olm_s_words() {
    let a = entry("a.v1", Some("a.v2"), &[], None);
    let b = entry("a.v2", Some("a.v1"), &[], None);
    assert_eq!(
        sort_channel("a", "stable", &[&a, &b]),
        Err(r#"no channel heads (entries not replaced by another entry) found in channel "stable" of package "a""#
            .to_owned())
    );
    let x = entry("a.v1", None, &[], None);
    let y = entry("a.v2", None, &[], None);
    let z = entry("a.v3", Some("a.v2"), &[], None);
    assert_eq!(
        sort_channel("a", "stable", &[&x, &y, &z]),
        Err("a unique replacement chain within a channel is required to determine the relative order between channel \
             entries, but 2 replacement chains were found in channel \"stable\" of package \"a\": a.v1, a.v3...a.v2"
            .to_owned())
    );
    // A head whose chain loops back into itself below the head.
    let h = entry("a.v3", Some("a.v2"), &[], None);
    let c1 = entry("a.v2", Some("a.v1"), &[], None);
    let c2 = entry("a.v1", Some("a.v2"), &[], None);
    assert_eq!(
        sort_channel("a", "stable", &[&h, &c1, &c2]),
        Err(r#"a cycle exists in the chain of replacement beginning with "a.v3" in channel "stable" of package "a""#
            .to_owned())
    );
}

#[test]
fn an_upgrade_replaces_skips_or_ranges_over_the_current_version() {
    let current = Current { name: "a.v1".into(), version: Some(semver::Version::new(1, 0, 0)) };
    assert!(upgrades_from(&entry("a.v2", Some("a.v1"), &[], None), &current));
    assert!(upgrades_from(&entry("a.v2", None, &["a.v1"], None), &current));
    assert!(upgrades_from(&entry("a.v2", None, &[], Some(">=0.5.0 <2.0.0")), &current));
    assert!(!upgrades_from(&entry("a.v2", None, &[], Some(">=1.1.0")), &current));
    assert!(!upgrades_from(&entry("a.v2", Some("a.v0"), &[], None), &current));
}

fn bundle(package: &str, name: &str, version: &str) -> Value {
    json!({"schema": "olm.bundle", "name": name, "package": package, "image": format!("r/{name}"),
           "properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}}]})
}

/// Package `a`: stable (default) v1 → v2 → v3, beta v3 → v4-beta (v4 replaces v3).
fn catalog() -> Catalog {
    let blobs = vec![
        json!({"schema": "olm.package", "name": "a", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": "a", "entries": [
            {"name": "a.v1"}, {"name": "a.v2", "replaces": "a.v1"}, {"name": "a.v3", "replaces": "a.v2"}]}),
        json!({"schema": "olm.channel", "name": "beta", "package": "a", "entries": [
            {"name": "a.v3"}, {"name": "a.v4", "replaces": "a.v3"}]}),
        bundle("a", "a.v1", "1.0.0"),
        bundle("a", "a.v2", "2.0.0"),
        bundle("a", "a.v3", "3.0.0"),
        bundle("a", "a.v4", "4.0.0"),
    ];
    Catalog::from_blobs(blobs.into_iter().map(|b| (PathBuf::from("c"), b)).collect()).expect("catalog")
}

fn subscription(spec: Value) -> Subscription {
    serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": "sub", "namespace": "ops"}, "spec": spec}))
    .expect("a Subscription")
}

fn sources(catalog: &Catalog) -> Vec<Source<'_>> {
    vec![Source { name: "community".into(), namespace: "olm".into(), priority: 0, catalog }]
}

fn bundles(want: &Want) -> Vec<String> {
    want.candidates.iter().map(|p| format!("{:?}:{}", p.origin, p.bundle)).collect()
}

#[test]
fn a_new_subscription_wants_its_channel_newest_first() {
    let catalog = catalog();
    let sub = subscription(json!({"source": "community", "sourceNamespace": "olm", "name": "a", "channel": "stable"}));
    let want = subscription_want(&sub, &sources(&catalog), None).expect("candidates");
    assert_eq!(want.by, "subscription sub");
    assert_eq!(want.package, "a");
    assert_eq!(bundles(&want), ["Source(0):a.v3", "Source(0):a.v2", "Source(0):a.v1"]);
}

#[test]
fn without_a_channel_every_channel_counts_the_default_first() {
    let catalog = catalog();
    let sub = subscription(json!({"source": "community", "sourceNamespace": "olm", "name": "a"}));
    let want = subscription_want(&sub, &sources(&catalog), None).expect("candidates");
    assert_eq!(
        bundles(&want),
        ["Source(0):a.v3", "Source(0):a.v2", "Source(0):a.v1", "Source(0):a.v4"],
        "stable first, then beta (its a.v3 once)"
    );
}

#[test]
fn a_starting_csv_is_the_only_candidate_of_a_first_install() {
    let catalog = catalog();
    let sub = subscription(
        json!({"source": "community", "sourceNamespace": "olm", "name": "a", "channel": "stable", "startingCSV": "a.v1"}),
    );
    let want = subscription_want(&sub, &sources(&catalog), None).expect("candidates");
    assert_eq!(bundles(&want), ["Source(0):a.v1"]);
}

#[test]
fn with_a_csv_installed_only_its_upgrades_then_itself_are_candidates() {
    let catalog = catalog();
    let sub = subscription(
        json!({"source": "community", "sourceNamespace": "olm", "name": "a", "channel": "stable", "startingCSV": "a.v1"}),
    );
    let current = Current { name: "a.v1".into(), version: Some(semver::Version::new(1, 0, 0)) };
    let want = subscription_want(&sub, &sources(&catalog), Some(&current)).expect("candidates");
    assert_eq!(bundles(&want), ["Source(0):a.v2", "Installed:a.v1"], "startingCSV no longer applies");
    let latest = Current { name: "a.v3".into(), version: Some(semver::Version::new(3, 0, 0)) };
    let want = subscription_want(&sub, &sources(&catalog), Some(&latest)).expect("candidates");
    assert_eq!(bundles(&want), ["Installed:a.v3"], "at the head: staying is the only choice");
}

#[test]
fn what_is_not_found_is_said_in_olm_s_words() {
    let catalog = catalog();
    let invalid = |spec: Value| match subscription_want(&subscription(spec), &sources(&catalog), None) {
        Err(NoCandidates::Invalid(message)) => message,
        other => panic!("not invalid: {other:?}"),
    };
    assert_eq!(
        invalid(json!({"source": "other", "sourceNamespace": "olm", "name": "a"})),
        "no operators found from catalog other in namespace olm referenced by subscription sub"
    );
    assert_eq!(
        invalid(json!({"source": "community", "sourceNamespace": "olm", "name": "b"})),
        "no operators found in package b in the catalog referenced by subscription sub"
    );
    assert_eq!(
        invalid(json!({"source": "community", "sourceNamespace": "olm", "name": "a", "channel": "alpha"})),
        "no operators found in channel alpha of package a in the catalog referenced by subscription sub"
    );
    assert_eq!(
        invalid(json!({"source": "community", "sourceNamespace": "olm", "name": "a", "channel": "stable",
                       "startingCSV": "a.v9"})),
        "no operators found with name a.v9 in channel stable of package a in the catalog referenced by subscription sub"
    );
}

#[test]
fn a_subscription_naming_no_catalog_looks_in_every_catalog() {
    let catalog = catalog();
    let other = Catalog::default();
    let both = vec![
        Source { name: "empty".into(), namespace: "ops".into(), priority: 0, catalog: &other },
        sources(&catalog).remove(0),
    ];
    let sub = subscription(json!({"source": "", "sourceNamespace": "", "name": "a", "channel": "stable"}));
    let want = subscription_want(&sub, &both, None).expect("candidates");
    assert_eq!(bundles(&want), ["Source(1):a.v3", "Source(1):a.v2", "Source(1):a.v1"]);
}

use std::path::PathBuf;

use serde_json::{json, Value};

use super::*;

/// A bundle blob: `name` of `package` at `version`, with extra properties.
pub(crate) fn bundle(package: &str, name: &str, version: &str, properties: Vec<Value>) -> Value {
    let mut all = vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    all.extend(properties);
    json!({"schema": "olm.bundle", "name": name, "package": package, "image": format!("registry.example/{name}"),
        "properties": all})
}

pub(crate) fn provides(kind: &str) -> Value {
    json!({"type": "olm.gvk", "value": {"group": "example.com", "version": "v1", "kind": kind}})
}

pub(crate) fn requires_api(kind: &str) -> Value {
    json!({"type": "olm.gvk.required", "value": {"group": "example.com", "version": "v1", "kind": kind}})
}

pub(crate) fn requires_package(package: &str, range: &str) -> Value {
    json!({"type": "olm.package.required", "value": {"packageName": package, "versionRange": range}})
}

fn constraint(value: Value) -> Value {
    json!({"type": "olm.constraint", "value": value})
}

/// A catalog of `bundles` (blobs), each package with a `stable` default channel holding its bundles in order,
/// each replacing the one before.
pub(crate) fn catalog(bundles: Vec<Value>) -> Catalog {
    let mut blobs = Vec::new();
    let mut packages: Vec<(String, Vec<String>)> = Vec::new();
    for blob in &bundles {
        let package = blob["package"].as_str().expect("package").to_owned();
        let name = blob["name"].as_str().expect("name").to_owned();
        match packages.iter_mut().find(|(p, _)| *p == package) {
            Some((_, names)) => names.push(name),
            None => packages.push((package, vec![name])),
        }
    }
    for (package, names) in &packages {
        blobs.push(json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}));
        let entries: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, name)| match i {
                0 => json!({"name": name}),
                _ => json!({"name": name, "replaces": names[i - 1]}),
            })
            .collect();
        blobs.push(json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": entries}));
    }
    blobs.extend(bundles);
    Catalog::from_blobs(blobs.into_iter().map(|blob| (PathBuf::from("catalog.yaml"), blob)).collect()).expect("catalog")
}

/// One bundle blob, read as a catalog reads it: what is installed, in these tests.
fn catalog_bundles(blob: Value) -> Vec<CatalogBundle> {
    catalog(vec![blob]).packages.values().flat_map(|package| package.bundles.values().cloned()).collect()
}

fn source<'a>(name: &str, priority: i32, catalog: &'a Catalog) -> Source<'a> {
    Source { name: name.into(), namespace: "olm".into(), priority, catalog }
}

/// What is wanted of the one catalog `community`.
fn problem(catalog: &Catalog, wants: Vec<Want>) -> Problem<'_> {
    Problem { sources: vec![source("community", 0, catalog)], wants, ..Problem::default() }
}

fn want(package: &str, bundles: &[&str]) -> Want {
    let candidates = bundles.iter().map(|b| Pick { origin: Origin::Source(0), bundle: (*b).into() }).collect();
    Want { by: format!("subscription {package}"), package: package.into(), candidates }
}

fn names(chosen: &[Chosen]) -> Vec<String> {
    chosen.iter().map(|c| c.bundle.name.clone()).collect()
}

fn explanation(result: Result<Vec<Chosen>, DependencyError>) -> String {
    match result {
        Err(error @ DependencyError::Unsatisfiable { .. }) => {
            assert_eq!(error.reason(), "ConstraintsNotSatisfiable");
            error.to_string()
        }
        other => panic!("expected no solution, got {other:?}"),
    }
}

#[test]
fn a_required_api_brings_the_bundle_providing_it() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![provides("Plumbus"), requires_api("Grumbo")]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]),
        bundle("grumbo", "grumbo.v1.1.0", "1.1.0", vec![provides("Grumbo")]),
        bundle("unrelated", "unrelated.v1.0.0", "1.0.0", vec![provides("Other")]),
    ]);
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]);
    let chosen = resolve_dependencies(&problem).expect("solution");
    assert_eq!(names(&chosen), ["grumbo.v1.1.0", "plumbus.v1.0.0"], "the newest provider, nothing unrelated");
    assert_eq!(chosen[0].wanted_by, None, "brought as a dependency");
    assert_eq!(chosen[1].wanted_by.as_deref(), Some("subscription plumbus"));
    assert_eq!(chosen[0].origin, Origin::Source(0));
}

#[test]
fn a_required_package_is_taken_newest_within_its_range() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_package("grumbo", ">=1.0.0 <2.0.0")]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![]),
        bundle("grumbo", "grumbo.v1.5.0", "1.5.0", vec![]),
        bundle("grumbo", "grumbo.v2.0.0", "2.0.0", vec![]),
    ]);
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]);
    assert_eq!(names(&resolve_dependencies(&problem).expect("solution")), ["grumbo.v1.5.0", "plumbus.v1.0.0"]);
}

#[test]
fn what_is_installed_is_kept_over_a_newer_bundle_and_a_higher_priority_catalog_wins_over_a_newer_version() {
    let low = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_api("Grumbo")]),
        bundle("grumbo", "grumbo.v3.0.0", "3.0.0", vec![provides("Grumbo")]),
    ]);
    let high = catalog(vec![bundle("grumbo", "grumbo.v2.0.0", "2.0.0", vec![provides("Grumbo")])]);
    let mut problem = Problem {
        sources: vec![source("low", 0, &low), source("high", 10, &high)],
        wants: vec![want("plumbus", &["plumbus.v1.0.0"])],
        ..Problem::default()
    };
    let chosen = resolve_dependencies(&problem).expect("solution");
    assert_eq!(names(&chosen), ["grumbo.v2.0.0", "plumbus.v1.0.0"], "priority before version");
    assert_eq!(chosen[0].origin, Origin::Source(1));

    problem.installed = catalog_bundles(bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]));
    let chosen = resolve_dependencies(&problem).expect("solution");
    assert_eq!(names(&chosen), ["grumbo.v1.0.0", "plumbus.v1.0.0"], "installed before anything");
    assert_eq!(chosen[0].origin, Origin::Installed);
}

#[test]
fn a_want_takes_its_first_candidate_and_falls_back_when_that_cannot_be_satisfied() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![]),
        bundle("plumbus", "plumbus.v2.0.0", "2.0.0", vec![requires_package("fleeb", ">=1.0.0")]),
    ]);
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v2.0.0", "plumbus.v1.0.0"])]);
    assert_eq!(names(&resolve_dependencies(&problem).expect("solution")), ["plumbus.v1.0.0"]);
    let first_only = Problem { wants: vec![want("plumbus", &["plumbus.v1.0.0"])], ..problem.clone() };
    assert_eq!(names(&resolve_dependencies(&first_only).expect("solution")), ["plumbus.v1.0.0"]);
    let newest_only = Problem { wants: vec![want("plumbus", &["plumbus.v2.0.0"])], ..problem };
    let explained = explanation(resolve_dependencies(&newest_only));
    assert!(explained.contains("plumbus.v2.0.0") && explained.contains("fleeb"), "{explained}");
}

#[test]
fn a_missing_dependency_is_explained_along_the_chain_of_requirements() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_package("grumbo", ">=1.0.0")]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![requires_api("Certificate")]),
    ]);
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]);
    let explained = explanation(resolve_dependencies(&problem));
    assert!(explained.starts_with("constraints not satisfiable: "), "{explained}");
    for link in ["plumbus.v1.0.0", "grumbo", "Certificate (example.com/v1)"] {
        assert!(explained.contains(link), "{link:?} in {explained}");
    }
}

#[test]
fn two_providers_of_one_api_conflict() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![provides("Grumbo")]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]),
    ]);
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"]), want("grumbo", &["grumbo.v1.0.0"])]);
    let explained = explanation(resolve_dependencies(&problem));
    assert!(explained.contains("Grumbo (example.com/v1)"), "{explained}");
    let one = Problem { wants: vec![want("plumbus", &["plumbus.v1.0.0"])], ..problem };
    assert_eq!(names(&resolve_dependencies(&one).expect("solution")), ["plumbus.v1.0.0"]);
}

#[test]
fn a_constraint_is_one_test_a_single_bundle_passes_and_cel_is_refused_with_its_reason() {
    let any = constraint(json!({"any": {"constraints": [
        {"package": {"packageName": "fleeb", "versionRange": ">=1.0.0"}},
        {"gvk": {"group": "example.com", "version": "v1", "kind": "Grumbo"}}]}}));
    // A grumbo, but not 2.0.0 or later: `all` and `not` test one bundle, as OLM's predicates do.
    let grumbo_one = constraint(json!({"all": {"constraints": [
        {"package": {"packageName": "grumbo", "versionRange": ">=1.0.0"}},
        {"not": {"constraints": [{"package": {"packageName": "grumbo", "versionRange": ">=2.0.0"}}]}}]}}));
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![any]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]),
        bundle("grumbo", "grumbo.v2.0.0", "2.0.0", vec![provides("Grumbo")]),
        bundle("dinglebop", "dinglebop.v1.0.0", "1.0.0", vec![grumbo_one]),
        bundle("squanch", "squanch.v1.0.0", "1.0.0", vec![json!({"type": "olm.label", "value": {"label": "tier-1"}})]),
        bundle(
            "blamf",
            "blamf.v1.0.0",
            "1.0.0",
            vec![json!({"type": "olm.label.required", "value": {"label": "tier-1"}})],
        ),
        bundle(
            "gazorp",
            "gazorp.v1.0.0",
            "1.0.0",
            vec![json!({"type": "olm.label.required", "value": {"label": "tier-9"}})],
        ),
        bundle(
            "schleem",
            "schleem.v1.0.0",
            "1.0.0",
            vec![constraint(json!({"failureMessage": "needs OpenShift",
            "cel": {"rule": "properties.exists(p, p.type == 'olm.maxOpenShiftVersion')"}}))],
        ),
    ]);
    let solve = |wants: Vec<Want>| resolve_dependencies(&problem(&catalog, wants));
    assert_eq!(
        names(&solve(vec![want("plumbus", &["plumbus.v1.0.0"])]).expect("any")),
        ["grumbo.v2.0.0", "plumbus.v1.0.0"]
    );
    assert_eq!(
        names(&solve(vec![want("dinglebop", &["dinglebop.v1.0.0"])]).expect("all of a package and not a range")),
        ["dinglebop.v1.0.0", "grumbo.v1.0.0"]
    );
    let excluded = solve(vec![want("dinglebop", &["dinglebop.v1.0.0"]), want("grumbo", &["grumbo.v2.0.0"])]);
    assert!(explanation(excluded).contains("grumbo"));
    assert_eq!(
        names(&solve(vec![want("blamf", &["blamf.v1.0.0"])]).expect("a label")),
        ["blamf.v1.0.0", "squanch.v1.0.0"]
    );
    let no_label = explanation(solve(vec![want("gazorp", &["gazorp.v1.0.0"])]));
    assert!(no_label.contains("with label: tier-9, and no bundle is one"), "{no_label}");
    let cel = explanation(solve(vec![want("schleem", &["schleem.v1.0.0"])]));
    assert!(cel.contains("CEL rules are not evaluated here") && cel.contains("needs OpenShift"), "{cel}");
}

#[test]
fn deprecated_bundles_are_never_chosen() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_package("grumbo", ">=1.0.0")]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![]),
        bundle("grumbo", "grumbo.v2.0.0", "2.0.0", vec![json!({"type": "olm.deprecated", "value": {}})]),
    ]);
    let chosen = resolve_dependencies(&problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])])).expect("one");
    assert_eq!(names(&chosen), ["grumbo.v1.0.0", "plumbus.v1.0.0"]);
    let only = explanation(resolve_dependencies(&problem(&catalog, vec![want("grumbo", &["grumbo.v2.0.0"])])));
    assert!(only.contains("bundle grumbo.v2.0.0 is deprecated"), "{only}");
}

#[test]
fn an_installed_bundle_wanted_by_no_one_stays_and_keeps_its_apis() {
    let catalog = catalog(vec![bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![provides("Grumbo")])]);
    let installed = catalog_bundles(bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]));
    let problem = Problem { installed, ..problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]) };
    let explained = explanation(resolve_dependencies(&problem));
    assert!(explained.contains("grumbo.v1.0.0 (installed)"), "{explained}");
}

#[test]
fn a_want_tries_its_candidates_in_its_own_order_before_what_is_installed() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v2.0.0", "2.0.0", vec![]),
        bundle("plumbus", "plumbus.v3.0.0", "3.0.0", vec![requires_package("fleeb", ">=1.0.0")]),
    ]);
    let installed = catalog_bundles(bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![]));
    let mut wanted = want("plumbus", &["plumbus.v3.0.0", "plumbus.v2.0.0"]);
    wanted.candidates.push(Pick { origin: Origin::Installed, bundle: "plumbus.v1.0.0".into() });
    let problem = Problem { installed, ..problem(&catalog, vec![wanted]) };
    assert_eq!(names(&resolve_dependencies(&problem).expect("v2")), ["plumbus.v2.0.0"], "not back to v1");
}

#[test]
fn a_bundle_whose_properties_cannot_be_read_stays_in_its_catalog_and_is_left_out_saying_why() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_package("grumbo", "~1.0.0")]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![]),
    ]);
    assert!(catalog.packages["plumbus"].bundles.contains_key("plumbus.v1.0.0"));
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]);
    let explained = explanation(resolve_dependencies(&problem));
    assert!(explained.contains("its properties cannot be read: version range \"~1.0.0\""), "{explained}");
}

#[test]
fn a_candidate_that_is_not_there_is_an_error_of_its_own() {
    let catalog = catalog(vec![bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![])]);
    let problem = problem(&catalog, vec![want("plumbus", &["plumbus.v9.0.0"])]);
    let error = resolve_dependencies(&problem).expect_err("unknown");
    assert_eq!(error.reason(), "ErrorPreventedResolution");
    assert_eq!(
        error.to_string(),
        "subscription plumbus wants bundle \"plumbus.v9.0.0\" of package \"plumbus\", which catalog olm/community does not hold"
    );
}

#[test]
fn a_real_catalog_whose_head_requires_apis_no_catalog_provides_says_which() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc/shipwright-operator");
    let catalog = Catalog::load_dir(&root).expect("shipwright catalog");
    let package = &catalog.packages["shipwright-operator"];
    let newest = package.bundles.values().max_by(|a, b| a.version.cmp(&b.version)).expect("a bundle");
    assert!(!newest.requires.is_empty(), "its olm.gvk.required properties are read");
    let problem = problem(&catalog, vec![want("shipwright-operator", &[newest.name.as_str()])]);
    let explained = explanation(resolve_dependencies(&problem));
    assert!(explained.contains("TektonConfig") || explained.contains("Certificate"), "{explained}");
}

#[test]
fn a_preferred_bundle_is_kept_while_it_fits_and_is_never_required() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_package("grumbo", ">=1.0.0")]),
        bundle("plumbus", "plumbus.v2.0.0", "2.0.0", vec![requires_package("grumbo", ">=1.5.0")]),
        bundle("plumbus", "plumbus.v3.0.0", "3.0.0", vec![]),
        bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![]),
        bundle("grumbo", "grumbo.v1.5.0", "1.5.0", vec![]),
        bundle("grumbo", "grumbo.v2.0.0", "2.0.0", vec![]),
    ]);
    let old = ("grumbo".to_owned(), Pick { origin: Origin::Source(0), bundle: "grumbo.v1.0.0".into() });
    let one = Problem { preferred: vec![old.clone()], ..problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]) };
    let chosen = resolve_dependencies(&one).expect("solution");
    assert_eq!(names(&chosen), ["grumbo.v1.0.0", "plumbus.v1.0.0"], "kept over the newer grumbo");
    let two = Problem { preferred: vec![old.clone()], ..problem(&catalog, vec![want("plumbus", &["plumbus.v2.0.0"])]) };
    assert_eq!(names(&resolve_dependencies(&two).expect("solution")), ["grumbo.v2.0.0", "plumbus.v2.0.0"]);
    let three = Problem { preferred: vec![old], ..problem(&catalog, vec![want("plumbus", &["plumbus.v3.0.0"])]) };
    assert_eq!(names(&resolve_dependencies(&three).expect("solution")), ["plumbus.v3.0.0"], "not required");
    let gone = ("grumbo".to_owned(), Pick { origin: Origin::Source(0), bundle: "grumbo.v0.1.0".into() });
    let missing = Problem { preferred: vec![gone], ..problem(&catalog, vec![want("plumbus", &["plumbus.v1.0.0"])]) };
    assert_eq!(names(&resolve_dependencies(&missing).expect("solution")), ["grumbo.v2.0.0", "plumbus.v1.0.0"]);
}

#[test]
fn a_wants_own_order_comes_before_a_preference_for_its_package() {
    let catalog = catalog(vec![
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![]),
        bundle("plumbus", "plumbus.v2.0.0", "2.0.0", vec![]),
    ]);
    let preferred = vec![("plumbus".to_owned(), Pick { origin: Origin::Source(0), bundle: "plumbus.v1.0.0".into() })];
    let problem =
        Problem { preferred, ..problem(&catalog, vec![want("plumbus", &["plumbus.v2.0.0", "plumbus.v1.0.0"])]) };
    assert_eq!(names(&resolve_dependencies(&problem).expect("solution")), ["plumbus.v2.0.0"]);
}

//! The File-Based Catalog loader: blobs assembled into packages whatever their order, what only the
//! PackageManifest API shows, errors naming their blob, and a catalog read as a stream within its limits.

use super::*;
use serde_json::json;

fn blobs(values: Vec<Value>) -> Vec<(PathBuf, Value)> {
    values.into_iter().map(|value| (PathBuf::from("catalog.yaml"), value)).collect()
}

fn bundle(name: &str, version: &str) -> Value {
    json!({"schema": "olm.bundle", "name": name, "package": "plumbus", "image": format!("registry.example/{name}"),
           "properties": [{"type": "olm.package", "value": {"packageName": "plumbus", "version": version}}]})
}

#[test]
fn packages_gather_their_channels_and_bundles_whatever_the_blob_order() {
    let catalog = Catalog::from_blobs(blobs(vec![
        bundle("plumbus.v1.0.0", "1.0.0"),
        json!({"schema": "olm.channel", "name": "stable", "package": "plumbus",
               "entries": [{"name": "plumbus.v1.0.0", "skipRange": "<1.0.0"}]}),
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        json!({"schema": "olm.deprecations", "package": "plumbus"}),
    ]))
    .expect("loads");
    let package = &catalog.packages["plumbus"];
    assert_eq!(package.default_channel.as_deref(), Some("stable"));
    assert_eq!(package.channels["stable"].entries[0].skip_range.as_deref(), Some("<1.0.0"));
    assert_eq!(package.bundles["plumbus.v1.0.0"].version, Version::new(1, 0, 0));
    assert_eq!(package.bundles["plumbus.v1.0.0"].image, "registry.example/plumbus.v1.0.0");
}

#[test]
fn deprecations_are_read_for_the_package_its_channels_and_its_bundles() {
    let catalog = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        bundle("plumbus.v1.0.0", "1.0.0"),
        json!({"schema": "olm.deprecations", "package": "plumbus", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "use fleeb"},
            {"reference": {"schema": "olm.channel", "name": "alpha"}, "message": "alpha is over"},
            {"reference": {"schema": "olm.bundle", "name": "plumbus.v1.0.0"}, "message": "1.0.0 leaks"}]}),
    ]))
    .expect("loads");
    let deprecations = &catalog.packages["plumbus"].deprecations;
    assert_eq!(deprecations.package.as_deref(), Some("use fleeb"));
    assert_eq!(deprecations.channels["alpha"], "alpha is over");
    assert_eq!(deprecations.bundles["plumbus.v1.0.0"], "1.0.0 leaks");
    assert!(!catalog.packages["plumbus"].bundles["plumbus.v1.0.0"].deprecated, "still resolved");
    let odd = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.package", "name": "plumbus"}),
        json!({"schema": "olm.deprecations", "package": "plumbus",
               "entries": [{"reference": {"schema": "olm.thing"}, "message": "?"}]}),
    ]))
    .expect_err("refused");
    assert!(odd.to_string().contains("olm.thing") || format!("{odd:?}").contains("olm.thing"), "{odd:?}");
}

#[test]
fn only_channel_heads_keep_a_description_beside_the_packages_description_and_icon() {
    let described = |name: &str, version: &str| {
        let mut blob = bundle(name, version);
        blob["properties"]
            .as_array_mut()
            .expect("properties")
            .push(json!({"type": "olm.csv.metadata", "value": {"displayName": format!("Plumbus {version}")}}));
        blob
    };
    let catalog = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable",
               "description": "Plumbus.", "icon": {"base64data": "PHN2Zy8+", "mediatype": "image/svg+xml"}}),
        json!({"schema": "olm.channel", "name": "stable", "package": "plumbus", "entries": [
            {"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]}),
        json!({"schema": "olm.channel", "name": "old", "package": "plumbus", "entries": [
            {"name": "plumbus.v1.0.0"}]}),
        described("plumbus.v1.0.0", "1.0.0"),
        described("plumbus.v1.1.0", "1.1.0"),
    ]))
    .expect("loads");
    let package = &catalog.packages["plumbus"];
    assert_eq!(package.description.as_deref(), Some("Plumbus."));
    assert_eq!(package.icon.as_ref().map(|icon| icon.data.as_slice()), Some(b"<svg/>".as_slice()));
    assert_eq!(
        package.descriptions.keys().collect::<Vec<_>>(),
        ["plumbus.v1.0.0", "plumbus.v1.1.0"],
        "the heads of old and stable"
    );
    assert_eq!(package.descriptions["plumbus.v1.1.0"].shown.display_name, "Plumbus 1.1.0");
    let only_stable = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.package", "name": "plumbus"}),
        json!({"schema": "olm.channel", "name": "stable", "package": "plumbus", "entries": [
            {"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]}),
        described("plumbus.v1.0.0", "1.0.0"),
        described("plumbus.v1.1.0", "1.1.0"),
    ]))
    .expect("loads");
    assert_eq!(
        only_stable.packages["plumbus"].descriptions.keys().collect::<Vec<_>>(),
        ["plumbus.v1.1.0"],
        "a bundle heading no channel keeps none"
    );
}

#[test]
fn what_only_package_manifests_show_never_keeps_a_catalog_from_loading() {
    let mut odd_bundle = bundle("plumbus.v1.0.0", "1.0.0");
    odd_bundle["relatedImages"] = json!("not a list");
    odd_bundle["properties"].as_array_mut().expect("properties").extend([
        json!({"type": "olm.bundle.object", "value": {"data": "not base64!"}}),
        json!({"type": "olm.csv.metadata", "value": {"displayName": 7}}),
    ]);
    let catalog = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.package", "name": "plumbus", "description": {"not": "text"},
               "icon": {"base64data": "not base64!"}}),
        json!({"schema": "olm.channel", "name": "stable", "package": "plumbus",
               "entries": [{"name": "plumbus.v1.0.0"}]}),
        odd_bundle,
    ]))
    .expect("loads");
    let package = &catalog.packages["plumbus"];
    assert_eq!((&package.description, &package.icon), (&None, &None));
    assert!(package.descriptions.is_empty(), "an unreadable head has no description");
    assert_eq!(package.bundles.len(), 1);
}

#[test]
fn a_bundle_without_a_semver_version_is_named_in_the_error() {
    let error = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.package", "name": "plumbus"}),
        bundle("plumbus.v1", "1"),
    ]))
    .expect_err("refused");
    assert_eq!(error.category(), "InvalidCatalog");
    assert!(error.to_string().contains("plumbus.v1") && error.to_string().contains("not semver"), "{error}");
}

#[test]
fn a_channel_of_an_unknown_package_is_an_error() {
    let error = Catalog::from_blobs(blobs(vec![
        json!({"schema": "olm.channel", "name": "stable", "package": "ghost", "entries": []}),
    ]))
    .expect_err("refused");
    assert!(error.to_string().contains("ghost"), "{error}");
}

/// A directory removed on drop, for catalogs written to disk.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("olmv2-fbc-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        Self(dir)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.0.join(relative);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("dir");
        std::fs::write(path, text).expect("written");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A bundle of `package` described by `olm.csv.metadata` whose description is `description`.
fn described(package: &str, name: &str, version: &str, description: &str) -> Value {
    json!({"schema": "olm.bundle", "name": name, "package": package, "image": format!("registry.example/{name}"),
           "properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}},
                          {"type": "olm.csv.metadata", "value": {"displayName": name, "description": description}}]})
}

fn package_and_channel(package: &str, entries: Value) -> Vec<Value> {
    vec![
        json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": package, "entries": entries}),
    ]
}

fn lines(blobs: &[Value]) -> String {
    blobs.iter().map(|blob| format!("{blob}\n")).collect()
}

#[test]
fn a_catalog_read_as_a_stream_is_the_catalog_its_blobs_make_whole() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc");
    let mut described = 0;
    for dir in std::fs::read_dir(&root).expect("testdata").flatten().map(|entry| entry.path()) {
        let streamed = Catalog::load_dir(&dir).expect("streamed");
        let path = dir.join("catalog.yaml");
        let text = std::fs::read_to_string(&path).expect("read whole");
        let whole: Vec<(PathBuf, Value)> = serde_yaml_ng::Deserializer::from_str(&text)
            .map(|document| Value::deserialize(document).expect("a document"))
            .filter(|blob| !blob.is_null())
            .map(|blob| (path.clone(), blob))
            .collect();
        assert_eq!(streamed, Catalog::from_blobs(whole).expect("whole"), "{}", dir.display());
        described += streamed.packages.values().map(|package| package.descriptions.len()).sum::<usize>();
    }
    assert!(described > 0, "the heads' descriptions were read again from their blobs");
}

#[test]
fn heads_are_described_whatever_the_order_of_files_and_blobs() {
    let scratch = Scratch::new("order");
    // The bundles come in a file before the one holding their package and channel, one of them pretty-printed
    // and glued to the next.
    let first = serde_json::to_string_pretty(&described("plumbus", "plumbus.v1.0.0", "1.0.0", "old")).expect("json");
    let second = described("plumbus", "plumbus.v1.1.0", "1.1.0", "new").to_string();
    scratch.write("a/bundles.json", &format!("{first}{second}"));
    let entries = json!([{"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]);
    let yaml: String = package_and_channel("plumbus", entries)
        .iter()
        .map(|blob| format!("---\n{}", serde_yaml_ng::to_string(blob).expect("yaml")))
        .collect();
    scratch.write("b/catalog.yaml", &yaml);
    let catalog = Catalog::load_dir(&scratch.0).expect("loads");
    let package = &catalog.packages["plumbus"];
    assert_eq!(package.bundles.len(), 2);
    assert_eq!(package.descriptions.keys().collect::<Vec<_>>(), ["plumbus.v1.1.0"]);
    assert_eq!(package.descriptions["plumbus.v1.1.0"].shown.long_description, "new");
}

#[test]
fn a_catalog_over_a_limit_stops_at_the_blob_that_passed_it_and_names_its_file() {
    let scratch = Scratch::new("limits");
    let mut blobs = package_and_channel("plumbus", json!([{"name": "plumbus.v1.0.0"}]));
    blobs.push(described("plumbus", "plumbus.v1.0.0", "1.0.0", &"words ".repeat(20_000)));
    scratch.write("plumbus/catalog.json", &lines(&blobs));
    let mut other = package_and_channel("fleeb", json!([{"name": "fleeb.v1.0.0"}, {"name": "fleeb.v2.0.0"}]));
    other.push(described("fleeb", "fleeb.v1.0.0", "1.0.0", "f"));
    other.push(described("fleeb", "fleeb.v2.0.0", "2.0.0", "f"));
    scratch.write("fleeb/catalog.json", &lines(&other));
    // Files are read in path order: fleeb's first.
    let fits = Catalog::load_dir(&scratch.0).expect("within the default limits");
    let weight = fits.weight();
    let over = |limits: CatalogLimits| Catalog::load_dir_within(&scratch.0, &limits).expect_err("over a limit");
    let defaults = CatalogLimits::default();
    let cases = [
        (CatalogLimits { max_packages: 1, ..defaults }, OverLimit::Packages(1), "plumbus"),
        (CatalogLimits { max_bundles: 2, ..defaults }, OverLimit::Bundles(2), "plumbus"),
        (CatalogLimits { max_channel_entries: 1, ..defaults }, OverLimit::ChannelEntries(1), "fleeb"),
        (CatalogLimits { max_blob_bytes: 100_000, ..defaults }, OverLimit::Blob(100_000), "plumbus"),
        // The long description is what passes it, once read as the head's.
        (CatalogLimits { max_model_bytes: weight - 1, ..defaults }, OverLimit::ModelBytes(weight - 1), "plumbus"),
    ];
    for (limits, expected, file) in cases {
        let error = over(limits);
        assert!(
            matches!(&error, CatalogError::OverLimit { path, limit } if *limit == expected && path.ends_with(format!("{file}/catalog.json"))),
            "{error:?}"
        );
        assert_eq!(error.category(), "CatalogOverLimit");
        assert!(error.for_good(), "the same content fails again");
    }
    Catalog::load_dir_within(&scratch.0, &CatalogLimits { max_model_bytes: weight, ..defaults }).expect("at the limit");
}

#[test]
fn a_catalog_weighs_what_it_keeps_and_not_what_it_read() {
    let entries = json!([{"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]);
    let catalog = |old: &str, new: &str| {
        let mut blobs = package_and_channel("plumbus", entries.clone());
        blobs.push(described("plumbus", "plumbus.v1.0.0", "1.0.0", old));
        blobs.push(described("plumbus", "plumbus.v1.1.0", "1.1.0", new));
        Catalog::from_blobs(blobs.into_iter().map(|blob| (PathBuf::from("c.json"), blob)).collect()).expect("loads")
    };
    let small = catalog("old", "new").weight();
    assert!(small > 0);
    let long = "x".repeat(100_000);
    assert_eq!(catalog(&long, "new").weight(), small, "a superseded bundle's description is not kept");
    let head = catalog("old", &long).weight();
    // The description's 100,000 bytes, and a third more for the allocator.
    assert!(head >= small + 133_000 && head < small + 135_000, "{small} {head}");
}

#[test]
fn why_a_property_does_not_read_is_kept_short() {
    let mut blob = bundle("plumbus.v1.0.0", "1.0.0");
    blob["properties"].as_array_mut().expect("properties").push(
        json!({"type": "olm.package.required", "value": {"packageName": "x", "versionRange": "y".repeat(50_000)}}),
    );
    let catalog =
        Catalog::from_blobs(blobs(vec![json!({"schema": "olm.package", "name": "plumbus"}), blob])).expect("loads");
    let unreadable = catalog.packages["plumbus"].bundles["plumbus.v1.0.0"].unreadable.clone().expect("unreadable");
    assert!(unreadable.len() <= UNREADABLE_KEPT + 3 && unreadable.ends_with("..."), "{}", unreadable.len());
}

#[test]
fn errors_name_their_file_from_the_image_root() {
    let error =
        CatalogError::Parse { path: PathBuf::from("/cache/sha256-1/rootfs/configs/a.json"), reason: "x".into() };
    assert_eq!(error.within(Path::new("/cache/sha256-1/rootfs")).to_string(), "parsing catalog file configs/a.json: x");
}

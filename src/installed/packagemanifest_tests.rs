use super::*;
use base64::Engine as _;
use std::path::{Path, PathBuf};

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn catalog_source(namespace: &str, name: &str, labels: Value) -> CatalogSource {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"sourceType": "grpc", "image": "quay.io/example/catalog:latest",
                 "displayName": format!("{name} display"), "publisher": "Example"}
    }))
    .unwrap()
}

fn catalog(blobs: Vec<Value>) -> Catalog {
    Catalog::from_blobs(blobs.into_iter().map(|blob| (PathBuf::from("catalog.yaml"), blob)).collect()).unwrap()
}

fn package_blob(name: &str, default_channel: &str) -> Value {
    json!({"schema": "olm.package", "name": name, "defaultChannel": default_channel,
           "description": "The package's own words.",
           "icon": {"base64data": b64(b"<svg>package</svg>"), "mediatype": "image/svg+xml"}})
}

fn channel(package: &str, name: &str, entries: Value) -> Value {
    json!({"schema": "olm.channel", "package": package, "name": name, "entries": entries})
}

/// A bundle described by `olm.csv.metadata` (`metadata`), or by nothing when it is null.
fn bundle(package: &str, name: &str, version: &str, metadata: Value, extra: Vec<Value>) -> Value {
    let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    if !metadata.is_null() {
        properties.push(json!({"type": "olm.csv.metadata", "value": metadata}));
    }
    properties.extend(extra);
    json!({"schema": "olm.bundle", "package": package, "name": name, "image": format!("quay.io/example/{name}"),
           "properties": properties,
           "relatedImages": [{"name": "operator", "image": format!("quay.io/example/{name}-operator")}]})
}

fn metadata(provider: &str) -> Value {
    json!({"displayName": "Plumbus", "provider": {"name": provider, "url": format!("https://{provider}.example")},
           "installModes": [{"type": "AllNamespaces", "supported": true}]})
}

/// `plumbus`: channel `stable` (1.0.0 → 1.1.0) and `alpha` (1.1.0 → 2.0.0-alpha), default `stable`.
fn plumbus() -> Catalog {
    catalog(vec![
        package_blob("plumbus", "stable"),
        channel(
            "plumbus",
            "stable",
            json!([{"name": "plumbus.v1.0.0"},
            {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.0"}]),
        ),
        channel(
            "plumbus",
            "alpha",
            json!([{"name": "plumbus.v1.1.0"},
            {"name": "plumbus.v2.0.0-alpha", "replaces": "plumbus.v1.1.0"}]),
        ),
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", metadata("Old Plumbus Inc"), vec![]),
        bundle("plumbus", "plumbus.v1.1.0", "1.1.0", metadata("Plumbus Inc"), vec![]),
        bundle("plumbus", "plumbus.v2.0.0-alpha", "2.0.0-alpha", metadata("Alpha Plumbus Inc"), vec![]),
    ])
}

fn names(manifests: &[Value]) -> Vec<String> {
    manifests
        .iter()
        .map(|m| {
            format!(
                "{}/{} in {}",
                m["status"]["catalogSource"].as_str().unwrap(),
                m["metadata"]["name"].as_str().unwrap(),
                m["metadata"]["namespace"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_package_manifest_reads_as_olms_newpackagemanifest_builds_it() {
    let source = catalog_source("olm", "community", json!({"team": "catalogs"}));
    let manifest = package_manifest(&source, &plumbus().packages["plumbus"], "team-a").unwrap();
    let description = |provider: &str, version: &str| {
        json!({"displayName": "Plumbus", "version": version,
               "provider": {"name": provider, "url": format!("https://{provider}.example")},
               "description": "The package's own words.",
               "installModes": [{"type": "AllNamespaces", "supported": true}],
               "customresourcedefinitions": {}, "apiservicedefinitions": {},
               "relatedImages": [format!("quay.io/example/plumbus.v{version}-operator")]})
    };
    assert_eq!(
        manifest,
        json!({
            "kind": "PackageManifest", "apiVersion": "packages.operators.coreos.com/v1",
            "metadata": {"name": "plumbus", "namespace": "team-a", "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"team": "catalogs", "catalog": "community", "catalog-namespace": "olm",
                    "provider": "Plumbus Inc", "provider-url": "https://Plumbus Inc.example",
                    "operatorframework.io/os.linux": "supported", "operatorframework.io/arch.amd64": "supported"}},
            "spec": {},
            "status": {
                "catalogSource": "community", "catalogSourceDisplayName": "community display",
                "catalogSourcePublisher": "Example", "catalogSourceNamespace": "olm",
                "provider": {"name": "Plumbus Inc", "url": "https://Plumbus Inc.example"},
                "packageName": "plumbus",
                "channels": [
                    {"name": "alpha", "currentCSV": "plumbus.v2.0.0-alpha",
                     "currentCSVDesc": description("Alpha Plumbus Inc", "2.0.0-alpha"),
                     "entries": [{"name": "plumbus.v2.0.0-alpha", "version": "2.0.0-alpha"},
                                 {"name": "plumbus.v1.1.0", "version": "1.1.0"}]},
                    {"name": "stable", "currentCSV": "plumbus.v1.1.0",
                     "currentCSVDesc": description("Plumbus Inc", "1.1.0"),
                     "entries": [{"name": "plumbus.v1.1.0", "version": "1.1.0"},
                                 {"name": "plumbus.v1.0.0", "version": "1.0.0"}]}],
                "defaultChannel": "stable"}
        }),
        "channels by name, icons stripped, the package's description where the metadata has none, \
         the provider of the default channel"
    );
}

#[test]
fn labels_override_each_other_in_olms_order_and_os_arch_defaults_fill_only_gaps() {
    let source = catalog_source("olm", "community", json!({"provider": "catalog's", "catalog": "mine", "x": "1"}));
    let mut with_labels = metadata("Plumbus Inc");
    with_labels["labels"] = json!({"x": "csv", "operatorframework.io/arch.arm64": "supported"});
    let catalog = catalog(vec![
        package_blob("plumbus", "stable"),
        channel("plumbus", "stable", json!([{"name": "plumbus.v1.0.0"}])),
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", with_labels, vec![]),
    ]);
    let manifest = package_manifest(&source, &catalog.packages["plumbus"], "olm").unwrap();
    assert_eq!(
        manifest["metadata"]["labels"],
        json!({"provider": "Plumbus Inc", "provider-url": "https://Plumbus Inc.example", "catalog": "community",
               "catalog-namespace": "olm", "x": "csv", "operatorframework.io/arch.arm64": "supported",
               "operatorframework.io/os.linux": "supported"}),
        "catalog and provider over the CatalogSource's labels, the CSV's over all; no amd64 beside arm64"
    );
}

#[test]
fn the_default_channel_gives_provider_and_labels_and_falls_back_to_the_first_channel_when_elided() {
    let source = catalog_source("olm", "community", json!({}));
    let manifest = package_manifest(&source, &plumbus().packages["plumbus"], "olm").unwrap();
    assert_eq!(manifest["status"]["provider"]["name"], "Plumbus Inc", "stable's, though alpha comes first");
    let mut no_csv = plumbus();
    let package = no_csv.packages.get_mut("plumbus").unwrap();
    package.descriptions.remove("plumbus.v1.1.0");
    let manifest = package_manifest(&source, package, "olm").unwrap();
    assert_eq!(manifest["status"]["defaultChannel"], "alpha", "stable's head has no CSV: the first channel");
    assert_eq!(manifest["status"]["channels"].as_array().unwrap().len(), 1);
    assert_eq!(manifest["status"]["provider"]["name"], "Alpha Plumbus Inc");
    assert_eq!(manifest["metadata"]["labels"]["provider"], "Alpha Plumbus Inc");
    package.default_channel = None;
    let manifest = package_manifest(&source, package, "olm").unwrap();
    assert_eq!(manifest["status"]["defaultChannel"], "alpha", "no default channel: the first");
}

#[test]
fn a_channel_whose_head_has_no_csv_is_elided_and_a_package_left_without_channels_is_not_shown() {
    let catalog = catalog(vec![
        package_blob("plumbus", "stable"),
        channel("plumbus", "stable", json!([{"name": "plumbus.v1.0.0"}])),
        channel(
            "plumbus",
            "fast",
            json!([{"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0",
            "replaces": "plumbus.v1.0.0"}]),
        ),
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", metadata("Plumbus Inc"), vec![]),
        bundle("plumbus", "plumbus.v1.1.0", "1.1.0", Value::Null, vec![]),
        package_blob("fleeb", "stable"),
        channel("fleeb", "stable", json!([{"name": "fleeb.v1.0.0"}])),
        bundle("fleeb", "fleeb.v1.0.0", "1.0.0", Value::Null, vec![]),
    ]);
    let source = catalog_source("olm", "community", json!({}));
    let manifest = package_manifest(&source, &catalog.packages["plumbus"], "olm").unwrap();
    let channels: Vec<&str> =
        manifest["status"]["channels"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(channels, ["stable"], "fast's head has neither a CSV nor olm.csv.metadata");
    let error = package_manifest(&source, &catalog.packages["fleeb"], "olm").unwrap_err();
    assert_eq!(error.category(), "PackageManifestWithoutChannels");
    assert!(error.to_string().contains("packagemanifest has no valid channels"), "{error}");
    let sources = [Source { catalog_source: &source, catalog: &catalog }];
    assert_eq!(names(&list(&sources, "olm", "olm")), ["community/plumbus in olm"]);
    assert_eq!(get(&sources, "olm", "olm", "fleeb"), None);
}

#[test]
fn entries_leave_out_olm_deprecated_bundles_and_carry_olm_deprecations_messages() {
    let deprecated = json!({"type": "olm.deprecated", "value": {}});
    let catalog = catalog(vec![
        package_blob("plumbus", "stable"),
        channel(
            "plumbus",
            "stable",
            json!([{"name": "plumbus.v1.0.0"}, {"name": "plumbus.v1.0.1",
            "replaces": "plumbus.v1.0.0"}, {"name": "plumbus.v1.1.0", "replaces": "plumbus.v1.0.1"}]),
        ),
        channel("plumbus", "old", json!([{"name": "plumbus.v0.9.0"}])),
        bundle("plumbus", "plumbus.v0.9.0", "0.9.0", metadata("Plumbus Inc"), vec![deprecated.clone()]),
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", metadata("Plumbus Inc"), vec![]),
        bundle("plumbus", "plumbus.v1.0.1", "1.0.1", metadata("Plumbus Inc"), vec![deprecated]),
        bundle("plumbus", "plumbus.v1.1.0", "1.1.0", metadata("Plumbus Inc"), vec![]),
        json!({"schema": "olm.deprecations", "package": "plumbus", "entries": [
            {"reference": {"schema": "olm.package"}, "message": "use fleeb"},
            {"reference": {"schema": "olm.channel", "name": "old"}, "message": "old is over"},
            {"reference": {"schema": "olm.bundle", "name": "plumbus.v1.0.0"}, "message": "1.0.0 leaks"}]}),
    ]);
    let source = catalog_source("olm", "community", json!({}));
    let status = &package_manifest(&source, &catalog.packages["plumbus"], "olm").unwrap()["status"];
    assert_eq!(status["deprecation"], json!({"message": "use fleeb"}));
    let old = &status["channels"][0];
    assert_eq!(old["deprecation"], json!({"message": "old is over"}));
    assert_eq!(old["currentCSV"], "plumbus.v0.9.0", "a deprecated head still heads its channel");
    assert_eq!(old["entries"], Value::Null, "OLM writes null for a channel left without entries");
    let stable = &status["channels"][1];
    assert!(stable.get("deprecation").is_none());
    assert_eq!(
        stable["entries"],
        json!([{"name": "plumbus.v1.1.0", "version": "1.1.0"},
               {"name": "plumbus.v1.0.0", "version": "1.0.0", "deprecation": {"message": "1.0.0 leaks"}}])
    );
}

fn csv_object(name: &str, icon: Option<&[u8]>) -> Value {
    let mut csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "labels": {"operatorframework.io/os.zos": "supported"}},
        "spec": {"version": "v3.0", "displayName": "Plumbus", "provider": {"name": "CSV Inc"},
            "description": "The CSV's own words.",
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "plumbus", "spec": {"template":
                {"spec": {"containers": [{"name": "manager", "image": "quay.io/example/manager:3"}]}}}}]}}}});
    if let Some(icon) = icon {
        csv["spec"]["icon"] = json!([{"base64data": b64(icon), "mediatype": "image/png"}]);
    }
    json!({"type": "olm.bundle.object", "value": {"data": b64(csv.to_string().as_bytes())}})
}

#[test]
fn a_csv_object_is_described_over_csv_metadata_with_its_own_name_images_and_icon() {
    let catalog = catalog(vec![
        package_blob("plumbus", "stable"),
        channel("plumbus", "stable", json!([{"name": "plumbus.v3.0.0"}])),
        bundle(
            "plumbus",
            "plumbus.v3.0.0",
            "3.0.0",
            metadata("Metadata Inc"),
            vec![csv_object("plumbus.v3.0.0-csv", Some(b"\x89PNG csv icon"))],
        ),
    ]);
    let source = catalog_source("olm", "community", json!({}));
    let manifest = package_manifest(&source, &catalog.packages["plumbus"], "olm").unwrap();
    let stable = &manifest["status"]["channels"][0];
    assert_eq!(stable["currentCSV"], "plumbus.v3.0.0-csv");
    assert_eq!(stable["currentCSVDesc"]["version"], "3.0.0", "read tolerantly, printed strictly");
    assert_eq!(stable["currentCSVDesc"]["description"], "The CSV's own words.");
    assert_eq!(stable["currentCSVDesc"]["relatedImages"], json!(["quay.io/example/manager:3"]), "not the FBC's");
    assert!(stable["currentCSVDesc"].get("icon").is_none(), "stripped");
    assert_eq!(manifest["status"]["provider"], json!({"name": "CSV Inc"}));
    assert_eq!(manifest["metadata"]["labels"]["operatorframework.io/os.zos"], "supported");
    assert!(manifest["metadata"]["labels"].get(DEFAULT_OS_LABEL).is_none(), "the CSV names an os");
    assert_eq!(manifest["metadata"]["labels"][DEFAULT_ARCH_LABEL], "supported");
    let sources = [Source { catalog_source: &source, catalog: &catalog }];
    assert_eq!(
        icon(&sources, "team-a", "olm", "plumbus", None, None),
        IconAnswer::Icon {
            data: b"\x89PNG csv icon".to_vec(),
            content_type: "image/png".into(),
            etag: "\"plumbus.stable.plumbus.v3.0.0-csv\"".into()
        }
    );
}

#[test]
fn the_icon_is_the_packages_for_csv_metadata_and_olms_default_when_there_is_none() {
    let source = catalog_source("olm", "community", json!({}));
    let catalog = plumbus();
    let sources = [Source { catalog_source: &source, catalog: &catalog }];
    assert_eq!(
        icon(&sources, "olm", "olm", "plumbus", None, None),
        IconAnswer::Icon {
            data: b"<svg>package</svg>".to_vec(),
            content_type: "image/svg+xml".into(),
            etag: "\"plumbus.stable.plumbus.v1.1.0\"".into()
        },
        "the default channel's"
    );
    let no_icon = self::catalog(vec![
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        channel("plumbus", "stable", json!([{"name": "plumbus.v3.0.0"}])),
        bundle("plumbus", "plumbus.v3.0.0", "3.0.0", Value::Null, vec![csv_object("plumbus.v3.0.0", None)]),
    ]);
    for catalog in [&no_icon, &{
        let mut without = plumbus();
        without.packages.get_mut("plumbus").unwrap().icon = None;
        without
    }] {
        let sources = [Source { catalog_source: &source, catalog }];
        assert_eq!(
            icon(&sources, "olm", "olm", "plumbus", None, None),
            IconAnswer::Icon {
                data: DEFAULT_ICON.as_bytes().to_vec(),
                content_type: "image/svg+xml".into(),
                etag: String::new()
            }
        );
    }
    assert_eq!(icon(&sources, "olm", "olm", "fleeb", None, None), IconAnswer::NotFound);
    assert_eq!(icon(&sources, "olm", "olm", "fleeb", Some("\"x\""), Some("7")), IconAnswer::NotModified, "first");
    assert!(matches!(icon(&sources, "olm", "olm", "plumbus", Some("\"x\""), None), IconAnswer::Icon { .. }));
}

#[test]
fn a_namespace_sees_its_own_catalogs_then_the_global_namespaces() {
    let catalog = plumbus();
    let (own_b, own_a, global, elsewhere) = (
        catalog_source("team-a", "b-catalog", json!({})),
        catalog_source("team-a", "a-catalog", json!({})),
        catalog_source("olm", "community", json!({})),
        catalog_source("team-b", "private", json!({})),
    );
    let sources: Vec<Source<'_>> = [&global, &own_b, &elsewhere, &own_a]
        .into_iter()
        .map(|catalog_source| Source { catalog_source, catalog: &catalog })
        .collect();
    assert_eq!(
        names(&list(&sources, "team-a", "olm")),
        ["a-catalog/plumbus in team-a", "b-catalog/plumbus in team-a", "community/plumbus in team-a"],
        "every same-named package is listed, in the namespace asked for"
    );
    assert_eq!(names(&list(&sources, "olm", "olm")), ["community/plumbus in olm"], "the global namespace once");
    assert_eq!(
        names(&list(&sources, "", "olm")),
        [
            "community/plumbus in olm",
            "a-catalog/plumbus in team-a",
            "b-catalog/plumbus in team-a",
            "private/plumbus in team-b"
        ],
        "across namespaces, each in its catalog's namespace"
    );
    let picked = |namespace| {
        get(&sources, namespace, "olm", "plumbus").map(|m| m["status"]["catalogSource"].as_str().unwrap().to_owned())
    };
    assert_eq!(picked("team-a").as_deref(), Some("a-catalog"), "the namespace's own, first by name");
    assert_eq!(picked("team-c").as_deref(), Some("community"), "else the global namespace's");
    assert_eq!(get(&sources, "team-c", "olm", "plumbus").unwrap()["metadata"]["namespace"], "team-c");
    assert_eq!(get(&sources, "team-c", "olm", "fleeb"), None);
    let visible: Vec<String> = visible(&sources, "team-b", "olm").iter().map(|s| s.catalog_source.name_any()).collect();
    assert_eq!(visible, ["private", "community"]);
}

#[test]
fn a_get_passes_over_a_catalog_whose_package_has_no_channel_to_show() {
    let empty = catalog(vec![
        package_blob("plumbus", "stable"),
        channel("plumbus", "stable", json!([{"name": "plumbus.v1.0.0"}])),
        bundle("plumbus", "plumbus.v1.0.0", "1.0.0", Value::Null, vec![]),
    ]);
    let full = plumbus();
    let (own, global) = (catalog_source("team-a", "own", json!({})), catalog_source("olm", "community", json!({})));
    let sources =
        [Source { catalog_source: &own, catalog: &empty }, Source { catalog_source: &global, catalog: &full }];
    assert_eq!(get(&sources, "team-a", "olm", "plumbus").unwrap()["status"]["catalogSource"], "community");
}

#[test]
fn the_table_has_olms_columns_and_rows_with_the_catalogs_display_name_and_age() {
    let source = catalog_source("olm", "community", json!({}));
    let catalog = plumbus();
    let sources = [Source { catalog_source: &source, catalog: &catalog }];
    let now = Timestamp::from_second(1_767_225_600 + 3 * 86_400 + 5 * 3600).unwrap(); // 2026-01-04T05:00:00Z
    let table = table(list(&sources, "team-a", "olm"), IncludeObject::Metadata, false, now);
    assert_eq!((table["kind"].as_str(), table["apiVersion"].as_str()), (Some("Table"), Some("meta.k8s.io/v1")));
    let columns: Vec<(&str, &str, &str)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap(), c["type"].as_str().unwrap(), c["format"].as_str().unwrap()))
        .collect();
    assert_eq!(columns, [("Name", "string", "name"), ("Catalog", "string", ""), ("Age", "string", "")]);
    assert_eq!(table["columnDefinitions"][1]["description"], "The source catalog for this package");
    assert_eq!(table["rows"][0]["cells"], json!(["plumbus", "community display", "3d5h"]));
    assert_eq!(table["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(table["rows"][0]["object"]["metadata"]["namespace"], "team-a");
    let whole = super::table(list(&sources, "team-a", "olm"), IncludeObject::Object, false, now);
    assert_eq!(whole["rows"][0]["object"]["kind"], "PackageManifest");
    let bare = super::table(list(&sources, "team-a", "olm"), IncludeObject::None, true, now);
    assert!(bare["rows"][0].get("object").is_none());
    assert_eq!(bare["columnDefinitions"], json!([]), "noHeaders");
    let mut undated = list(&sources, "team-a", "olm");
    undated[0]["metadata"]["creationTimestamp"] = Value::Null;
    assert_eq!(super::table(undated, IncludeObject::None, false, now)["rows"][0]["cells"][2], "<unknown>");
}

#[test]
fn ages_read_as_kubernetes_human_duration() {
    let now = Timestamp::from_second(1_000_000_000).unwrap();
    let ago = |seconds: i64| age(Some(Timestamp::from_second(1_000_000_000 - seconds).unwrap()), now);
    let cases = [
        (-5, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (9 * 60 + 5, "9m5s"),
        (179 * 60, "179m"),
        (3 * 3600 + 5 * 60, "3h5m"),
        (7 * 3600, "7h"),
        (47 * 3600, "47h"),
        (3 * 86_400 + 3600, "3d1h"),
        (5 * 86_400, "5d"),
        (400 * 86_400, "400d"),
        (3 * 365 * 86_400 + 10 * 86_400, "3y10d"),
        (9 * 365 * 86_400, "9y"),
    ];
    for (seconds, expected) in cases {
        assert_eq!(ago(seconds), expected, "{seconds}s");
    }
    assert_eq!(age(None, now), "<unknown>");
}

#[test]
fn a_field_selector_names_one_package_or_is_refused_as_olm_refuses_it() {
    assert_eq!(selected_name([]), Ok(None));
    assert_eq!(selected_name([("metadata.name", true, "plumbus")]), Ok(Some("plumbus")));
    assert_eq!(
        selected_name([("metadata.namespace", true, "olm"), ("metadata.name", true, "plumbus")]),
        Ok(Some("plumbus"))
    );
    let refused = selected_name([("metadata.name", false, "plumbus")]).unwrap_err();
    assert_eq!(refused.to_string(), "field label not supported: metadata.name");
    assert_eq!(
        selected_name([("metadata.namespace", true, "olm")]),
        Err(PackageManifestError::FieldLabelNotSupported("metadata.namespace".into()))
    );
    let list = list_object(Vec::new());
    assert_eq!(
        list,
        json!({"kind": "PackageManifestList", "apiVersion": "packages.operators.coreos.com/v1",
        "metadata": {}, "items": []})
    );
}

fn testdata(name: &str) -> Catalog {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc").join(name);
    Catalog::load_dir(&root).unwrap()
}

#[test]
fn a_real_catalog_reads_as_olm_shows_it() {
    let catalog = testdata("visionone-containersecurity");
    let source = catalog_source("olm", "community", json!({}));
    let sources = [Source { catalog_source: &source, catalog: &catalog }];
    let manifest = get(&sources, "default", "olm", "visionone-containersecurity").unwrap();
    let status = &manifest["status"];
    assert_eq!(status["defaultChannel"], "stable");
    let channels = status["channels"].as_array().unwrap();
    let heads: Vec<(&str, &str)> =
        channels.iter().map(|c| (c["name"].as_str().unwrap(), c["currentCSV"].as_str().unwrap())).collect();
    assert_eq!(
        heads,
        [("alpha", "visionone-containersecurity.v0.0.5"), ("stable", "visionone-containersecurity.v0.0.5")]
    );
    let versions: Vec<&str> =
        channels[0]["entries"].as_array().unwrap().iter().map(|e| e["version"].as_str().unwrap()).collect();
    assert_eq!(versions, ["0.0.5", "0.0.4", "0.0.3", "0.0.2", "0.0.1"], "newest first");
    assert_eq!(channels[1]["entries"].as_array().unwrap().len(), 4);
    assert_eq!(status["provider"], json!({"name": "TrendMicro", "url": "trendmicro.com"}));
    let description = &channels[1]["currentCSVDesc"];
    assert_eq!(description["version"], "0.0.5");
    assert_eq!(description["minKubeVersion"], "1.23.0");
    assert_eq!(
        description["relatedImages"],
        json!(["public.ecr.aws/trendmicro/container-security/visionone-containersecurity-operator:v0.0.5"]),
        "the CSV's deployment images; the FBC relatedImages are not read when the bundle carries its CSV"
    );
    assert!(description["annotations"]["alm-examples"].is_string());
    let owned = &description["customresourcedefinitions"]["owned"][0];
    assert_eq!(owned["kind"], "VisionOneContainerSecurity");
    assert!(owned.get("specDescriptors").is_none() && owned.get("resources").is_none(), "cut as OLM cuts it");
    let labels = &manifest["metadata"]["labels"];
    assert_eq!(labels["operatorframework.io/arch.arm64"], "supported", "the CSV's labels");
    assert_eq!(labels["provider"], "TrendMicro");
    let IconAnswer::Icon { data, content_type, etag } =
        icon(&sources, "default", "olm", "visionone-containersecurity", None, None)
    else {
        panic!("an icon")
    };
    assert!(data.starts_with(b"\x89PNG"), "the CSV's PNG, decoded");
    assert_eq!(content_type, "image/png");
    assert_eq!(etag, "\"visionone-containersecurity.stable.visionone-containersecurity.v0.0.5\"");
    // Only channel heads keep a description.
    let package = &catalog.packages["visionone-containersecurity"];
    assert_eq!(package.descriptions.keys().collect::<Vec<_>>(), ["visionone-containersecurity.v0.0.5"]);
}

#[test]
fn every_real_testdata_package_has_a_package_manifest() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/testdata/fbc");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let catalog = testdata(&name);
        let source = catalog_source("olm", &name, json!({}));
        for package in catalog.packages.values() {
            let manifest = package_manifest(&source, package, "olm").unwrap();
            let channels = manifest["status"]["channels"].as_array().unwrap();
            assert_eq!(channels.len(), package.channels.len(), "{}: no channel elided", package.name);
            seen.push(package.name.clone());
        }
    }
    assert!(seen.len() >= 5, "{seen:?}");
}

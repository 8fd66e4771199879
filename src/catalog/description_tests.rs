use super::*;
use serde_json::json;

fn object(value: &Value) -> Value {
    json!({"data": GO_STD.encode(value.to_string())})
}

#[test]
fn versions_read_as_blang_reads_them_tolerantly() {
    assert_eq!(parse_tolerant("v1.2").map(|v| v.to_string()), Ok("1.2.0".to_owned()));
    assert_eq!(parse_tolerant(" 01.002.3-rc.1 ").map(|v| v.to_string()), Ok("1.2.3-rc.1".to_owned()));
    assert_eq!(parse_tolerant("1").map(|v| v.to_string()), Ok("1.0.0".to_owned()));
    assert_eq!(parse_tolerant("1.00.00-rc").map(|v| v.to_string()), Ok("1.0.0-rc".to_owned()), "zeros kept");
    assert!(parse_tolerant("1.2-rc.1").is_err(), "a short version with a pre-release");
    assert!(parse_tolerant("").is_err());
    assert!(parse_tolerant("one").is_err());
}

#[test]
fn base64_decodes_as_gos_std_encoding() {
    assert_eq!(decode_strict("aGVs\nbG8="), Some(b"hello".to_vec()), "line breaks ignored");
    assert_eq!(decode_strict("aGVsbG8"), None, "padding required");
    assert_eq!(decode_strict("aGVsbG9="), Some(b"hello".to_vec()), "unused bits tolerated");
    assert_eq!(decode_streamed("aGVsbG8="), b"hello");
    assert_eq!(decode_streamed("aGVsbG8gd29y!ZA=="), b"hello wor", "the whole quanta before the fault");
}

#[test]
fn the_first_csv_object_wins_over_csv_metadata() {
    let crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}});
    let csv = json!({"kind": "ClusterServiceVersion", "metadata": {"name": "plumbus.v1.0.0-csv",
        "labels": {"tier": "1"}, "annotations": {"capabilities": "Basic Install"}},
        "spec": {"version": "v1.0", "displayName": "Plumbus", "provider": {"name": "Plumbus Inc"},
            "icon": [{"base64data": "aGVsbG8=", "mediatype": "image/png"}, {"base64data": "", "mediatype": "x"}],
            "customresourcedefinitions": {"owned": [{"name": "plumbi.example.com", "version": "v1",
                "kind": "Plumbus", "specDescriptors": [{"path": "size"}], "resources": null}]},
            "install": {"strategy": "deployment", "spec": {"deployments": [{"name": "d", "spec": {"template":
                {"spec": {"containers": [{"image": "op:1"}], "initContainers": [{"image": "init:1"}]}}}}]}},
            "relatedImages": [{"name": "op", "image": "op:1"}, {"name": "extra", "image": "extra:1"}]}});
    let mut sources = Sources::new(json!([{"name": "", "image": "fbc-related:1"}]));
    sources.offer("olm.bundle.object", &mut object(&crd));
    sources.offer("olm.bundle.object", &mut object(&csv));
    sources.offer("olm.csv.metadata", &mut json!({"displayName": "Not this one"}));
    let read = sources.read("plumbus.v1.0.0", &Version::new(1, 0, 0)).expect("described");
    assert_eq!(read.csv_name, "plumbus.v1.0.0-csv", "currentCSV is the CSV's name");
    assert!(!read.from_csv_metadata);
    assert_eq!(read.icon, Some(Icon { data: b"hello".to_vec(), media_type: "image/png".into() }));
    assert_eq!(read.labels["tier"], "1");
    let shown = serde_json::to_value(&read.shown).expect("json");
    assert_eq!(
        shown,
        json!({"displayName": "Plumbus", "version": "1.0.0", "provider": {"name": "Plumbus Inc"},
            "annotations": {"capabilities": "Basic Install"},
            "customresourcedefinitions": {"owned": [{"name": "plumbi.example.com", "version": "v1",
                "kind": "Plumbus"}]},
            "apiservicedefinitions": {},
            "relatedImages": ["extra:1", "init:1", "op:1"]}),
        "descriptors dropped, empty fields left out, images of the deployments and relatedImages, not the FBC's"
    );
}

#[test]
fn csv_metadata_makes_a_csv_named_and_versioned_after_the_bundle() {
    let mut sources = Sources::new(json!([{"name": "a", "image": "b:1"}, {"name": "c", "image": "b:1"},
        {"name": "d", "image": "a:1"}]));
    sources.offer(
        "olm.csv.metadata",
        &mut json!({"displayName": "Plumbus", "labels": {"x": "y"},
        "crdDescriptions": {"owned": [{"name": "plumbi.example.com", "version": "v1", "kind": "Plumbus"}]},
        "nativeAPIs": [{"group": "", "version": "v1", "kind": "Pod"}], "keywords": null,
        "installModes": [{"type": "AllNamespaces", "supported": true}]}),
    );
    let read = sources.read("plumbus.v1.2.3", &Version::new(1, 2, 3)).expect("described");
    assert!(read.from_csv_metadata);
    assert_eq!((read.csv_name.as_str(), read.icon), ("plumbus.v1.2.3", None));
    assert_eq!(
        serde_json::to_value(&read.shown).expect("json"),
        json!({"displayName": "Plumbus", "version": "1.2.3", "provider": {},
            "installModes": [{"type": "AllNamespaces", "supported": true}],
            "customresourcedefinitions": {"owned": [{"name": "plumbi.example.com", "version": "v1",
                "kind": "Plumbus"}]},
            "apiservicedefinitions": {},
            "nativeApis": [{"group": "", "version": "v1", "kind": "Pod"}],
            "relatedImages": ["a:1", "b:1"]})
    );
}

#[test]
fn a_bundle_with_no_csv_or_unreadable_metadata_has_no_description() {
    let none = Sources::new(Value::Null);
    assert!(none.read("b", &Version::new(1, 0, 0)).expect_err("none").contains("neither"));
    let mut two = Sources::new(Value::Null);
    two.offer("olm.csv.metadata", &mut json!({}));
    two.offer("olm.csv.metadata", &mut json!({}));
    assert!(two.read("b", &Version::new(1, 0, 0)).is_err(), "OLM refuses more than one");
    let mut bad = Sources::new(Value::Null);
    bad.offer("olm.csv.metadata", &mut json!({"displayName": 7}));
    assert!(bad.read("b", &Version::new(1, 0, 0)).is_err());
    let mut bad_version = Sources::new(Value::Null);
    bad_version.offer(
        "olm.bundle.object",
        &mut object(&json!({"kind": "ClusterServiceVersion",
        "spec": {"version": "one"}})),
    );
    assert!(bad_version.read("b", &Version::new(1, 0, 0)).expect_err("refused").contains("one"));
    let mut no_version = Sources::new(Value::Null);
    no_version.offer("olm.bundle.object", &mut object(&json!({"kind": "ClusterServiceVersion"})));
    assert_eq!(no_version.read("b", &Version::new(1, 0, 0)).expect("read").shown.version, "0.0.0");
}

#[test]
fn a_package_icon_decodes_or_is_left_out() {
    assert_eq!(
        Icon::of_package(&json!({"base64data": "aGVsbG8=", "mediatype": "image/svg+xml"})),
        Some(Icon { data: b"hello".to_vec(), media_type: "image/svg+xml".into() })
    );
    assert_eq!(Icon::of_package(&json!({"base64data": "not base64!"})), None);
    assert_eq!(Icon::of_package(&Value::Null), None);
    assert_eq!(Icon::of_package(&json!({"mediatype": "image/png"})).map(|icon| icon.data), Some(Vec::new()));
}

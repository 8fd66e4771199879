//! A bundle's properties as `opm render` writes them into a catalog (operator-registry's
//! `ObjectsAndPropertiesFromBundle`), and OLM v0's `operatorframework.io/properties` annotation made of them, which
//! OLM's InstallPlan writes on every CSV it installs from a catalog: the resolver reads a CSV's package and APIs from
//! it, so an installed CSV without it is an anonymous package competing with its own catalog bundle for its APIs.
//! Computed from the bundle image itself (the image is what an Install applies); for a catalog rendered by `opm`
//! from the same image, the properties are the catalog's. Pure functions.

use std::collections::BTreeSet;

use serde_json::Value;

use super::gohash;
use super::model::{Bundle, Property};

/// Property types `opm` keeps out of the annotation (they inline whole objects: the CSV would double in size).
const NOT_PROJECTED: [&str; 2] = ["olm.bundle.object", "olm.csv.metadata"];

/// One property as Go writes it: its type and the JSON text of its value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Rendered {
    pub property_type: String,
    pub value: String,
}

fn gvk(property_type: &str, group: &str, version: &str, kind: &str) -> Rendered {
    let text = format!(
        "{{\"group\":{},\"kind\":{},\"version\":{}}}",
        gohash::string(group),
        gohash::string(kind),
        gohash::string(version)
    );
    Rendered { property_type: property_type.to_owned(), value: text }
}

/// `olm.package`: operator-registry's `Package` struct, its fields in declaration order, `release` only when set.
fn package(name: &str, version: &str, release: Option<&str>) -> Rendered {
    let release = release.filter(|r| !r.is_empty()).map(|r| format!(",\"release\":{}", gohash::string(r)));
    let text = format!(
        "{{\"packageName\":{},\"version\":{}{}}}",
        gohash::string(name),
        gohash::string(version),
        release.unwrap_or_default()
    );
    Rendered { property_type: "olm.package".to_owned(), value: text }
}

fn text_of(value: &Value, key: &str) -> String {
    value.get(key).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The `(group, version, kind)` of every version each CustomResourceDefinition of the bundle serves.
fn crd_apis(bundle: &Bundle) -> Vec<(String, String, String)> {
    let mut apis = Vec::new();
    for manifest in bundle.objects.iter().filter(|m| m.object["kind"] == "CustomResourceDefinition") {
        let spec = &manifest.object["spec"];
        let (group, kind) = (text_of(spec, "group"), text_of(&spec["names"], "kind"));
        let versions = spec["versions"].as_array().into_iter().flatten().map(|v| text_of(v, "name"));
        // apiextensions.k8s.io/v1beta1's single `version` counts too.
        let single = spec.get("version").and_then(Value::as_str).map(str::to_owned);
        for version in versions.chain(single).filter(|v| !v.is_empty()) {
            apis.push((group.clone(), version, kind.clone()));
        }
    }
    apis
}

/// The bundle's properties as `opm render` lists them, without those kept out of the annotation: its package (from
/// `properties.yaml` if it names one, else `annotations.yaml`'s package at the CSV's version), every API it provides
/// (`olm.gvk`: its CRDs' versions, its owned APIServices, `properties.yaml`'s) and requires (`olm.gvk.required`: the
/// CSV's required CRDs and APIServices, `dependencies.yaml`'s), `dependencies.yaml`'s packages
/// (`olm.package.required`), then every other property of both files; sorted by type, then value text.
pub fn rendered(bundle: &Bundle) -> Vec<Rendered> {
    let spec = &bundle.csv.spec;
    let mut provided: BTreeSet<Rendered> = BTreeSet::new();
    let mut required: BTreeSet<Rendered> = BTreeSet::new();
    let mut package_property = None;
    let mut others = Vec::new();
    let other = |p: &Property| Rendered { property_type: p.property_type.clone(), value: gohash::value(&p.value) };
    for property in &bundle.properties {
        match property.property_type.as_str() {
            "olm.gvk" => {
                let v = &property.value;
                provided.insert(gvk("olm.gvk", &text_of(v, "group"), &text_of(v, "version"), &text_of(v, "kind")));
            }
            "olm.package" => {
                let v = &property.value;
                let release = v.get("release").and_then(Value::as_str);
                package_property = Some(package(&text_of(v, "packageName"), &text_of(v, "version"), release));
            }
            _ => others.push(other(property)),
        }
    }
    let mut package_required = Vec::new();
    for dependency in &bundle.dependencies {
        let v = &dependency.value;
        match dependency.property_type.as_str() {
            "olm.gvk" => {
                required.insert(gvk(
                    "olm.gvk.required",
                    &text_of(v, "group"),
                    &text_of(v, "version"),
                    &text_of(v, "kind"),
                ));
            }
            "olm.package" => package_required.push(Rendered {
                property_type: "olm.package.required".to_owned(),
                value: format!(
                    "{{\"packageName\":{},\"versionRange\":{}}}",
                    gohash::string(&text_of(v, "packageName")),
                    gohash::string(&text_of(v, "version"))
                ),
            }),
            _ => others.push(other(dependency)),
        }
    }
    for (group, version, kind) in crd_apis(bundle) {
        provided.insert(gvk("olm.gvk", &group, &version, &kind));
    }
    let crds = spec.custom_resource_definitions.clone().unwrap_or_default();
    let services = spec.api_service_definitions.clone().unwrap_or_default();
    for owned in &services.owned {
        provided.insert(gvk("olm.gvk", &owned.group, &owned.version, &owned.kind));
    }
    for needed in &crds.required {
        // A required CRD is named `<plural>.<group>`; OLM's registry refuses a name without a group.
        if let Some((_, group)) = needed.name.split_once('.') {
            required.insert(gvk("olm.gvk.required", group, &needed.version, &needed.kind));
        }
    }
    for needed in &services.required {
        required.insert(gvk("olm.gvk.required", &needed.group, &needed.version, &needed.kind));
    }
    let package_property = package_property.unwrap_or_else(|| {
        let version = spec.version.as_deref().unwrap_or_default();
        package(&bundle.annotations.package, version, spec.release.as_deref())
    });
    let mut all: Vec<Rendered> = std::iter::once(package_property)
        .chain(provided)
        .chain(required)
        .chain(package_required)
        .chain(others)
        .filter(|p| !NOT_PROJECTED.contains(&p.property_type.as_str()))
        .collect();
    all.sort();
    all
}

/// OLM v0's `operatorframework.io/properties` annotation of the properties: `{"properties":[{type, value}, …]}`.
pub fn annotation(properties: &[Rendered]) -> String {
    let listed: Vec<String> = properties
        .iter()
        .map(|p| format!("{{\"type\":{},\"value\":{}}}", gohash::string(&p.property_type), p.value))
        .collect();
    format!("{{\"properties\":[{}]}}", listed.join(","))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::bundle::fixtures::bundle;

    fn crd(group: &str, kind: &str, versions: &[&str]) -> Value {
        let versions: Vec<Value> =
            versions.iter().map(|v| json!({"name": v, "served": true, "storage": true})).collect();
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": format!("{}s.{group}", kind.to_lowercase())},
               "spec": {"group": group, "names": {"kind": kind, "plural": format!("{}s", kind.to_lowercase())},
                        "scope": "Namespaced", "versions": versions}})
    }

    fn plumbus() -> Bundle {
        let mut bundle = bundle(
            json!({"version": "2.1.0",
                   "customresourcedefinitions": {
                       "owned": [{"name": "plumbai.how.theydoit.com", "version": "v1", "kind": "Plumbus"}],
                       "required": [{"name": "grumbos.manufacturing.how.theydoit.com", "version": "v1alpha1", "kind": "Grumbo"}]},
                   "apiservicedefinitions": {
                       "owned": [{"name": "fleebs", "group": "fleeb.example.com", "version": "v1", "kind": "Fleeb"}]}}),
            vec![crd("how.theydoit.com", "Plumbus", &["v1", "v2alpha1"])],
        );
        bundle.annotations.package = "plumbus".into();
        bundle
    }

    #[test]
    fn a_bundle_without_metadata_files_lists_its_package_and_apis_as_opm_renders_them() {
        let text = annotation(&rendered(&plumbus()));
        assert_eq!(
            text,
            concat!(
                r#"{"properties":["#,
                r#"{"type":"olm.gvk","value":{"group":"fleeb.example.com","kind":"Fleeb","version":"v1"}},"#,
                r#"{"type":"olm.gvk","value":{"group":"how.theydoit.com","kind":"Plumbus","version":"v1"}},"#,
                r#"{"type":"olm.gvk","value":{"group":"how.theydoit.com","kind":"Plumbus","version":"v2alpha1"}},"#,
                r#"{"type":"olm.gvk.required","value":{"group":"manufacturing.how.theydoit.com","kind":"Grumbo","version":"v1alpha1"}},"#,
                r#"{"type":"olm.package","value":{"packageName":"plumbus","version":"2.1.0"}}"#,
                "]}"
            )
        );
        let parsed: Value = serde_json::from_str(&text).expect("the annotation is JSON");
        assert_eq!(parsed["properties"].as_array().map(Vec::len), Some(5));
    }

    #[test]
    fn metadata_files_add_their_properties_and_dependencies_without_duplicates() {
        let mut bundle = plumbus();
        let property = |t: &str, value: Value| Property { property_type: t.into(), value };
        bundle.properties = vec![
            property("olm.package", json!({"packageName": "plumbus", "version": "2.1.0", "release": "2"})),
            property("olm.gvk", json!({"group": "how.theydoit.com", "kind": "Plumbus", "version": "v1"})),
            property("olm.maxOpenShiftVersion", json!("4.18")),
            property("olm.bundle.object", json!({"data": "e30="})),
        ];
        bundle.dependencies = vec![
            property("olm.package", json!({"packageName": "grumbo", "version": ">=1.0.0"})),
            property(
                "olm.gvk",
                json!({"group": "manufacturing.how.theydoit.com", "kind": "Grumbo", "version": "v1alpha1"}),
            ),
        ];
        let listed: Vec<(String, String)> = rendered(&bundle).into_iter().map(|p| (p.property_type, p.value)).collect();
        let types: Vec<&str> = listed.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            types,
            [
                "olm.gvk",
                "olm.gvk",
                "olm.gvk",
                "olm.gvk.required",
                "olm.maxOpenShiftVersion",
                "olm.package",
                "olm.package.required"
            ],
            "one olm.gvk per API, the bundle object left out: {listed:?}"
        );
        assert!(listed.contains(&("olm.maxOpenShiftVersion".into(), r#""4.18""#.into())));
        assert!(listed
            .contains(&("olm.package".into(), r#"{"packageName":"plumbus","version":"2.1.0","release":"2"}"#.into())));
        assert!(listed.contains(&(
            "olm.package.required".into(),
            r#"{"packageName":"grumbo","versionRange":"\u003e=1.0.0"}"#.into()
        )));
    }

    #[test]
    fn a_v1beta1_crds_single_version_counts_and_a_required_crd_without_group_is_left_out() {
        let mut bundle = bundle(
            json!({"version": "1.0.0",
                   "customresourcedefinitions": {"required": [{"name": "nogroup", "version": "v1", "kind": "X"}]}}),
            vec![json!({"apiVersion": "apiextensions.k8s.io/v1beta1", "kind": "CustomResourceDefinition",
                        "spec": {"group": "a.example.com", "version": "v1beta1", "names": {"kind": "A"}}})],
        );
        bundle.annotations.package = "a".into();
        let types: Vec<String> =
            rendered(&bundle).into_iter().map(|p| format!("{} {}", p.property_type, p.value)).collect();
        assert_eq!(
            types,
            [
                r#"olm.gvk {"group":"a.example.com","kind":"A","version":"v1beta1"}"#,
                r#"olm.package {"packageName":"a","version":"1.0.0"}"#
            ]
        );
    }
}

//! What the aggregated API server says about itself: discovery (`/apis`, the group, each group-version's
//! APIResourceList: what the aggregation layer checks and serves to kubectl) and the OpenAPI v3 documents
//! kube-aggregator merges so that `kubectl explain installed` and `kubectl explain packagemanifests` work. The
//! Installed schema embeds the CSV and Subscription schemas of the project's own CRDs, so the document says what the
//! objects hold. Two group-versions: `v1` (OLM v0's PackageManifests, preferred, as OLM's packageserver serves only
//! it) and `v2alpha1` (Installed). Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::CustomResourceExt;
use serde_json::{json, Value};
use sha2::Digest;

use super::packagemanifest;
use super::synthesize::{GROUP, KIND, VERSION};
use crate::api::v1alpha1::{ClusterServiceVersion, Subscription};

/// The plural the API serves Installed objects at.
pub const INSTALLED: &str = "installed";

/// A group-version this server serves: its version and APIResourceList resources.
fn resources(version: &str) -> Option<Value> {
    match version {
        VERSION => Some(json!([{
            "name": INSTALLED, "singularName": INSTALLED, "namespaced": true, "kind": KIND,
            "verbs": ["get", "list", "watch"], "categories": ["olm"],
        }])),
        packagemanifest::VERSION => Some(json!([
            {"name": packagemanifest::RESOURCE, "singularName": "packagemanifest", "namespaced": true,
             "kind": packagemanifest::KIND, "verbs": ["get", "list"]},
            {"name": format!("{}/icon", packagemanifest::RESOURCE), "singularName": "", "namespaced": true,
             "kind": packagemanifest::KIND, "verbs": ["get"]},
        ])),
        _ => None,
    }
}

/// Whether `resource` (and `subresource`) of `version` is served.
pub fn serves(version: &str, resource: &str, subresource: Option<&str>) -> bool {
    let name = match subresource {
        Some(subresource) => format!("{resource}/{subresource}"),
        None => resource.to_owned(),
    };
    resources(version)
        .and_then(|list| list.as_array().cloned())
        .is_some_and(|list| list.iter().any(|r| r["name"] == name))
}

/// The versions served, preferred first.
pub const VERSIONS: &[&str] = &[packagemanifest::VERSION, VERSION];

pub fn group() -> Value {
    let versions: Vec<Value> =
        VERSIONS.iter().map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v})).collect();
    json!({"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": versions,
           "preferredVersion": versions.first()})
}

pub fn group_list() -> Value {
    let mut group = group();
    if let Some(object) = group.as_object_mut() {
        object.remove("kind");
        object.remove("apiVersion");
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})
}

/// The APIResourceList of `version`, when served.
pub fn resource_list(version: &str) -> Option<Value> {
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": format!("{GROUP}/{version}"),
                "resources": resources(version)?}))
}

/// The path an OpenAPI v3 document of `version` is listed at (without `/openapi/v3/`).
fn document_path(version: &str) -> String {
    format!("apis/{GROUP}/{version}")
}

/// The OpenAPI v3 index: each group-version's document, at a URL carrying the hash of its content. Made once: the
/// documents are this build's, and kube-apiserver's aggregator asks for the index every minute for each APIService,
/// fetching a document only when its hash is new to it; each index made anew built both documents (the CSV's and the
/// Subscription's schemas among them) only to hash them.
pub fn openapi_index() -> Value {
    static INDEX: std::sync::LazyLock<Value> = std::sync::LazyLock::new(built_openapi_index);
    INDEX.clone()
}

fn built_openapi_index() -> Value {
    let mut paths = serde_json::Map::new();
    for version in VERSIONS {
        if let Some(document) = openapi_document(version) {
            let hash = hex_sha512(&document);
            paths.insert(
                document_path(version),
                json!({"serverRelativeURL": format!("/openapi/v3/{}?hash={hash}", document_path(version))}),
            );
        }
    }
    json!({"paths": paths})
}

fn hex_sha512(document: &Value) -> String {
    let digest = sha2::Sha512::digest(document.to_string().as_bytes());
    digest.iter().map(|byte| format!("{byte:02X}")).collect()
}

/// The OpenAPI v3 document at `path` (after `/openapi/v3/`), with the hash of its content.
pub fn openapi_at(path: &str) -> Option<(Value, String)> {
    let version = VERSIONS.iter().find(|version| document_path(version) == path)?;
    let document = openapi_document(version)?;
    let hash = hex_sha512(&document);
    Some((document, hash))
}

fn crd_schema(
    crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> Value {
    crd.spec
        .versions
        .first()
        .and_then(|version| version.schema.as_ref())
        .and_then(|schema| serde_json::to_value(&schema.open_api_v3_schema).ok())
        .unwrap_or_else(|| json!({"type": "object"}))
}

fn object_meta_schemas() -> serde_json::Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    generator.subschema_for::<ObjectMeta>();
    generator.take_definitions(true)
}

/// A GET operation on `kind` of `version`, answering `schema`.
fn operation(version: &str, kind: &str, action: &str, what: &str, schema: &str) -> Value {
    json!({"get": {
        "description": format!("{action} {what}"),
        "operationId": format!("{action}{kind}"),
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema":
            {"$ref": format!("#/components/schemas/{GROUP}.{version}.{schema}")}}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": GROUP, "version": version, "kind": kind},
    }})
}

fn type_meta() -> Value {
    json!({
        "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
        "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
    })
}

/// The list kind of `kind`.
fn list_schema(version: &str, kind: &str) -> Value {
    json!({
        "description": format!("A list of {kind} objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{GROUP}.{version}.{kind}")}},
            "metadata": {"type": "object", "properties": {"resourceVersion": {"type": "string"}}},
        },
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": version, "kind": format!("{kind}List")}],
    })
}

fn installed_schema(meta_ref: &str) -> Value {
    let mut properties = type_meta();
    properties["metadata"] = json!({"allOf": [{"$ref": meta_ref}],
        "description": "Standard object's metadata: the name is the CSV's, the namespace the one asked for."});
    properties["status"] = json!({
        "type": "object",
        "description": "What the operator is: the Subscription that installed it and its ClusterServiceVersion, without what only the operator's namespace may read.",
        "properties": {
            "subscription": crd_schema(&Subscription::crd()),
            "clusterServiceVersion": crd_schema(&ClusterServiceVersion::crd()),
        },
    });
    json!({
        "description": "Installed is a resource generated from installed operator CSVs and their Subscriptions: \
            one exists in a namespace for each operator installed to watch it, named after its CSV.",
        "type": "object",
        "properties": properties,
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": VERSION, "kind": KIND}],
    })
}

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn package_manifest_schema(meta_ref: &str) -> Value {
    let mut properties = type_meta();
    properties["metadata"] = json!({"allOf": [{"$ref": meta_ref}], "description": "Standard object's metadata."});
    properties["spec"] =
        json!({"type": "object", "description": "PackageManifestSpec defines the desired state of PackageManifest"});
    let description = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "description": "CSVDescription: the head CSV's display name, version, provider, annotations, keywords, links, maintainers, maturity, description, install modes, owned and required APIs, minimum Kubernetes version and related images."});
    let channel = json!({"type": "object", "description": "PackageChannel defines a single channel under a package, pointing to a version of that package.", "properties": {
        "name": string("name is the name of the channel, e.g. `alpha` or `stable`"),
        "currentCSV": string("currentCSV is a reference to the CSV that is the head of the channel"),
        "currentCSVDesc": description,
        "entries": {"type": "array", "description": "entries lists all CSVs in the channel, by their upgrade edges.", "items": {"type": "object", "properties": {
            "name": string("name is the name of the bundle for this entry."),
            "version": string("version is the version of the bundle for this entry.")}}},
        "deprecation": {"type": "object", "properties": {"message": string("message is the deprecation message")}},
    }});
    properties["status"] = json!({"type": "object", "description": "PackageManifestStatus represents the current status of the PackageManifest", "properties": {
        "catalogSource": string("CatalogSource is the name of the CatalogSource this package belongs to"),
        "catalogSourceDisplayName": string("CatalogSourceDisplayName is the display name of the CatalogSource"),
        "catalogSourcePublisher": string("CatalogSourcePublisher is the publisher of the CatalogSource"),
        "catalogSourceNamespace": string("CatalogSourceNamespace is the namespace of the owning CatalogSource"),
        "provider": {"type": "object", "description": "Provider is the provider of the PackageManifest's default CSV", "properties": {
            "name": string("name of the provider"), "url": string("url of the provider")}},
        "packageName": string("PackageName is the name of the overall package, ala `etcd`."),
        "deprecation": {"type": "object", "properties": {"message": string("message is the deprecation message")}},
        "channels": {"type": "array", "description": "Channels are the declared channels for the package, ala `stable` or `alpha`.", "items": channel},
        "defaultChannel": string("DefaultChannel is, if specified, the name of the default channel for the package."),
    }});
    json!({
        "description": "PackageManifest holds information about a package, which is a reference to one (or more) channels under a single package.",
        "type": "object",
        "properties": properties,
        "x-kubernetes-group-version-kind": [{"group": GROUP, "version": packagemanifest::VERSION, "kind": packagemanifest::KIND}],
    })
}

fn openapi_document(version: &str) -> Option<Value> {
    let mut schemas = object_meta_schemas();
    let meta_ref = schemas
        .keys()
        .find(|name| name.ends_with("ObjectMeta"))
        .map(|name| format!("#/components/schemas/{name}"))
        .unwrap_or_default();
    let prefix = format!("/apis/{GROUP}/{version}");
    let (kind, plural, schema) = match version {
        VERSION => (KIND, INSTALLED, installed_schema(&meta_ref)),
        packagemanifest::VERSION => {
            (packagemanifest::KIND, packagemanifest::RESOURCE, package_manifest_schema(&meta_ref))
        }
        _ => return None,
    };
    schemas.insert(format!("{GROUP}.{version}.{kind}"), schema);
    schemas.insert(format!("{GROUP}.{version}.{kind}List"), list_schema(version, kind));
    let list = format!("{kind}List");
    let paths = json!({
        format!("{prefix}/{plural}"): operation(version, kind, "list", "objects of all namespaces", &list),
        format!("{prefix}/namespaces/{{namespace}}/{plural}"): operation(version, kind, "list", "objects of a namespace", &list),
        format!("{prefix}/namespaces/{{namespace}}/{plural}/{{name}}"): operation(version, kind, "get", "an object", kind),
    });
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "olmv2", "version": version},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_installed_read_only_and_namespaced() {
        let list = resource_list(VERSION).unwrap();
        assert_eq!(list["groupVersion"], "packages.operators.coreos.com/v2alpha1");
        let installed = &list["resources"][0];
        assert_eq!((installed["name"].as_str(), installed["kind"].as_str()), (Some("installed"), Some("Installed")));
        assert_eq!(installed["namespaced"], true);
        assert_eq!(installed["verbs"], json!(["get", "list", "watch"]), "no write verb: writes are 405");
        assert!(resource_list("v9").is_none());
        assert_eq!(group()["preferredVersion"]["version"], "v1", "OLM's packageserver serves v1 only");
        let packages = resource_list("v1").unwrap();
        assert_eq!(packages["resources"][0]["name"], "packagemanifests");
        assert_eq!(packages["resources"][0]["verbs"], json!(["get", "list"]), "OLM serves no watch");
        assert!(serves("v1", "packagemanifests", Some("icon")));
        assert!(!serves("v1", "installed", None));
        assert!(!serves("v2alpha1", "installed", Some("status")));
        assert_eq!(group_list()["groups"][0]["name"], GROUP);
    }

    #[test]
    fn the_openapi_document_describes_installed_for_kubectl_explain() {
        let index = openapi_index();
        let url = index["paths"]["apis/packages.operators.coreos.com/v2alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap()
            .to_owned();
        let (document, hash) = openapi_at("apis/packages.operators.coreos.com/v2alpha1").unwrap();
        assert!(url.ends_with(&format!("?hash={hash}")));
        let installed = &document["components"]["schemas"]["packages.operators.coreos.com.v2alpha1.Installed"];
        assert_eq!(installed["x-kubernetes-group-version-kind"][0]["kind"], "Installed");
        let csv = &installed["properties"]["status"]["properties"]["clusterServiceVersion"];
        assert!(csv["properties"]["spec"]["properties"]["version"].is_object(), "the CSV's own schema");
        let meta = installed["properties"]["metadata"]["allOf"][0]["$ref"].as_str().unwrap();
        let name = meta.trim_start_matches("#/components/schemas/");
        assert!(document["components"]["schemas"][name]["properties"]["name"].is_object(), "{meta} is in the document");
        assert!(openapi_at("apis/packages.operators.coreos.com/v9").is_none());
        let (packages, _) = openapi_at("apis/packages.operators.coreos.com/v1").unwrap();
        let manifest = &packages["components"]["schemas"]["packages.operators.coreos.com.v1.PackageManifest"];
        assert_eq!(manifest["x-kubernetes-group-version-kind"][0]["kind"], "PackageManifest");
        assert!(
            manifest["properties"]["status"]["properties"]["channels"]["items"]["properties"]["currentCSV"].is_object()
        );
    }
}

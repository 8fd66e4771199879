//! The definitions of the built-in kinds as kube-apiserver publishes them, made once (they never change): generated
//! from the k8s-openapi types, whose `JsonSchema` names each type by its Kubernetes definition name; given what the
//! Go types' markers add (`extensions`), the forms kube-openapi gives its special types (int-or-string, quantity,
//! the untyped `JSON` of CRD schemas), `x-kubernetes-group-version-kind` on each kind and a `<Kind>List` definition
//! per listable kind. They are kept in the OpenAPI v2 form (`#/definitions/` references, descriptions beside
//! `$ref`); `v3` rewrites them for v3 documents.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use k8s_openapi::api::{admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn};
use k8s_openapi::api::{authorization::v1 as authz, autoscaling::v1 as autoscaling, coordination::v1 as coordination};
use k8s_openapi::api::{batch::v1 as batch, networking::v1 as networking};
use k8s_openapi::api::{core::v1 as core, events::v1 as events, rbac::v1 as rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;
use k8s_openapi::schemars::generate::SchemaSettings;
use k8s_openapi::schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::extensions;

pub const REF_PREFIX: &str = "#/definitions/";
pub const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
pub const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub const INT_OR_STRING: &str = "io.k8s.apimachinery.pkg.util.intstr.IntOrString";
pub const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

type Generate = fn(&mut SchemaGenerator) -> Schema;

fn of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The built-in kinds with a definition: those `resources` serves, the kinds of their subresources and `Status`;
/// `true` where the kind has a list kind.
const KINDS: &[(&str, &str, Generate, bool)] = &[
    ("", "Namespace", of::<core::Namespace>, true),
    ("", "ServiceAccount", of::<core::ServiceAccount>, true),
    ("", "Secret", of::<core::Secret>, true),
    ("", "ConfigMap", of::<core::ConfigMap>, true),
    ("", "Service", of::<core::Service>, true),
    ("", "Pod", of::<core::Pod>, true),
    ("", "Event", of::<core::Event>, true),
    ("", "Endpoints", of::<core::Endpoints>, true),
    ("", "PersistentVolumeClaim", of::<core::PersistentVolumeClaim>, true),
    ("", "PersistentVolume", of::<core::PersistentVolume>, true),
    ("", "ReplicationController", of::<core::ReplicationController>, true),
    ("", "Status", of::<meta::Status>, false),
    ("apps", "Deployment", of::<apps::Deployment>, true),
    ("apps", "ReplicaSet", of::<apps::ReplicaSet>, true),
    ("apps", "DaemonSet", of::<apps::DaemonSet>, true),
    ("apps", "StatefulSet", of::<apps::StatefulSet>, true),
    ("batch", "Job", of::<batch::Job>, true),
    ("batch", "CronJob", of::<batch::CronJob>, true),
    ("networking.k8s.io", "Ingress", of::<networking::Ingress>, true),
    ("rbac.authorization.k8s.io", "Role", of::<rbac::Role>, true),
    ("rbac.authorization.k8s.io", "RoleBinding", of::<rbac::RoleBinding>, true),
    ("rbac.authorization.k8s.io", "ClusterRole", of::<rbac::ClusterRole>, true),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding", of::<rbac::ClusterRoleBinding>, true),
    ("apiextensions.k8s.io", "CustomResourceDefinition", of::<apiextensions::CustomResourceDefinition>, true),
    ("apiregistration.k8s.io", "APIService", of::<apiregistration::APIService>, true),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
        of::<admission::ValidatingWebhookConfiguration>,
        true,
    ),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
        of::<admission::MutatingWebhookConfiguration>,
        true,
    ),
    ("coordination.k8s.io", "Lease", of::<coordination::Lease>, true),
    ("events.k8s.io", "Event", of::<events::Event>, true),
    ("authorization.k8s.io", "SubjectAccessReview", of::<authz::SubjectAccessReview>, false),
    ("authorization.k8s.io", "SelfSubjectAccessReview", of::<authz::SelfSubjectAccessReview>, false),
    ("authorization.k8s.io", "LocalSubjectAccessReview", of::<authz::LocalSubjectAccessReview>, false),
    ("authorization.k8s.io", "SelfSubjectRulesReview", of::<authz::SelfSubjectRulesReview>, false),
    ("authentication.k8s.io", "TokenReview", of::<authn::TokenReview>, false),
    ("authentication.k8s.io", "SelfSubjectReview", of::<authn::SelfSubjectReview>, false),
    ("authentication.k8s.io", "TokenRequest", of::<authn::TokenRequest>, false),
    ("autoscaling", "Scale", of::<autoscaling::Scale>, false),
];

/// Definitions the operations refer to besides the kinds.
const OPERATION_TYPES: &[Generate] = &[of::<meta::DeleteOptions>, of::<meta::Patch>, of::<meta::ListMeta>];

/// Kinds whose `metadata` kube-apiserver's definition requires (a `json:"metadata"` without `omitempty` or
/// `+optional`); k8s-openapi marks it required on every kind.
const METADATA_REQUIRED: &[&str] = &["io.k8s.api.core.v1.Event"];

/// Other definitions whose required fields kube-openapi derives otherwise than k8s-openapi (which requires the
/// defaulted `name` of local object references, and relaxes `eventTime`).
const REQUIRED: &[(&str, &[&str])] = &[
    ("io.k8s.api.core.v1.LocalObjectReference", &[]),
    ("io.k8s.api.core.v1.ConfigMapEnvSource", &[]),
    ("io.k8s.api.core.v1.ConfigMapProjection", &[]),
    ("io.k8s.api.core.v1.ConfigMapVolumeSource", &[]),
    ("io.k8s.api.core.v1.SecretEnvSource", &[]),
    ("io.k8s.api.core.v1.SecretProjection", &[]),
    ("io.k8s.api.core.v1.ConfigMapKeySelector", &["key"]),
    ("io.k8s.api.core.v1.SecretKeySelector", &["key"]),
    ("io.k8s.api.events.v1.Event", &["eventTime"]),
];

/// The built-in definitions and where each kind's is.
#[derive(Debug)]
pub struct Builtin {
    pub definitions: BTreeMap<String, Value>,
    /// The definition of each kind and list kind, by (group, kind).
    pub kinds: BTreeMap<(String, String), String>,
    /// The `apiVersion` and `kind` properties every kind has.
    pub type_meta: Map<String, Value>,
}

impl Builtin {
    pub fn get() -> &'static Builtin {
        static BUILTIN: OnceLock<Builtin> = OnceLock::new();
        BUILTIN.get_or_init(build)
    }

    pub fn kind(&self, group: &str, kind: &str) -> Option<&str> {
        self.kinds.get(&(group.to_owned(), kind.to_owned())).map(String::as_str)
    }
}

/// `{"$ref": ...}` to a definition.
pub fn reference(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}

/// The name a `$ref` points to.
pub fn referenced(schema: &Value) -> Option<&str> {
    schema.get("$ref")?.as_str()?.strip_prefix(REF_PREFIX)
}

pub fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!({"group": group, "kind": kind, "version": version})
}

fn build() -> Builtin {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.definitions_path = "/definitions".into();
        s.meta_schema = None;
    });
    let mut generator = SchemaGenerator::new(settings);
    let mut kinds = BTreeMap::new();
    let mut roots = Vec::new();
    for (group, kind, generate, listable) in KINDS {
        let root = generate(&mut generator);
        if let Some(name) = referenced(root.as_value()) {
            kinds.insert(((*group).to_owned(), (*kind).to_owned()), name.to_owned());
            roots.push((*group, *kind, name.to_owned(), *listable));
        }
    }
    for generate in OPERATION_TYPES {
        generate(&mut generator);
    }
    let mut definitions: BTreeMap<String, Value> = generator.take_definitions(false).into_iter().collect();
    special_forms(&mut definitions);
    for (name, required) in REQUIRED {
        if let Some(Value::Object(definition)) = definitions.get_mut(*name) {
            if required.is_empty() {
                definition.remove("required");
            } else {
                definition.insert("required".into(), json!(required));
            }
        }
    }
    extensions::apply(&mut definitions);
    let type_meta = type_meta(&definitions);
    for (group, kind, name, listable) in roots {
        // Every built-in kind served is of version v1.
        let version = "v1";
        let Some(definition) = definitions.get_mut(&name) else { continue };
        if !METADATA_REQUIRED.contains(&name.as_str()) {
            unrequire(definition, "metadata");
        }
        definition["x-kubernetes-group-version-kind"] = json!([gvk(group, version, kind)]);
        if listable {
            let list_kind = format!("{kind}List");
            let list_name = format!("{name}List");
            let list = list_definition(&type_meta, &name, kind, &list_kind, gvk(group, version, &list_kind));
            definitions.insert(list_name.clone(), list);
            kinds.insert((group.to_owned(), list_kind), list_name);
        }
    }
    Builtin { definitions, kinds, type_meta }
}

fn unrequire(definition: &mut Value, field: &str) {
    let Some(required) = definition.get_mut("required").and_then(Value::as_array_mut) else { return };
    required.retain(|f| f != field);
    if required.is_empty() {
        if let Some(object) = definition.as_object_mut() {
            object.remove("required");
        }
    }
}

/// kube-openapi publishes int-or-string as a string of format `int-or-string`, a quantity as a string, and the
/// `JSON` values of CRD schemas (defaults, enums, `items`...) untyped, where k8s-openapi writes them for CRD use.
fn special_forms(definitions: &mut BTreeMap<String, Value>) {
    let untyped = [
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
    ];
    for (name, definition) in definitions.iter_mut() {
        let description = definition.get("description").cloned().unwrap_or(Value::Null);
        let mut form = if name == INT_OR_STRING {
            json!({"type": "string", "format": "int-or-string"})
        } else if name == QUANTITY {
            json!({"type": "string"})
        } else if untyped.contains(&name.as_str()) {
            json!({})
        } else {
            continue;
        };
        if !description.is_null() {
            form["description"] = description;
        }
        *definition = form;
    }
}

/// `apiVersion` and `kind` as every kind's definition describes them.
fn type_meta(definitions: &BTreeMap<String, Value>) -> Map<String, Value> {
    let properties = &definitions.get("io.k8s.api.core.v1.ConfigMap").unwrap_or(&Value::Null)["properties"];
    ["apiVersion", "kind"]
        .into_iter()
        .map(|field| (field.to_owned(), properties.get(field).cloned().unwrap_or_else(|| json!({"type": "string"}))))
        .collect()
}

/// A `<Kind>List` definition, as kube-apiserver publishes one for each kind (and for each CRD's).
pub fn list_definition(type_meta: &Map<String, Value>, item: &str, kind: &str, list_kind: &str, gvk: Value) -> Value {
    let mut properties = type_meta.clone();
    properties.insert(
        "items".into(),
        json!({"description": format!("List of {kind} objects."), "type": "array", "items": reference(item)}),
    );
    let mut metadata = reference(LIST_META);
    metadata["description"] = json!("Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds");
    properties.insert("metadata".into(), metadata);
    json!({"description": format!("{list_kind} is a list of {kind}."), "type": "object", "required": ["items"],
        "properties": properties, "x-kubernetes-group-version-kind": [gvk]})
}

/// The names of the definitions `roots` refer to, directly or not, themselves included.
pub fn closure<'a, 'b>(
    lookup: impl Fn(&str) -> Option<&'b Value>,
    roots: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut pending: Vec<String> = roots.into_iter().map(str::to_owned).collect();
    while let Some(name) = pending.pop() {
        if found.contains(&name) {
            continue;
        }
        if let Some(definition) = lookup(&name) {
            references(definition, &mut |target| pending.push(target.to_owned()));
        }
        found.insert(name);
    }
    found
}

fn references(schema: &Value, found: &mut impl FnMut(&str)) {
    match schema {
        Value::Object(map) => {
            if let Some(target) = map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(REF_PREFIX)) {
                found(target);
            }
            map.values().for_each(|value| references(value, found));
        }
        Value::Array(items) => items.iter().for_each(|value| references(value, found)),
        _ => {}
    }
}

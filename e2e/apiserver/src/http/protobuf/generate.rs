//! Writes `messages.txt` from its sources and checks the committed file matches: the field numbers and wire types
//! come from k8s-pb's generated bindings (read as source text, since prost types carry no reflection), the JSON
//! names and required fields from k8s-openapi's schemas, and Go pointer-ness from `pointers.txt` (read off the
//! `Unmarshal` functions of k8s.io/api, apimachinery, apiextensions-apiserver and kube-aggregator, which assign
//! pointer fields through a reference). `OLMV2_WRITE_PROTOBUF_TABLE=1 cargo test -p kube-emulator protobuf_table`
//! writes the file.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use k8s_openapi::api::{admissionregistration::v1 as admission, apps::v1 as apps, authentication::v1 as authn};
use k8s_openapi::api::{authorization::v1 as authz, autoscaling::v1 as autoscaling, coordination::v1 as coordination};
use k8s_openapi::api::{batch::v1 as batch, networking::v1 as networking};
use k8s_openapi::api::{core::v1 as core, events::v1 as events, rbac::v1 as rbac};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1 as apiregistration;

use super::table::Special;

/// A field as k8s-pb declares it.
#[derive(Debug, Clone)]
struct RawField {
    number: u32,
    rust_name: String,
    label: char,
    kind: String,
}

/// The kinds served in protobuf: (apiVersion, kind, k8s-pb message). Each also has its list.
const KINDS: &[(&str, &str, &str)] = &[
    ("v1", "Namespace", "api.core.v1.Namespace"),
    ("v1", "ServiceAccount", "api.core.v1.ServiceAccount"),
    ("v1", "Secret", "api.core.v1.Secret"),
    ("v1", "ConfigMap", "api.core.v1.ConfigMap"),
    ("v1", "Service", "api.core.v1.Service"),
    ("v1", "Pod", "api.core.v1.Pod"),
    ("v1", "Event", "api.core.v1.Event"),
    ("v1", "Endpoints", "api.core.v1.Endpoints"),
    ("apps/v1", "Deployment", "api.apps.v1.Deployment"),
    ("apps/v1", "ReplicaSet", "api.apps.v1.ReplicaSet"),
    ("rbac.authorization.k8s.io/v1", "Role", "api.rbac.v1.Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "api.rbac.v1.RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "api.rbac.v1.ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "api.rbac.v1.ClusterRoleBinding"),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
    ),
    ("apiregistration.k8s.io/v1", "APIService", "kube_aggregator.pkg.apis.apiregistration.v1.APIService"),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        "api.admissionregistration.v1.ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        "api.admissionregistration.v1.MutatingWebhookConfiguration",
    ),
    ("v1", "PersistentVolumeClaim", "api.core.v1.PersistentVolumeClaim"),
    ("v1", "PersistentVolume", "api.core.v1.PersistentVolume"),
    ("v1", "ReplicationController", "api.core.v1.ReplicationController"),
    ("apps/v1", "DaemonSet", "api.apps.v1.DaemonSet"),
    ("apps/v1", "StatefulSet", "api.apps.v1.StatefulSet"),
    ("batch/v1", "Job", "api.batch.v1.Job"),
    ("batch/v1", "CronJob", "api.batch.v1.CronJob"),
    ("networking.k8s.io/v1", "Ingress", "api.networking.v1.Ingress"),
    ("coordination.k8s.io/v1", "Lease", "api.coordination.v1.Lease"),
    ("events.k8s.io/v1", "Event", "api.events.v1.Event"),
];

/// Kinds without lists: subresources, reviews and the generic types.
const SINGLES: &[(&str, &str, &str)] = &[
    ("autoscaling/v1", "Scale", "api.autoscaling.v1.Scale"),
    ("authentication.k8s.io/v1", "TokenRequest", "api.authentication.v1.TokenRequest"),
    ("authentication.k8s.io/v1", "TokenReview", "api.authentication.v1.TokenReview"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "api.authentication.v1.SelfSubjectReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "api.authorization.v1.SubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", "api.authorization.v1.SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", "api.authorization.v1.LocalSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", "api.authorization.v1.SelfSubjectRulesReview"),
    ("v1", "Status", "apimachinery.pkg.apis.meta.v1.Status"),
    ("v1", "DeleteOptions", "apimachinery.pkg.apis.meta.v1.DeleteOptions"),
];

const SPECIALS: &[(&str, Special)] = &[
    ("apimachinery.pkg.apis.meta.v1.Time", Special::Time),
    ("apimachinery.pkg.apis.meta.v1.MicroTime", Special::MicroTime),
    ("apimachinery.pkg.apis.meta.v1.Duration", Special::Duration),
    ("apimachinery.pkg.apis.meta.v1.FieldsV1", Special::RawJson),
    ("apimachinery.pkg.runtime.RawExtension", Special::RawJson),
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.Json", Special::RawJson),
    ("apimachinery.pkg.util.intstr.IntOrString", Special::IntOrString),
    ("apimachinery.pkg.api.resource.Quantity", Special::Quantity),
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray", Special::SchemaOrArray),
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool", Special::SchemaOrBool),
    ("apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray", Special::SchemaOrStringArray),
    ("api.authentication.v1.ExtraValue", Special::StringList),
    ("api.authorization.v1.ExtraValue", Special::StringList),
];

/// The OpenAPI definitions of the kinds above, with everything they refer to.
fn definitions() -> Map<String, Value> {
    let mut generator = schemars::generate::SchemaSettings::openapi3().into_generator();
    macro_rules! each {
        ($($type:ty),* $(,)?) => { $( generator.subschema_for::<$type>(); )* };
    }
    each!(
        core::Namespace,
        core::ServiceAccount,
        core::Secret,
        core::ConfigMap,
        core::Service,
        core::Pod,
        core::Event,
        core::Endpoints,
        apps::Deployment,
        apps::ReplicaSet,
        rbac::Role,
        rbac::RoleBinding,
        rbac::ClusterRole,
        rbac::ClusterRoleBinding,
        apiextensions::CustomResourceDefinition,
        apiregistration::APIService,
        admission::ValidatingWebhookConfiguration,
        admission::MutatingWebhookConfiguration,
        coordination::Lease,
        events::Event,
        autoscaling::Scale,
        authn::TokenRequest,
        authn::TokenReview,
        authn::SelfSubjectReview,
        authz::SubjectAccessReview,
        authz::SelfSubjectAccessReview,
        authz::LocalSubjectAccessReview,
        authz::SelfSubjectRulesReview,
        meta::Status,
        meta::DeleteOptions,
        meta::ListMeta,
        core::PersistentVolumeClaim,
        core::PersistentVolume,
        core::ReplicationController,
        apps::DaemonSet,
        apps::StatefulSet,
        batch::Job,
        batch::CronJob,
        networking::Ingress,
    );
    generator.take_definitions(false)
}

fn normalized(name: &str) -> String {
    name.chars().filter(char::is_ascii_alphanumeric).map(|c| c.to_ascii_lowercase()).collect()
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// k8s-pb's source directory: the version the lock file names, as cargo unpacked it under `$CARGO_HOME`.
fn k8s_pb_source() -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).expect("the workspace");
    let lock = std::fs::read_to_string(workspace.join("Cargo.lock")).expect("the lock file");
    let version = lock
        .split("[[package]]")
        .find(|package| package.contains("name = \"k8s-pb\""))
        .and_then(|package| package.lines().find_map(|l| l.strip_prefix("version = ")))
        .expect("k8s-pb is locked")
        .trim_matches('"')
        .to_owned();
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("a home directory")).join(".cargo"));
    let registries = std::fs::read_dir(home.join("registry/src")).expect("cargo's registry sources");
    registries
        .filter_map(Result::ok)
        .map(|registry| registry.path().join(format!("k8s-pb-{version}/src")))
        .find(|path| path.is_dir())
        .expect("k8s-pb's source, unpacked by cargo")
}

/// Every message k8s-pb declares, by id (its module path and name, dot-separated).
fn read_k8s_pb(root: &Path) -> BTreeMap<String, Vec<RawField>> {
    let mut messages = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    let attribute = regex::Regex::new(r#"#\[prost\(([^\]]*)tag = "(\d+)"\)\]"#).expect("a valid pattern");
    let declaration = regex::Regex::new(r"^pub (?:r#)?(\w+):\s*(.*),$").expect("a valid pattern");
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).expect("k8s-pb's source is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                pending.push(path);
                continue;
            }
            if path.file_name().is_none_or(|n| n != "mod.rs") {
                continue;
            }
            let module: Vec<String> = path
                .parent()
                .and_then(|p| p.strip_prefix(root).ok())
                .map(|p| p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect())
                .unwrap_or_default();
            let source = std::fs::read_to_string(&path).expect("a readable module");
            // Joined so that attributes and declarations rustfmt broke over lines read as one.
            let mut lines: Vec<String> = Vec::new();
            for line in source.lines().map(str::trim) {
                let continues = lines.last().is_some_and(|last| {
                    (last.starts_with("#[prost(") && !last.ends_with(")]"))
                        || (last.starts_with("pub ")
                            && last.contains(':')
                            && !last.ends_with('{')
                            && (!last.ends_with(',') || last.matches('<').count() != last.matches('>').count()))
                });
                match lines.last_mut() {
                    Some(last) if continues => last.push_str(line),
                    _ => lines.push(line.to_owned()),
                }
            }
            let mut current: Option<String> = None;
            let mut attribute_seen: Option<(String, u32)> = None;
            for line in &lines {
                if let Some(name) = line.strip_prefix("pub struct ").and_then(|rest| rest.strip_suffix(" {}")) {
                    messages.insert([module.clone(), vec![name.to_owned()]].concat().join("."), Vec::new());
                } else if let Some(name) = line.strip_prefix("pub struct ").and_then(|rest| rest.strip_suffix(" {")) {
                    let id = [module.clone(), vec![name.to_owned()]].concat().join(".");
                    messages.insert(id.clone(), Vec::new());
                    current = Some(id);
                } else if line == "}" {
                    current = None;
                } else if let Some(found) = attribute.captures(line) {
                    attribute_seen = Some((found[1].to_owned(), found[2].parse().expect("a field number")));
                } else if let (Some(id), Some((spec, number)), Some(found)) =
                    (&current, attribute_seen.take(), declaration.captures(line))
                {
                    let field = raw_field(&module, &spec, number, &found[1], &found[2]);
                    messages.get_mut(id).expect("the current message").push(field);
                }
            }
        }
    }
    messages
}

fn raw_field(module: &[String], spec: &str, number: u32, name: &str, rust_type: &str) -> RawField {
    let (label, scalar) = if let Some(map) = spec.trim().strip_prefix("btree_map = \"") {
        // `btree_map = "string, <value>"`: every Kubernetes map has string keys.
        let value = map.split('"').next().unwrap_or_default().split(',').nth(1).unwrap_or_default().trim().to_owned();
        ('m', value)
    } else {
        let spec: Vec<&str> = spec.split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
        let scalar = spec[0].split(' ').next().unwrap_or_default().to_owned();
        (if spec.contains(&"repeated") { 'r' } else { 'o' }, scalar)
    };
    let kind = if scalar == "message" { resolve(module, rust_type) } else { scalar };
    RawField { number, rust_name: name.to_owned(), label, kind }
}

/// The message id a Rust type path names, from the module it is written in.
fn resolve(module: &[String], rust_type: &str) -> String {
    let compact: String = rust_type.chars().filter(|c| !c.is_whitespace()).collect();
    // The last type argument, which rustfmt may follow with a trailing comma.
    let inner = compact.rsplit('<').next().unwrap_or_default().replace('>', "");
    let inner = inner.trim_end_matches(',').rsplit(',').next().unwrap_or_default();
    let mut path: Vec<String> = module.to_vec();
    let mut rest = inner;
    while let Some(after) = rest.strip_prefix("super::") {
        path.pop();
        rest = after;
    }
    path.extend(rest.split("::").map(str::to_owned));
    path.join(".")
}

fn definition_name(id: &str) -> String {
    format!("io.k8s.{id}")
        .replace("apiextensions_apiserver", "apiextensions-apiserver")
        .replace("kube_aggregator", "kube-aggregator")
}

fn pointers() -> BTreeSet<String> {
    include_str!("pointers.txt").lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(normalized).collect()
}

/// The table's text.
fn generate() -> String {
    let messages = read_k8s_pb(&k8s_pb_source());
    let definitions = definitions();
    // Definitions by (package, normalized short name): prost respells acronyms (`JSONSchemaProps` is `JsonSchemaProps`).
    let by_short: HashMap<String, &Value> = definitions
        .iter()
        .map(|(name, schema)| {
            let (package, short) = name.rsplit_once('.').unwrap_or_default();
            (format!("{package}.{}", normalized(short)), schema)
        })
        .collect();
    let pointers = pointers();
    let specials: HashMap<&str, Special> = SPECIALS.iter().copied().collect();
    let mut roots = Vec::new();
    // Messages to write, each with the schema its JSON names come from when it has none of its own (a message Go
    // embeds inline takes its parent's).
    let mut queue: VecDeque<(String, Option<String>)> = VecDeque::new();
    for (api_version, kind, id) in KINDS {
        roots.push(format!("root {api_version} {kind} {id}"));
        roots.push(format!("root {api_version} {kind}List {id}List"));
        queue.push_back(((*id).to_owned(), None));
        queue.push_back((format!("{id}List"), None));
    }
    for (api_version, kind, id) in SINGLES {
        roots.push(format!("root {api_version} {kind} {id}"));
        queue.push_back(((*id).to_owned(), None));
    }
    let mut done = BTreeMap::new();
    while let Some((id, inlined_in)) = queue.pop_front() {
        if done.contains_key(&id) {
            continue;
        }
        let fields = messages.get(&id).unwrap_or_else(|| panic!("k8s-pb has no message {id}"));
        let (package, short) =
            definition_name(&id).rsplit_once('.').map(|(p, s)| (p.to_owned(), s.to_owned())).unwrap_or_default();
        let own_key = format!("{package}.{}", normalized(&short));
        let schema_key = inlined_in.unwrap_or(own_key);
        let schema = by_short.get(&schema_key);
        let properties: Vec<String> =
            schema.and_then(|s| s["properties"].as_object()).map(|p| p.keys().cloned().collect()).unwrap_or_default();
        let required: Vec<String> = schema
            .and_then(|s| s["required"].as_array())
            .map(|r| r.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
            .unwrap_or_default();
        let special = specials.get(id.as_str()).copied();
        assert!(
            special.is_some() || schema.is_some() || short.ends_with("List"),
            "no schema for {id}: the JSON names of its fields are not known"
        );
        let mut line = format!("message {id}");
        if let Some(special) = special {
            line.push_str(&format!(" ={}", special.name()));
        }
        let mut sorted = fields.clone();
        sorted.sort_by_key(|f| f.number);
        for field in &sorted {
            let known = |name: &str| properties.iter().any(|p| normalized(p) == normalized(name));
            let mut label = field.label;
            let json = match properties.iter().find(|p| normalized(p) == normalized(&field.rust_name)) {
                Some(json) => json.clone(),
                // Lists have no schema of their own; their fields are `metadata` and `items`.
                None if schema.is_none() => lower_camel(&field.rust_name),
                // A message whose fields are all the parent's: embedded inline in Go (a Volume's VolumeSource).
                None if messages
                    .get(&field.kind)
                    .is_some_and(|inner| !inner.is_empty() && inner.iter().all(|f| known(&f.rust_name))) =>
                {
                    label = 'i';
                    queue.push_back((field.kind.clone(), Some(schema_key.clone())));
                    lower_camel(&field.rust_name)
                }
                // A field of a later Kubernetes than the version served: skipped, as that version's decoder would.
                None => continue,
            };
            let mut flags = String::new();
            if pointers.contains(&normalized(&format!("{id}.{}", field.rust_name))) {
                flags.push('p');
            }
            if required.contains(&json) {
                flags.push('q');
            }
            let flags = if flags.is_empty() { String::new() } else { format!(",{flags}") };
            line.push_str(&format!(" {},{json},{label},{}{flags}", field.number, field.kind));
            if field.kind.contains('.') && special.is_none() && label != 'i' {
                queue.push_back((field.kind.clone(), None));
            }
        }
        done.insert(id, line);
    }
    let mut out = String::from(
        "# Generated by e2e/apiserver/src/http/protobuf/generate.rs from k8s-pb, k8s-openapi and pointers.txt: do not edit.\n",
    );
    for line in roots.iter().chain(done.values()) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[test]
fn protobuf_table_is_generated_from_its_sources() {
    let generated = generate();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/http/protobuf/messages.txt");
    if std::env::var_os("OLMV2_WRITE_PROTOBUF_TABLE").is_some() {
        std::fs::write(&path, &generated).expect("the table is written");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "messages.txt is not what its sources give: run OLMV2_WRITE_PROTOBUF_TABLE=1 cargo test -p kube-emulator protobuf_table"
    );
    super::table::Table::parse(&generated).expect("the generated table parses");
}

//! The documents' shape, as kubectl reads it: kinds found by group-version-kind, merge keys where strategic merge
//! patch looks, `fieldValidation` and patch types on operations, index hashes that are the served content's, v2 in
//! gnostic's protobuf.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, Method};
use prost::Message;
use serde_json::{json, Value};

use super::definitions::{gvk, Builtin};
use super::gnostic;
use super::*;

fn api() -> ApiServer {
    ApiServer::new(100, Duration::from_secs(60))
}

fn widget_crd(field: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {field: {"type": "string"}}}}}}}]}})
}

struct Answer {
    code: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON")
    }

    fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default()
    }
}

async fn get(api: &ApiServer, url: &str, headers: &[(&'static str, &str)]) -> Answer {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let query: Query = serde_urlencoded::from_str(query).expect("query");
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, HeaderValue::from_str(value).expect("header"));
    }
    let rest: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).skip(1).collect();
    let response = serve(api, &UserInfo::default(), &Method::GET, path, &rest, &query, &map).await.expect("served");
    let code = response.status().as_u16();
    let headers = response.headers().clone();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body").to_vec();
    Answer { code, headers, body }
}

fn sha512(body: &[u8]) -> String {
    Sha512::digest(body).iter().map(|byte| format!("{byte:02X}")).collect()
}

#[test]
fn builtin_definitions_carry_kinds_lists_and_the_go_types_markers() {
    let builtin = Builtin::get();
    let definition = |name: &str| builtin.definitions.get(name).unwrap_or_else(|| panic!("{name} defined"));
    let config_map = definition("io.k8s.api.core.v1.ConfigMap");
    assert_eq!(
        config_map["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
    );
    assert!(config_map.get("required").is_none(), "kube-apiserver does not require a ConfigMap's metadata");
    assert_eq!(definition("io.k8s.api.core.v1.Event")["required"], json!(["involvedObject", "metadata"]));
    assert_eq!(definition("io.k8s.api.events.v1.Event")["required"], json!(["eventTime"]));
    let list = definition("io.k8s.api.apps.v1.DeploymentList");
    assert_eq!(list["properties"]["items"]["items"]["$ref"], "#/definitions/io.k8s.api.apps.v1.Deployment");
    assert_eq!(list["x-kubernetes-group-version-kind"][0]["kind"], "DeploymentList");
    assert_eq!(builtin.kind("apps", "DeploymentList"), Some("io.k8s.api.apps.v1.DeploymentList"));

    let containers = &definition("io.k8s.api.core.v1.PodSpec")["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
    assert_eq!(containers["x-kubernetes-list-map-keys"], json!(["name"]));
    let volumes = &definition("io.k8s.api.core.v1.PodSpec")["properties"]["volumes"];
    assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
    let ports = &definition("io.k8s.api.core.v1.Container")["properties"]["ports"];
    assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["containerPort", "protocol"]));
    let finalizers = &definition("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")["properties"]["finalizers"];
    assert_eq!(
        (finalizers["x-kubernetes-list-type"].as_str(), finalizers["x-kubernetes-patch-strategy"].as_str()),
        (Some("set"), Some("merge"))
    );
    assert_eq!(definition("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")["x-kubernetes-map-type"], "atomic");
    assert_eq!(definition("io.k8s.api.rbac.v1.ClusterRole")["properties"]["rules"]["x-kubernetes-list-type"], "atomic");
    let int_or_string = definition("io.k8s.apimachinery.pkg.util.intstr.IntOrString");
    assert_eq!(
        (int_or_string["type"].as_str(), int_or_string["format"].as_str()),
        (Some("string"), Some("int-or-string"))
    );
    assert!(definition("io.k8s.api.core.v1.LocalObjectReference").get("required").is_none());
    assert_eq!(definition("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON").get("type"), None);
}

#[tokio::test]
async fn the_index_points_at_each_group_version_by_the_hash_of_its_content() {
    let api = api();
    let index = get(&api, "/openapi/v3", &[]).await;
    assert_eq!((index.code, index.header("content-type")), (200, "application/json"));
    let paths = index.json()["paths"].as_object().cloned().expect("paths");
    assert!(paths.contains_key("api/v1") && paths.contains_key("apis/apps/v1"), "{paths:?}");
    for (path, entry) in &paths {
        let url = entry["serverRelativeURL"].as_str().expect("URL");
        let document = get(&api, url, &[("accept", "application/json")]).await;
        assert_eq!(document.code, 200, "{url}");
        assert_eq!(url, format!("/openapi/v3/{path}?hash={}", sha512(&document.body)));
        assert_eq!(document.header("cache-control"), "public, immutable");
        assert_eq!(document.header("etag"), format!("\"{}\"", sha512(&document.body)));
    }
    let moved = get(&api, "/openapi/v3/api/v1?hash=0123", &[]).await;
    assert_eq!(
        (moved.code, moved.header("location")),
        (301, paths["api/v1"]["serverRelativeURL"].as_str().unwrap_or_default())
    );
    let etag = get(&api, "/openapi/v3/api/v1", &[]).await.header("etag").to_owned();
    assert_eq!(get(&api, "/openapi/v3/api/v1", &[("if-none-match", &etag)]).await.code, 304);
    let protobuf_only = [("accept", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf")];
    assert_eq!(get(&api, "/openapi/v3/api/v1", &protobuf_only).await.code, 406, "v3 is served in JSON only");
    assert!(serve(
        &api,
        &UserInfo::default(),
        &Method::GET,
        "/openapi/v3/apis/nothing/v1",
        &["v3", "apis", "nothing", "v1"],
        &Query::new(),
        &HeaderMap::new()
    )
    .await
    .is_err());
}

#[tokio::test]
async fn a_builtin_group_version_document_has_operations_and_v3_schemas() {
    let api = api();
    let apps = get(&api, "/openapi/v3/apis/apps/v1", &[]).await.json();
    let item = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
    let patch = &item["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "apps", "kind": "Deployment", "version": "v1"})
    );
    assert_eq!(patch["x-kubernetes-action"], "patch");
    assert!(patch["parameters"]
        .as_array()
        .expect("parameters")
        .iter()
        .any(|p| p["name"] == "fieldValidation" && p["in"] == "query"));
    let patch_types: Vec<&String> = patch["requestBody"]["content"].as_object().expect("content").keys().collect();
    assert!(patch_types.iter().any(|t| *t == "application/strategic-merge-patch+json"), "{patch_types:?}");
    assert_eq!(
        item["get"]["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.Deployment"
    );
    let status_patch = &apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/status"]["patch"];
    assert!(status_patch["parameters"].as_array().expect("parameters").iter().any(|p| p["name"] == "fieldValidation"));
    let schemas = &apps["components"]["schemas"];
    let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(deployment["x-kubernetes-group-version-kind"][0]["kind"], "Deployment");
    assert_eq!(
        deployment["properties"]["metadata"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    assert_eq!(
        schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    assert!(schemas["io.k8s.api.autoscaling.v1.Scale"].is_object(), "the scale subresource's kind");
    assert_eq!(
        schemas["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]["oneOf"],
        json!([{"type": "integer"}, {"type": "string"}])
    );
    assert!(schemas.get("io.k8s.api.core.v1.ConfigMap").is_none(), "only what the group-version reaches");
}

#[tokio::test]
async fn custom_resources_are_published_from_their_schema_and_follow_the_crds() {
    let api = api();
    let before = get(&api, "/openapi/v3", &[]).await.json();
    api.resources_mut().register_crd(&widget_crd("size")).expect("registered");
    let index = get(&api, "/openapi/v3", &[]).await.json();
    assert_eq!(index["paths"]["api/v1"], before["paths"]["api/v1"], "other documents are unchanged");
    let url = index["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .expect("the CRD's group-version")
        .to_owned();
    let document = get(&api, &url, &[]).await.json();
    let patch = &document["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    let patch_types: Vec<&String> = patch["requestBody"]["content"].as_object().expect("content").keys().collect();
    assert_eq!(
        patch_types,
        ["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"]
    );
    let widget = &document["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(
        widget["x-kubernetes-group-version-kind"],
        json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
    );
    assert_eq!(widget["properties"]["spec"]["properties"]["size"]["type"], "string");
    assert!(document["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object());
    assert!(document["components"]["schemas"]["com.example.v1.WidgetList"].is_object());

    api.resources_mut().register_crd(&widget_crd("color")).expect("changed");
    let changed = get(&api, "/openapi/v3", &[]).await.json();
    assert_ne!(changed["paths"]["apis/example.com/v1"]["serverRelativeURL"], url.as_str(), "a new schema, a new hash");
    let document = get(&api, "/openapi/v3/apis/example.com/v1", &[]).await.json();
    assert!(document["components"]["schemas"]["com.example.v1.Widget"]["properties"]["spec"]["properties"]["color"]
        .is_object());
    api.resources_mut().unregister_crd(&widget_crd("color"));
    assert!(get(&api, "/openapi/v3", &[]).await.json()["paths"].get("apis/example.com/v1").is_none());
}

#[tokio::test]
async fn v2_is_served_in_json_and_in_gnostic_protobuf() {
    let api = api();
    api.resources_mut().register_crd(&widget_crd("size")).expect("registered");
    let json_document = get(&api, "/openapi/v2", &[("accept", "application/json")]).await;
    assert_eq!(json_document.header("content-type"), "application/json");
    let document = json_document.json();
    assert_eq!(document["swagger"], "2.0");
    let config_map_patch = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
    assert!(config_map_patch["consumes"]
        .as_array()
        .expect("consumes")
        .iter()
        .any(|c| c == "application/strategic-merge-patch+json"));
    assert_eq!(
        document["definitions"]["com.example.v1.Widget"]["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );

    let kubectl_accept = [("accept", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")];
    let protobuf = get(&api, "/openapi/v2", &kubectl_accept).await;
    assert_eq!(
        (protobuf.code, protobuf.header("content-type")),
        (200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
    );
    assert_eq!(protobuf.header("etag"), json_document.header("etag"));
    let decoded = gnostic::Document::decode(protobuf.body.as_slice()).expect("gnostic's Document");
    assert_eq!(decoded, gnostic::document(&document).expect("the JSON document's"));
    let definitions = decoded.definitions.expect("definitions").additional_properties;
    assert_eq!(definitions.len(), document["definitions"].as_object().map_or(0, |d| d.len()));
    let config_map = definitions
        .iter()
        .find(|d| d.name == "io.k8s.api.core.v1.ConfigMap")
        .and_then(|d| d.value.clone())
        .expect("ConfigMap");
    let gvk = config_map
        .vendor_extension
        .iter()
        .find(|e| e.name == "x-kubernetes-group-version-kind")
        .and_then(|e| e.value.clone())
        .expect("GVK");
    let gvk: Value = serde_yaml_ng::from_str(&gvk.yaml).expect("YAML");
    assert_eq!(gvk, json!([{"group": "", "kind": "ConfigMap", "version": "v1"}]));
    assert_eq!(get(&api, "/openapi/v2", &[("accept", "text/html")]).await.code, 406);
    assert_eq!(get(&api, "/openapi/v2", &[]).await.header("content-type"), "application/json");
}

#[test]
fn every_builtin_kind_served_has_its_definition() {
    let builtin = Builtin::get();
    for resource in crate::model::resources::Resources::default().all() {
        assert!(builtin.kind(&resource.group, &resource.kind).is_some(), "{} {}", resource.group, resource.kind);
    }
}

#[test]
fn the_kinds_apply_prune_looks_up_have_definitions_lists_and_their_go_types_markers() {
    let builtin = Builtin::get();
    for (group, kind, name) in [
        ("", "PersistentVolumeClaim", "io.k8s.api.core.v1.PersistentVolumeClaim"),
        ("", "PersistentVolume", "io.k8s.api.core.v1.PersistentVolume"),
        ("", "ReplicationController", "io.k8s.api.core.v1.ReplicationController"),
        ("apps", "DaemonSet", "io.k8s.api.apps.v1.DaemonSet"),
        ("apps", "StatefulSet", "io.k8s.api.apps.v1.StatefulSet"),
        ("batch", "Job", "io.k8s.api.batch.v1.Job"),
        ("batch", "CronJob", "io.k8s.api.batch.v1.CronJob"),
        ("networking.k8s.io", "Ingress", "io.k8s.api.networking.v1.Ingress"),
    ] {
        assert_eq!(builtin.kind(group, kind), Some(name));
        assert_eq!(builtin.definitions[name]["x-kubernetes-group-version-kind"], json!([gvk(group, "v1", kind)]));
        assert!(builtin.definitions[name].get("required").is_none(), "{name}: metadata is optional");
        assert_eq!(builtin.kind(group, &format!("{kind}List")), Some(format!("{name}List").as_str()));
    }
    let atomic = json!({"x-kubernetes-list-type": "atomic"});
    let merged_by_type = json!({"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-patch-merge-key": "type", "x-kubernetes-patch-strategy": "merge"});
    let set = json!({"x-kubernetes-list-type": "set"});
    let atomic_map = json!({"x-kubernetes-map-type": "atomic"});
    let expected = [
        ("apps.v1.DaemonSetStatus", "conditions", &merged_by_type),
        ("apps.v1.StatefulSetSpec", "volumeClaimTemplates", &atomic),
        ("apps.v1.StatefulSetStatus", "conditions", &merged_by_type),
        ("batch.v1.CronJobStatus", "active", &atomic),
        ("batch.v1.PodFailurePolicy", "rules", &atomic),
        ("batch.v1.PodFailurePolicyRule", "onPodConditions", &atomic),
        ("batch.v1.PodFailurePolicyOnExitCodesRequirement", "values", &set),
        ("batch.v1.SuccessPolicy", "rules", &atomic),
        ("batch.v1.UncountedTerminatedPods", "succeeded", &set),
        ("batch.v1.UncountedTerminatedPods", "failed", &set),
        ("core.v1.PersistentVolumeClaimStatus", "conditions", &merged_by_type),
        ("core.v1.PersistentVolumeClaimStatus", "accessModes", &atomic),
        ("core.v1.PersistentVolumeSpec", "accessModes", &atomic),
        ("core.v1.PersistentVolumeSpec", "mountOptions", &atomic),
        ("core.v1.RBDPersistentVolumeSource", "monitors", &atomic),
        ("core.v1.ReplicationControllerSpec", "selector", &atomic_map),
        ("core.v1.ReplicationControllerStatus", "conditions", &merged_by_type),
        ("networking.v1.IngressSpec", "rules", &atomic),
        ("networking.v1.IngressSpec", "tls", &atomic),
        ("networking.v1.HTTPIngressRuleValue", "paths", &atomic),
        ("networking.v1.IngressTLS", "hosts", &atomic),
        ("networking.v1.IngressLoadBalancerStatus", "ingress", &atomic),
    ];
    let markers = |schema: &Value| -> Value {
        schema.as_object().map_or(json!({}), |s| {
            s.iter().filter(|(key, _)| key.starts_with("x-kubernetes-")).map(|(k, v)| (k.clone(), v.clone())).collect()
        })
    };
    for (definition, field, markers_expected) in expected {
        let schema = &builtin.definitions[&format!("io.k8s.api.{definition}")]["properties"][field];
        assert_eq!(&markers(schema), markers_expected, "{definition}.{field}");
    }
    // A Job's conditions: atomic for server-side apply, yet merged by type by a strategic merge patch.
    let job_conditions = &builtin.definitions["io.k8s.api.batch.v1.JobStatus"]["properties"]["conditions"];
    assert_eq!(
        markers(job_conditions),
        json!({"x-kubernetes-list-type": "atomic", "x-kubernetes-patch-merge-key": "type",
            "x-kubernetes-patch-strategy": "merge"})
    );
    let granular = &builtin.definitions["io.k8s.api.core.v1.PersistentVolumeClaimStatus"]["properties"]
        ["allocatedResourceStatuses"];
    assert_eq!(markers(granular), json!({"x-kubernetes-map-type": "granular"}));
    for structure in ["core.v1.SecretReference", "networking.v1.ServiceBackendPort"] {
        assert_eq!(builtin.definitions[&format!("io.k8s.api.{structure}")]["x-kubernetes-map-type"], "atomic");
    }
    for (definition, field) in
        [("apps.v1.DaemonSetSpec", "updateStrategy"), ("apps.v1.StatefulSetSpec", "updateStrategy")]
    {
        let schema = &builtin.definitions[&format!("io.k8s.api.{definition}")]["properties"][field];
        assert_eq!(markers(schema), json!({}), "{definition}.{field}: no patch strategy, unlike a Deployment's");
    }
}

#[tokio::test]
async fn the_batch_and_networking_documents_have_their_kinds_operations() {
    let api = api();
    let batch = get(&api, "/openapi/v3/apis/batch/v1", &[]).await.json();
    let cron_job = &batch["paths"]["/apis/batch/v1/namespaces/{namespace}/cronjobs/{name}"]["patch"];
    assert_eq!(cron_job["x-kubernetes-group-version-kind"], gvk("batch", "v1", "CronJob"));
    let schemas = &batch["components"]["schemas"];
    assert_eq!(
        schemas["io.k8s.api.batch.v1.JobTemplateSpec"]["properties"]["spec"]["allOf"][0]["$ref"],
        "#/components/schemas/io.k8s.api.batch.v1.JobSpec"
    );
    assert_eq!(
        schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]["x-kubernetes-patch-merge-key"],
        "name"
    );
    let networking = get(&api, "/openapi/v3/apis/networking.k8s.io/v1", &[]).await.json();
    let status = &networking["paths"]["/apis/networking.k8s.io/v1/namespaces/{namespace}/ingresses/{name}/status"];
    assert_eq!(status["get"]["x-kubernetes-group-version-kind"], gvk("networking.k8s.io", "v1", "Ingress"));
    let core = get(&api, "/openapi/v3/api/v1", &[]).await.json();
    assert!(core["paths"]["/api/v1/persistentvolumes/{name}"]["put"].is_object(), "PersistentVolumes are cluster-wide");
}

#[tokio::test]
async fn the_index_adds_what_aggregated_servers_list_after_this_servers_own_documents() {
    use crate::request::api_server::OpenApiIndex;
    let api = api();
    let own = get(&api, "/openapi/v3", &[]).await;
    let own_paths = own.json()["paths"].as_object().cloned().expect("paths");
    let aggregated_url = "/openapi/v3/apis/metrics.example.com/v1?hash=ABCD";
    let paths = BTreeMap::from([
        ("apis/metrics.example.com/v1".to_owned(), aggregated_url.to_owned()),
        ("api/v1".to_owned(), "/openapi/v3/api/v1?hash=NOT-THIS-SERVERS".to_owned()),
    ]);
    let index = OpenApiIndex { spec: json!({}), paths, read_at: std::time::Instant::now() };
    api.aggregated_openapi.set("v1.metrics.example.com", index);

    let merged = get(&api, "/openapi/v3", &[]).await;
    let merged_paths = merged.json()["paths"].as_object().cloned().expect("paths");
    assert_eq!(merged_paths["apis/metrics.example.com/v1"], json!({"serverRelativeURL": aggregated_url}));
    assert_eq!(merged_paths["api/v1"], own_paths["api/v1"], "this server's own group-versions win a clash");
    assert_eq!(merged_paths.len(), own_paths.len() + 1, "{merged_paths:?}");
    assert_eq!(merged.header("etag"), format!("\"{}\"", sha512(&merged.body)));
    assert_ne!(merged.header("etag"), own.header("etag"));
    let local = own_paths["api/v1"]["serverRelativeURL"].as_str().expect("URL");
    assert_eq!(get(&api, local, &[]).await.code, 200, "served here, not proxied");
    let rest = ["v3", "apis", "metrics.example.com", "v1"];
    let path = "/openapi/v3/apis/metrics.example.com/v1";
    let unavailable =
        serve(&api, &UserInfo::default(), &Method::GET, path, &rest, &Query::new(), &HeaderMap::new()).await;
    assert_eq!(unavailable.err().map(|e| e.code), Some(503), "listed, so proxied: no APIService to proxy to");

    api.aggregated_openapi.remove("v1.metrics.example.com");
    assert_eq!(get(&api, "/openapi/v3", &[]).await.body, own.body);
    let gone = serve(&api, &UserInfo::default(), &Method::GET, path, &rest, &Query::new(), &HeaderMap::new()).await;
    assert_eq!(gone.err().map(|e| e.code), Some(404));
}

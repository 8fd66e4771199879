//! The CatalogSource: a File-Based Catalog shipped in an OCI image (docs/design.md, 'Catalogs'), from which packages
//! resolve.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;

use super::Icon;

/// gRPC connectivity states OLM copies into `connectionState.lastObservedState`.
pub const READY: &str = "READY";
pub const TRANSIENT_FAILURE: &str = "TRANSIENT_FAILURE";

/// Desired state of a CatalogSource.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "CatalogSource",
    doc = "A catalog of operator packages, shipped as a File-Based Catalog image.",
    namespaced,
    status = "CatalogSourceStatus",
    category = "olm",
    shortname = "catsrc",
    printcolumn = r#"{"name":"Display","type":"string","jsonPath":".spec.displayName","description":"The pretty name of the catalog"}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.sourceType","description":"The type of the catalog"}"#,
    printcolumn = r#"{"name":"Publisher","type":"string","jsonPath":".spec.publisher","description":"The publisher of the catalog"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceSpec {
    /// How the catalog is served: `grpc` with `image` (a File-Based Catalog image), `configmap`, or `internal`.
    pub source_type: SourceType,
    /// The catalog image.
    #[serde(default)]
    pub image: Option<String>,
    /// Address of an existing catalog server, for `grpc` without `image`.
    #[serde(default)]
    pub address: Option<String>,
    /// Name of a ConfigMap holding the catalog, for `configmap` and `internal`.
    #[serde(default, rename = "configMap")]
    pub config_map: Option<String>,
    /// Pull secrets for the catalog image and its bundles, in the CatalogSource's namespace.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// How often the image is polled for a new digest.
    #[serde(default)]
    pub update_strategy: Option<UpdateStrategy>,
    /// Scheduling of a catalog server pod.
    #[serde(default, rename = "grpcPodConfig")]
    pub grpc_pod_config: Option<GrpcPodConfig>,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Publisher.
    #[serde(default)]
    pub publisher: Option<String>,
    /// Priority among catalogs; higher wins ties.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Icon of the catalog.
    #[serde(default)]
    pub icon: Option<Icon>,
}

/// How a catalog is served.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceType {
    /// A catalog image, or the address of a catalog server.
    #[default]
    Grpc,
    /// A catalog held in a ConfigMap.
    Configmap,
    /// A ConfigMap-held catalog managed by OLM.
    Internal,
}

/// Polling of the catalog image.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStrategy {
    /// Poll the registry at an interval.
    #[serde(default)]
    pub registry_poll: Option<RegistryPoll>,
}

/// Registry polling interval.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RegistryPoll {
    /// A Go duration such as `10m`.
    #[serde(default)]
    pub interval: Option<String>,
}

/// Scheduling of a catalog server pod.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcPodConfig {
    /// Node selector.
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations.
    #[serde(default)]
    pub tolerations: Option<Vec<Toleration>>,
    /// Affinity.
    #[serde(default)]
    pub affinity: Option<Affinity>,
    /// Priority class.
    #[serde(default)]
    pub priority_class_name: Option<String>,
    /// `legacy` or `restricted`.
    #[serde(default)]
    pub security_context_config: Option<String>,
    /// Memory the catalog server is sized for; sets its memory request, limit and `GOMEMLIMIT`.
    #[serde(default)]
    pub memory_target: Option<Quantity>,
    /// Serve the catalog from content extracted out of the image instead of the image's own server.
    #[serde(default)]
    pub extract_content: Option<ExtractContentConfig>,
}

/// Where a File-Based Catalog's content is extracted to.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExtractContentConfig {
    /// Directory of the pre-computed API cache.
    #[serde(default)]
    pub cache_dir: Option<String>,
    /// Directory of the File-Based Catalog content.
    pub catalog_dir: String,
}

/// Observed state of a CatalogSource.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceStatus {
    /// Human-readable detail.
    #[serde(default)]
    pub message: Option<String>,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// The catalog image pinned by the digest last pulled.
    #[serde(default)]
    pub resolved_image: Option<String>,
    /// The ConfigMap a configmap catalog was read from.
    #[serde(default)]
    pub config_map_reference: Option<ConfigMapResourceReference>,
    /// When the image was last polled.
    #[serde(default)]
    pub latest_image_registry_poll: Option<Time>,
    /// The registry service OLM v0 runs for a catalog (kept as OLM writes it; no such service runs here).
    #[serde(default)]
    pub registry_service: Option<RegistryServiceStatus>,
    /// The state of the connection to the catalog: OLM v0's `connectionState` (READY, CONNECTING,
    /// TRANSIENT_FAILURE, ...).
    #[serde(default)]
    pub connection_state: Option<GrpcConnectionState>,
    /// Conditions of the catalog.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// The service serving a catalog, as OLM v0 records it.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryServiceStatus {
    /// The protocol served (`grpc`).
    #[serde(default)]
    pub protocol: Option<String>,
    /// The Service's name.
    #[serde(default)]
    pub service_name: Option<String>,
    /// The Service's namespace.
    #[serde(default)]
    pub service_namespace: Option<String>,
    /// The port served.
    #[serde(default)]
    pub port: Option<String>,
    /// When the service was created.
    #[serde(default)]
    pub created_at: Option<Time>,
}

/// The state of the connection to a catalog, as OLM v0 records it.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrpcConnectionState {
    /// Where the catalog is served from.
    #[serde(default)]
    pub address: Option<String>,
    /// READY, CONNECTING, TRANSIENT_FAILURE, IDLE or SHUTDOWN.
    pub last_observed_state: String,
    /// When that state was observed.
    #[serde(default, rename = "lastConnect")]
    pub last_connect_time: Option<Time>,
}

/// The ConfigMap a configmap catalog was read from, and the version of it that was read.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapResourceReference {
    /// Name of the ConfigMap.
    #[serde(default)]
    pub name: String,
    /// Namespace of the ConfigMap.
    #[serde(default)]
    pub namespace: String,
    /// UID of the ConfigMap.
    #[serde(default)]
    pub uid: Option<String>,
    /// Resource version of the ConfigMap that was read.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// When the reference was last updated.
    #[serde(default)]
    pub last_update_time: Option<Time>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_olm_v0_status_reads_and_writes_back_the_same() {
        let status = serde_json::json!({"message": "m", "reason": "r",
            "latestImageRegistryPoll": "2026-01-01T00:00:00Z",
            "registryService": {"protocol": "grpc", "serviceName": "community", "serviceNamespace": "olm",
                "port": "50051", "createdAt": "2026-01-01T00:00:00Z"},
            "connectionState": {"address": "community.olm.svc:50051", "lastObservedState": "READY",
                "lastConnect": "2026-01-01T00:00:01Z"}});
        let read: CatalogSourceStatus = serde_json::from_value(status.clone()).expect("OLM's status");
        assert_eq!(read.connection_state.as_ref().map(|c| c.last_observed_state.as_str()), Some("READY"));
        assert_eq!(serde_json::to_value(&read).expect("written"), status);
    }

    #[test]
    fn grpc_pod_config_keeps_every_olm_field() {
        let spec: CatalogSourceSpec = serde_json::from_value(serde_json::json!({
            "sourceType": "grpc",
            "image": "quay.io/example/catalog:latest",
            "grpcPodConfig": {
                "affinity": {"nodeAffinity": {}},
                "memoryTarget": "30Mi",
                "extractContent": {"cacheDir": "/tmp/cache", "catalogDir": "/configs"}
            }
        }))
        .expect("spec parses");
        let value = serde_json::to_value(&spec).expect("spec serializes");
        let config = &value["grpcPodConfig"];
        assert!(config["affinity"].is_object());
        assert_eq!(config["memoryTarget"], "30Mi");
        assert_eq!(config["extractContent"]["cacheDir"], "/tmp/cache");
        assert_eq!(config["extractContent"]["catalogDir"], "/configs");
    }

    #[test]
    fn status_keeps_olm_config_map_reference() {
        let status: CatalogSourceStatus = serde_json::from_value(serde_json::json!({
            "configMapReference": {"name": "catalog", "namespace": "olm", "uid": "abc", "resourceVersion": "7",
                                   "lastUpdateTime": "2024-01-01T00:00:00Z"}
        }))
        .expect("status parses");
        let value = serde_json::to_value(&status).expect("status serializes");
        let reference = &value["configMapReference"];
        assert_eq!(reference["uid"], "abc");
        assert_eq!(reference["resourceVersion"], "7");
        assert!(reference["lastUpdateTime"].is_string());
    }
}

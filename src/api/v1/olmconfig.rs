//! The OLMConfig: cluster-wide switches of the legacy loops; one object, named `cluster`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// The name of the one OLMConfig the controller reads.
pub const OLM_CONFIG_NAME: &str = "cluster";

/// Desired cluster-wide configuration.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OLMConfig",
    doc = "Cluster-wide configuration of the legacy loops; the controller reads the one named cluster.",
    plural = "olmconfigs",
    status = "OlmConfigStatus",
    category = "olm"
)]
#[serde(rename_all = "camelCase")]
pub struct OLMConfigSpec {
    /// Optional behaviour of the legacy loops.
    #[serde(default)]
    pub features: Option<Features>,
}

/// Optional behaviour.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Features {
    /// Stop copying the CSVs of AllNamespaces operators into every namespace.
    #[serde(default, rename = "disableCopiedCSVs")]
    pub disable_copied_csvs: Option<bool>,
    /// How often the package server refreshes its cache, as a Go duration.
    #[serde(default)]
    pub package_server_sync_interval: Option<String>,
}

/// Observed state of the OLMConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OlmConfigStatus {
    /// Conditions such as DisabledCopiedCSVs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

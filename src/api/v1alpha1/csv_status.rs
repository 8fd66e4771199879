//! The status of a ClusterServiceVersion as OLM v0 reports it: its phase, the history of its conditions, the
//! requirements it checked and what cleaning it up still holds.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;

/// The phases of a ClusterServiceVersion's life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CsvPhase {
    /// Not yet processed.
    #[default]
    #[serde(rename = "")]
    None,
    Pending,
    InstallReady,
    Installing,
    Succeeded,
    Failed,
    Unknown,
    Replacing,
    Deleting,
}

/// Observed state of a ClusterServiceVersion.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionStatus {
    /// Current phase.
    #[serde(default)]
    pub phase: CsvPhase,
    /// Human-readable detail of the phase.
    #[serde(default)]
    pub message: Option<String>,
    /// Machine-readable reason of the phase.
    #[serde(default)]
    pub reason: Option<String>,
    /// When the status was last updated.
    #[serde(default)]
    pub last_update_time: Option<Time>,
    /// When the phase last changed.
    #[serde(default)]
    pub last_transition_time: Option<Time>,
    /// History of phase transitions, newest last, at most 20.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<CsvCondition>,
    /// Status of each requirement: CRDs, APIServices, ServiceAccounts and their rules.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub requirement_status: Vec<RequirementStatus>,
    /// When webhook and APIService serving certificates were last issued.
    #[serde(default)]
    pub certs_last_updated: Option<Time>,
    /// When serving certificates are due to be rotated.
    #[serde(default)]
    pub certs_rotate_at: Option<Time>,
    /// Custom resources awaiting deletion when cleanup is enabled.
    #[serde(default)]
    pub cleanup: Option<CleanupStatus>,
}

/// One entry of a CSV's phase history.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvCondition {
    /// The phase entered.
    #[serde(default)]
    pub phase: CsvPhase,
    /// Human-readable detail.
    #[serde(default)]
    pub message: Option<String>,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// When the entry was last updated.
    #[serde(default)]
    pub last_update_time: Option<Time>,
    /// When the phase was entered.
    #[serde(default)]
    pub last_transition_time: Option<Time>,
}

/// Status of one requirement of a CSV.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RequirementStatus {
    /// API group of the required object.
    #[serde(default)]
    pub group: String,
    /// API version of the required object.
    #[serde(default)]
    pub version: String,
    /// Kind of the required object.
    #[serde(default)]
    pub kind: String,
    /// Name of the required object.
    #[serde(default)]
    pub name: String,
    /// Present, PresentNotSatisfied, NotPresent, NotSatisfied, Satisfied, ...
    #[serde(default)]
    pub status: String,
    /// Human-readable detail.
    #[serde(default)]
    pub message: String,
    /// UID of the object found.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Status of what the requirement depends on (a ServiceAccount's rules).
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<DependentStatus>,
}

/// Status of something a requirement depends on.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct DependentStatus {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Satisfied or NotSatisfied.
    #[serde(default)]
    pub status: String,
    /// UID of the object found.
    #[serde(default)]
    pub uuid: Option<String>,
    /// Detail, such as `namespaced rule:{...}`.
    #[serde(default)]
    pub message: Option<String>,
}

/// Custom resources awaiting deletion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CleanupStatus {
    /// Kinds with instances pending deletion.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub pending_deletion: Vec<ResourceList>,
}

/// Instances of one kind pending deletion.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceList {
    /// API group.
    #[serde(default)]
    pub group: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// The instances.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub instances: Vec<ResourceInstance>,
}

/// One instance pending deletion.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ResourceInstance {
    /// Name.
    pub name: String,
    /// Namespace; absent for cluster-scoped kinds.
    #[serde(default)]
    pub namespace: Option<String>,
}

//! The Subscription: OLM v0's request to install a package from a CatalogSource channel and follow its updates.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ObjectReference, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;

/// Desired state of a Subscription.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    doc = "A request to install a package from a CatalogSource channel and follow its updates.",
    namespaced,
    status = "SubscriptionStatus",
    category = "olm",
    shortname = "sub",
    shortname = "subs",
    printcolumn = r#"{"name":"Package","type":"string","jsonPath":".spec.name","description":"The package subscribed to"}"#,
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.source","description":"The catalog source for the specified package"}"#,
    printcolumn = r#"{"name":"Channel","type":"string","jsonPath":".spec.channel","description":"The channel of updates to subscribe to"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// Name of the CatalogSource.
    pub source: String,
    /// Namespace of the CatalogSource.
    pub source_namespace: String,
    /// Name of the package.
    pub name: String,
    /// Channel of the package to follow; the default channel when absent.
    #[serde(default)]
    pub channel: Option<String>,
    /// The CSV to install first.
    #[serde(rename = "startingCSV", default)]
    pub starting_csv: Option<String>,
    /// Automatic or Manual approval of InstallPlans.
    #[serde(default)]
    pub install_plan_approval: Option<InstallPlanApproval>,
    /// Overrides applied to the operator's Deployments.
    #[serde(default)]
    pub config: Option<SubscriptionConfig>,
}

/// Approval of InstallPlans.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InstallPlanApproval {
    /// InstallPlans run without a person.
    #[default]
    Automatic,
    /// InstallPlans wait for `spec.approved`.
    Manual,
}

/// Overrides applied to the Deployments of a subscribed operator.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionConfig {
    /// Selects the pods to configure.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Node selector of the pods.
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the pods.
    #[serde(default)]
    pub tolerations: Option<Vec<Toleration>>,
    /// Resource requirements of the containers.
    #[serde(default)]
    pub resources: Option<ResourceRequirements>,
    /// Environment sources added to the containers.
    #[serde(default)]
    pub env_from: Option<Vec<EnvFromSource>>,
    /// Environment variables added to the containers.
    #[serde(default)]
    pub env: Option<Vec<EnvVar>>,
    /// Volumes added to the pods.
    #[serde(default)]
    pub volumes: Option<Vec<Volume>>,
    /// Volume mounts added to the containers.
    #[serde(default)]
    pub volume_mounts: Option<Vec<VolumeMount>>,
    /// Affinity of the pods.
    #[serde(default)]
    pub affinity: Option<Affinity>,
    /// Annotations added to the Deployments and pods.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// States of a Subscription.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SubscriptionState {
    #[default]
    #[serde(rename = "")]
    None,
    UpgradeAvailable,
    UpgradePending,
    AtLatestKnown,
    UpgradeFailed,
}

/// Observed state of a Subscription.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV resolved as current.
    #[serde(rename = "currentCSV", default)]
    pub current_csv: Option<String>,
    /// The CSV installed.
    #[serde(rename = "installedCSV", default)]
    pub installed_csv: Option<String>,
    /// State of the subscription.
    #[serde(default)]
    pub state: SubscriptionState,
    /// Reason of the state.
    #[serde(default)]
    pub reason: Option<String>,
    /// The current InstallPlan.
    #[serde(default)]
    pub install_plan_ref: Option<ObjectReference>,
    /// Generation of the current InstallPlan.
    #[serde(default)]
    pub install_plan_generation: Option<i64>,
    /// The current InstallPlan, as OLM first recorded it.
    #[serde(default, rename = "installplan")]
    pub install_plan: Option<InstallPlanReference>,
    /// Conditions of the subscription.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<SubscriptionCondition>,
    /// Health of the catalogs the namespace resolves from.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub catalog_health: Vec<SubscriptionCatalogHealth>,
    /// When the status was last updated.
    #[serde(default)]
    pub last_updated: Option<Time>,
}

/// A reference to an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanReference {
    /// API version of the InstallPlan.
    #[serde(default)]
    pub api_version: String,
    /// Kind; InstallPlan.
    #[serde(default)]
    pub kind: String,
    /// Name of the InstallPlan.
    #[serde(default)]
    pub name: String,
    /// UID of the InstallPlan.
    #[serde(default)]
    pub uuid: String,
}

/// A condition of a Subscription.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCondition {
    /// Type: CatalogSourcesUnhealthy, InstallPlanMissing, InstallPlanPending, InstallPlanFailed, ResolutionFailed, ...
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
    /// When the condition was last probed.
    #[serde(default)]
    pub last_heartbeat_time: Option<Time>,
    /// When the condition last changed status.
    #[serde(default)]
    pub last_transition_time: Option<Time>,
}

/// Health of one CatalogSource.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionCatalogHealth {
    /// The CatalogSource.
    pub catalog_source_ref: ObjectReference,
    /// When its health was last checked.
    #[serde(default)]
    pub last_updated: Option<Time>,
    /// Whether it is healthy.
    pub healthy: bool,
}

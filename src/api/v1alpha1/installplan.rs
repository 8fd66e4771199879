//! The InstallPlan: OLM v0's resolved set of steps that installs or upgrades operators in a namespace.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;

use super::InstallPlanApproval;

/// Desired state of an InstallPlan.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "InstallPlan",
    doc = "The resolved steps that install or upgrade operators in a namespace.",
    namespaced,
    status = "InstallPlanStatus",
    category = "olm",
    shortname = "ip",
    printcolumn = r#"{"name":"CSV","type":"string","jsonPath":".spec.clusterServiceVersionNames[0]","description":"The first CSV in the list of clusterServiceVersionNames"}"#,
    printcolumn = r#"{"name":"Approval","type":"string","jsonPath":".spec.approval","description":"The approval mode"}"#,
    printcolumn = r#"{"name":"Approved","type":"boolean","jsonPath":".spec.approved"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanSpec {
    /// Name of the CatalogSource the plan was resolved from (OLM's json name is `source`).
    #[serde(default, rename = "source")]
    pub catalog_source: Option<String>,
    /// Namespace of that CatalogSource (OLM's json name is `sourceNamespace`).
    #[serde(default, rename = "sourceNamespace")]
    pub catalog_source_namespace: Option<String>,
    /// CSVs the plan installs.
    pub cluster_service_version_names: Vec<String>,
    /// Automatic or Manual.
    pub approval: InstallPlanApproval,
    /// Whether the plan may run.
    pub approved: bool,
    /// Generation of the plan in its namespace.
    #[serde(default)]
    pub generation: Option<i64>,
}

/// Phases of an InstallPlan.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum InstallPlanPhase {
    #[default]
    #[serde(rename = "")]
    None,
    Planning,
    RequiresApproval,
    Installing,
    Complete,
    Failed,
}

/// Observed state of an InstallPlan.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanStatus {
    /// Current phase.
    #[serde(default)]
    pub phase: InstallPlanPhase,
    /// Conditions of the plan.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<InstallPlanCondition>,
    /// CatalogSources the plan used.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub catalog_sources: Vec<String>,
    /// The steps of the plan.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<Step>,
    /// Bundles being unpacked for the plan.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub bundle_lookups: Vec<BundleLookup>,
    /// The ServiceAccount the plan's steps are applied as.
    #[serde(default)]
    pub attenuated_service_account_ref: Option<ObjectReference>,
    /// When the plan started installing.
    #[serde(default)]
    pub start_time: Option<Time>,
    /// Human-readable detail.
    #[serde(default)]
    pub message: Option<String>,
}

/// A condition of an InstallPlan.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallPlanCondition {
    /// Type: Resolved or Installed.
    #[serde(rename = "type", default)]
    pub type_: String,
    /// True, False or Unknown.
    #[serde(default)]
    pub status: String,
    /// When the condition was last updated.
    #[serde(default)]
    pub last_update_time: Option<Time>,
    /// When the condition last changed status.
    #[serde(default)]
    pub last_transition_time: Option<Time>,
    /// Machine-readable reason.
    #[serde(default)]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
}

/// One object the plan creates or updates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Step {
    /// The CSV this step belongs to.
    #[serde(default)]
    pub resolving: String,
    /// The object.
    pub resource: StepResource,
    /// Whether the plan succeeds without this step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub optional: bool,
    /// Unknown, NotPresent, Present, Created, NotCreated, WaitingForApi or UnsupportedResource.
    #[serde(default)]
    pub status: String,
}

/// The object of a step.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StepResource {
    /// The CatalogSource the object came from.
    #[serde(default)]
    pub source_name: String,
    /// Namespace of that CatalogSource.
    #[serde(default)]
    pub source_namespace: String,
    /// API group.
    #[serde(default)]
    pub group: String,
    /// API version.
    #[serde(default)]
    pub version: String,
    /// Kind.
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// The object as JSON, or a reference to a ConfigMap holding it.
    #[serde(default)]
    pub manifest: Option<String>,
}

/// A bundle being unpacked.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BundleLookup {
    /// The bundle image.
    pub path: String,
    /// Name of the bundle's CSV.
    pub identifier: String,
    /// The CSV it replaces.
    #[serde(default)]
    pub replaces: String,
    /// The CatalogSource it came from.
    pub catalog_source_ref: ObjectReference,
    /// Conditions of the lookup.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<InstallPlanCondition>,
    /// The bundle's properties as JSON.
    #[serde(default)]
    pub properties: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_uses_olm_json_names() {
        let spec: InstallPlanSpec = serde_json::from_value(serde_json::json!({
            "source": "community",
            "sourceNamespace": "olm",
            "clusterServiceVersionNames": ["plumbus.v1.0.0"],
            "approval": "Manual",
            "approved": false,
            "generation": 2
        }))
        .expect("spec parses");
        assert_eq!(spec.catalog_source.as_deref(), Some("community"));
        assert_eq!(spec.catalog_source_namespace.as_deref(), Some("olm"));
        let value = serde_json::to_value(&spec).expect("spec serializes");
        assert_eq!(value["source"], "community");
        assert_eq!(value["sourceNamespace"], "olm");
        assert!(value.get("catalogSource").is_none());
        assert!(value.get("catalogSourceNamespace").is_none());
    }
}

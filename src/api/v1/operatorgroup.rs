//! The OperatorGroup: the namespaces the operators of one namespace watch, and the ServiceAccount they install as.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;

/// Annotation on a CSV: the OperatorGroup it belongs to.
pub const OPERATOR_GROUP_ANNOTATION: &str = "olm.operatorGroup";
/// Annotation on a CSV and its pods: the namespace of its OperatorGroup.
pub const OPERATOR_NAMESPACE_ANNOTATION: &str = "olm.operatorNamespace";
/// Annotation on a CSV and its pods: the sorted, comma-joined target namespaces (empty for all namespaces).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";
/// Annotation on an OperatorGroup: the APIs its operators provide, as `Kind.version.group`, sorted, comma-joined.
pub const PROVIDED_APIS_ANNOTATION: &str = "olm.providedAPIs";
/// Annotation on an OperatorGroup: who named its `spec.serviceAccountName` (the user as the API server authenticated
/// them, JSON), written by the controller's mutating webhook only. The account lends its rights to Installs only
/// where that person could run as it themselves (`docs/security.md`, invariant 3).
pub const ACCOUNT_NAMED_BY_ANNOTATION: &str = "v2alpha1.operators.coreos.com/service-account-named-by";

/// Desired state of an OperatorGroup.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorGroup",
    doc = "The namespaces the operators of a namespace watch, and the ServiceAccount they are installed as.",
    namespaced,
    status = "OperatorGroupStatus",
    category = "olm",
    shortname = "og",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// Selects target namespaces by label; ignored when `targetNamespaces` is set. Empty or absent selects all.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Explicit target namespaces.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub target_namespaces: Vec<String>,
    /// The ServiceAccount, in the group's namespace, that operators of the group are installed as.
    #[serde(default)]
    pub service_account_name: Option<String>,
    /// Whether `olm.providedAPIs` is set by hand and never changed by OLM.
    #[serde(default, rename = "staticProvidedAPIs", skip_serializing_if = "std::ops::Not::not")]
    pub static_provided_apis: bool,
    /// How operators of the group upgrade: Default, or TechPreviewUnsafeFailForward to allow upgrading past failed
    /// installs (a plain string, as OLM's type is).
    #[serde(default)]
    pub upgrade_strategy: UpgradeStrategyName,
}

/// The upgrade strategies OLM knows.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpgradeStrategyName {
    /// Upgrades wait for the previous install to succeed.
    #[default]
    Default,
    /// Upgrades may replace a failed install.
    TechPreviewUnsafeFailForward,
}

/// Observed state of an OperatorGroup.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupStatus {
    /// The target namespaces; `[""]` for all namespaces.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// The ServiceAccount found for `spec.serviceAccountName`.
    #[serde(default)]
    pub service_account_ref: Option<ObjectReference>,
    /// When the status last changed.
    #[serde(default)]
    pub last_updated: Option<Time>,
    /// Conditions such as MultipleOperatorGroup and OperatorGroupServiceAccount.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl OperatorGroupSpec {
    /// Whether the group targets every namespace: no explicit targets and an empty or absent selector.
    pub fn is_global(&self) -> bool {
        self.target_namespaces.is_empty()
            && self.selector.as_ref().is_none_or(|selector| {
                selector.match_labels.as_ref().is_none_or(|labels| labels.is_empty())
                    && selector.match_expressions.as_ref().is_none_or(|expressions| expressions.is_empty())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_without_targets_or_selector_is_global() {
        assert!(OperatorGroupSpec::default().is_global());
        let empty_selector = OperatorGroupSpec { selector: Some(LabelSelector::default()), ..Default::default() };
        assert!(empty_selector.is_global());
    }

    #[test]
    fn group_with_targets_or_selector_is_not_global() {
        let targeted = OperatorGroupSpec { target_namespaces: vec!["a".into()], ..Default::default() };
        assert!(!targeted.is_global());
        let selected = OperatorGroupSpec {
            selector: Some(LabelSelector {
                match_labels: Some([("team".to_owned(), "a".to_owned())].into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(!selected.is_global());
    }
}

//! The ClusterServiceVersion: an operator's metadata, install strategy, owned and required APIs, and its
//! installation status as OLM v0 reports it.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::RuleWithOperations;
use k8s_openapi::api::apps::v1::DeploymentSpec;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use crate::api::nullable::null_as_default;

use super::arbitrary_json;
use super::csv_status::ClusterServiceVersionStatus;

/// Desired state of a ClusterServiceVersion, as written by the operator's author.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    doc = "An operator version: its metadata, install strategy and APIs, and its installation status.",
    namespaced,
    status = "ClusterServiceVersionStatus",
    category = "olm",
    shortname = "csv",
    shortname = "csvs",
    printcolumn = r#"{"name":"Display","type":"string","jsonPath":".spec.displayName","description":"The name of the CSV"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".spec.version","description":"The version of the CSV"}"#,
    printcolumn = r#"{"name":"Release","type":"string","jsonPath":".spec.release","description":"The release of this version of the CSV"}"#,
    printcolumn = r#"{"name":"Replaces","type":"string","jsonPath":".spec.replaces","description":"The name of a CSV that this one replaces"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterServiceVersionSpec {
    /// How the operator is installed: its deployments and the permissions they need.
    pub install: NamedInstallStrategy,
    /// Semantic version of the operator.
    #[serde(default)]
    pub version: Option<String>,
    /// Packaging release of this version (dot-separated alphanumeric identifiers, at most 20 characters), which
    /// tells apart builds of the same version.
    #[serde(default)]
    pub release: Option<String>,
    /// Maturity of the operator (alpha, beta, stable, ...).
    #[serde(default)]
    pub maturity: Option<String>,
    /// CRDs the operator owns and requires.
    #[serde(default, rename = "customresourcedefinitions")]
    pub custom_resource_definitions: Option<CustomResourceDefinitions>,
    /// APIServices the operator owns and requires.
    #[serde(default, rename = "apiservicedefinitions")]
    pub api_service_definitions: Option<ApiServiceDefinitions>,
    /// Admission and conversion webhooks the operator serves.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        rename = "webhookdefinitions",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub webhook_definitions: Vec<WebhookDescription>,
    /// Built-in APIs the operator needs the cluster to serve.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        rename = "nativeAPIs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub native_apis: Vec<GroupVersionKind>,
    /// The lowest Kubernetes version the operator runs on.
    #[serde(default)]
    pub min_kube_version: Option<String>,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Description, in Markdown.
    #[serde(default)]
    pub description: Option<String>,
    /// Search keywords.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// People who maintain the operator.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub maintainers: Vec<Maintainer>,
    /// Who publishes the operator.
    #[serde(default)]
    pub provider: Option<AppLink>,
    /// Links to documentation and sources.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<AppLink>,
    /// Icons of the operator.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub icon: Vec<Icon>,
    /// Which OperatorGroup shapes the operator supports.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<InstallMode>,
    /// The name of the CSV this one upgrades.
    #[serde(default)]
    pub replaces: Option<String>,
    /// Names of CSVs this one may upgrade directly, skipping them.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub skips: Vec<String>,
    /// Labels OLM copies onto objects it creates for the CSV.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations OLM copies onto objects it creates for the CSV.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Selects the operator's resources.
    #[serde(default)]
    pub selector: Option<LabelSelector>,
    /// Images the operator uses, for disconnected mirroring.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub related_images: Vec<RelatedImage>,
    /// Whether OLM deletes the operator's custom resources when the CSV goes.
    #[serde(default)]
    pub cleanup: Option<CleanupSpec>,
}

/// The install strategy, of which OLM knows one: `deployment`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct NamedInstallStrategy {
    /// Name of the strategy; `deployment`.
    pub strategy: String,
    /// The deployment strategy's details.
    #[serde(default)]
    pub spec: StrategyDetailsDeployment,
}

/// Deployments, and the permissions their ServiceAccounts need.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDetailsDeployment {
    /// The operator's Deployments.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<StrategyDeploymentSpec>,
    /// Rules granted in each target namespace.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<StrategyDeploymentPermissions>,
    /// Rules granted cluster-wide.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub cluster_permissions: Vec<StrategyDeploymentPermissions>,
}

/// One Deployment of the operator.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct StrategyDeploymentSpec {
    /// Name of the Deployment.
    pub name: String,
    /// The Deployment's spec.
    pub spec: DeploymentSpec,
    /// Labels of the Deployment.
    #[serde(default)]
    pub label: Option<BTreeMap<String, String>>,
}

/// Rules granted to a ServiceAccount.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StrategyDeploymentPermissions {
    /// The ServiceAccount; `default` when empty.
    #[serde(default)]
    pub service_account_name: String,
    /// The rules.
    #[serde(default, deserialize_with = "null_as_default")]
    pub rules: Vec<PolicyRule>,
}

/// CRDs the operator owns and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CustomResourceDefinitions {
    /// CRDs the operator provides.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CrdDescription>,
    /// CRDs another operator must provide.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CrdDescription>,
}

/// A CRD the operator owns or requires.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CrdDescription {
    /// Name of the CRD: `<plural>.<group>`.
    pub name: String,
    /// Version of the API.
    pub version: String,
    /// Kind of the API.
    pub kind: String,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Kinds the operator creates for instances of this API.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceReference>,
    /// Descriptors of status fields, for user interfaces.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub status_descriptors: Vec<Descriptor>,
    /// Descriptors of spec fields, for user interfaces.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub spec_descriptors: Vec<Descriptor>,
    /// Descriptors of actions, for user interfaces.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub action_descriptors: Vec<Descriptor>,
}

/// APIServices the operator owns and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ApiServiceDefinitions {
    /// APIServices the operator serves.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<ApiServiceDescription>,
    /// APIServices another operator must serve.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<ApiServiceDescription>,
}

/// An aggregated API the operator serves or needs.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiServiceDescription {
    /// Plural resource name.
    pub name: String,
    /// API group.
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// The Deployment that serves the API.
    #[serde(default)]
    pub deployment_name: Option<String>,
    /// The port the serving container listens on.
    #[serde(default)]
    pub container_port: Option<i32>,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Kinds the operator creates for instances of this API.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ApiResourceReference>,
    /// Descriptors of status fields.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub status_descriptors: Vec<Descriptor>,
    /// Descriptors of spec fields.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub spec_descriptors: Vec<Descriptor>,
    /// Descriptors of actions.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub action_descriptors: Vec<Descriptor>,
}

/// A kind created for instances of an API. Every field may be missing, as OLM's decoder allows, and `Kind` is
/// read as `kind` because OLM's decoder matches field names without regard to case.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ApiResourceReference {
    /// Plural resource name.
    #[serde(default)]
    pub name: String,
    /// Kind.
    #[serde(default, alias = "Kind")]
    pub kind: String,
    /// API version.
    #[serde(default)]
    pub version: String,
}

/// A spec, status or action descriptor: how a user interface presents a field.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// JSON path of the field, relative to spec or status.
    pub path: String,
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Descriptor URNs such as `urn:alm:descriptor:com.tectonic.ui:text`.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        rename = "x-descriptors",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub x_descriptors: Vec<String>,
    /// A sample value.
    #[serde(default)]
    #[schemars(schema_with = "arbitrary_json")]
    pub value: Option<serde_json::Value>,
}

/// The kinds of webhook a CSV can define.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum WebhookAdmissionType {
    ValidatingAdmissionWebhook,
    MutatingAdmissionWebhook,
    ConversionWebhook,
}

/// A webhook the operator serves from one of its Deployments.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookDescription {
    /// Name prefix of the webhook configuration.
    pub generate_name: String,
    /// Kind of webhook.
    #[serde(rename = "type")]
    pub webhook_type: WebhookAdmissionType,
    /// The Deployment that serves the webhook; empty when absent, which OLM's schema allows.
    #[serde(default)]
    pub deployment_name: String,
    /// Port of the webhook Service; 443 when absent.
    #[serde(default)]
    pub container_port: Option<i32>,
    /// Port the container listens on.
    #[serde(default)]
    pub target_port: Option<IntOrString>,
    /// Operations and resources the webhook intercepts.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<RuleWithOperations>,
    /// Fail or Ignore.
    #[serde(default)]
    pub failure_policy: Option<String>,
    /// Exact or Equivalent.
    #[serde(default)]
    pub match_policy: Option<String>,
    /// Selects the objects the webhook sees.
    #[serde(default)]
    pub object_selector: Option<LabelSelector>,
    /// None or NoneOnDryRun.
    #[serde(default)]
    pub side_effects: Option<String>,
    /// Timeout of a call, in seconds.
    #[serde(default)]
    pub timeout_seconds: Option<i32>,
    /// AdmissionReview versions the webhook accepts.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub admission_review_versions: Vec<String>,
    /// Never or IfNeeded.
    #[serde(default)]
    pub reinvocation_policy: Option<String>,
    /// HTTP path of the webhook.
    #[serde(default)]
    pub webhook_path: Option<String>,
    /// CRDs whose conversion the webhook serves.
    #[serde(
        default,
        deserialize_with = "null_as_default",
        rename = "conversionCRDs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub conversion_crds: Vec<String>,
}

/// A built-in API identified by group, version and kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct GroupVersionKind {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
}

/// A maintainer of the operator.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Maintainer {
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// Email address.
    #[serde(default)]
    pub email: Option<String>,
}

/// A named link.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct AppLink {
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// URL.
    #[serde(default)]
    pub url: Option<String>,
}

/// An icon.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Icon {
    /// Base64-encoded image.
    #[serde(default, rename = "base64data")]
    pub base64_data: String,
    /// Media type of the image.
    #[serde(default, rename = "mediatype")]
    pub media_type: String,
}

/// The install mode types of an OperatorGroup shape.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
pub enum InstallModeType {
    /// Watches the namespace it is installed in.
    OwnNamespace,
    /// Watches one other namespace.
    SingleNamespace,
    /// Watches several namespaces.
    MultiNamespace,
    /// Watches every namespace.
    AllNamespaces,
}

/// Whether the operator supports an install mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub struct InstallMode {
    /// The install mode.
    #[serde(rename = "type")]
    pub mode: InstallModeType,
    /// Whether it is supported.
    pub supported: bool,
}

/// An image the operator uses.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct RelatedImage {
    /// Name of the image's role.
    #[serde(default)]
    pub name: String,
    /// Image reference.
    pub image: String,
}

/// Cleanup of custom resources when the CSV is deleted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CleanupSpec {
    /// Whether cleanup is enabled.
    #[serde(default)]
    pub enabled: bool,
}

impl ClusterServiceVersionSpec {
    /// Whether the CSV supports an install mode; a mode it does not list counts as unsupported, as in OLM.
    pub fn supports(&self, mode: InstallModeType) -> bool {
        self.install_modes.iter().any(|candidate| candidate.mode == mode && candidate.supported)
    }

    /// The namespaces an operator installed without an OperatorGroup watches, as users expect: all namespaces
    /// (`""`) when it supports that, otherwise `own_namespace`.
    pub fn targets_without_group(&self, own_namespace: &str) -> Vec<String> {
        if self.supports(InstallModeType::AllNamespaces) {
            vec![String::new()]
        } else {
            vec![own_namespace.to_owned()]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1alpha1::CsvPhase;

    #[test]
    fn unlisted_install_mode_is_unsupported() {
        let spec = ClusterServiceVersionSpec {
            install_modes: vec![
                InstallMode { mode: InstallModeType::OwnNamespace, supported: true },
                InstallMode { mode: InstallModeType::AllNamespaces, supported: false },
            ],
            ..Default::default()
        };
        assert!(spec.supports(InstallModeType::OwnNamespace));
        assert!(!spec.supports(InstallModeType::AllNamespaces));
        assert!(!spec.supports(InstallModeType::MultiNamespace));
    }

    #[test]
    fn olm_spec_fields_parse() {
        let spec: ClusterServiceVersionSpec = serde_json::from_value(serde_json::json!({
            "displayName": "Plumbus",
            "version": "1.0.0",
            "release": "1.el9",
            "install": {"strategy": "deployment", "spec": {"deployments": []}},
            "webhookdefinitions": [{"generateName": "vplumbus.example.com", "type": "ValidatingAdmissionWebhook",
                                    "sideEffects": "None", "admissionReviewVersions": ["v1"]}]
        }))
        .expect("spec parses");
        assert_eq!(spec.release.as_deref(), Some("1.el9"));
        assert_eq!(spec.webhook_definitions.len(), 1);
        assert!(spec.webhook_definitions[0].deployment_name.is_empty());
        let value = serde_json::to_value(&spec).expect("spec serializes");
        assert_eq!(value["release"], "1.el9");
    }

    #[test]
    fn empty_phase_is_none() {
        let status: ClusterServiceVersionStatus =
            serde_json::from_value(serde_json::json!({"phase": ""})).expect("status parses");
        assert_eq!(status.phase, CsvPhase::None);
    }
}

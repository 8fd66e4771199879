//! The `Operator`: the single entry point a user applies, and the aggregated state of everything installed for it.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::DeploymentConfig;
use crate::api::union::{Member, UnionError};

/// An Operator annotated so (`"true"`) is made a Subscription again.
pub const REVERT_ANNOTATION: &str = "operators.coreos.com/revert-to-subscription";

/// Desired state of an Operator: where its content comes from and how it is updated.
#[skip_serializing_none]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v2alpha1",
    kind = "Operator",
    doc = "An operator: where its content comes from, and the aggregated state of its components.",
    status = "OperatorStatus",
    category = "olm",
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.metadata.version","description":"Version of the newest successful ClusterServiceVersion among the components"}"#,
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.updates.type","description":"Where content comes from: CatalogSource or ManifestImage"}"#,
    printcolumn = r#"{"name":"Package","type":"string","priority":1,"jsonPath":".spec.updates.catalogSource.package"}"#,
    printcolumn = r#"{"name":"Channel","type":"string","priority":1,"jsonPath":".spec.updates.catalogSource.channel"}"#,
    printcolumn = r#"{"name":"Image","type":"string","priority":1,"jsonPath":".spec.updates.manifestImage"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state","description":"Summary of the top-level conditions"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorSpec {
    /// Where the operator's content is installed and updated from. Without it the Operator only gathers the
    /// components already labelled for it.
    #[serde(default)]
    pub updates: Option<Updates>,
    /// How the operator's Deployments are configured (OLM v0's Subscription `spec.config`, OLM v1's
    /// `deploymentConfig`), passed to its Install with every bundle it installs. Changing it changes the Install's
    /// content, which faces the same approval as an update.
    #[serde(default)]
    pub config: Option<DeploymentConfig>,
    /// The namespace the operator's namespace-less bundle content goes to (its Deployments, its accounts, its CSV).
    /// Without it, the controller's `--operator-namespace`. An Operator adopted from a Subscription keeps the
    /// Subscription's namespace. Changing it moves the content, which faces the same approval as an update.
    #[serde(default)]
    pub install_namespace: Option<String>,
}

/// Which source an Operator's updates come from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum UpdateSourceType {
    /// Resolve bundles from a package and channel of a CatalogSource.
    CatalogSource,
    /// Install a single bundle image.
    ManifestImage,
}

/// A union: `type` names the one member that is set.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Updates {
    /// The member of this union that is set.
    #[serde(rename = "type")]
    pub source_type: UpdateSourceType,
    /// Resolve content from a package and channel of a CatalogSource.
    #[serde(default)]
    pub catalog_source: Option<CatalogSourceUpdates>,
    /// A fully qualified bundle image reference (registry included), preferably pinned by digest.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub manifest_image: Option<String>,
}

impl Updates {
    /// The members of the union, for its schema rule.
    pub const MEMBERS: &'static [Member] = &[
        Member { discriminator: "CatalogSource", field: "catalogSource" },
        Member { discriminator: "ManifestImage", field: "manifestImage" },
    ];
}

/// The member of [`Updates`] that is set, read after the schema's union rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum UpdateSource<'a> {
    CatalogSource(&'a CatalogSourceUpdates),
    ManifestImage(&'a str),
}

impl Updates {
    /// The selected member; an error when the object breaks the union rule the schema enforces.
    pub fn source(&self) -> Result<UpdateSource<'_>, UnionError> {
        match (self.source_type, &self.catalog_source, &self.manifest_image) {
            (UpdateSourceType::CatalogSource, Some(catalog), None) => Ok(UpdateSource::CatalogSource(catalog)),
            (UpdateSourceType::ManifestImage, None, Some(image)) => Ok(UpdateSource::ManifestImage(image)),
            (UpdateSourceType::CatalogSource, None, _) => {
                Err(UnionError::MemberMissing { discriminator: "CatalogSource", field: "catalogSource" })
            }
            (UpdateSourceType::CatalogSource, Some(_), Some(_)) => {
                Err(UnionError::ExtraMember { discriminator: "CatalogSource", field: "manifestImage" })
            }
            (UpdateSourceType::ManifestImage, _, None) => {
                Err(UnionError::MemberMissing { discriminator: "ManifestImage", field: "manifestImage" })
            }
            (UpdateSourceType::ManifestImage, Some(_), Some(_)) => {
                Err(UnionError::ExtraMember { discriminator: "ManifestImage", field: "catalogSource" })
            }
        }
    }
}

/// How updates found in a channel are applied.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpdateApproval {
    /// Each update's Install proceeds once its permissions are approved.
    #[default]
    Automatic,
    /// Each update waits for a person before it is installed.
    Manual,
}

/// A package and channel of a CatalogSource to install from and follow.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSourceUpdates {
    /// The package to install. Omit it with `channel` to install only `entrypoint`, without following updates.
    #[serde(default)]
    pub package: Option<String>,
    /// The channel of the package to follow.
    #[serde(default)]
    pub channel: Option<String>,
    /// The name of the first bundle to install; the channel head when omitted.
    #[serde(default)]
    pub entrypoint: Option<String>,
    /// Whether updates are installed automatically or wait for a person.
    #[serde(default)]
    pub approval: UpdateApproval,
    /// The CatalogSource to resolve from. Naming it requires the `install` verb on it.
    #[serde(rename = "ref")]
    pub catalog_ref: CatalogSourceReference,
}

/// A reference to a namespaced CatalogSource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct CatalogSourceReference {
    /// Name of the CatalogSource.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the CatalogSource.
    #[schemars(length(min = 1))]
    pub namespace: String,
}

/// Observed state of an Operator, aggregated from its components.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorStatus {
    /// A one-word summary of the conditions, for `kubectl get`.
    #[serde(default)]
    pub state: Option<OperatorState>,
    /// What the newest successful ClusterServiceVersion among the components says of the operator.
    #[serde(default)]
    pub metadata: Option<OperatorMetadata>,
    /// Updates found for the operator outside what it follows.
    #[serde(default)]
    pub updates: Option<UpdatesStatus>,
    /// Top-level conditions that summarize abnormal state: UpdateAvailable, ComponentsDiverge,
    /// InstallPendingApproval and ContentImportError.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The components gathered by the operator's label, with their status.
    #[serde(default)]
    pub components: Option<Components>,
    /// The generation of the Operator that this status describes.
    #[serde(default)]
    pub observed_generation: Option<i64>,
}

/// One-word summary of an Operator's conditions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum OperatorState {
    /// Content is being resolved from its source.
    Resolving,
    /// An Install waits for a person to approve the permissions it needs.
    PendingApproval,
    /// Content is being applied or is rolling out.
    Installing,
    /// Every component is installed and healthy.
    Installed,
    /// Something failed; the conditions say what.
    Failed,
    /// An Install's content needs more than an InstallPolicy allows; what was installed before keeps running.
    ExceedsPolicy,
}

/// What the operator's ClusterServiceVersion says about it.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorMetadata {
    /// Human-readable name.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Description of the operator.
    #[serde(default)]
    pub description: Option<String>,
    /// Version of the operator.
    #[serde(default)]
    pub version: Option<String>,
    /// APIs the operator provides and requires.
    #[serde(default)]
    pub apis: Option<OperatorApis>,
}

/// APIs an operator provides and requires.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorApis {
    /// APIs the operator owns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub provides: Vec<ApiReference>,
    /// APIs the operator needs another operator to provide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requires: Vec<ApiReference>,
}

/// An API identified by group, version and kind, with its resource names.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct ApiReference {
    /// API group.
    pub group: String,
    /// API version; empty when any version satisfies a requirement.
    #[serde(default)]
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    #[serde(default)]
    pub plural: Option<String>,
    /// Singular resource name.
    #[serde(default)]
    pub singular: Option<String>,
}

/// Updates found for an Operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct UpdatesStatus {
    /// Channels of the package, other than the one followed, that hold a newer version.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub available: Vec<AvailableUpdate>,
}

/// A channel that holds a newer version of the operator.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct AvailableUpdate {
    /// The package.
    pub package: String,
    /// The channel holding the newer version.
    pub channel: String,
    /// The newest version in that channel.
    #[serde(default)]
    pub version: Option<String>,
}

/// The components of an Operator.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Components {
    /// The label selector that gathers the components, across all namespaces and cluster-scoped kinds.
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
    /// References to the components, with conditions worth a person's attention.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refs: Vec<ComponentRef>,
}

/// A reference to one component, enriched with its relevant conditions.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentRef {
    /// Kind of the component.
    pub kind: String,
    /// API version of the component.
    pub api_version: String,
    /// Namespace of the component; absent for cluster-scoped kinds.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name of the component.
    pub name: String,
    /// UID of the component.
    #[serde(default)]
    pub uid: Option<String>,
    /// The resourceVersion the conditions were read at.
    #[serde(default)]
    pub resource_version: Option<String>,
    /// Abnormal or informative conditions, copied from the component where it has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ComponentCondition>,
}

/// A condition of a component. Fields are optional because they are copied from kinds whose conditions
/// do not all carry a reason or a transition time (Pods, Deployments).
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentCondition {
    /// Type of the condition.
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    pub status: String,
    /// Machine-readable reason of the last transition.
    #[serde(default)]
    pub reason: Option<String>,
    /// Human-readable message.
    #[serde(default)]
    pub message: Option<String>,
    /// When the condition last changed status.
    #[serde(default)]
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog_updates() -> CatalogSourceUpdates {
        CatalogSourceUpdates {
            package: Some("plumbus".into()),
            channel: Some("stable".into()),
            entrypoint: None,
            approval: UpdateApproval::Automatic,
            catalog_ref: CatalogSourceReference { name: "community".into(), namespace: "my-ns".into() },
        }
    }

    #[test]
    fn union_yields_the_named_member() {
        let updates = Updates {
            source_type: UpdateSourceType::ManifestImage,
            catalog_source: None,
            manifest_image: Some("registry.example/plumbus@sha256:abc".into()),
        };
        assert_eq!(updates.source(), Ok(UpdateSource::ManifestImage("registry.example/plumbus@sha256:abc")));
    }

    #[test]
    fn union_with_a_second_member_is_an_error() {
        let updates = Updates {
            source_type: UpdateSourceType::CatalogSource,
            catalog_source: Some(catalog_updates()),
            manifest_image: Some("registry.example/plumbus:1".into()),
        };
        assert_eq!(
            updates.source(),
            Err(UnionError::ExtraMember { discriminator: "CatalogSource", field: "manifestImage" })
        );
    }

    #[test]
    fn union_without_the_named_member_is_an_error() {
        let updates =
            Updates { source_type: UpdateSourceType::CatalogSource, catalog_source: None, manifest_image: None };
        assert_eq!(
            updates.source(),
            Err(UnionError::MemberMissing { discriminator: "CatalogSource", field: "catalogSource" })
        );
    }

    #[test]
    fn seed_example_deserializes() {
        let yaml = r#"
apiVersion: operators.coreos.com/v2alpha1
kind: Operator
metadata:
  name: plumbus
spec:
  updates:
    type: CatalogSource
    catalogSource:
      package: plumbus
      channel: stable
      entrypoint: plumbus.v2.0.0
      approval: Automatic
      ref:
        name: community
        namespace: my-ns
"#;
        let operator: Operator = serde_yaml_ng::from_str(yaml).expect("seed example parses");
        let updates = operator.spec.updates.expect("updates set");
        match updates.source() {
            Ok(UpdateSource::CatalogSource(catalog)) => {
                assert_eq!(catalog.entrypoint.as_deref(), Some("plumbus.v2.0.0"));
                assert_eq!(catalog.catalog_ref.namespace, "my-ns");
            }
            other => panic!("unexpected source {other:?}"),
        }
    }
}

//! The `Install`: content to apply as a controller-assigned ServiceAccount, gated on approval of the
//! permissions that ServiceAccount lacks.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

use super::DeploymentConfig;
use crate::api::union::{Member, UnionError};

/// Annotation naming the Install an object was created or applied for.
pub const INSTALL_ANNOTATION: &str = "v2alpha1.operators.coreos.com/install";

/// Set to `"true"` on an Install whose content waits for a person's approval even when it needs no new permission:
/// the Install of an Operator whose updates are approved by hand (`approval: Manual`).
pub const MANUAL_APPROVAL_ANNOTATION: &str = "v2alpha1.operators.coreos.com/manual-approval";

/// Who created an Install or an Operator, as the API server authenticated them (a JSON [`Requester`]): written by
/// the controller's mutating webhook on create, immutable after. An OperatorGroup's ServiceAccount lends its
/// existing rights to an Install only when this person may use that account.
pub const CREATOR_ANNOTATION: &str = "v2alpha1.operators.coreos.com/creator";

/// The Subscription (`<namespace>/<name>`) an Install was made for by the InstallPlan loop: written by the controller
/// only (the validating webhook refuses anyone else setting or changing it), so that no Install someone else made is
/// taken for a Subscription's.
pub const SUBSCRIPTION_ANNOTATION: &str = "operators.coreos.com/subscription";

/// Set by the controller's mutating webhook when someone who does not hold what an Install's ServiceAccount was
/// granted changes its content or namespaces (the value names them): the new content is applied only after a person
/// holding everything it needs approves it. Only the controller removes it, once such content is applied.
pub const CONTENT_CHANGED_BY_ANNOTATION: &str = "v2alpha1.operators.coreos.com/content-changed-by";

/// Where an Install or an Operator came from when the controller adopted it (`Subscription <namespace>/<name>`):
/// written by the controller only, so that a person reading the Install knows that what its account held came
/// with the Subscription, approved before the Operator existed.
pub const ADOPTED_FROM_ANNOTATION: &str = "v2alpha1.operators.coreos.com/adopted-from";

/// Beside [`ADOPTED_FROM_ANNOTATION`] on an adopted Install: the uid of the Subscription it was adopted from, so
/// that a Subscription of the same name made later is not taken for it. Written by the controller only.
pub const ADOPTED_FROM_UID_ANNOTATION: &str = "v2alpha1.operators.coreos.com/adopted-from-uid";

/// On an Install the adoption loop made for an operator OLM v0 installed: the CSV (`<namespace>/<name>`) whose
/// objects its first apply may take over (`install::takeover`), and, beside it, that CSV's uid. Written by the
/// controller only: set by anyone else, an Install would take over objects that are not its own.
pub const TAKES_OVER_CSV_ANNOTATION: &str = "v2alpha1.operators.coreos.com/takes-over-csv";
pub const TAKES_OVER_CSV_UID_ANNOTATION: &str = "v2alpha1.operators.coreos.com/takes-over-csv-uid";

/// On an Operator made or chosen for a Subscription: the name of its Install, the Subscription's, which keeps its
/// name (an Install cannot be renamed, and re-creating it would re-create the operator). Written by the controller
/// only; without it, an Operator's Install is named after the Operator.
pub const OPERATOR_INSTALL_ANNOTATION: &str = "v2alpha1.operators.coreos.com/install-name";

/// A user as the API server authenticated them, in the fields access reviews take.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Requester {
    /// The username.
    #[serde(default)]
    pub username: String,
    /// The user's uid, when the authenticator gives one.
    #[serde(default)]
    pub uid: Option<String>,
    /// The user's groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes the authenticator gave.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// Desired state of an Install: what to apply, where, and whether its pending permissions are approved.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v2alpha1",
    kind = "Install",
    doc = "Content applied as a controller-assigned ServiceAccount once a person holding the permissions it lacks approves them.",
    status = "InstallStatus",
    category = "olm",
    printcolumn = r#"{"name":"Approval","type":"string","jsonPath":".spec.approval"}"#,
    printcolumn = r#"{"name":"Pending","type":"integer","jsonPath":".status.pending.count","description":"Number of permission rules waiting for approval"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".status.state"}"#,
    printcolumn = r#"{"name":"Policy","type":"string","jsonPath":".status.policy.state","description":"Whether the content fits every InstallPolicy"}"#,
    printcolumn = r#"{"name":"ServiceAccount","type":"string","priority":1,"jsonPath":".status.serviceAccountRef.name"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstallSpec {
    /// Replaces namespace fields in the content: every object in `from` is installed in `to`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<NamespaceMapping>,
    /// Whether a person holding the pending permissions approved them. The controller resets it to
    /// Unapproved whenever permissions are pending; only a user holding them may set Approved.
    #[serde(default)]
    pub approval: Approval,
    /// What to install; at least one item.
    #[schemars(length(min = 1))]
    pub content: Vec<Content>,
}

/// A namespace rename applied to the content.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct NamespaceMapping {
    /// The namespace as written in the content.
    #[schemars(length(min = 1, max = 63))]
    pub from: String,
    /// The namespace to install into.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub to: String,
}

/// Approval of an Install's pending permissions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Approval {
    /// The content may be applied with the permissions it needs.
    Approved,
    /// Nothing is granted or applied until a person approves.
    #[default]
    Unapproved,
}

/// The kinds of content an Install can apply.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ContentType {
    /// An operator bundle image.
    ManifestImage,
    /// Kubernetes manifests given inline.
    Raw,
}

/// A union: `type` names the one member that is set.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Content {
    /// The member of this union that is set.
    #[serde(rename = "type")]
    pub content_type: ContentType,
    /// A fully qualified bundle image reference (registry included).
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub manifest_image: Option<String>,
    /// One or more Kubernetes objects as YAML or JSON documents.
    #[serde(default)]
    #[schemars(length(min = 1))]
    pub raw: Option<String>,
    /// How the bundle's Deployments are configured, as OLM v0's Subscription `spec.config` and OLM v1's
    /// `deploymentConfig` do: environment, volumes, resources, scheduling, annotations. ManifestImage content only.
    /// Changing it changes the content: it faces the approval a new image would.
    #[serde(default)]
    pub config: Option<DeploymentConfig>,
}

impl Content {
    /// The members of the union, for its schema rule.
    pub const MEMBERS: &'static [Member] = &[
        Member { discriminator: "ManifestImage", field: "manifestImage" },
        Member { discriminator: "Raw", field: "raw" },
    ];
}

/// The member of [`Content`] that is set, read after the schema's union rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentSource<'a> {
    ManifestImage(&'a str),
    Raw(&'a str),
}

impl Content {
    /// The selected member; an error when the object breaks the union rule the schema enforces.
    pub fn source(&self) -> Result<ContentSource<'_>, UnionError> {
        match (self.content_type, &self.manifest_image, &self.raw) {
            (ContentType::ManifestImage, Some(image), None) => Ok(ContentSource::ManifestImage(image)),
            (ContentType::Raw, None, Some(raw)) => Ok(ContentSource::Raw(raw)),
            (ContentType::ManifestImage, None, _) => {
                Err(UnionError::MemberMissing { discriminator: "ManifestImage", field: "manifestImage" })
            }
            (ContentType::ManifestImage, Some(_), Some(_)) => {
                Err(UnionError::ExtraMember { discriminator: "ManifestImage", field: "raw" })
            }
            (ContentType::Raw, _, None) => Err(UnionError::MemberMissing { discriminator: "Raw", field: "raw" }),
            (ContentType::Raw, Some(_), Some(_)) => {
                Err(UnionError::ExtraMember { discriminator: "Raw", field: "manifestImage" })
            }
        }
    }
}

/// Observed state of an Install.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstallStatus {
    /// A one-word summary of the conditions, for `kubectl get`.
    #[serde(default)]
    pub state: Option<InstallState>,
    /// The ServiceAccount the content is applied as. The controller assigns it; requesters never name one.
    #[serde(default)]
    pub service_account_ref: Option<ServiceAccountReference>,
    /// Conditions: PendingApproval, ContentImportError, InvalidContent, Installed, Progressing, ComponentsDiverge, ExceedsPolicy.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The content as resolved, images pinned by digest, in the order of `spec.content`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolved: Vec<ResolvedContent>,
    /// Permissions the content needs that the ServiceAccount does not hold, with whom the content's bindings bind and
    /// which of its ClusterRoles take part in aggregation.
    #[serde(default)]
    pub pending: Option<PendingPermissions>,
    /// The objects last applied: those a later content drops are pruned, and drift is measured against them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<AppliedObject>,
    /// The rules granted to the ServiceAccount for this Install, each approved by a person who held it (or, for
    /// the per-object verbs on an object the Install creates, following from the `create` so approved). Someone who
    /// does not hold them all cannot change the content without a new approval.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub granted: Vec<PendingPermission>,
    /// The content last let through the approval gate. Content that needs a person's approval (a Manual Operator's
    /// update, a moved tag of such an Install, content changed by someone not holding `granted`) is applied only
    /// once approved for its digests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_content: Vec<ResolvedContent>,
    /// Where the Install came from when an Operator adopted it (`Subscription <namespace>/<name>`): what its account
    /// held then was approved for the Subscription; anything more goes through the approval gate.
    #[serde(default)]
    pub adopted_from: Option<String>,
    /// How the content measures against the InstallPolicies; absent while there is none.
    #[serde(default)]
    pub policy: Option<PolicyStatus>,
    /// The generation of the Install that this status describes.
    #[serde(default)]
    pub observed_generation: Option<i64>,
}

/// How an Install's content measures against the InstallPolicies.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PolicyStatus {
    /// `Within` every policy, or `Exceeds` one.
    #[serde(default)]
    pub state: Option<PolicyState>,
    /// What is over a ceiling or forbidden, each with the policy that says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<PolicyViolation>,
}

/// Whether content fits the InstallPolicies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PolicyState {
    Within,
    Exceeds,
}

/// One thing the content needs that a policy does not allow.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct PolicyViolation {
    /// The InstallPolicy.
    pub policy: String,
    /// A rule over its ceiling, or an object it forbids, as a person reads it.
    pub message: String,
}

/// One-word summary of an Install's conditions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum InstallState {
    /// Content is being pulled and its permissions computed.
    Resolving,
    /// Permissions are pending; waiting for a person who holds them to approve.
    PendingApproval,
    /// Approved permissions are being granted and content applied.
    Applying,
    /// Content is applied and matches what was resolved.
    Installed,
    /// Something failed; the conditions say what.
    Failed,
    /// The content needs more than an InstallPolicy allows: it is never applied, whoever approves.
    ExceedsPolicy,
}

/// An object an Install applied.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedObject {
    /// API version of the object, as applied.
    pub api_version: String,
    /// Kind of the object.
    pub kind: String,
    /// Namespace of the object; absent for cluster-scoped kinds.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name of the object.
    pub name: String,
}

/// A reference to a ServiceAccount.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ServiceAccountReference {
    /// Name of the ServiceAccount.
    pub name: String,
    /// Namespace of the ServiceAccount.
    pub namespace: String,
}

/// A content item as resolved: an image pinned by digest, or the digest of raw manifests.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedContent {
    /// The kind of content.
    #[serde(rename = "type")]
    pub content_type: ContentType,
    /// The image reference pinned by digest, for ManifestImage content.
    #[serde(default)]
    pub manifest_image: Option<String>,
    /// The digest of the content (the image manifest's, or the sha256 of raw manifests).
    pub digest: String,
    /// The sha256 of the deployment configuration the bundle is installed with, when it has one: content with
    /// another configuration is other content.
    #[serde(default)]
    pub config_digest: Option<String>,
}

/// Permissions waiting for approval, and what the content's RBAC objects do with them.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PendingPermissions {
    /// Number of rules in `permissions`.
    pub count: i64,
    /// Why a person's approval is needed: `Permissions` (the ServiceAccount lacks them), `ManualApproval` (the
    /// Operator approves updates by hand: every rule the content uses is listed) or `ContentChanged` (someone who
    /// does not hold what was granted changed the content: every rule it uses is listed).
    #[serde(default)]
    pub reason: Option<PendingReason>,
    /// The missing rules, compacted and in a stable order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PendingPermission>,
    /// Every RoleBinding and ClusterRoleBinding of the content: whom it binds to which role, and the rules that role
    /// grants them. `permissions` holds what creating a binding needs; this says who receives it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bindings: Vec<PendingBinding>,
    /// Every ClusterRole of the content that gathers the rules of other ClusterRoles (an aggregationRule) or whose
    /// rules are added to other ClusterRoles (labels their aggregationRules select, such as `aggregate-to-admin`):
    /// such a role grants more, or reaches further, than its own rules say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregations: Vec<PendingAggregation>,
}

/// A RoleBinding or ClusterRoleBinding of the content.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingBinding {
    /// RoleBinding or ClusterRoleBinding.
    pub kind: String,
    /// Namespace of a RoleBinding, the only one its rules hold in; absent for a ClusterRoleBinding, whose rules hold
    /// in every namespace and for cluster-scoped resources.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name of the binding.
    pub name: String,
    /// The role the subjects are bound to.
    pub role_ref: PendingRoleRef,
    /// Whom the binding grants the role's rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<PendingSubject>,
    /// Whether the role exists, in the cluster or in the content. When false, `rules` is unknown rather than empty:
    /// the binding grants whatever a role of that name will hold once someone creates it.
    pub role_found: bool,
    /// The rules the role grants, aggregated ClusterRoles resolved, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<BindingRule>,
}

/// The role a binding refers to.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct PendingRoleRef {
    /// Role (in the binding's namespace) or ClusterRole.
    pub kind: String,
    /// Name of the role.
    pub name: String,
}

/// A subject a binding grants a role to.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct PendingSubject {
    /// User, Group or ServiceAccount.
    pub kind: String,
    /// Namespace of a ServiceAccount (a RoleBinding's own when the subject names none).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Name of the user, group or ServiceAccount.
    pub name: String,
}

/// A rule a bound role grants, as in a PolicyRule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BindingRule {
    /// Verbs, as in a PolicyRule.
    pub verbs: Vec<String>,
    /// API groups, as in a PolicyRule; `""` is the core group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, as in a PolicyRule, with subresources as `resource/subresource`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Resource names the rule is limited to; every name when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource URLs, as in a PolicyRule.
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

/// How a ClusterRole of the content takes part in aggregation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
pub enum AggregationType {
    /// It carries an aggregationRule: it holds the rules of every ClusterRole its selectors match, now and later.
    Gathers,
    /// Other ClusterRoles' aggregationRules select its labels: its rules are added to theirs.
    Extends,
}

/// A ClusterRole of the content that takes part in aggregation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingAggregation {
    /// Gathers (an aggregationRule) or Extends (labels selected by aggregationRules); a ClusterRole doing both is
    /// listed twice.
    #[serde(rename = "type")]
    pub aggregation_type: AggregationType,
    /// Name of the ClusterRole in the content.
    pub cluster_role: String,
    /// Gathers: the selectors of its aggregationRule.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub selectors: Vec<LabelSelector>,
    /// Gathers: the ClusterRoles, in the cluster or the content, whose rules it holds now, directly or through
    /// another aggregated ClusterRole.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregated_roles: Vec<String>,
    /// Extends: the ClusterRoles, in the cluster or the content, its rules are added to, directly or through
    /// another aggregated ClusterRole (`edit` is itself aggregated into `admin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aggregates_into: Vec<String>,
    /// Extends: the ClusterRole's labels, which aggregationRules select, shown even when no ClusterRole selects them
    /// yet: a key containing `aggregate-to-` asks for one that will.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Why an Install waits for a person.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PendingReason {
    /// The ServiceAccount lacks the listed rules.
    Permissions,
    /// Updates are approved by hand; the listed rules are every rule the content uses.
    ManualApproval,
    /// The content was changed by someone who does not hold what was granted; the listed rules are every rule the
    /// content uses.
    ContentChanged,
}

/// Where a pending rule applies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
pub enum PermissionScope {
    /// Granted by a ClusterRole and ClusterRoleBinding: in every namespace, and for cluster-scoped resources.
    Cluster,
    /// Granted by Roles and RoleBindings in the listed namespaces only.
    Namespaced,
}

/// A PolicyRule the ServiceAccount lacks, with where it applies.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingPermission {
    /// Cluster-wide, or only in `namespaces`.
    pub scope: PermissionScope,
    /// The namespaces the rule applies in, when `scope` is Namespaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Verbs, as in a PolicyRule.
    pub verbs: Vec<String>,
    /// API groups, as in a PolicyRule; `""` is the core group.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources, as in a PolicyRule, with subresources as `resource/subresource`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Resource names the rule is limited to; every name when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource URLs, as in a PolicyRule; only with Cluster scope.
    #[serde(default, rename = "nonResourceURLs", skip_serializing_if = "Vec::is_empty")]
    pub non_resource_urls: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_content_yields_its_manifests() {
        let content = Content {
            content_type: ContentType::Raw,
            manifest_image: None,
            raw: Some("kind: Pod".into()),
            config: None,
        };
        assert_eq!(content.source(), Ok(ContentSource::Raw("kind: Pod")));
    }

    #[test]
    fn content_with_both_members_is_an_error() {
        let content = Content {
            content_type: ContentType::Raw,
            manifest_image: Some("registry.example/bus:1".into()),
            raw: Some("kind: Pod".into()),
            config: None,
        };
        assert_eq!(content.source(), Err(UnionError::ExtraMember { discriminator: "Raw", field: "manifestImage" }));
    }

    #[test]
    fn approval_defaults_to_unapproved() {
        let spec: InstallSpec =
            serde_json::from_value(serde_json::json!({"content": [{"type": "Raw", "raw": "kind: Pod"}]}))
                .expect("spec parses");
        assert_eq!(spec.approval, Approval::Unapproved);
    }

    #[test]
    fn pending_permission_serializes_policy_rule_field_names() {
        let permission = PendingPermission {
            scope: PermissionScope::Cluster,
            namespaces: vec![],
            verbs: vec!["get".into()],
            api_groups: vec![],
            resources: vec![],
            resource_names: vec![],
            non_resource_urls: vec!["/healthz".into()],
        };
        let value = serde_json::to_value(&permission).expect("serializes");
        assert_eq!(value, serde_json::json!({"scope": "Cluster", "verbs": ["get"], "nonResourceURLs": ["/healthz"]}));
    }
}

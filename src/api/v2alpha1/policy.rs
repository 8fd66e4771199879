//! The `InstallPolicy`: what a cluster admin allows any Install to get (a ceiling of ClusterRoles, kinds forbidden
//! outright) and what each user or group may install from (image repositories, Raw manifests, catalog packages).
//! Evaluated by `crate::policy`; docs/policy.md explains it to admins.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_with::skip_serializing_none;

/// Cluster-wide limits on Installs, stated once by a cluster admin. With no InstallPolicy, nothing is limited beyond
/// the approval gate; with several, every ceiling applies, forbidden kinds add up, and a requester's allowed sources
/// are the union of the source rules naming them.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v2alpha1",
    kind = "InstallPolicy",
    doc = "What any Install may be granted or apply, and what each user or group may install from.",
    category = "olm",
    printcolumn = r#"{"name":"Ceiling","type":"string","jsonPath":".spec.ceiling.clusterRoles"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct InstallPolicySpec {
    /// The most any Install may be granted or apply: every rule its content needs (to apply its objects, and what
    /// its Roles and bindings grant) must be inside these ClusterRoles' rules. Content needing more is never applied,
    /// whoever approves it.
    #[serde(default)]
    pub ceiling: Option<Ceiling>,
    /// Objects no Install may apply, whatever permissions it was approved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forbid: Vec<ForbidRule>,
    /// Who may install from where. A user named by no rule of any policy is not limited; a user named by some may
    /// use only what those rules allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceRule>,
}

/// ClusterRoles whose rules (aggregation resolved) bound what an Install may get.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ceiling {
    /// The cluster-wide ceiling: the union of these ClusterRoles' rules. A ClusterRole that does not exist holds
    /// nothing.
    #[schemars(length(min = 1))]
    pub cluster_roles: Vec<String>,
    /// Namespaces with a ceiling of their own, which replaces the cluster-wide one for rules in that namespace; a
    /// cluster-wide rule on a namespaced resource must fit these too. An empty list allows nothing there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub namespaces: Vec<NamespaceCeiling>,
}

/// The ceiling in one namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceCeiling {
    /// The namespace.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
    /// The ClusterRoles whose rules bound what an Install may get in it.
    #[serde(default)]
    pub cluster_roles: Vec<String>,
}

/// Objects refused outright: an object matches when it matches every field given (at least one is).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("anyOf" = [
    {"required": ["apiGroups"]}, {"required": ["kinds"]}, {"required": ["namespaces"]}, {"required": ["roleRefs"]}
]))]
pub struct ForbidRule {
    /// API groups (`""` for core, `*` for any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub api_groups: Vec<String>,
    /// Kinds (`*` for any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub kinds: Vec<String>,
    /// Namespaces the objects are applied in (after the Install's namespace mapping); a cluster-scoped object is in
    /// none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub namespaces: Vec<String>,
    /// For RoleBindings and ClusterRoleBindings: the names of the roles they bind, a trailing `*` matching any rest
    /// (`system:*`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1))]
    pub role_refs: Vec<String>,
}

/// What the subjects it names may install from; a requester named by several rules may use what any allows.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceRule {
    /// Users, groups and ServiceAccounts the rule is for.
    #[schemars(length(min = 1))]
    pub subjects: Vec<PolicySubject>,
    /// Bundle image repositories they may install (Installs' ManifestImage content, Operators' manifestImage).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageSource>,
    /// Whether they may install Raw manifests.
    #[serde(default)]
    pub raw: bool,
    /// Catalog packages they may install through Operators (`*` for any), from the CatalogSources in `catalogs` (any
    /// they may use when it is empty; the `install` verb on a CatalogSource is checked besides).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// The CatalogSources `packages` may come from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub catalogs: Vec<CatalogName>,
}

/// A user, a group or a ServiceAccount, as RBAC names subjects.
#[skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PolicySubject {
    pub kind: SubjectKind,
    #[schemars(length(min = 1))]
    pub name: String,
    /// The ServiceAccount's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
}

/// The kinds of subject.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum SubjectKind {
    User,
    Group,
    ServiceAccount,
}

/// Images of a repository, or of every repository under a path.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSource {
    /// A repository (`registry.example/team/bundle`), or every repository under a path (`registry.example/team/*`).
    /// The registry is written as images name it (`docker.io` for Docker Hub's short names).
    #[schemars(regex(
        pattern = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*(/\*)?$"
    ))]
    pub repository: String,
    /// `Required` (the default): only references pinned by digest; `Optional`: tags too.
    #[serde(default)]
    pub digests: DigestRule,
}

/// Whether image references must be pinned by digest.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DigestRule {
    /// Only `repository@sha256:...`.
    #[default]
    Required,
    /// Tags too.
    Optional,
}

/// A CatalogSource.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct CatalogName {
    #[schemars(length(min = 1))]
    pub name: String,
    #[schemars(length(min = 1))]
    pub namespace: String,
}

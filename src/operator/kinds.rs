//! The kinds whose objects can be components of an Operator, with what the controller needs to watch and name them.
//! Both `components` (what an Operator's status says of a component) and `projection` (which generated objects
//! carry its label on) read this table, so neither depends on the other for it.

/// A kind whose objects can be components.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ComponentKind {
    pub group: &'static str,
    pub version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Whether a component of this kind is read from more than its metadata (its conditions, or what it generated):
    /// the others are watched as metadata only, so that every Secret and ConfigMap of a cluster is not decoded.
    pub body: bool,
}

impl ComponentKind {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

const fn kind(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> ComponentKind {
    let body = matches!(
        kind.as_bytes(),
        b"CustomResourceDefinition"
            | b"APIService"
            | b"Deployment"
            | b"ReplicaSet"
            | b"Pod"
            | b"ClusterServiceVersion"
            | b"Subscription"
            | b"InstallPlan"
            | b"Install"
    );
    ComponentKind { group, version, kind, plural, namespaced, body }
}

/// Every kind an Install applies from bundles, the kinds OLM v0's loops generate, and the ones seed 004 asks
/// conditions of. Kinds the cluster does not serve are skipped.
pub const COMPONENT_KINDS: &[ComponentKind] = &[
    kind("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false),
    kind("apiregistration.k8s.io", "v1", "APIService", "apiservices", false),
    kind("apps", "v1", "Deployment", "deployments", true),
    kind("apps", "v1", "ReplicaSet", "replicasets", true),
    kind("", "v1", "Pod", "pods", true),
    kind("", "v1", "Service", "services", true),
    kind("", "v1", "ServiceAccount", "serviceaccounts", true),
    kind("", "v1", "ConfigMap", "configmaps", true),
    kind("", "v1", "Secret", "secrets", true),
    kind("", "v1", "Namespace", "namespaces", false),
    kind("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    kind("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true),
    kind("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false),
    kind("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false),
    kind(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
    ),
    kind("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", false),
    kind("operators.coreos.com", "v1alpha1", "ClusterServiceVersion", "clusterserviceversions", true),
    kind("operators.coreos.com", "v1alpha1", "Subscription", "subscriptions", true),
    kind("operators.coreos.com", "v1alpha1", "InstallPlan", "installplans", true),
    kind("operators.coreos.com", "v2alpha1", "Install", "installs", false),
];

/// The component kind of this name, if objects of that kind can be components.
pub fn component_kind(kind: &str) -> Option<ComponentKind> {
    COMPONENT_KINDS.iter().find(|known| known.kind == kind).copied()
}

#[cfg(test)]
mod tests {
    use super::COMPONENT_KINDS;

    #[test]
    fn each_component_kind_has_a_plural_of_its_own() {
        // The index keys objects and settled kinds by plural alone.
        let plurals: std::collections::BTreeSet<&str> = COMPONENT_KINDS.iter().map(|kind| kind.plural).collect();
        assert_eq!(plurals.len(), COMPONENT_KINDS.len());
    }
}

//! The RBAC objects of a cluster as listed, and the part of them that one Install owns: the grants made for it, the
//! only rights an Install's own ServiceAccount counts as approved (grants belong to one Install uid).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use std::collections::BTreeMap;
use std::sync::Arc;

use super::missing::to_pending;
use super::required::Scope;
use super::resolve::RbacSnapshot;
use super::rule::Rule;
use crate::api::v2alpha1::PendingPermission;

/// Every Role, ClusterRole and binding read from a cluster, shared with the store they were read from (a watch's,
/// held once for every pass) rather than copied.
#[derive(Clone, Debug, Default)]
pub struct RbacObjects {
    pub roles: Vec<Arc<Role>>,
    pub cluster_roles: Vec<Arc<ClusterRole>>,
    pub role_bindings: Vec<Arc<RoleBinding>>,
    pub cluster_role_bindings: Vec<Arc<ClusterRoleBinding>>,
}

fn controlled_by(metadata: &ObjectMeta, uid: &str) -> bool {
    metadata.owner_references.iter().flatten().any(|owner| owner.uid == uid && owner.controller == Some(true))
}

impl RbacObjects {
    /// The rules of these objects' roles as granted rules: a ClusterRole's cluster-wide, a Role's in its namespace.
    /// (For the grants of one Install: every role it owns is bound to its account.)
    pub fn granted_rules(&self) -> Vec<PendingPermission> {
        let mut uncovered: BTreeMap<Scope, Vec<Rule>> = BTreeMap::new();
        for role in &self.cluster_roles {
            uncovered.entry(Scope::Cluster).or_default().extend(role.rules.iter().flatten().map(Rule::from));
        }
        for role in &self.roles {
            let namespace = role.metadata.namespace.clone().unwrap_or_default();
            uncovered
                .entry(Scope::Namespace(namespace))
                .or_default()
                .extend(role.rules.iter().flatten().map(Rule::from));
        }
        uncovered.retain(|_, rules| !rules.is_empty());
        to_pending(uncovered)
    }

    /// The rules every subject holds, as the API server's authorizer resolves them.
    pub fn snapshot(&self) -> RbacSnapshot {
        RbacSnapshot::shared(
            &self.roles,
            self.cluster_roles.clone(),
            &self.role_bindings,
            self.cluster_role_bindings.clone(),
        )
    }

    /// These objects but those carrying `annotation` (the grants whose rules followed from an approved `create`).
    pub fn without_annotated(&self, annotation: &str) -> Self {
        let keep = |metadata: &ObjectMeta| !metadata.annotations.as_ref().is_some_and(|a| a.contains_key(annotation));
        Self {
            roles: self.roles.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
            cluster_roles: self.cluster_roles.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
            role_bindings: self.role_bindings.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
            cluster_role_bindings: self.cluster_role_bindings.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
        }
    }

    /// These objects but the grants of other Installs: what an OperatorGroup's account holds of its own, which it may
    /// lend to an Install whose creator may use it. Grants approved for one Install never count for another.
    pub fn without_other_installs(&self, uid: &str) -> Self {
        let keep = |metadata: &ObjectMeta| {
            !metadata.owner_references.iter().flatten().any(|owner| {
                owner.kind == "Install"
                    && owner.api_version == "operators.coreos.com/v2alpha1"
                    && owner.controller == Some(true)
                    && owner.uid != uid
            })
        };
        Self {
            roles: self.roles.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
            cluster_roles: self.cluster_roles.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
            role_bindings: self.role_bindings.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
            cluster_role_bindings: self.cluster_role_bindings.iter().filter(|o| keep(&o.metadata)).cloned().collect(),
        }
    }

    /// Only the objects whose controlling owner has `uid`: a binding counts only with a role of the same owner, so
    /// nobody's binding to some other role, and no binding left by an earlier owner of the same name, counts.
    pub fn owned_by(&self, uid: &str) -> Self {
        Self {
            roles: self.roles.iter().filter(|o| controlled_by(&o.metadata, uid)).cloned().collect(),
            cluster_roles: self.cluster_roles.iter().filter(|o| controlled_by(&o.metadata, uid)).cloned().collect(),
            role_bindings: self.role_bindings.iter().filter(|o| controlled_by(&o.metadata, uid)).cloned().collect(),
            cluster_role_bindings: self
                .cluster_role_bindings
                .iter()
                .filter(|o| controlled_by(&o.metadata, uid))
                .cloned()
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::{Rule, UserInfo};
    use serde_json::json;

    fn owned(uid: Option<&str>) -> serde_json::Value {
        match uid {
            Some(uid) => {
                json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": "x", "uid": uid, "controller": true}])
            }
            None => json!([]),
        }
    }

    fn objects(role_owner: Option<&str>, binding_owner: Option<&str>) -> RbacObjects {
        let role: ClusterRole =
            serde_json::from_value(json!({"metadata": {"name": "grant", "ownerReferences": owned(role_owner)},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}))
            .expect("role");
        let binding: ClusterRoleBinding =
            serde_json::from_value(json!({"metadata": {"name": "grant", "ownerReferences": owned(binding_owner)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "grant"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "olmv2-system"}]}))
            .expect("binding");
        RbacObjects {
            cluster_roles: vec![Arc::new(role)],
            cluster_role_bindings: vec![Arc::new(binding)],
            ..RbacObjects::default()
        }
    }

    fn holds(objects: &RbacObjects) -> bool {
        let (rules, _) = objects.snapshot().cluster_rules_for(&UserInfo::service_account("olmv2-system", "sa"));
        crate::rbac::covers(&rules, &[Rule::resource(&["get"], &[""], &["secrets"])])
    }

    #[test]
    fn granted_rules_are_the_owned_roles_rules_where_they_apply() {
        let mut objects = objects(Some("u"), Some("u"));
        let role: Role = serde_json::from_value(
            json!({"metadata": {"name": "r", "namespace": "team", "ownerReferences": owned(Some("u"))},
            "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}]}),
        )
        .expect("role");
        objects.roles.push(Arc::new(role));
        let granted = objects.owned_by("u").granted_rules();
        assert_eq!(granted.len(), 2, "{granted:?}");
        assert!(granted
            .iter()
            .any(|p| p.scope == crate::api::v2alpha1::PermissionScope::Cluster && p.resources == ["secrets"]));
        assert!(granted.iter().any(|p| p.namespaces == ["team"] && p.resources == ["deployments"]));
        assert!(objects.owned_by("other").granted_rules().is_empty());
    }

    #[test]
    fn only_grants_owned_by_the_uid_count() {
        assert!(holds(&objects(Some("u"), Some("u")).owned_by("u")));
        assert!(!holds(&objects(Some("u"), Some("u")).owned_by("other")), "an earlier Install's grants");
        assert!(!holds(&objects(None, None).owned_by("u")), "orphaned grants");
        assert!(!holds(&objects(None, Some("u")).owned_by("u")), "a binding of ours to a role that is not");
        assert!(holds(&objects(None, None)), "the whole cluster still counts where it should");
    }

    #[test]
    fn another_installs_grants_never_count_for_this_one() {
        assert!(!holds(&objects(Some("other"), Some("other")).without_other_installs("u")));
        assert!(holds(&objects(Some("u"), Some("u")).without_other_installs("u")));
        assert!(holds(&objects(None, None).without_other_installs("u")), "the account's own rights");
    }
}

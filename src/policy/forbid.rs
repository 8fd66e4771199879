//! Objects a policy forbids outright: matched on the content as it would be applied (after the Install's namespace
//! mapping), by API group, kind, namespace and, for bindings, the role they bind.

use serde_json::Value;

use crate::api::v2alpha1::ForbidRule;
use crate::rbac::kinds::group_of;

/// Whether `rule` forbids `object`: it matches every field the rule gives.
pub fn forbids(rule: &ForbidRule, object: &Value) -> bool {
    let group = group_of(object["apiVersion"].as_str().unwrap_or_default());
    let kind = object["kind"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str().filter(|ns| !ns.is_empty());
    let listed = |values: &[String], value: &str| values.iter().any(|v| v == "*" || v == value);
    let binding = matches!(kind, "RoleBinding" | "ClusterRoleBinding") && group == "rbac.authorization.k8s.io";
    let role = object["roleRef"]["name"].as_str().unwrap_or_default();
    (rule.api_groups.is_empty() || listed(&rule.api_groups, group))
        && (rule.kinds.is_empty() || listed(&rule.kinds, kind))
        && (rule.namespaces.is_empty() || namespace.is_some_and(|ns| listed(&rule.namespaces, ns)))
        && (rule.role_refs.is_empty() || (binding && rule.role_refs.iter().any(|pattern| name_matches(pattern, role))))
        && !(rule.api_groups.is_empty()
            && rule.kinds.is_empty()
            && rule.namespaces.is_empty()
            && rule.role_refs.is_empty())
}

/// A name pattern: exact, or a prefix before a trailing `*`.
fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// An object as a violation names it: `ClusterRoleBinding grab-all (binds ClusterRole cluster-admin)`.
pub fn describe(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let mut text = match object["metadata"]["namespace"].as_str().filter(|ns| !ns.is_empty()) {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    };
    if let (Some(role_kind), Some(role)) = (object["roleRef"]["kind"].as_str(), object["roleRef"]["name"].as_str()) {
        text.push_str(&format!(" (binds {role_kind} {role})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(groups: &[&str], kinds: &[&str], namespaces: &[&str], role_refs: &[&str]) -> ForbidRule {
        let owned = |values: &[&str]| values.iter().map(|v| (*v).to_owned()).collect();
        ForbidRule {
            api_groups: owned(groups),
            kinds: owned(kinds),
            namespaces: owned(namespaces),
            role_refs: owned(role_refs),
        }
    }

    fn binding(kind: &str, role: &str, namespace: Option<&str>) -> Value {
        let mut object = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "grab"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}});
        if let Some(namespace) = namespace {
            object["metadata"]["namespace"] = json!(namespace);
        }
        object
    }

    #[test]
    fn kinds_are_matched_with_their_group() {
        let webhooks = rule(&["admissionregistration.k8s.io"], &["MutatingWebhookConfiguration"], &[], &[]);
        let object = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "w"}});
        assert!(forbids(&webhooks, &object));
        let other_group =
            json!({"apiVersion": "example.com/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "w"}});
        assert!(!forbids(&webhooks, &other_group));
        let priority = rule(&[], &["PriorityClass"], &[], &[]);
        assert!(forbids(
            &priority,
            &json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}})
        ));
    }

    #[test]
    fn bindings_are_matched_by_the_role_they_bind() {
        let built_in = rule(&[], &["ClusterRoleBinding", "RoleBinding"], &[], &["cluster-admin", "system:*"]);
        assert!(forbids(&built_in, &binding("ClusterRoleBinding", "cluster-admin", None)));
        assert!(forbids(&built_in, &binding("RoleBinding", "system:controller:foo", Some("operators"))));
        assert!(!forbids(&built_in, &binding("ClusterRoleBinding", "plumbus-reader", None)));
        // roleRefs only ever match bindings.
        let any_role_ref = rule(&[], &[], &[], &["*"]);
        assert!(!forbids(
            &any_role_ref,
            &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "roleRef": {"name": "x"}})
        ));
    }

    #[test]
    fn namespaces_match_namespaced_objects_only() {
        let kube_system = rule(&[], &[], &["kube-system"], &[]);
        let in_it =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}});
        let elsewhere =
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "operators"}});
        let cluster_scoped = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}});
        assert!(forbids(&kube_system, &in_it));
        assert!(!forbids(&kube_system, &elsewhere));
        assert!(!forbids(&kube_system, &cluster_scoped));
    }

    #[test]
    fn an_empty_rule_forbids_nothing() {
        let object = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        assert!(!forbids(&ForbidRule::default(), &object));
    }

    #[test]
    fn objects_are_described_with_the_role_they_bind() {
        assert_eq!(
            describe(&binding("ClusterRoleBinding", "cluster-admin", None)),
            "ClusterRoleBinding grab (binds ClusterRole cluster-admin)"
        );
        assert_eq!(
            describe(&json!({"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "kube-system"}})),
            "ConfigMap kube-system/c"
        );
    }
}

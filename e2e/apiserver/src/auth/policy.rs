//! The RBAC objects a cluster bootstraps (cluster-admin; admin, edit and view, aggregated from the
//! `aggregate-to-*` roles; system:discovery, system:basic-user, system:public-info-viewer,
//! system:service-account-issuer-discovery; and their bindings),
//! limited to the resources the emulator serves; the `kube-system` Role that reads the
//! `extension-apiserver-authentication` ConfigMap and its binding; and the loop that keeps aggregated ClusterRoles
//! filled.

use serde_json::{json, Value};

use crate::storage::selectors::label_selector_matches;
use crate::storage::store::{ResourceId, Store};

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 5] = ["create", "delete", "deletecollection", "patch", "update"];
const ALL_VERBS: [&str; 8] = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn role(name: &str, labels: Value, rules: Vec<Value>) -> Value {
    let mut labels = labels;
    labels["kubernetes.io/bootstrapping"] = json!("rbac-defaults");
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name, "labels": labels,
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}, "rules": rules})
}

fn aggregated(name: &str, labels: Value, aggregate_from: &str) -> Value {
    let mut object = role(name, labels, Vec::new());
    object["aggregationRule"] = json!({"clusterRoleSelectors": [{"matchLabels": {format!("rbac.authorization.k8s.io/aggregate-to-{aggregate_from}"): "true"}}]});
    object
}

fn binding(name: &str, role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> =
        groups.iter().map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g})).collect();
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}, "subjects": subjects})
}

fn urls(urls: &[&str]) -> Value {
    json!({"nonResourceURLs": urls, "verbs": ["get"]})
}

/// The default ClusterRoles.
pub fn cluster_roles() -> Vec<Value> {
    let aggregate = |to: &str| json!({format!("rbac.authorization.k8s.io/aggregate-to-{to}"): "true"});
    let edit_writes: Vec<&str> = WRITE.to_vec();
    vec![
        role(
            "cluster-admin",
            json!({}),
            vec![rule(&["*"], &["*"], &["*"]), json!({"nonResourceURLs": ["*"], "verbs": ["*"]})],
        ),
        aggregated("admin", json!({}), "admin"),
        aggregated("edit", aggregate("admin"), "edit"),
        aggregated("view", aggregate("edit"), "view"),
        role(
            "system:aggregate-to-admin",
            aggregate("admin"),
            vec![
                rule(&["rbac.authorization.k8s.io"], &["roles", "rolebindings"], &ALL_VERBS),
                rule(&["authorization.k8s.io"], &["localsubjectaccessreviews"], &["create"]),
            ],
        ),
        role(
            "system:aggregate-to-edit",
            aggregate("edit"),
            vec![
                rule(
                    &[""],
                    &[
                        "pods",
                        "pods/status",
                        "configmaps",
                        "endpoints",
                        "persistentvolumeclaims",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "secrets",
                        "serviceaccounts",
                        "services",
                        "events",
                    ],
                    &edit_writes,
                ),
                rule(&["batch"], &["jobs", "cronjobs"], &edit_writes),
                rule(&["networking.k8s.io"], &["ingresses"], &edit_writes),
                rule(&[""], &["serviceaccounts"], &["impersonate"]),
                rule(&[""], &["serviceaccounts/token"], &["create"]),
                rule(&[""], &["secrets"], &READ),
                rule(
                    &["apps"],
                    &[
                        "daemonsets",
                        "deployments",
                        "deployments/scale",
                        "replicasets",
                        "replicasets/scale",
                        "statefulsets",
                        "statefulsets/scale",
                    ],
                    &edit_writes,
                ),
                rule(&["coordination.k8s.io"], &["leases"], &ALL_VERBS),
                rule(&["events.k8s.io"], &["events"], &edit_writes),
            ],
        ),
        role(
            "system:aggregate-to-view",
            aggregate("view"),
            vec![
                rule(
                    &[""],
                    &[
                        "configmaps",
                        "endpoints",
                        "events",
                        "persistentvolumeclaims",
                        "persistentvolumeclaims/status",
                        "pods",
                        "pods/log",
                        "pods/status",
                        "replicationcontrollers",
                        "replicationcontrollers/scale",
                        "replicationcontrollers/status",
                        "serviceaccounts",
                        "services",
                        "services/status",
                    ],
                    &READ,
                ),
                rule(&["batch"], &["jobs", "jobs/status", "cronjobs", "cronjobs/status"], &READ),
                rule(&["networking.k8s.io"], &["ingresses", "ingresses/status"], &READ),
                rule(&[""], &["namespaces", "namespaces/status"], &READ),
                rule(
                    &["apps"],
                    &[
                        "daemonsets",
                        "daemonsets/status",
                        "deployments",
                        "deployments/scale",
                        "deployments/status",
                        "replicasets",
                        "replicasets/scale",
                        "replicasets/status",
                        "statefulsets",
                        "statefulsets/scale",
                        "statefulsets/status",
                    ],
                    &READ,
                ),
                rule(&["events.k8s.io"], &["events"], &READ),
            ],
        ),
        role(
            "system:discovery",
            json!({}),
            vec![urls(&[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ])],
        ),
        role(
            "system:basic-user",
            json!({}),
            vec![
                rule(&["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"], &["create"]),
                rule(&["authentication.k8s.io"], &["selfsubjectreviews"], &["create"]),
            ],
        ),
        role(
            "system:public-info-viewer",
            json!({}),
            vec![urls(&["/healthz", "/livez", "/readyz", "/version", "/version/"])],
        ),
        role(
            "system:service-account-issuer-discovery",
            json!({}),
            vec![urls(&[
                "/.well-known/openid-configuration",
                "/.well-known/openid-configuration/",
                "/openid/v1/jwks",
                "/openid/v1/jwks/",
            ])],
        ),
    ]
}

/// The default ClusterRoleBindings.
pub fn cluster_role_bindings() -> Vec<Value> {
    vec![
        binding("cluster-admin", "cluster-admin", &["system:masters"]),
        binding("system:discovery", "system:discovery", &["system:authenticated"]),
        binding("system:basic-user", "system:basic-user", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
        binding(
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            &["system:serviceaccounts"],
        ),
    ]
}

/// The Roles kube-apiserver's bootstrap policy puts in namespaces, for those served here: in `kube-system`, the
/// reader of the ConfigMap aggregated API servers read their authentication settings from.
pub fn namespace_roles() -> Vec<Value> {
    let mut reader = role(
        "extension-apiserver-authentication-reader",
        json!({}),
        vec![json!({"apiGroups": [""], "resources": ["configmaps"],
            "resourceNames": ["extension-apiserver-authentication"], "verbs": READ})],
    );
    reader["kind"] = json!("Role");
    reader["metadata"]["namespace"] = json!("kube-system");
    vec![reader]
}

/// The RoleBindings of kube-apiserver's bootstrap policy for `namespace_roles`: the authentication reader bound to
/// kube-controller-manager and kube-scheduler.
pub fn namespace_role_bindings() -> Vec<Value> {
    let subjects: Vec<Value> = ["system:kube-controller-manager", "system:kube-scheduler"]
        .iter()
        .map(|user| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}))
        .collect();
    vec![json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "system::extension-apiserver-authentication-reader", "namespace": "kube-system",
            "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "extension-apiserver-authentication-reader"},
        "subjects": subjects})]
}

/// The rules an aggregated ClusterRole should hold now, or `None` when it is not aggregated or already holds them.
pub fn aggregated_rules(role: &Value, all: &[Value]) -> Option<Vec<Value>> {
    let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array()?;
    let mut rules: Vec<Value> = Vec::new();
    for other in all.iter().filter(|o| o["metadata"]["name"] != role["metadata"]["name"]) {
        if selectors.iter().any(|s| label_selector_matches(s, &other["metadata"]["labels"])) {
            for rule in other["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    let current = role["rules"].as_array().cloned().unwrap_or_default();
    (current != rules).then_some(rules)
}

pub fn cluster_roles_id() -> ResourceId {
    ResourceId::new("rbac.authorization.k8s.io", "clusterroles")
}

/// The aggregation controller: writes the rules of each aggregated ClusterRole that changed, until none does
/// (an aggregated role can select another: edit is aggregated into admin).
pub fn aggregate(store: &Store) {
    let roles = store.count(&cluster_roles_id());
    for _ in 0..=roles {
        let all = store.all(&cluster_roles_id());
        let mut changed = false;
        for role in &all {
            if let Some(rules) = aggregated_rules(role, &all) {
                let mut updated = role.clone();
                updated["rules"] = Value::Array(rules);
                match store.update(&cluster_roles_id(), updated) {
                    Ok(_) => changed = true,
                    Err(error) => {
                        tracing::debug!(%error, "aggregated ClusterRole not updated; retried on the next pass")
                    }
                }
            }
        }
        if !changed {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_collects_the_labelled_roles_transitively_over_passes() {
        let store = Store::new(1000);
        for role in cluster_roles() {
            store.create(&cluster_roles_id(), role).expect("created");
        }
        aggregate(&store);
        let rules_of = |name: &str| {
            store.get(&cluster_roles_id(), "", name).expect("role")["rules"].as_array().cloned().unwrap_or_default()
        };
        let view = rules_of("view");
        assert!(view.iter().any(|r| r["resources"].as_array().is_some_and(|rs| rs.contains(&json!("configmaps")))));
        let admin = rules_of("admin");
        assert!(admin.iter().any(|r| r["resources"] == json!(["roles", "rolebindings"])), "admin has its own rules");
        assert!(view.iter().all(|r| admin.contains(r)), "and view's, through edit");
        assert!(!rules_of("edit").iter().any(|r| r["resources"] == json!(["roles", "rolebindings"])));
        assert_eq!(
            aggregated_rules(
                &store.get(&cluster_roles_id(), "", "admin").expect("admin"),
                &store.all(&cluster_roles_id())
            ),
            None,
            "stable"
        );
        let selector = json!({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]});
        assert!(label_selector_matches(&selector, &json!({"tier": "b"})));
        assert!(!label_selector_matches(&selector, &json!({"tier": "c"})));
    }
}

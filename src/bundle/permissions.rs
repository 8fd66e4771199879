//! The ServiceAccounts and RBAC a CSV's `permissions` and `clusterPermissions` become, as OLM renders them: a Role
//! and RoleBinding per target namespace, or, watching all namespaces, a ClusterRole and ClusterRoleBinding that can
//! also read namespaces; a ClusterRole and ClusterRoleBinding per cluster permission. Names are OLM v0's
//! (`names::rbac_name`). Pure functions.

use std::collections::BTreeSet;

use serde_json::{json, Value};

use super::names::rbac_name;
use crate::api::v1alpha1::{StrategyDeploymentPermissions, StrategyDetailsDeployment};

/// One ServiceAccount per account the permissions name, except `default` (every namespace has it) and those the
/// bundle ships itself.
pub fn service_accounts(
    strategy: &StrategyDetailsDeployment,
    declared: &BTreeSet<String>,
    namespace: &str,
) -> Vec<Value> {
    let accounts: BTreeSet<&str> = strategy
        .permissions
        .iter()
        .chain(&strategy.cluster_permissions)
        .map(|p| p.service_account_name.as_str())
        .filter(|name| !name.is_empty() && *name != "default" && !declared.contains(*name))
        .collect();
    accounts
        .into_iter()
        .map(|account| {
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, "namespace": namespace}})
        })
        .collect()
}

/// The RBAC objects of every permission of the CSV `csv`. `targets` empty means all namespaces.
pub fn rbac(csv: &str, strategy: &StrategyDetailsDeployment, targets: &[&str], namespace: &str) -> Vec<Value> {
    let mut objects = Vec::new();
    for permission in &strategy.permissions {
        let name = rbac_name(csv, permission);
        if targets.is_empty() {
            // OLM lifts a namespaced permission to the cluster and lets the operator find the namespaces it watches;
            // the ClusterRole keeps the Role's name, as OLM v0 names it.
            let mut rules = rules(permission);
            if let Some(list) = rules.as_array_mut() {
                list.push(json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}));
            }
            objects.extend(cluster_rbac(&name, permission, rules, namespace));
        } else {
            for target in targets {
                objects.extend(namespaced_rbac(&name, permission, target, namespace));
            }
        }
    }
    for permission in &strategy.cluster_permissions {
        objects.extend(cluster_rbac(&rbac_name(csv, permission), permission, rules(permission), namespace));
    }
    objects
}

fn rules(permission: &StrategyDeploymentPermissions) -> Value {
    Value::Array(permission.rules.iter().filter_map(|rule| serde_json::to_value(rule).ok()).collect())
}

fn subjects(permission: &StrategyDeploymentPermissions, namespace: &str) -> Value {
    let name =
        if permission.service_account_name.is_empty() { "default" } else { permission.service_account_name.as_str() };
    json!([{"kind": "ServiceAccount", "name": name, "namespace": namespace}])
}

fn namespaced_rbac(
    name: &str,
    permission: &StrategyDeploymentPermissions,
    target: &str,
    namespace: &str,
) -> [Value; 2] {
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": name, "namespace": target},
            "rules": rules(permission)}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": name, "namespace": target},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subjects(permission, namespace)}),
    ]
}

fn cluster_rbac(name: &str, permission: &StrategyDeploymentPermissions, rules: Value, namespace: &str) -> [Value; 2] {
    [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": subjects(permission, namespace)}),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(value: Value) -> StrategyDetailsDeployment {
        serde_json::from_value(value).expect("strategy")
    }

    /// A CSV name long enough for the account names to be cut out of the RBAC names' prefix.
    const CSV: &str = "an-operator-with-a-rather-long-name.v1.22.333";

    /// Two accounts with the same rules, and one cluster permission.
    fn two_accounts() -> StrategyDetailsDeployment {
        let rules = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
        strategy(json!({"deployments": [],
            "permissions": [{"serviceAccountName": "operator-manager", "rules": rules},
                            {"serviceAccountName": "operator-webhook", "rules": rules}],
            "clusterPermissions": [{"serviceAccountName": "operator-manager",
                                    "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]}]}))
    }

    fn names(objects: &[Value], kind: &str) -> Vec<String> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .map(|o| o["metadata"]["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    #[test]
    fn two_accounts_with_the_same_rules_keep_their_own_bindings() {
        // Before names covered the account, both bindings had one name and the second account's replaced the first's.
        let objects = rbac(CSV, &two_accounts(), &["team-a"], "operators");
        let bindings: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "RoleBinding").collect();
        assert_eq!(bindings.len(), 2);
        assert_ne!(bindings[0]["metadata"]["name"], bindings[1]["metadata"]["name"]);
        assert_eq!(bindings[0]["subjects"][0]["name"], "operator-manager");
        assert_eq!(bindings[1]["subjects"][0]["name"], "operator-webhook");
        let all = rbac(CSV, &two_accounts(), &[], "operators");
        let cluster_bindings = names(&all, "ClusterRoleBinding");
        let unique: BTreeSet<&String> = cluster_bindings.iter().collect();
        assert_eq!((cluster_bindings.len(), unique.len()), (3, 3), "{cluster_bindings:?}");
    }

    #[test]
    fn namespaced_permissions_give_a_role_and_binding_per_target() {
        let objects = rbac(CSV, &two_accounts(), &["team-a", "team-b"], "operators");
        assert_eq!(names(&objects, "Role").len(), 4);
        let role = objects.iter().find(|o| o["kind"] == "Role").expect("role");
        assert_eq!(role["metadata"]["namespace"], "team-a");
        assert_eq!(role["rules"], json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]));
        let binding = objects.iter().find(|o| o["kind"] == "RoleBinding").expect("binding");
        assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
        assert_eq!(binding["subjects"][0]["namespace"], "operators");
        assert_eq!(names(&objects, "ClusterRole").len(), 1, "the cluster permission");
    }

    #[test]
    fn all_namespaces_lifts_permissions_to_the_cluster_with_namespace_reads_under_the_roles_name() {
        let roles = rbac(CSV, &two_accounts(), &["team-a"], "operators");
        let lifted = rbac(CSV, &two_accounts(), &[], "operators");
        assert!(names(&lifted, "Role").is_empty());
        let role = roles.iter().find(|o| o["kind"] == "Role").expect("role");
        let cluster_role =
            lifted.iter().find(|o| o["metadata"]["name"] == role["metadata"]["name"]).expect("same name");
        assert_eq!(cluster_role["kind"], "ClusterRole");
        assert_eq!(
            cluster_role["rules"][1],
            json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]})
        );
    }

    #[test]
    fn the_default_account_is_bound_but_never_created() {
        let default = strategy(json!({"deployments": [], "permissions": [{"serviceAccountName": "", "rules": []},
            {"serviceAccountName": "default", "rules": []}, {"serviceAccountName": "own", "rules": []}, {"serviceAccountName": "shipped", "rules": []}]}));
        let declared = BTreeSet::from(["shipped".to_owned()]);
        let accounts = service_accounts(&default, &declared, "operators");
        assert_eq!(
            accounts,
            vec![
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "own", "namespace": "operators"}})
            ]
        );
        let objects = rbac("operator.v1", &default, &["operators"], "operators");
        assert_eq!(objects[1]["subjects"][0]["name"], "default");
    }
}

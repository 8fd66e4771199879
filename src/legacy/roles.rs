//! The aggregating ClusterRoles OLM v0 makes so that namespace admins, editors and viewers can use the APIs an
//! operator provides: three per OperatorGroup (`olm.og.<group>.<admin|edit|view>-<hash>`, rule-less, aggregating
//! one label per API its operators provide) and, once a CSV has Succeeded, four per owned CRD
//! (`<crd>-<version>-<admin|edit|view|crdview>`) and three per owned APIService, carrying those labels and the
//! `rbac.authorization.k8s.io/aggregate-to-*` labels of Kubernetes' own admin, edit and view roles.

use serde_json::{json, Value};

use super::apis::{ApiKey, ApiSet};
use super::hash::{base62_sha224, fnv64a_hex};

/// The three levels, in OLM's order.
pub const SUFFIXES: [&str; 3] = ["admin", "edit", "view"];

/// Labels OLM v0 puts on what it owns through labels rather than owner references (defined with the API: Installs
/// taking a CSV over read them too).
pub use crate::api::v1alpha1::{MANAGED_LABEL, OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

/// The longest name a ClusterRole may have.
const NAME_LIMIT: usize = 253;

/// The verbs each level grants on a provided API.
pub fn verbs(suffix: &str) -> &'static [&'static str] {
    match suffix {
        "admin" => &["*"],
        "edit" => &["create", "update", "patch", "delete"],
        _ => &["get", "list", "watch"],
    }
}

/// The aggregation label of one API at one level: `olm.opgroup.permissions/aggregate-to-<fnv64a>-<suffix>`.
pub fn aggregation_label(api: &ApiKey, suffix: &str) -> String {
    format!("olm.opgroup.permissions/aggregate-to-{}-{suffix}", fnv64a_hex(&api.to_string()))
}

/// The name of a group's role at one level: `olm.og.<group>.<suffix>-<base62(sha224("<ns>/<group>/<suffix>"))>`,
/// the group's name cut so that the whole stays within 253 characters.
pub fn group_role_name(namespace: &str, group: &str, suffix: &str) -> String {
    let hash = base62_sha224(&format!("{namespace}/{group}/{suffix}"));
    let fixed = "olm.og..-".len() + suffix.len() + hash.len();
    let limit = NAME_LIMIT.saturating_sub(fixed);
    let group = if group.len() < limit { group } else { group.get(..limit).unwrap_or(group) };
    format!("olm.og.{group}.{suffix}-{hash}")
}

/// A group's role at one level: labelled with its owner (OLM's owner labels: groups are namespaced, roles are not,
/// so no owner reference), aggregating the labels of `apis` (none: no aggregation rule).
pub fn group_role(namespace: &str, group: &str, suffix: &str, apis: &ApiSet) -> Value {
    let selectors: Vec<Value> = apis
        .iter()
        .map(|api| aggregation_label(api, suffix))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|label| json!({"matchLabels": {label: "true"}}))
        .collect();
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {
            "name": group_role_name(namespace, group, suffix),
            "labels": {
                OWNER_LABEL: group,
                OWNER_NAMESPACE_LABEL: namespace,
                OWNER_KIND_LABEL: "OperatorGroup",
                MANAGED_LABEL: "true",
            },
        },
    });
    if !selectors.is_empty() {
        role["aggregationRule"] = json!({"clusterRoleSelectors": selectors});
    }
    role
}

/// What a per-API role is for: a CRD (its name and uid, its owner) or an APIService.
pub struct ProvidedApi<'a> {
    pub key: &'a ApiKey,
    /// The CRD's or APIService's name (`plumbuses.example.com`, `v1.metrics.example.com`).
    pub owner_name: &'a str,
    pub owner_uid: &'a str,
    /// The plural resource name.
    pub resource: &'a str,
    /// Whether it is a CRD (gets a `crdview` role) rather than an APIService.
    pub crd: bool,
}

/// The roles of one provided API: `<name>-<version>-admin|edit|view` (plus `-crdview` for CRDs), each owned by the
/// CRD or APIService without blocking its deletion, so that they go with it.
pub fn api_roles(api: &ProvidedApi<'_>) -> Vec<Value> {
    let prefix = format!("{}-{}-", api.owner_name, api.key.version);
    let (owner_api_version, owner_kind) = if api.crd {
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
    } else {
        ("apiregistration.k8s.io/v1", "APIService")
    };
    let owner = json!({"apiVersion": owner_api_version, "kind": owner_kind, "name": api.owner_name,
        "uid": api.owner_uid, "blockOwnerDeletion": false, "controller": false});
    let role = |suffix: &str, aggregate: &str, rule: Value| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": format!("{prefix}{suffix}"),
                "labels": {
                    format!("rbac.authorization.k8s.io/aggregate-to-{aggregate}"): "true",
                    aggregation_label(api.key, aggregate): "true",
                    MANAGED_LABEL: "true",
                },
                "ownerReferences": [owner.clone()],
            },
            "rules": [rule],
        })
    };
    let mut roles: Vec<Value> = SUFFIXES
        .iter()
        .map(|suffix| {
            role(
                suffix,
                suffix,
                json!({"verbs": verbs(suffix), "apiGroups": [api.key.group], "resources": [api.resource]}),
            )
        })
        .collect();
    if api.crd {
        roles.push(role(
            "crdview",
            "view",
            json!({"verbs": ["get"], "apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                   "resourceNames": [api.owner_name]}),
        ));
    }
    roles
}

/// Whether the ClusterRole on the cluster (`current`) lacks what `wanted` says: its labels, its aggregation rule
/// (when `wanted` aggregates or must not), its rules (when `wanted` has rules; an aggregated role's rules are the
/// aggregation controller's). A role that has it is not written again, so a settled cluster sees no writes.
pub fn role_differs(current: Option<&k8s_openapi::api::rbac::v1::ClusterRole>, wanted: &Value) -> bool {
    let Some(current) = current else { return true };
    let current = serde_json::to_value(current).unwrap_or_default();
    let labels_held = wanted["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(key, value)| current["metadata"]["labels"][key] == *value);
    let owners_held = wanted["metadata"]["ownerReferences"].as_array().into_iter().flatten().all(|owner| {
        current["metadata"]["ownerReferences"].as_array().into_iter().flatten().any(|o| o["uid"] == owner["uid"])
    });
    let rules_held = wanted.get("rules").is_none_or(|rules| current["rules"] == *rules);
    let aggregation_held = current["aggregationRule"] == wanted["aggregationRule"];
    !(labels_held && owners_held && rules_held && aggregation_held)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: &str) -> ApiKey {
        ApiKey { kind: kind.into(), version: "v1".into(), group: "example.com".into() }
    }

    #[test]
    fn group_role_names_follow_olm() {
        let name = group_role_name("ns", "og", "admin");
        assert_eq!(name, "olm.og.og.admin-7hdvs1pJiMS8ikuUkvThunsWUnvSLPNYPbr0ec");
        let long = "g".repeat(300);
        for suffix in SUFFIXES {
            let name = group_role_name("ns", &long, suffix);
            assert!(name.len() <= NAME_LIMIT, "{} characters", name.len());
            assert!(name.ends_with(&base62_sha224(&format!("ns/{long}/{suffix}"))));
        }
    }

    #[test]
    fn group_roles_aggregate_one_sorted_label_per_api() {
        let apis: ApiSet = [key("Plumbus"), key("Grumbo")].into();
        let role = group_role("ns", "og", "edit", &apis);
        let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array().expect("selectors");
        assert_eq!(selectors.len(), 2);
        let labels: Vec<String> =
            selectors.iter().flat_map(|s| s["matchLabels"].as_object().expect("labels").keys().cloned()).collect();
        let mut sorted = labels.clone();
        sorted.sort();
        assert_eq!(labels, sorted);
        assert!(labels.contains(&aggregation_label(&key("Plumbus"), "edit")));
        assert_eq!(role["metadata"]["labels"]["olm.owner.kind"], "OperatorGroup");
        assert_eq!(role["metadata"]["labels"]["olm.owner"], "og");
        assert_eq!(role["metadata"]["labels"]["olm.owner.namespace"], "ns");
        assert_eq!(role["metadata"]["labels"]["olm.managed"], "true");
        assert!(role.get("rules").is_none());
        assert!(group_role("ns", "og", "view", &ApiSet::new()).get("aggregationRule").is_none());
    }

    #[test]
    fn a_role_is_written_only_when_it_lacks_something() {
        let apis: ApiSet = [key("Plumbus")].into();
        let wanted = group_role("ns", "og", "admin", &apis);
        assert!(role_differs(None, &wanted));
        let mut stored = wanted.clone();
        stored["metadata"]["labels"]["someone-else"] = json!("x");
        stored["rules"] = json!([{"verbs": ["*"], "apiGroups": ["example.com"], "resources": ["plumbuses"]}]);
        let stored: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(stored).expect("role");
        assert!(!role_differs(Some(&stored), &wanted), "others' labels and aggregated rules are fine");
        let widened = group_role("ns", "og", "admin", &[key("Plumbus"), key("Grumbo")].into());
        assert!(role_differs(Some(&stored), &widened));
        let mut unlabelled = stored.clone();
        unlabelled.metadata.labels.get_or_insert_default().remove("olm.managed");
        assert!(role_differs(Some(&unlabelled), &wanted));
        let plumbus = key("Plumbus");
        let api = ProvidedApi {
            key: &plumbus,
            owner_name: "p.example.com",
            owner_uid: "u",
            resource: "plumbuses",
            crd: true,
        };
        let edit = &api_roles(&api)[1];
        let mut changed: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(edit.clone()).expect("role");
        assert!(!role_differs(Some(&changed), edit));
        changed.rules = Some(vec![]);
        assert!(role_differs(Some(&changed), edit));
    }

    #[test]
    fn a_crd_gets_four_roles_and_an_apiservice_three() {
        let plumbus = key("Plumbus");
        let crd = ProvidedApi {
            key: &plumbus,
            owner_name: "plumbuses.example.com",
            owner_uid: "u1",
            resource: "plumbuses",
            crd: true,
        };
        let roles = api_roles(&crd);
        let names: Vec<&str> = roles.iter().map(|r| r["metadata"]["name"].as_str().expect("name")).collect();
        assert_eq!(
            names,
            [
                "plumbuses.example.com-v1-admin",
                "plumbuses.example.com-v1-edit",
                "plumbuses.example.com-v1-view",
                "plumbuses.example.com-v1-crdview"
            ]
        );
        assert_eq!(roles[0]["rules"][0]["verbs"], json!(["*"]));
        assert_eq!(roles[1]["rules"][0]["verbs"], json!(["create", "update", "patch", "delete"]));
        assert_eq!(roles[3]["rules"][0]["resourceNames"], json!(["plumbuses.example.com"]));
        assert_eq!(roles[3]["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"], "true");
        assert_eq!(roles[0]["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], false);
        let service = ProvidedApi { crd: false, owner_name: "v1.metrics.example.com", ..crd };
        assert_eq!(api_roles(&service).len(), 3);
    }
}

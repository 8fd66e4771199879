//! Properties of the RBAC engine over generated rules: coverage is reflexive and agrees with breakdown,
//! compaction never changes what is covered, the held-rule index answers as a plain scan does, and missing
//! permissions are never less and never more than what the holder lacks; roles overlaid with an Install's content
//! resolve as the same roles read anew; aggregated ClusterRoles, cycles included, hold what Kubernetes' aggregation
//! controller settles on.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use olmv2::rbac::compact::compact;
use olmv2::rbac::held::HeldRules;
use olmv2::rbac::missing::rule_of;
use olmv2::rbac::resolve::Roles;
use olmv2::rbac::{
    breakdown, covers, missing_permissions, rule_covers, Grant, RbacSnapshot, RequiredPermissions, Rule, Scope,
    ScopedRule, UserInfo,
};
use proptest::prelude::*;
use proptest::sample::subsequence;

fn values(pool: &'static [&'static str], min: usize) -> impl Strategy<Value = Vec<String>> {
    subsequence(pool, min..=pool.len()).prop_map(|picked| picked.into_iter().map(str::to_owned).collect())
}

const VERBS: &[&str] = &["get", "list", "create", "delete", "escalate", "*"];
const GROUPS: &[&str] = &["", "apps", "rbac.authorization.k8s.io", "*"];
const RESOURCES: &[&str] =
    &["pods", "pods/log", "deployments", "deployments/scale", "*/scale", "secrets", "roles", "*"];
const NAMES: &[&str] = &["a", "b", "*"];
const URLS: &[&str] = &["/healthz", "/api", "/api/*", "/api*", "/api**", "/apis/*", "/metrics", "*"];

fn resource_rule() -> impl Strategy<Value = Rule> {
    (values(VERBS, 1), values(GROUPS, 1), values(RESOURCES, 1), values(NAMES, 0)).prop_map(
        |(verbs, api_groups, resources, resource_names)| Rule {
            verbs,
            api_groups,
            resources,
            resource_names,
            non_resource_urls: vec![],
        },
    )
}

fn url_rule() -> impl Strategy<Value = Rule> {
    (values(VERBS, 1), values(URLS, 1)).prop_map(|(verbs, non_resource_urls)| Rule {
        verbs,
        non_resource_urls,
        ..Rule::default()
    })
}

/// Valid PolicyRules: resource rules or URL rules, never both (the API server refuses a mix).
fn rule() -> impl Strategy<Value = Rule> {
    prop_oneof![3 => resource_rule(), 1 => url_rule()]
}

fn scope() -> impl Strategy<Value = Scope> {
    prop_oneof![Just(Scope::Cluster), Just(Scope::Namespace("a".into())), Just(Scope::Namespace("b".into()))]
}

fn snapshot_granting(rules: &[Rule]) -> RbacSnapshot {
    let role = ClusterRole {
        metadata: kube::api::ObjectMeta { name: Some("held".into()), ..Default::default() },
        rules: Some(rules.iter().map(Into::into).collect()),
        ..Default::default()
    };
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "held"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "held"},
        "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": "olm"}]
    }))
    .expect("binding");
    RbacSnapshot::new(&[], &[role], vec![], vec![binding])
}

fn installer() -> UserInfo {
    UserInfo::service_account("olm", "installer")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_rule_covers_itself(rule in rule()) {
        prop_assert!(covers(std::slice::from_ref(&rule), std::slice::from_ref(&rule)));
    }

    #[test]
    fn a_rule_covers_every_piece_of_its_breakdown(rule in rule()) {
        for atom in breakdown(&rule) {
            prop_assert!(rule_covers(&rule, &atom), "{rule:?} does not cover {atom:?}");
        }
    }

    #[test]
    fn compaction_never_changes_what_is_covered(rules in prop::collection::vec(rule(), 0..8)) {
        let compacted = compact(&rules);
        prop_assert!(covers(&compacted, &rules), "compaction lost coverage: {rules:?} -> {compacted:?}");
        prop_assert!(covers(&rules, &compacted), "compaction added coverage: {rules:?} -> {compacted:?}");
        prop_assert_eq!(compact(&compacted), compacted.clone(), "compaction is not stable");
    }

    #[test]
    fn the_held_index_answers_as_a_scan(held in prop::collection::vec(rule(), 0..8), wanted in rule()) {
        let index = HeldRules::new(held.clone());
        for atom in breakdown(&wanted) {
            prop_assert_eq!(index.covers_atom(&atom), held.iter().any(|rule| rule_covers(rule, &atom)), "{:?}", atom);
        }
    }

    #[test]
    fn nothing_is_missing_for_a_holder_of_everything(
        apply in prop::collection::vec((scope(), rule()), 0..6),
        granted in prop::collection::vec((scope(), prop::collection::vec(rule(), 0..3)), 0..3),
    ) {
        let required = RequiredPermissions {
            apply: apply.into_iter().map(|(scope, rule)| ScopedRule { scope, rule }).collect(),
            grants: granted.into_iter().map(|(scope, rules)| Grant {
                object: "Role x".into(), scope, rules: Some(rules),
                exemption: Rule::resource(&["escalate"], &["rbac.authorization.k8s.io"], &["roles"]).named(&["x"]),
            }).collect(),
        };
        let missing = missing_permissions(&required, &snapshot_granting(&Rule::full_authority()), &installer());
        prop_assert!(missing.permissions.is_empty(), "{:?}", missing.permissions);
    }

    #[test]
    fn missing_is_never_less_and_never_more_than_what_is_lacked(
        held in prop::collection::vec(rule(), 0..6),
        wanted in prop::collection::vec(rule(), 1..6),
    ) {
        let required = RequiredPermissions {
            apply: wanted.iter().cloned().map(|rule| ScopedRule { scope: Scope::Cluster, rule }).collect(),
            grants: vec![],
        };
        let missing = missing_permissions(&required, &snapshot_granting(&held), &installer());
        let pending: Vec<Rule> = missing.permissions.iter().map(rule_of).collect();
        let mut after_approval = held.clone();
        after_approval.extend(pending.iter().cloned());
        prop_assert!(covers(&after_approval, &wanted), "approving {pending:?} still leaves {wanted:?} uncovered");
        for atom in pending.iter().flat_map(breakdown) {
            prop_assert!(!held.iter().any(|rule| rule_covers(rule, &atom)), "{atom:?} is pending but held");
            prop_assert!(covers(&wanted, std::slice::from_ref(&atom)), "{atom:?} is pending but not wanted");
        }
    }
}

const ROLE_NAMES: &[&str] = &["a", "b", "c", "d", "e"];

/// A ClusterRole: aggregating (by one of two labels), or plain with rules and maybe a label to be aggregated by. A role
/// gathering x is itself gathered by y's, and one gathering y by none: nested, but without cycles (whose resolution
/// depends on the order roles are met).
fn cluster_role() -> impl Strategy<Value = ClusterRole> {
    let name = proptest::sample::select(ROLE_NAMES);
    let label = proptest::option::of(proptest::sample::select(&["x", "y"][..]));
    (name, label, any::<bool>(), proptest::collection::vec(rule(), 0..3)).prop_map(
        |(name, label, aggregating, rules)| {
            let mut role: ClusterRole =
                serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
            match (aggregating, label) {
                (true, Some(label)) => {
                    role.aggregation_rule = serde_json::from_value(serde_json::json!(
                        {"clusterRoleSelectors": [{"matchLabels": {format!("aggregate-to-{label}"): "true"}}]}
                    ))
                    .unwrap();
                    // Nested, as `edit` is aggregated into `admin`: what gathers x is gathered by y's.
                    if label == "x" {
                        role.metadata.labels = Some([("aggregate-to-y".to_string(), "true".to_string())].into());
                    }
                }
                (_, label) => {
                    role.metadata.labels = label.map(|label| [(format!("aggregate-to-{label}"), "true".into())].into());
                    role.rules = Some(rules.iter().map(Into::into).collect());
                }
            }
            role
        },
    )
}

/// Roles with distinct names, as a cluster or one piece of content holds them.
fn distinct(roles: Vec<ClusterRole>) -> Vec<ClusterRole> {
    let mut seen = std::collections::BTreeSet::new();
    roles.into_iter().filter(|role| seen.insert(role.metadata.name.clone())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn overlaid_roles_resolve_as_the_same_roles_read_anew(
        cluster in proptest::collection::vec(cluster_role(), 0..6).prop_map(distinct),
        content in proptest::collection::vec(cluster_role(), 0..3).prop_map(distinct),
        more in proptest::collection::vec(cluster_role(), 0..2).prop_map(distinct),
    ) {
        let overlaid = Roles::new(&[], &cluster).overlay(&[], &content).overlay(&[], &more);
        // The cluster after the content and then more is applied: each replaces the role of its name, last.
        let mut applied = cluster.clone();
        for role in content.iter().chain(&more) {
            applied.retain(|existing| existing.metadata.name != role.metadata.name);
            applied.push(role.clone());
        }
        let anew = Roles::new(&[], &applied);
        for name in ROLE_NAMES {
            prop_assert_eq!(overlaid.cluster_role_rules(name), anew.cluster_role_rules(name), "{}", name);
        }
    }
}

/// A ClusterRole labelled with any of x and y, aggregating by one of them or plain: cycles of aggregation happen.
fn any_cluster_role() -> impl Strategy<Value = ClusterRole> {
    let name = proptest::sample::select(ROLE_NAMES);
    let labels = subsequence(&["x", "y"][..], 0..=2);
    let aggregates = proptest::option::of(proptest::sample::select(&["x", "y"][..]));
    (name, labels, aggregates, proptest::collection::vec(rule(), 0..3)).prop_map(|(name, labels, aggregates, rules)| {
        let mut role: ClusterRole = serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).unwrap();
        role.metadata.labels =
            Some(labels.iter().map(|label| (format!("aggregate-to-{label}"), "true".into())).collect());
        match aggregates {
            Some(label) => {
                role.aggregation_rule = serde_json::from_value(serde_json::json!(
                    {"clusterRoleSelectors": [{"matchLabels": {format!("aggregate-to-{label}"): "true"}}]}
                ))
                .unwrap();
            }
            None => role.rules = Some(rules.iter().map(Into::into).collect()),
        }
        role
    })
}

/// What Kubernetes' aggregation controller settles on: it sets an aggregated role's rules to those its selectors
/// match hold now (other than itself), again and again, until nothing changes.
fn settled(roles: &[ClusterRole]) -> std::collections::BTreeMap<String, Vec<Rule>> {
    let own = |role: &ClusterRole| -> Vec<Rule> { role.rules.iter().flatten().map(Rule::from).collect() };
    let mut held: std::collections::BTreeMap<String, Vec<Rule>> =
        roles.iter().map(|role| (role.metadata.name.clone().unwrap(), own(role))).collect();
    loop {
        let mut changed = false;
        for role in roles.iter().filter(|role| role.aggregation_rule.is_some()) {
            let name = role.metadata.name.clone().unwrap();
            let selectors = role.aggregation_rule.as_ref().unwrap().cluster_role_selectors.clone().unwrap_or_default();
            let mut rules: Vec<Rule> = Vec::new();
            for candidate in roles.iter().filter(|candidate| candidate.metadata.name != role.metadata.name) {
                let labels = candidate.metadata.labels.clone().unwrap_or_default();
                let selected = selectors.iter().any(|selector| {
                    selector.match_labels.iter().flatten().all(|(key, value)| labels.get(key) == Some(value))
                });
                if selected {
                    for rule in &held[candidate.metadata.name.as_ref().unwrap()] {
                        if !rules.contains(rule) {
                            rules.push(rule.clone());
                        }
                    }
                }
            }
            let sorted = |rules: &[Rule]| {
                let mut sorted: Vec<String> = rules.iter().map(|rule| format!("{rule:?}")).collect();
                sorted.sort();
                sorted
            };
            if sorted(&rules) != sorted(&held[&name]) {
                held.insert(name, rules);
                changed = true;
            }
        }
        if !changed {
            return held;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn aggregated_roles_hold_what_the_aggregation_controller_settles_on(
        roles in proptest::collection::vec(any_cluster_role(), 0..6).prop_map(distinct),
    ) {
        let resolved = Roles::new(&[], &roles);
        for (name, expected) in settled(&roles) {
            let mut expected: Vec<String> = expected.iter().map(|rule| format!("{rule:?}")).collect();
            expected.sort();
            let mut got: Vec<String> =
                resolved.cluster_role_rules(&name).unwrap_or_default().iter().map(|rule| format!("{rule:?}")).collect();
            got.sort();
            prop_assert_eq!(got, expected, "{}", name);
        }
    }
}

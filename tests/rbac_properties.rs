//! Properties of the RBAC engine over generated rules: coverage is reflexive and agrees with breakdown,
//! compaction never changes what is covered, the held-rule index answers as a plain scan does, and missing
//! permissions are never less and never more than what the holder lacks.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use olmv2::rbac::compact::compact;
use olmv2::rbac::held::HeldRules;
use olmv2::rbac::missing::rule_of;
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

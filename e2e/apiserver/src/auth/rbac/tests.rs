//! The authorizer's decisions, rule matching and escalation checks against kube-apiserver's, messages included.

use super::*;
use serde_json::json;

fn rule(verbs: &[&str], groups: &[&str], resources: &[&str], names: &[&str]) -> Rule {
    let own = |items: &[&str]| items.iter().map(|i| (*i).to_owned()).collect();
    Rule {
        verbs: own(verbs),
        api_groups: own(groups),
        resources: own(resources),
        resource_names: own(names),
        non_resource_urls: Vec::new(),
    }
}

fn request(verb: &str, group: &str, resource: &str, subresource: &str, name: &str) -> Attributes {
    Attributes {
        verb: verb.into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        ..Attributes::default()
    }
}

#[test]
fn rule_matching_follows_kubernetes() {
    let pods = rule(&["get"], &[""], &["pods"], &[]);
    assert!(rule_allows(&pods, &request("get", "", "pods", "", "a")));
    assert!(!rule_allows(&pods, &request("get", "", "pods", "log", "a")), "a subresource needs its own rule");
    assert!(rule_allows(&rule(&["get"], &[""], &["*/log"], &[]), &request("get", "", "pods", "log", "a")));
    assert!(rule_allows(&rule(&["*"], &["*"], &["*"], &[]), &request("delete", "apps", "deployments", "scale", "")));
    let named = rule(&["get"], &[""], &["secrets"], &["one"]);
    assert!(rule_allows(&named, &request("get", "", "secrets", "", "one")));
    assert!(!rule_allows(&named, &request("list", "", "secrets", "", "")));
    assert!(!rule_allows(&named, &request("get", "", "secrets", "", "two")));
    let urls = Rule {
        verbs: vec!["get".into()],
        non_resource_urls: vec!["/healthz".into(), "/apis/*".into()],
        ..Rule::default()
    };
    let path = |p: &str| Attributes { verb: "get".into(), path: p.into(), ..Attributes::default() };
    assert!(rule_allows(&urls, &path("/healthz")));
    assert!(rule_allows(&urls, &path("/apis/apps/v1")));
    assert!(!rule_allows(&urls, &path("/api")));
}

#[test]
fn rules_come_from_bindings_that_name_the_user() {
    let store = Store::new(100);
    let put = |resource: &str, object: Value| store.create(&ResourceId::new(RBAC, resource), object).expect("created");
    put(
        "clusterroles",
        json!({"metadata": {"name": "reader"}, "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}),
    );
    put(
        "roles",
        json!({"metadata": {"name": "writer", "namespace": "team"}, "rules": [{"verbs": ["create"], "apiGroups": [""], "resources": ["configmaps"]}]}),
    );
    put(
        "clusterrolebindings",
        json!({"metadata": {"name": "readers"}, "roleRef": {"kind": "ClusterRole", "name": "reader"}, "subjects": [{"kind": "Group", "name": "readers"}]}),
    );
    put(
        "rolebindings",
        json!({"metadata": {"name": "writers", "namespace": "team"}, "roleRef": {"kind": "Role", "name": "writer"}, "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}),
    );
    let reader = UserInfo::new("alice", &["readers"]);
    let create =
        |namespace: &str| Attributes { namespace: namespace.into(), ..request("create", "", "configmaps", "", "") };
    assert_eq!(
        authorize(
            &store,
            &reader,
            &Attributes { namespace: "team".into(), ..request("get", "", "configmaps", "", "x") }
        ),
        Decision::Allow(
            "RBAC: allowed by ClusterRoleBinding \"readers\" of ClusterRole \"reader\" to Group \"readers\"".into()
        )
    );
    assert_eq!(authorize(&store, &reader, &create("team")), Decision::Deny);
    let bot = UserInfo::service_account("team", "bot", "1");
    assert!(
        matches!(authorize(&store, &bot, &create("team")), Decision::Allow(_)),
        "the subject's namespace defaults to the binding's"
    );
    assert_eq!(authorize(&store, &bot, &create("other")), Decision::Deny);
    assert_eq!(
        forbidden_message(&bot, &create("other")),
        "User \"system:serviceaccount:team:bot\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"other\""
    );
    assert!(matches!(
        authorize(&store, &UserInfo::new("root", &["system:masters"]), &create("any")),
        Decision::Allow(_)
    ));
}

#[test]
fn escalation_coverage_and_message() {
    let owned = [rule(&["get", "list"], &[""], &["configmaps"], &[]), rule(&["*"], &["apps"], &["*/scale"], &[])];
    let requested = [
        rule(&["get", "delete", "create"], &[""], &["configmaps", "secrets"], &[]),
        rule(&["update"], &["apps"], &["deployments/scale"], &[]),
    ];
    let missing = uncovered(&owned, &requested);
    let listed: Vec<String> = missing.iter().map(Rule::compact_string).collect();
    assert_eq!(
        listed,
        [
            "{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\" \"create\"]}",
            "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\" \"create\"]}",
        ]
    );
    let user = UserInfo::new("alice", &[]);
    assert_eq!(escalation_message(&user, &missing[..1]), "user \"alice\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\" \"create\"]}");
    assert!(
        uncovered(&[rule(&["get"], &[""], &["secrets"], &[])], &[rule(&["get"], &[""], &["secrets"], &["one"])])
            .is_empty(),
        "all names cover one name"
    );
    assert_eq!(
        uncovered(&[rule(&["get"], &[""], &["secrets"], &["one"])], &[rule(&["get"], &[""], &["secrets"], &[])]).len(),
        1,
        "one name does not cover all"
    );
}

//! Rule coverage, case by case, as Kubernetes' escalation check (`Covers`) decides it: wildcards in each field,
//! resourceNames narrowing, subresources, and non-resource URL prefixes.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use olmv2::rbac::{breakdown, covers, uncovered, Rule};

fn resource(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Rule {
    Rule::resource(verbs, groups, resources)
}

fn url(verbs: &[&str], urls: &[&str]) -> Rule {
    Rule::non_resource(verbs, urls)
}

struct Case {
    name: &'static str,
    owners: Vec<Rule>,
    wanted: Rule,
    covered: bool,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "exact match",
            owners: vec![resource(&["get"], &[""], &["pods"])],
            wanted: resource(&["get"], &[""], &["pods"]),
            covered: true,
        },
        Case {
            name: "verb * covers any verb",
            owners: vec![resource(&["*"], &[""], &["pods"])],
            wanted: resource(&["get", "escalate"], &[""], &["pods"]),
            covered: true,
        },
        Case {
            name: "a missing verb is not covered",
            owners: vec![resource(&["get"], &[""], &["pods"])],
            wanted: resource(&["get", "list"], &[""], &["pods"]),
            covered: false,
        },
        Case {
            name: "wanted verb * needs owner verb *",
            owners: vec![resource(
                &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"],
                &[""],
                &["pods"],
            )],
            wanted: resource(&["*"], &[""], &["pods"]),
            covered: false,
        },
        Case {
            name: "group * covers any group",
            owners: vec![resource(&["get"], &["*"], &["deployments"])],
            wanted: resource(&["get"], &["apps", "extensions"], &["deployments"]),
            covered: true,
        },
        Case {
            name: "another group is not covered",
            owners: vec![resource(&["get"], &["apps"], &["deployments"])],
            wanted: resource(&["get"], &["extensions"], &["deployments"]),
            covered: false,
        },
        Case {
            name: "the core group is the empty string, not a wildcard",
            owners: vec![resource(&["get"], &[""], &["pods"])],
            wanted: resource(&["get"], &["metrics.k8s.io"], &["pods"]),
            covered: false,
        },
        Case {
            name: "wanted group * needs owner group *",
            owners: vec![resource(&["get"], &["", "apps"], &["*"])],
            wanted: resource(&["get"], &["*"], &["pods"]),
            covered: false,
        },
        Case {
            name: "resource * covers resources and subresources",
            owners: vec![resource(&["get"], &[""], &["*"])],
            wanted: resource(&["get"], &[""], &["pods", "pods/log", "services/proxy"]),
            covered: true,
        },
        Case {
            name: "a resource does not cover its subresources",
            owners: vec![resource(&["get"], &[""], &["pods"])],
            wanted: resource(&["get"], &[""], &["pods/log"]),
            covered: false,
        },
        Case {
            name: "a subresource does not cover its resource",
            owners: vec![resource(&["get"], &[""], &["pods/log"])],
            wanted: resource(&["get"], &[""], &["pods"]),
            covered: false,
        },
        Case {
            name: "*/scale covers the scale subresource of every resource",
            owners: vec![resource(&["update"], &["apps"], &["*/scale"])],
            wanted: resource(&["update"], &["apps"], &["deployments/scale", "statefulsets/scale"]),
            covered: true,
        },
        Case {
            name: "*/scale covers no resource itself",
            owners: vec![resource(&["update"], &["apps"], &["*/scale"])],
            wanted: resource(&["update"], &["apps"], &["deployments"]),
            covered: false,
        },
        Case {
            name: "*/scale does not cover another subresource",
            owners: vec![resource(&["update"], &["apps"], &["*/scale"])],
            wanted: resource(&["update"], &["apps"], &["deployments/status"]),
            covered: false,
        },
        Case {
            name: "deployments/* is not a wildcard: it covers no real subresource",
            owners: vec![resource(&["get"], &["apps"], &["deployments/*"])],
            wanted: resource(&["get"], &["apps"], &["deployments/scale"]),
            covered: false,
        },
        Case {
            name: "deployments/* covers itself literally",
            owners: vec![resource(&["get"], &["apps"], &["deployments/*"])],
            wanted: resource(&["get"], &["apps"], &["deployments/*"]),
            covered: true,
        },
        Case {
            name: "wanted resource * needs owner resource *",
            owners: vec![resource(&["get"], &[""], &["pods", "secrets", "*/scale"])],
            wanted: resource(&["get"], &[""], &["*"]),
            covered: false,
        },
        Case {
            name: "an owner without names covers a named request",
            owners: vec![resource(&["get"], &[""], &["configmaps"])],
            wanted: resource(&["get"], &[""], &["configmaps"]).named(&["a"]),
            covered: true,
        },
        Case {
            name: "an owner with names covers the same name",
            owners: vec![resource(&["get"], &[""], &["configmaps"]).named(&["a", "b"])],
            wanted: resource(&["get"], &[""], &["configmaps"]).named(&["b"]),
            covered: true,
        },
        Case {
            name: "an owner with names does not cover another name",
            owners: vec![resource(&["get"], &[""], &["configmaps"]).named(&["a"])],
            wanted: resource(&["get"], &[""], &["configmaps"]).named(&["b"]),
            covered: false,
        },
        Case {
            name: "an owner with names does not cover an unnamed request",
            owners: vec![resource(&["get"], &[""], &["configmaps"]).named(&["a"])],
            wanted: resource(&["get"], &[""], &["configmaps"]),
            covered: false,
        },
        Case {
            name: "* is an ordinary resource name",
            owners: vec![resource(&["get"], &[""], &["configmaps"]).named(&["*"])],
            wanted: resource(&["get"], &[""], &["configmaps"]).named(&["a"]),
            covered: false,
        },
        Case {
            name: "an exact URL",
            owners: vec![url(&["get"], &["/healthz"])],
            wanted: url(&["get"], &["/healthz"]),
            covered: true,
        },
        Case {
            name: "a URL does not cover a longer URL",
            owners: vec![url(&["get"], &["/healthz"])],
            wanted: url(&["get"], &["/healthz/ready"]),
            covered: false,
        },
        Case {
            name: "a URL ending in * covers every URL with its prefix",
            owners: vec![url(&["get"], &["/apis/*"])],
            wanted: url(&["get"], &["/apis/apps/v1", "/apis/"]),
            covered: true,
        },
        Case {
            name: "the prefix is textual: /api* covers /apis",
            owners: vec![url(&["get"], &["/api*"])],
            wanted: url(&["get"], &["/apis/apps"]),
            covered: true,
        },
        Case {
            name: "a URL prefix does not cover a URL without it",
            owners: vec![url(&["get"], &["/apis/*"])],
            wanted: url(&["get"], &["/api/v1"]),
            covered: false,
        },
        Case {
            name: "URL * covers every URL",
            owners: vec![url(&["get"], &["*"])],
            wanted: url(&["get"], &["/metrics", "/"]),
            covered: true,
        },
        Case {
            name: "URL verbs must match",
            owners: vec![url(&["get"], &["/metrics"])],
            wanted: url(&["post"], &["/metrics"]),
            covered: false,
        },
        Case {
            name: "resource rules do not cover URLs",
            owners: vec![resource(&["*"], &["*"], &["*"])],
            wanted: url(&["get"], &["/healthz"]),
            covered: false,
        },
        Case {
            name: "URL rules do not cover resources",
            owners: vec![url(&["*"], &["*"])],
            wanted: resource(&["get"], &[""], &["pods"]),
            covered: false,
        },
        Case {
            name: "several owners cover one rule together",
            owners: vec![resource(&["get"], &[""], &["pods"]), resource(&["list"], &[""], &["pods", "services"])],
            wanted: resource(&["get", "list"], &[""], &["pods"]),
            covered: true,
        },
        Case {
            name: "cluster-admin covers everything",
            owners: Rule::full_authority(),
            wanted: resource(&["*"], &["*"], &["*"]),
            covered: true,
        },
        Case {
            name: "a resource rule without groups grants nothing, so needs nothing",
            owners: vec![],
            wanted: resource(&["get"], &[], &["pods"]),
            covered: true,
        },
    ]
}

#[test]
fn coverage_follows_kubernetes() {
    let mut wrong = Vec::new();
    for case in cases() {
        if covers(&case.owners, std::slice::from_ref(&case.wanted)) != case.covered {
            wrong.push(case.name);
        }
    }
    assert!(wrong.is_empty(), "cases decided wrongly: {wrong:#?}");
}

#[test]
fn breakdown_is_one_verb_group_resource_and_name() {
    let rule = resource(&["get", "list"], &["", "apps"], &["pods"]).named(&["a", "b"]);
    let atoms = breakdown(&rule);
    assert_eq!(atoms.len(), 8);
    assert!(atoms.iter().all(|atom| atom.verbs.len() == 1
        && atom.api_groups.len() == 1
        && atom.resources.len() == 1
        && atom.resource_names.len() == 1));
    assert_eq!(breakdown(&url(&["get", "head"], &["/a", "/b"])).len(), 4);
}

#[test]
fn uncovered_lists_exactly_the_missing_atoms() {
    let owners = vec![resource(&["get", "list"], &[""], &["pods"])];
    let wanted = vec![resource(&["get", "delete"], &[""], &["pods", "pods/log"])];
    let missing = uncovered(&owners, &wanted);
    assert_eq!(
        missing,
        vec![
            resource(&["delete"], &[""], &["pods"]),
            resource(&["get"], &[""], &["pods/log"]),
            resource(&["delete"], &[""], &["pods/log"]),
        ]
    );
}

//! Tests of a namespace's resolution.

use super::*;
use crate::catalog::Catalog;
use serde_json::json;
use std::path::PathBuf;

fn bundle(package: &str, name: &str, version: &str, extra: Vec<Value>) -> Value {
    let mut properties = vec![json!({"type": "olm.package", "value": {"packageName": package, "version": version}})];
    properties.extend(extra);
    json!({"schema": "olm.bundle", "name": name, "package": package, "image": format!("r/{name}"), "properties": properties})
}

fn gvk(kind: &str) -> Value {
    json!({"group": "example.com", "version": "v1", "kind": kind})
}

/// `plumbus` (v1 → v2, v2 requires Grumbo) and `grumbo` (v1 provides Grumbo).
fn catalog() -> Catalog {
    let blobs = vec![
        json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": "plumbus",
               "entries": [{"name": "plumbus.v1"}, {"name": "plumbus.v2", "replaces": "plumbus.v1"}]}),
        bundle("plumbus", "plumbus.v1", "1.0.0", vec![json!({"type": "olm.gvk", "value": gvk("Plumbus")})]),
        bundle(
            "plumbus",
            "plumbus.v2",
            "2.0.0",
            vec![
                json!({"type": "olm.gvk", "value": gvk("Plumbus")}),
                json!({"type": "olm.gvk.required", "value": gvk("Grumbo")}),
            ],
        ),
        json!({"schema": "olm.package", "name": "grumbo", "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": "grumbo", "entries": [{"name": "grumbo.v1"}]}),
        bundle("grumbo", "grumbo.v1", "1.0.0", vec![json!({"type": "olm.gvk", "value": gvk("Grumbo")})]),
    ];
    Catalog::from_blobs(blobs.into_iter().map(|b| (PathBuf::from("c"), b)).collect()).expect("catalog")
}

fn subscription(name: &str, package: &str, installed: Option<&str>) -> Subscription {
    let mut object = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": "ops"},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": package, "channel": "stable"}});
    if let Some(installed) = installed {
        object["status"] = json!({"installedCSV": installed, "state": "AtLatestKnown"});
    }
    serde_json::from_value(object).expect("a Subscription")
}

fn csv(name: &str, version: &str, owned: &[&str], annotations: Value) -> ClusterServiceVersion {
    let owned: Vec<Value> = owned
        .iter()
        .map(|kind| json!({"name": format!("{}s.example.com", kind.to_lowercase()), "version": "v1", "kind": kind}))
        .collect();
    serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": "ops", "annotations": annotations},
        "spec": {"version": version, "install": {"strategy": "deployment"},
                 "customresourcedefinitions": {"owned": owned}}}))
    .expect("a CSV")
}

fn resolve(
    catalog: &Catalog,
    subscriptions: &[Subscription],
    csvs: &[ClusterServiceVersion],
    groups: usize,
) -> Outcome {
    let sources = vec![Source { name: "community".into(), namespace: "olm".into(), priority: 0, catalog }];
    resolve_namespace(&Inputs { subscriptions, csvs, sources, operator_groups: groups })
}

fn resolved(bundle: &str, package: &str, source: Option<usize>) -> Resolved {
    Resolved { bundle: bundle.into(), package: package.into(), source }
}

#[test]
fn a_namespace_needs_exactly_one_operator_group() {
    let catalog = catalog();
    for groups in [0, 2] {
        assert_eq!(
            resolve(&catalog, &[subscription("plumbus", "plumbus", None)], &[], groups),
            Outcome::Failed {
                reason: ERROR_PREVENTED_RESOLUTION,
                message: format!("expected 1 OperatorGroup in the namespace, found {groups}")
            }
        );
    }
}

#[test]
fn a_new_subscription_gets_its_channel_head_and_what_it_requires() {
    let catalog = catalog();
    let Outcome::Resolved { subscriptions, dependencies } =
        resolve(&catalog, &[subscription("plumbus", "plumbus", None)], &[], 1)
    else {
        panic!("resolves")
    };
    assert_eq!(subscriptions["plumbus"], resolved("plumbus.v2", "plumbus", Some(0)));
    assert_eq!(dependencies, [resolved("grumbo.v1", "grumbo", Some(0))], "Grumbo comes with it");
}

#[test]
fn a_dependency_a_subscription_already_asks_for_is_not_generated_again() {
    let catalog = catalog();
    let subs = [subscription("plumbus", "plumbus", None), subscription("grumbo", "grumbo", None)];
    let Outcome::Resolved { subscriptions, dependencies } = resolve(&catalog, &subs, &[], 1) else {
        panic!("resolves")
    };
    assert_eq!(subscriptions["grumbo"], resolved("grumbo.v1", "grumbo", Some(0)));
    assert!(dependencies.is_empty());
}

#[test]
fn an_installed_csv_a_subscription_follows_is_upgraded_and_one_at_the_head_stays() {
    let catalog = catalog();
    let installed = [csv("plumbus.v1", "1.0.0", &["Plumbus"], json!({}))];
    let Outcome::Resolved { subscriptions, .. } =
        resolve(&catalog, &[subscription("plumbus", "plumbus", Some("plumbus.v1"))], &installed, 1)
    else {
        panic!("resolves")
    };
    assert_eq!(subscriptions["plumbus"], resolved("plumbus.v2", "plumbus", Some(0)), "an upgrade before staying");
    let at_head =
        [csv("plumbus.v2", "2.0.0", &["Plumbus"], json!({})), csv("grumbo.v1", "1.0.0", &["Grumbo"], json!({}))];
    let Outcome::Resolved { subscriptions, dependencies } =
        resolve(&catalog, &[subscription("plumbus", "plumbus", Some("plumbus.v2"))], &at_head, 1)
    else {
        panic!("resolves")
    };
    assert_eq!(subscriptions["plumbus"], resolved("plumbus.v2", "plumbus", None), "installed: nothing to do");
    assert!(dependencies.is_empty(), "the installed Grumbo provider answers the requirement");
}

#[test]
fn an_invalid_subscription_reads_as_olm_s_unsatisfiable_constraints() {
    let catalog = catalog();
    assert_eq!(
        resolve(&catalog, &[subscription("ghost", "ghost", None)], &[], 1),
        Outcome::Failed {
            reason: CONSTRAINTS_NOT_SATISFIABLE,
            message: "constraints not satisfiable: no operators found in package ghost in the catalog referenced by \
                      subscription ghost, subscription ghost exists"
                .into()
        }
    );
}

#[test]
fn a_hand_installed_csv_providing_the_same_api_blocks_the_subscription() {
    let catalog = catalog();
    let squatter = [csv("squatter.v1", "1.0.0", &["Plumbus"], json!({}))];
    let outcome = resolve(&catalog, &[subscription("plumbus", "plumbus", None)], &squatter, 1);
    let Outcome::Failed { reason, message } = outcome else { panic!("unsatisfiable: {outcome:?}") };
    assert_eq!(reason, CONSTRAINTS_NOT_SATISFIABLE);
    assert!(message.starts_with("constraints not satisfiable: "), "{message}");
    assert!(message.contains("squatter.v1"), "the installed CSV is named: {message}");
}

#[test]
fn an_installed_csv_s_properties_annotation_replaces_what_its_apis_say() {
    let annotated = csv(
        "plumbus.v1",
        "1.0.0",
        &["Plumbus"],
        json!({PROPERTIES_ANNOTATION: r#"{"properties":[{"type":"olm.package","value":{"packageName":"plumbus","version":"1.0.0"}},{"type":"olm.gvk","value":{"group":"example.com","version":"v2","kind":"Plumbus"}}]}"#}),
    );
    let bundle = installed_bundle(&annotated, &[]);
    assert_eq!(bundle.package, "plumbus");
    assert_eq!(bundle.provides, [Gvk { group: "example.com".into(), version: "v2".into(), kind: "Plumbus".into() }]);
    let plain = installed_bundle(&csv("plumbus.v1", "1.0.0", &["Plumbus"], json!({})), &[]);
    assert_eq!(plain.package, "csv/plumbus.v1", "no Subscription follows it: a package of its own");
    assert_eq!(plain.provides[0].group, "example.com");
    let followed = installed_bundle(
        &csv("plumbus.v1", "1.0.0", &[], json!({})),
        &[subscription("plumbus", "plumbus", Some("plumbus.v1"))],
    );
    assert_eq!(followed.package, "plumbus", "the Subscription following it names its package");
}

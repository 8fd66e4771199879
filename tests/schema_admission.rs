//! Bad input is refused by the CRD schemas themselves, at `kubectl apply` time: each case validates an object
//! against the generated openAPIV3Schema, as the API server does before storing it.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use jsonschema::Validator;
use olmv2::crdgen::all_crds;
use serde_json::{json, Value};

fn validator(kind: &str) -> Validator {
    let crd = all_crds().into_iter().find(|crd| crd.spec.names.kind == kind).expect("CRD exists");
    let schema = serde_json::to_value(crd.spec.versions[0].schema.as_ref().expect("schema")).expect("json");
    jsonschema::draft4::new(&schema["openAPIV3Schema"]).expect("schema compiles")
}

fn refusals(kind: &str, object: &Value) -> Vec<String> {
    validator(kind).iter_errors(object).map(|error| format!("{}: {error}", error.instance_path())).collect()
}

fn operator(name: &str, updates: Value) -> Value {
    json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "metadata": {"name": name},
           "spec": {"updates": updates}})
}

fn catalog_updates() -> Value {
    json!({"type": "CatalogSource", "catalogSource": {"package": "plumbus", "channel": "stable",
           "approval": "Automatic", "ref": {"name": "community", "namespace": "my-ns"}}})
}

fn install(content: Value) -> Value {
    json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "metadata": {"name": "plumbus-plan"},
           "spec": {"namespaces": [{"from": "default", "to": "operators"}], "approval": "Unapproved", "content": content}})
}

#[test]
fn seed_operator_is_accepted() {
    assert_eq!(refusals("Operator", &operator("plumbus", catalog_updates())), Vec::<String>::new());
    let image = json!({"type": "ManifestImage", "manifestImage": "quay.io/my-namespace/my-operator@sha256:123abc"});
    assert_eq!(refusals("Operator", &operator("my-operator.v1", image)), Vec::<String>::new());
}

#[test]
fn operator_names_that_are_not_label_names_are_refused() {
    let too_long = "a".repeat(64);
    for name in ["Plumbus", "plumbus_", "-plumbus", "plumbus-", "plum/bus", "plum:bus", too_long.as_str()] {
        let errors = refusals("Operator", &operator(name, catalog_updates()));
        assert!(errors.iter().any(|e| e.starts_with("/metadata/name")), "{name:?} accepted: {errors:?}");
    }
    assert!(refusals("Operator", &operator(&"a".repeat(63), catalog_updates())).is_empty());
}

#[test]
fn operator_union_with_two_members_is_refused() {
    let mut both = catalog_updates();
    both["manifestImage"] = json!("quay.io/howtheydoit/plum:latest");
    let errors = refusals("Operator", &operator("plumbus", both));
    assert!(errors.iter().any(|e| e.starts_with("/spec/updates")), "{errors:?}");
}

#[test]
fn operator_union_without_the_named_member_is_refused() {
    let errors = refusals("Operator", &operator("plumbus", json!({"type": "ManifestImage"})));
    assert!(errors.iter().any(|e| e.starts_with("/spec/updates")), "{errors:?}");
    let wrong = json!({"type": "ManifestImage", "catalogSource": catalog_updates()["catalogSource"]});
    assert!(refusals("Operator", &operator("plumbus", wrong)).iter().any(|e| e.starts_with("/spec/updates")));
}

#[test]
fn operator_enums_and_required_fields_are_enforced() {
    let errors = refusals("Operator", &operator("plumbus", json!({"type": "Helm", "manifestImage": "x"})));
    assert!(errors.iter().any(|e| e.starts_with("/spec/updates/type")), "{errors:?}");

    let mut bad_approval = catalog_updates();
    bad_approval["catalogSource"]["approval"] = json!("Sometimes");
    let errors = refusals("Operator", &operator("plumbus", bad_approval));
    assert!(errors.iter().any(|e| e.starts_with("/spec/updates/catalogSource/approval")), "{errors:?}");

    let mut no_ref = catalog_updates();
    no_ref["catalogSource"].as_object_mut().expect("object").remove("ref");
    let errors = refusals("Operator", &operator("plumbus", no_ref));
    assert!(errors.iter().any(|e| e.contains("\"ref\" is a required property")), "{errors:?}");
}

#[test]
fn seed_install_is_accepted() {
    let content = json!([
        {"type": "ManifestImage", "manifestImage": "quay.io/howtheydoit/plum:latest"},
        {"type": "Raw", "raw": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: nginx\n"}
    ]);
    assert_eq!(refusals("Install", &install(content)), Vec::<String>::new());
}

#[test]
fn install_content_union_and_minimum_are_enforced() {
    let both = json!([{"type": "Raw", "raw": "kind: Pod", "manifestImage": "quay.io/x/y:1"}]);
    assert!(refusals("Install", &install(both)).iter().any(|e| e.starts_with("/spec/content/0")));
    let missing = json!([{"type": "Raw"}]);
    assert!(refusals("Install", &install(missing)).iter().any(|e| e.starts_with("/spec/content/0")));
    let empty = json!([]);
    assert!(refusals("Install", &install(empty)).iter().any(|e| e.starts_with("/spec/content")));
}

#[test]
fn install_approval_and_namespace_mapping_are_enforced() {
    let mut object = install(json!([{"type": "Raw", "raw": "kind: Pod"}]));
    object["spec"]["approval"] = json!("Yes");
    object["spec"]["namespaces"] = json!([{"from": "default", "to": "Not_A_Namespace"}]);
    let errors = refusals("Install", &object);
    assert!(errors.iter().any(|e| e.starts_with("/spec/approval")), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("/spec/namespaces/0/to")), "{errors:?}");
}

fn install_policy(spec: Value) -> Value {
    json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "InstallPolicy", "metadata": {"name": "cluster"},
           "spec": spec})
}

#[test]
fn a_well_formed_install_policy_is_accepted() {
    let policy = install_policy(json!({
        "ceiling": {"clusterRoles": ["olmv2-ceiling"], "namespaces": [{"name": "kube-system", "clusterRoles": []}]},
        "forbid": [
            {"apiGroups": ["admissionregistration.k8s.io"], "kinds": ["MutatingWebhookConfiguration"]},
            {"kinds": ["ClusterRoleBinding", "RoleBinding"], "roleRefs": ["cluster-admin", "system:*"]},
            {"namespaces": ["kube-system"]}
        ],
        "sources": [{
            "subjects": [{"kind": "Group", "name": "team-a"}],
            "images": [{"repository": "registry.example/approved/*"}, {"repository": "127.0.0.1:5000/approved/*", "digests": "Optional"},
                       {"repository": "registry.example/team__a/bundle--x"}],
            "raw": false,
            "packages": ["plumbus"],
            "catalogs": [{"name": "community", "namespace": "olm"}]
        }]
    }));
    assert_eq!(refusals("InstallPolicy", &policy), Vec::<String>::new());
}

#[test]
fn malformed_install_policies_are_refused() {
    let bad_repository = install_policy(json!({"sources": [{"subjects": [{"kind": "Group", "name": "team-a"}],
        "images": [{"repository": "https://registry.example/approved/*"}]}]}));
    assert!(refusals("InstallPolicy", &bad_repository)
        .iter()
        .any(|e| e.starts_with("/spec/sources/0/images/0/repository")));
    let bad_enum = install_policy(json!({"sources": [{"subjects": [{"kind": "Team", "name": "a"}],
        "images": [{"repository": "registry.example/x", "digests": "Sometimes"}]}]}));
    let errors = refusals("InstallPolicy", &bad_enum);
    assert!(errors.iter().any(|e| e.starts_with("/spec/sources/0/subjects/0/kind")), "{errors:?}");
    assert!(errors.iter().any(|e| e.starts_with("/spec/sources/0/images/0/digests")), "{errors:?}");
    let empty_forbid = install_policy(json!({"forbid": [{}]}));
    assert!(refusals("InstallPolicy", &empty_forbid).iter().any(|e| e.starts_with("/spec/forbid/0")));
    let no_ceiling_roles = install_policy(json!({"ceiling": {"clusterRoles": []}}));
    assert!(refusals("InstallPolicy", &no_ceiling_roles).iter().any(|e| e.starts_with("/spec/ceiling/clusterRoles")));
    let no_subjects = install_policy(json!({"sources": [{"subjects": [], "raw": true}]}));
    assert!(refusals("InstallPolicy", &no_subjects).iter().any(|e| e.starts_with("/spec/sources/0/subjects")));
}

#[test]
fn the_example_policy_in_deploy_is_valid_and_names_the_ceiling_it_ships() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/examples/install-policy.yaml");
    let text = std::fs::read_to_string(path).expect("example");
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|document| serde::Deserialize::deserialize(document).expect("YAML"))
        .collect();
    let policy = documents.iter().find(|d| d["kind"] == "InstallPolicy").expect("an InstallPolicy");
    assert_eq!(refusals("InstallPolicy", policy), Vec::<String>::new());
    let role = documents.iter().find(|d| d["kind"] == "ClusterRole").expect("its ceiling ClusterRole");
    assert_eq!(policy["spec"]["ceiling"]["clusterRoles"][0], role["metadata"]["name"]);
    let typed: olmv2::api::v2alpha1::InstallPolicy = serde_json::from_value(policy.clone()).expect("typed");
    assert!(!typed.spec.forbid.is_empty() && !typed.spec.sources.is_empty());
}

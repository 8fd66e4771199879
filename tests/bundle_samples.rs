//! The sample bundles under `bundles/`: the good ones load and render, plumbus 2.1.0 asks for more permission than
//! 2.0.0-alpha, each malformed one is refused with the file and the reason, and namespace mapping reaches every
//! namespace field.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::{Path, PathBuf};

use olmv2::api::v2alpha1::PermissionScope;
use olmv2::bundle::{map_namespaces, render, Bundle, RenderOptions};
use olmv2::rbac::missing::rule_of;
use olmv2::rbac::{covers, missing_permissions, required_permissions, KindIndex, RbacSnapshot, UserInfo};
use olmv2::tls::CertificateAuthority;
use serde_json::{json, Value};

fn sample(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bundles").join(path)
}

fn rendered(path: &str, targets: &[&str]) -> Vec<Value> {
    let bundle = Bundle::load(&sample(path)).expect("loads");
    let authority = CertificateAuthority::new("samples").expect("CA");
    let targets: Vec<String> = targets.iter().map(|t| (*t).to_owned()).collect();
    render(
        &bundle,
        &RenderOptions {
            install_namespace: "operators",
            target_namespaces: &targets,
            certificates: &authority,
            deployment_config: None,
        },
    )
    .expect("renders")
}

#[test]
fn the_seed_plumbus_is_what_the_seed_describes() {
    let bundle = Bundle::load(&sample("plumbus/2.0.0-alpha")).expect("loads");
    assert_eq!(bundle.name(), "plumbus.v2.0.0-alpha");
    assert_eq!(bundle.csv.spec.version.as_deref(), Some("2.0.0-alpha"));
    assert_eq!(bundle.csv.spec.display_name.as_deref(), Some("Plumbus"));
    let crds = bundle.csv.spec.custom_resource_definitions.as_ref().expect("CRDs");
    assert_eq!((crds.owned[0].kind.as_str(), crds.owned[0].name.as_str()), ("Plumbus", "plumbai.how.theydoit.com"));
    assert_eq!(crds.required[0].kind, "Grumbo");
    assert_eq!(bundle.dependencies[0].value["kind"], "Grumbo");
    Bundle::load(&sample("grumbo/1.0.0")).expect("grumbo loads");
}

#[test]
fn plumbus_2_1_asks_for_more_than_2_0() {
    let kinds = KindIndex::kubernetes();
    let nobody = RbacSnapshot::default();
    let installer = UserInfo::service_account("olm", "plumbus");
    let pending = |path: &str| {
        let objects = rendered(path, &[""]);
        let required = required_permissions(&objects, &kinds, &nobody.roles).expect("required");
        missing_permissions(&required, &nobody, &installer).permissions
    };
    let old: Vec<_> =
        pending("plumbus/2.0.0-alpha").iter().filter(|p| p.scope == PermissionScope::Cluster).map(rule_of).collect();
    let new: Vec<_> =
        pending("plumbus/2.1.0").iter().filter(|p| p.scope == PermissionScope::Cluster).map(rule_of).collect();
    assert!(!covers(&old, &new), "2.1.0 must need something 2.0.0-alpha did not");
    assert!(new.iter().any(|rule| rule.resources.contains(&"nodes".to_owned())), "{new:#?}");
}

#[test]
fn each_malformed_sample_is_refused_naming_file_and_reason() {
    let expected = [
        ("invalid-csv", "manifests/grumbo.clusterserviceversion.yaml: invalid ClusterServiceVersion: invalid type: string \"not-a-list\", expected a sequence"),
        ("invalid-yaml", "manifests/broken.yaml: invalid YAML: mapping values are not allowed in this context at line 5 column 8"),
        ("missing-annotations", "metadata/annotations.yaml: is missing"),
        ("nested-manifests", "manifests/extra: manifests/ must be flat, but this is a directory"),
        ("no-csv", "manifests/: holds no ClusterServiceVersion"),
        ("not-an-object", "manifests/list.yaml: document 0 is not a Kubernetes object: it is not a mapping"),
        ("two-csvs", "manifests/: holds more than one ClusterServiceVersion: [\"manifests/a.clusterserviceversion.yaml\", \"manifests/b.clusterserviceversion.yaml\"]"),
        ("unsupported-kind", "manifests/pod.yaml: kind Pod is not allowed in a bundle"),
        ("wrong-mediatype", "metadata/annotations.yaml: invalid annotations: operators.operatorframework.io.bundle.mediatype.v1 is \"plain+v0\"; only registry+v1 is supported"),
    ];
    let on_disk = std::fs::read_dir(sample("malformed")).expect("malformed/").count();
    assert_eq!(on_disk, expected.len(), "every malformed sample has an expected error");
    for (name, message) in expected {
        let error = Bundle::load(&sample(&format!("malformed/{name}"))).expect_err(name);
        assert_eq!(error.to_string(), message, "{name}");
    }
}

#[test]
fn namespace_mapping_reaches_every_namespace_field() {
    let mut objects = rendered("plumbus/2.0.0-alpha", &["operators"]);
    objects.push(json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "w"},
        "webhooks": [{"name": "a", "clientConfig": {"service": {"namespace": "operators", "name": "s"}}}, {"name": "b", "clientConfig": {"url": "https://x"}}]}));
    objects.push(json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.x"}, "spec": {"service": {"namespace": "operators", "name": "s"}}}));
    let untouched_cluster_role = objects.iter().find(|o| o["kind"] == "ClusterRole").cloned().expect("cluster role");
    map_namespaces(&mut objects, &[("operators".to_owned(), "plumbus-system".to_owned())]);
    let text = serde_json::to_string(&objects).expect("json");
    assert!(!text.contains("\"operators\""), "a namespace field kept the old name: {text}");
    assert!(!text.contains("operators,") && !text.contains(",operators"));
    let deployment = objects.iter().find(|o| o["kind"] == "Deployment").expect("deployment");
    assert_eq!(deployment["metadata"]["namespace"], "plumbus-system");
    assert_eq!(deployment["spec"]["template"]["metadata"]["annotations"]["olm.operatorNamespace"], "plumbus-system");
    assert_eq!(deployment["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"], "plumbus-system");
    let binding = objects.iter().find(|o| o["kind"] == "RoleBinding").expect("binding");
    assert_eq!(binding["subjects"][0]["namespace"], "plumbus-system");
    let webhook = objects.iter().find(|o| o["kind"] == "ValidatingWebhookConfiguration").expect("webhook");
    assert_eq!(webhook["webhooks"][0]["clientConfig"]["service"]["namespace"], "plumbus-system");
    assert_eq!(webhook["webhooks"][1]["clientConfig"], json!({"url": "https://x"}), "absent fields stay absent");
    assert_eq!(objects.iter().find(|o| o["kind"] == "ClusterRole").expect("cluster role"), &untouched_cluster_role);
}

//! The manifests under `deploy/` are well-formed Kubernetes objects that agree with the binary: the probes and
//! the Service use the port `run` serves on, and the controller's ServiceAccount is the one bound.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::path::Path;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use serde_json::Value;

fn documents() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    // Files only: `kubectl apply -f deploy/` does not descend into deploy/examples/.
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .expect("deploy/")
        .map(|e| e.expect("entry").path())
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    let mut documents = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("readable");
        for document in serde_yaml_ng::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(document).expect("YAML");
            if !value.is_null() {
                documents.push(value);
            }
        }
    }
    documents
}

fn find<T: serde::de::DeserializeOwned>(kind: &str) -> T {
    let value = documents().into_iter().find(|d| d["kind"] == kind).unwrap_or_else(|| panic!("no {kind}"));
    serde_json::from_value(value).expect("typed object")
}

#[test]
fn every_document_names_its_kind_and_object() {
    for document in documents() {
        assert!(document["apiVersion"].is_string() && document["kind"].is_string(), "{document}");
        assert!(document["metadata"]["name"].is_string(), "{document}");
    }
}

#[test]
fn probes_use_the_port_run_serves_on() {
    let deployment: Deployment = find("Deployment");
    let container = &deployment.spec.expect("spec").template.spec.expect("pod spec").containers[0];
    let args: Vec<&str> = container.args.iter().flatten().map(String::as_str).collect();
    assert_eq!(
        args,
        ["run", "--log-format", "json", "--enable-v2alpha1", "--leader-elect"],
        "the v2alpha1 controllers run deployed, replicas electing their leader"
    );
    let port = &container.ports.as_ref().expect("ports")[0];
    let default_address: std::net::SocketAddr = "0.0.0.0:8080".parse().expect("address");
    assert_eq!(port.container_port, i32::from(default_address.port()));
    assert_eq!(
        container.liveness_probe.as_ref().and_then(|p| p.http_get.as_ref()).map(|g| g.path.clone()),
        Some(Some("/healthz".into()))
    );
    assert_eq!(
        container.readiness_probe.as_ref().and_then(|p| p.http_get.as_ref()).map(|g| g.path.clone()),
        Some(Some("/readyz".into()))
    );
}

#[test]
fn controller_service_account_is_bound_to_its_role() {
    let binding: ClusterRoleBinding = find("ClusterRoleBinding");
    let role: ClusterRole = find("ClusterRole");
    assert_eq!(binding.role_ref.name, role.metadata.name.expect("name"));
    let subject = &binding.subjects.expect("subjects")[0];
    assert_eq!((subject.kind.as_str(), subject.name.as_str()), ("ServiceAccount", "olmv2-controller"));
    let rules = role.rules.expect("rules");
    assert!(
        rules.iter().any(|rule| rule.verbs.contains(&"impersonate".to_owned())),
        "impersonation is how content is applied"
    );
}

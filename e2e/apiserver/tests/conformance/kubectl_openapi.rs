//! What kubectl reads from the OpenAPI documents: `explain` of built-in and custom kinds, client-side validation of
//! a `kind: List` with the v2 protobuf document, strict validation on the server, and the `get -o yaml` to `apply`
//! round trip with client-side apply's strategic merge patch from the v3 schemas' merge keys.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use support::kubectl::{start_with_crds as setup, temp_dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_reads_the_openapi_documents_of_builtin_and_custom_kinds() {
    let dir = temp_dir("explain");
    let (_plane, kubectl) = setup(&dir).await;
    let replicas = kubectl.ok(&["explain", "deployment.spec.replicas"], None);
    assert!(replicas.starts_with("GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\n"), "{replicas}");
    assert!(
        replicas.contains("FIELD: replicas <integer>") && replicas.contains("Number of desired pods"),
        "{replicas}"
    );
    let config_map = kubectl.ok(&["explain", "configmap"], None);
    assert!(
        config_map.contains("KIND:       ConfigMap") && config_map.contains("data\t<map[string]string>"),
        "{config_map}"
    );
    let surge = kubectl.ok(&["explain", "deployment.spec.strategy.rollingUpdate.maxSurge"], None);
    assert!(surge.contains("FIELD: maxSurge <IntOrString>"), "{surge}");
    let recursive = kubectl.ok(&["explain", "pods.spec.containers", "--recursive"], None);
    assert!(
        recursive.contains("ports\t<[]ContainerPort>") && recursive.contains("containerPort\t<integer> -required-"),
        "{recursive}"
    );
    let operator = kubectl.ok(&["explain", "operator.spec.updates"], None);
    assert!(operator.contains("KIND:       Operator") && operator.contains("catalogSource\t<Object>"), "{operator}");
    let metadata = kubectl.ok(&["explain", "operator.metadata.labels"], None);
    assert!(
        metadata.contains("FIELD: labels <map[string]string>"),
        "a custom resource's metadata is ObjectMeta:\n{metadata}"
    );
    let missing = kubectl.fails(&["explain", "deployment.spec.nothing"], None);
    assert!(missing.contains("field \"nothing\" does not exist"), "{missing}");
    std::fs::remove_dir_all(&dir).ok();
}

const LIST: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: listed}
  data: {mode: one}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: listed}
  spec:
    selector: {matchLabels: {app: listed}}
    template:
      metadata: {labels: {app: listed}}
      spec:
        containers: [{name: app, image: example.com/app:1}]
- apiVersion: operators.coreos.com/v2alpha1
  kind: Operator
  metadata: {name: listed}
  spec:
    updates:
      type: CatalogSource
      catalogSource: {package: plumbus, channel: stable, ref: {name: catalog, namespace: olm}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_of_a_list_validates_its_items_with_the_v2_document() {
    let dir = temp_dir("list");
    let (plane, kubectl) = setup(&dir).await;
    let applied = kubectl.ok(&["apply", "-f", "-"], Some(LIST));
    assert_eq!(
        applied.lines().collect::<Vec<_>>(),
        ["configmap/listed created", "deployment.apps/listed created", "operator.operators.coreos.com/listed created"]
    );
    assert!(
        plane.api.audit.records().iter().any(|r| r.path == "/openapi/v2" && r.code == 200),
        "kubectl validates a List's items on the client, with the v2 document"
    );

    let unknown_builtin = LIST.replace("data: {mode: one}", "data: {mode: one}\n  bogus: 1");
    let refused = kubectl.fails(&["apply", "-f", "-"], Some(&unknown_builtin));
    assert!(refused.contains("error validating data: ValidationError(ConfigMap): unknown field \"bogus\" in io.k8s.api.core.v1.ConfigMap"), "{refused}");
    let unknown_custom = LIST.replace("  spec:\n    updates:", "  spec:\n    bogus: 1\n    updates:");
    let refused = kubectl.fails(&["apply", "--validate=true", "-f", "-"], Some(&unknown_custom));
    assert!(
        refused.contains(
            "ValidationError(Operator.spec): unknown field \"bogus\" in com.coreos.operators.v2alpha1.Operator.spec"
        ),
        "{refused}"
    );
    let wrong_type = LIST.replace("{mode: one}", "{mode: one}\n  immutable: \"yes\"");
    let refused = kubectl.fails(&["apply", "-f", "-"], Some(&wrong_type));
    assert!(refused.contains("ValidationError(ConfigMap.immutable): invalid type for io.k8s.api.core.v1.ConfigMap.immutable: got \"string\", expected \"boolean\""), "{refused}");

    let changed = LIST.replace("{mode: one}", "{mode: two}");
    let configured = kubectl.ok(&["apply", "--validate=strict", "-f", "-"], Some(&changed));
    assert!(configured.contains("configmap/listed configured"), "{configured}");
    assert_eq!(kubectl.json(&["get", "configmap", "listed"])["data"]["mode"], "two");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_validation_refuses_unknown_fields_of_builtin_and_custom_kinds() {
    let dir = temp_dir("strict");
    let (_plane, kubectl) = setup(&dir).await;
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: strict\ndata: {a: b}\n";
    let operator = "apiVersion: operators.coreos.com/v2alpha1\nkind: Operator\nmetadata:\n  name: strict\nspec: {}\n";
    for validate in ["--validate=strict", "--validate=true"] {
        let refused = kubectl.fails(&["apply", validate, "-f", "-"], Some(&format!("{config_map}bogus: 1\n")));
        assert!(refused.contains("Error from server (BadRequest): error when creating \"STDIN\": ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\""), "{refused}");
        let refused =
            kubectl.fails(&["apply", validate, "-f", "-"], Some(&operator.replace("spec: {}", "spec: {bogus: 1}")));
        assert!(refused.contains("Error from server (BadRequest): error when creating \"STDIN\": Operator in version \"v2alpha1\" cannot be handled as a Operator: strict decoding error: unknown field \"spec.bogus\""), "{refused}");
    }
    kubectl.ok(&["apply", "--validate=strict", "-f", "-"], Some(config_map));
    kubectl.ok(&["apply", "--validate=true", "-f", "-"], Some(operator));
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_yaml_applies_back_and_client_side_apply_merges_with_the_v3_schemas() {
    let dir = temp_dir("round-trip");
    let (plane, kubectl) = setup(&dir).await;
    kubectl.ok(&["apply", "-f", "-"], Some(LIST));
    let yaml = kubectl.ok(&["get", "configmap/listed", "deployment/listed", "operator/listed", "-o", "yaml"], None);
    assert!(yaml.starts_with("apiVersion: v1\nitems:\n"), "kubectl get writes a List:\n{yaml}");
    let before = kubectl.json(&["get", "configmap/listed", "deployment/listed", "operator/listed"]);
    let applied = kubectl.ok(&["apply", "-f", "-"], Some(&yaml));
    assert_eq!(applied.lines().count(), 3, "{applied}");
    let after = kubectl.json(&["get", "configmap/listed", "deployment/listed", "operator/listed"]);
    for (before, after) in
        before["items"].as_array().expect("items").iter().zip(after["items"].as_array().expect("items"))
    {
        assert_eq!(
            (&before["data"], &before["spec"]),
            (&after["data"], &after["spec"]),
            "the round trip changes nothing"
        );
    }

    // Client-side apply computes a strategic merge patch from the v3 document's merge keys: a container the
    // configuration stops listing is deleted by name, one added by someone else is left alone.
    kubectl.ok(
        &[
            "patch",
            "deployment",
            "listed",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"example.com/sidecar:1"}]}}}}"#,
        ],
        None,
    );
    let from = plane.api.audit.records().len();
    let deployment = |containers: &str| {
        format!("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: listed}}\nspec:\n  selector: {{matchLabels: {{app: listed}}}}\n  template:\n    metadata: {{labels: {{app: listed}}}}\n    spec:\n      containers: {containers}\n")
    };
    let images = || {
        let mut images: Vec<String> = kubectl.json(&["get", "deployment", "listed"])["spec"]["template"]["spec"]
            ["containers"]
            .as_array()
            .expect("containers")
            .iter()
            .filter_map(|c| c["image"].as_str().map(str::to_owned))
            .collect();
        images.sort();
        images
    };
    let two = deployment("[{name: app, image: example.com/app:2}, {name: helper, image: example.com/helper:1}]");
    assert_eq!(kubectl.ok(&["apply", "-f", "-"], Some(&two)).trim(), "deployment.apps/listed configured");
    assert_eq!(images(), ["example.com/app:2", "example.com/helper:1", "example.com/sidecar:1"]);
    let one = deployment("[{name: app, image: example.com/app:2}]");
    assert_eq!(kubectl.ok(&["apply", "-f", "-"], Some(&one)).trim(), "deployment.apps/listed configured");
    assert_eq!(images(), ["example.com/app:2", "example.com/sidecar:1"], "helper deleted by name, sidecar kept");
    let records = plane.api.audit.records();
    assert!(records[from..].iter().any(|r| r.path.starts_with("/openapi/v3")), "kubectl reads the v3 documents");
    assert!(!records[from..].iter().any(|r| r.path == "/openapi/v2"), "and needs no fallback to v2");
    std::fs::remove_dir_all(&dir).ok();
}

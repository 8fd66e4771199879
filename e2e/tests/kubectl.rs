//! The real kubectl against the control plane: apply (client-side, again with a change, server-side with a
//! conflict), get in every output the project documents (yaml, json, wide with printer columns, watch), the three
//! patch types, label and annotate, wait for a condition, and cascading delete; and what kubectl reads from the
//! OpenAPI documents: explain, client-side validation of a `kind: List`, strict validation, the `get -o yaml` to
//! `apply` round trip and the strategic merge patch of client-side apply.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use olmv2_e2e::apiserver::api::{Target, WriteOptions};
use olmv2_e2e::apiserver::{ControlPlane, Options};
use serde_json::Value;
use support::kubectl::{temp_dir, Kubectl};

async fn setup(dir: &Path) -> (ControlPlane, Kubectl) {
    let plane = ControlPlane::start(Options::default()).await.expect("control plane starts");
    let crd_type = plane
        .api
        .resources()
        .lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        .cloned()
        .expect("CRDs served");
    let target = Target { resource: crd_type, namespace: String::new(), name: None, subresource: None };
    let options = WriteOptions::internal("test");
    for crd in olmv2::crdgen::all_crds() {
        plane
            .api
            .create(&target, serde_json::to_value(&crd).expect("JSON"), &options)
            .await
            .expect("project CRD accepted");
    }
    let kubeconfig = dir.join("kubeconfig");
    plane.write_kubeconfig(&kubeconfig).expect("kubeconfig written");
    (plane, Kubectl { kubeconfig })
}

const MANIFESTS: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: demo}
data:
  mode: "one"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: example.com/app:1
        env: [{name: A, value: "1"}]
---
apiVersion: operators.coreos.com/v2alpha1
kind: Operator
metadata:
  name: plumbus
spec:
  updates:
    type: CatalogSource
    catalogSource:
      package: plumbus
      channel: stable
      ref: {name: catalog, namespace: olm}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_patch_label_wait_and_delete() {
    let dir = temp_dir("suite");
    let (_plane, kubectl) = setup(&dir).await;

    let created = kubectl.ok(&["apply", "-f", "-"], Some(MANIFESTS));
    assert_eq!(
        created.lines().collect::<Vec<_>>(),
        ["configmap/settings created", "deployment.apps/web created", "operator.operators.coreos.com/plumbus created"]
    );
    let changed = MANIFESTS.replace("mode: \"one\"", "mode: \"two\"").replace("app:1", "app:2");
    let configured = kubectl.ok(&["apply", "-f", "-"], Some(&changed));
    assert_eq!(
        configured.lines().collect::<Vec<_>>(),
        [
            "configmap/settings configured",
            "deployment.apps/web configured",
            "operator.operators.coreos.com/plumbus unchanged"
        ]
    );
    assert_eq!(kubectl.json(&["get", "configmap", "settings"])["data"]["mode"], "two");
    let deployment = kubectl.json(&["get", "deployment", "web"]);
    assert_eq!(deployment["spec"]["template"]["spec"]["containers"][0]["image"], "example.com/app:2");
    assert_eq!(deployment["metadata"]["generation"], 2);

    let server_side =
        kubectl.ok(&["apply", "--server-side", "-f", "-"], Some(&changed.replace("mode: \"two\"", "mode: \"three\"")));
    assert!(server_side.contains("configmap/settings serverside-applied"), "{server_side}");
    let conflict = kubectl.fails(
        &["apply", "--server-side", "--field-manager", "intruder", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: four\n"),
    );
    assert!(
        conflict.contains("Apply failed with 1 conflict: conflict with \"kubectl\" using v1: .data.mode"),
        "{conflict}"
    );
    kubectl.ok(
        &["apply", "--server-side", "--force-conflicts", "--field-manager", "intruder", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n  mode: four\n"),
    );
    assert_eq!(kubectl.json(&["get", "configmap", "settings"])["data"]["mode"], "four");

    let yaml = kubectl.ok(&["get", "operator", "plumbus", "-o", "yaml"], None);
    assert!(yaml.contains("kind: Operator") && yaml.contains("approval: Automatic"), "defaults applied:\n{yaml}");
    let wide = kubectl.ok(&["get", "operators", "-o", "wide"], None);
    let header: Vec<&str> = wide.lines().next().expect("header").split_whitespace().collect();
    assert_eq!(&header[..2], ["NAME", "VERSION"], "{wide}");
    assert!(header.contains(&"PACKAGE") && header.contains(&"CHANNEL"), "{wide}");
    let row: Vec<&str> = wide.lines().nth(1).expect("row").split_whitespace().collect();
    assert!(row.contains(&"plumbus") && row.contains(&"stable") && row.contains(&"CatalogSource"), "{wide}");
    let deployments = kubectl.ok(&["get", "deployments", "-o", "wide"], None);
    assert!(deployments.lines().next().expect("header").contains("IMAGES"), "{deployments}");

    kubectl.ok(&["patch", "configmap", "settings", "--type", "merge", "-p", r#"{"data":{"merged":"yes"}}"#], None);
    kubectl.ok(
        &[
            "patch",
            "configmap",
            "settings",
            "--type",
            "json",
            "-p",
            r#"[{"op":"add","path":"/data/json","value":"yes"}]"#,
        ],
        None,
    );
    kubectl.ok(
        &[
            "patch",
            "deployment",
            "web",
            "-p",
            r#"{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"B","value":"2"}]}]}}}}"#,
        ],
        None,
    );
    let data = &kubectl.json(&["get", "configmap", "settings"])["data"];
    assert_eq!((data["merged"].as_str(), data["json"].as_str()), (Some("yes"), Some("yes")));
    let env = kubectl.json(&["get", "deployment", "web"])["spec"]["template"]["spec"]["containers"][0]["env"].clone();
    assert_eq!(
        env,
        serde_json::json!([{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]),
        "strategic merge by name"
    );

    kubectl.ok(&["label", "configmap", "settings", "tier=gold"], None);
    kubectl.ok(&["annotate", "configmap", "settings", "note=hello"], None);
    let labelled = kubectl.ok(&["get", "configmaps", "-l", "tier=gold", "-o", "name"], None);
    assert_eq!(labelled.trim(), "configmap/settings");
    assert_eq!(kubectl.json(&["get", "configmap", "settings"])["metadata"]["annotations"]["note"], "hello");
    let invalid = kubectl.fails(&["label", "configmap", "settings", "bad key=x"], None);
    assert!(!invalid.is_empty());

    kubectl.ok(&["patch", "operator", "plumbus", "--subresource", "status", "--type", "merge", "-p", r#"{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Installed","message":"ok","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#], None);
    let waited = kubectl.ok(&["wait", "--for=condition=Ready", "operator/plumbus", "--timeout=10s"], None);
    assert_eq!(waited.trim(), "operator.operators.coreos.com/plumbus condition met");

    let owner = kubectl.json(&["get", "configmap", "settings"]);
    let child = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: child\n  ownerReferences:\n  - {{apiVersion: v1, kind: ConfigMap, name: settings, uid: {}, blockOwnerDeletion: true}}\n",
        owner["metadata"]["uid"].as_str().expect("uid")
    );
    kubectl.ok(&["apply", "-f", "-"], Some(&child));
    let deleted = kubectl.ok(&["delete", "configmap", "settings", "--cascade=foreground", "--timeout=10s"], None);
    assert_eq!(deleted.trim(), "configmap \"settings\" deleted");
    let gone = kubectl.fails(&["get", "configmap", "child"], None);
    assert!(gone.contains("configmaps \"child\" not found"), "{gone}");

    let refused =
        kubectl.fails(&["apply", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_Valid\n"));
    assert!(refused.contains("ConfigMap \"Not_Valid\" is invalid: metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain"), "{refused}");
    let unknown =
        kubectl.fails(&["apply", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\nbogus: 1\n"));
    assert!(unknown.contains("unknown field \"bogus\""), "{unknown}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_watch_prints_changes_as_they_happen() {
    let dir = temp_dir("watch");
    let (_plane, kubectl) = setup(&dir).await;
    let mut watcher = kubectl
        .command(&["get", "configmaps", "--watch", "--output-watch-events", "--request-timeout=20s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl get -w starts");
    let stdout = watcher.stdout.take().expect("stdout");
    let (lines_tx, lines_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(700)).await;
    kubectl
        .ok(&["apply", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: watched\ndata: {a: b}\n"));
    kubectl.ok(&["delete", "configmap", "watched"], None);
    let mut seen = Vec::new();
    while seen.len() < 4 {
        match lines_rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    watcher.kill().ok();
    watcher.wait().ok();
    let events: Vec<(String, String)> = seen
        .iter()
        .skip(1)
        .map(|line| {
            let cells: Vec<&str> = line.split_whitespace().collect();
            (cells[0].to_owned(), cells[1].to_owned())
        })
        .collect();
    assert_eq!(
        seen.first().map(|h| h.split_whitespace().take(3).collect::<Vec<_>>()),
        Some(vec!["EVENT", "NAME", "DATA"]),
        "{seen:?}"
    );
    assert!(events.contains(&("ADDED".to_owned(), "watched".to_owned())), "{seen:?}");
    assert!(events.contains(&("DELETED".to_owned(), "watched".to_owned())), "{seen:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_can_i_agrees_with_what_is_enforced() {
    let dir = temp_dir("can-i");
    let (_plane, kubectl) = setup(&dir).await;
    let can_i = |verb: &str| {
        let output = kubectl.run(&["auth", "can-i", verb, "configmaps", "--as=alice", "-n", "default"], None);
        (String::from_utf8_lossy(&output.stdout).trim().to_owned(), output.status.success())
    };
    assert_eq!(can_i("list"), ("no".to_owned(), false));
    let refused = kubectl.fails(&["get", "configmaps", "--as=alice", "-n", "default"], None);
    assert!(refused.contains("Error from server (Forbidden): configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""), "{refused}");
    kubectl.ok(&["apply", "-f", "-"], Some(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: reader, namespace: default}\nrules:\n- {apiGroups: [\"\"], resources: [configmaps], verbs: [get, list]}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: alice-reads, namespace: default}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}\nsubjects:\n- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}\n",
    ));
    assert_eq!(can_i("list"), ("yes".to_owned(), true));
    kubectl.ok(&["get", "configmaps", "--as=alice", "-n", "default"], None);
    assert_eq!(can_i("delete"), ("no".to_owned(), false));
    let refused = kubectl.fails(&["delete", "configmap", "anything", "--as=alice", "-n", "default"], None);
    assert!(
        refused.contains("configmaps \"anything\" is forbidden: User \"alice\" cannot delete resource"),
        "{refused}"
    );
    let whoami = kubectl.ok(&["auth", "whoami", "--as=alice", "-o", "json"], None);
    let review: Value = serde_json::from_str(&whoami).expect("JSON");
    assert_eq!(review["status"]["userInfo"]["username"], "alice");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_denial_and_an_aggregated_list_through_kubectl() {
    let dir = temp_dir("workloads");
    let (plane, kubectl) = setup(&dir).await;
    let (_webhook, configuration) = support::workloads::deny_webhook(&plane).await;
    kubectl.ok(&["apply", "-f", "-"], Some(&configuration.to_string()));
    let denied = kubectl.fails(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: refused\n  labels: {deny: \"true\"}\n"),
    );
    assert!(denied.contains("Error from server (Forbidden): error when creating \"STDIN\": admission webhook \"deny.example.com\" denied the request: objects labelled deny=true are refused"), "{denied}");
    kubectl.ok(&["apply", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: accepted\n"));

    let backend = support::workloads::metrics_backend(&plane).await;
    plane.api.endpoints.set("default", "metrics", backend.address);
    kubectl.ok(
        &["apply", "-f", "-"],
        Some("apiVersion: v1\nkind: Service\nmetadata: {name: metrics}\nspec:\n  ports: [{port: 443}]\n"),
    );
    kubectl.ok(&["apply", "-f", "-"], Some(&support::workloads::api_service(&backend.ca_bundle()).to_string()));
    let waited =
        kubectl.ok(&["wait", "--for=condition=Available", "apiservice/v1.metrics.example.com", "--timeout=20s"], None);
    assert!(waited.contains("condition met"), "{waited}");
    let listed = kubectl.json(&["get", "samples.metrics.example.com", "-n", "default"]);
    assert_eq!(listed["items"][0]["remoteUser"], "kubernetes-admin");
    let table = kubectl.ok(&["get", "samples", "-n", "default"], None);
    assert!(table.contains("who-asked"), "{table}");
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_shows_the_events_a_controller_recorded_with_the_events_api() {
    let dir = temp_dir("describe");
    let (plane, kubectl) = setup(&dir).await;
    kubectl.ok(&["apply", "-f", "-"], Some(MANIFESTS));
    let operator = kubectl.json(&["get", "operator", "plumbus"]);
    let client = plane.client().await.expect("client");
    let (code, body) = support::post(
        &client,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &serde_json::json!({"metadata": {"name": "plumbus.1"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "olmv2-operator-controller", "reportingInstance": "olmv2-1", "action": "Reconcile",
            "reason": "InstallPendingApproval", "type": "Warning", "note": "one or more installs require approval",
            "regarding": {"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "name": "plumbus",
                          "uid": operator["metadata"]["uid"]}}),
    )
    .await;
    assert_eq!(code, 201, "{body}");

    let described = kubectl.ok(&["describe", "operator", "plumbus"], None);
    let events = described.split("Events:").nth(1).expect("an Events section");
    assert!(events.contains("Warning") && events.contains("InstallPendingApproval"), "{described}");
    assert!(events.contains("olmv2-operator-controller") && events.contains("one or more installs require approval"));
    let listed = kubectl.ok(&["get", "events", "-n", "default"], None);
    assert!(listed.contains("operator/plumbus") && listed.contains("InstallPendingApproval"), "{listed}");
}

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

//! The real kubectl against the control plane: apply (client-side, again with a change, server-side with a
//! conflict), get in every output the project documents (yaml, json, wide with printer columns, the columns and
//! cells of built-in kinds, watch), the three patch types, label and annotate, wait for a condition, cascading
//! delete, `auth can-i`, a webhook's denial, an aggregated API's list and the events `describe` shows. What kubectl
//! reads from the OpenAPI documents is `kubectl_openapi`'s; its imperative commands are `kubectl_commands`'.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use crate::support;
use serde_json::Value;
use support::kubectl::{start_with_crds as setup, temp_dir};

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
async fn a_webhook_denial_and_an_aggregated_list_and_explain_through_kubectl() {
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
    let explained = kubectl.ok(&["explain", "samples.remoteUser"], None);
    assert!(
        explained.contains("KIND:       Sample")
            && explained.contains("FIELD: remoteUser <string>")
            && explained.contains("The user the aggregator said was asking."),
        "explained from the aggregated server's OpenAPI v3 document:\n{explained}"
    );
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

/// Services of every type, a ServiceAccount, a Role and two RoleBindings, in YAML and JSON.
const PRINTED: &str = r#"
apiVersion: v1
kind: Namespace
metadata: {name: printers}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: printers}
spec:
  clusterIP: 10.96.100.10
  selector: {app: web, tier: front}
  ports: [{name: http, port: 80, targetPort: 8080}, {name: dns, port: 53, protocol: UDP}]
---
apiVersion: v1
kind: Service
metadata: {name: nodes, namespace: printers}
spec:
  type: NodePort
  clusterIP: 10.96.100.11
  externalIPs: [192.0.2.10]
  ports: [{port: 443, nodePort: 30443}]
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: printers}
spec:
  type: LoadBalancer
  clusterIP: 10.96.100.12
  selector: {app: lb}
  ports: [{port: 8443, nodePort: 31443}]
---
apiVersion: v1
kind: Service
metadata: {name: db, namespace: printers}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{port: 5432}]
---
{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "alias", "namespace": "printers"},
 "spec": {"type": "ExternalName", "externalName": "db.example.com"}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: builder, namespace: printers}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: printers}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: readers, namespace: printers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects:
- {kind: User, name: alice}
- {kind: Group, name: team}
- {kind: User, name: bob}
- {kind: ServiceAccount, name: builder, namespace: printers}
---
{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
 "metadata": {"name": "viewers", "namespace": "printers"},
 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
 "subjects": [{"kind": "ServiceAccount", "name": "default"}]}
"#;

/// The tables kubectl prints, one per kind: each a header and rows of cells, cut where the header's columns start
/// (kubectl aligns every cell of a column with its header, at least three spaces after the previous one).
fn printed_tables(output: &str) -> Vec<(Vec<String>, Vec<Vec<String>>)> {
    output
        .split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut lines = block.lines();
            let header = lines.next().expect("a header");
            let starts: Vec<usize> = (0..header.len())
                .filter(|&i| header.as_bytes()[i] != b' ' && (i == 0 || header[..i].ends_with("  ")))
                .collect();
            let cut = |line: &str| -> Vec<String> {
                starts
                    .iter()
                    .enumerate()
                    .map(|(n, &start)| {
                        let end = starts.get(n + 1).copied().unwrap_or(line.len()).min(line.len());
                        line.get(start.min(end)..end).unwrap_or_default().trim().to_owned()
                    })
                    .collect()
            };
            (cut(header), lines.map(cut).collect())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_wide_prints_the_columns_and_cells_a_cluster_prints() {
    let dir = temp_dir("printers");
    let (_plane, kubectl) = setup(&dir).await;
    kubectl.ok(&["apply", "-f", "-"], Some(PRINTED));
    let output = kubectl.ok(&["get", "svc,sa,role,rolebinding", "-n", "printers", "-o", "wide"], None);
    let tables = printed_tables(&output);
    assert_eq!(tables.len(), 4, "{output}");
    // Objects created a moment ago: their age is in seconds.
    let ages = |rows: &[Vec<String>], column: usize| {
        for row in rows {
            let age = &row[column];
            assert!(age.ends_with('s') && age[..age.len() - 1].parse::<u32>().is_ok(), "{age}\n{output}");
        }
    };
    let without = |rows: &[Vec<String>], column: usize| -> Vec<Vec<String>> {
        rows.iter()
            .map(|row| row.iter().enumerate().filter(|(i, _)| *i != column).map(|(_, c)| c.clone()).collect())
            .collect()
    };
    let expect = |rows: &[&[&str]]| -> Vec<Vec<String>> {
        rows.iter().map(|row| row.iter().map(|c| (*c).to_owned()).collect()).collect()
    };

    let (header, rows) = &tables[0];
    assert_eq!(header, &["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"], "{output}");
    ages(rows, 5);
    assert_eq!(
        without(rows, 5),
        expect(&[
            &["service/alias", "ExternalName", "<none>", "db.example.com", "<none>", "<none>"],
            &["service/db", "ClusterIP", "None", "<none>", "5432/TCP", "app=db"],
            &["service/lb", "LoadBalancer", "10.96.100.12", "<pending>", "8443:31443/TCP", "app=lb"],
            &["service/nodes", "NodePort", "10.96.100.11", "192.0.2.10", "443:30443/TCP", "<none>"],
            &["service/web", "ClusterIP", "10.96.100.10", "<none>", "80/TCP,53/UDP", "app=web,tier=front"],
        ]),
        "{output}"
    );

    let (header, rows) = &tables[1];
    assert_eq!(header, &["NAME", "SECRETS", "AGE"], "{output}");
    ages(rows, 2);
    assert_eq!(
        without(rows, 2),
        expect(&[&["serviceaccount/builder", "0"], &["serviceaccount/default", "0"]]),
        "{output}"
    );

    let created = kubectl.json(&["get", "role", "reader", "-n", "printers"])["metadata"]["creationTimestamp"].clone();
    let (header, rows) = &tables[2];
    assert_eq!(header, &["NAME", "CREATED AT"], "{output}");
    assert_eq!(
        rows,
        &expect(&[&["role.rbac.authorization.k8s.io/reader", created.as_str().expect("time")]]),
        "{output}"
    );

    let (header, rows) = &tables[3];
    assert_eq!(header, &["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"], "{output}");
    ages(rows, 2);
    assert_eq!(
        without(rows, 2),
        expect(&[
            &["rolebinding.rbac.authorization.k8s.io/readers", "Role/reader", "alice, bob", "team", "printers/builder"],
            &["rolebinding.rbac.authorization.k8s.io/viewers", "ClusterRole/view", "", "", "/default"],
        ]),
        "{output}"
    );

    // Without `-o wide`, the columns of priority 1 are left out.
    let narrow = kubectl.ok(&["get", "rolebindings,services", "-n", "printers"], None);
    let tables = printed_tables(&narrow);
    assert_eq!(tables[0].0, ["NAME", "ROLE", "AGE"], "{narrow}");
    assert_eq!(tables[1].0, ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"], "{narrow}");
    std::fs::remove_dir_all(&dir).ok();
}

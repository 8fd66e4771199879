//! kubectl's everyday imperative commands against the control plane, each checked for what a cluster answers:
//! the typed generators (`kubectl create <kind>`, `create token`, `scale`), which send and accept protobuf; the
//! commands that read and rewrite objects (`edit`, `replace --force`, `label`/`annotate --overwrite`); deletion
//! (`--cascade=orphan|foreground`, `wait --for=delete`); RBAC (`auth can-i --list`, `auth reconcile`); `diff`,
//! `rollout status` and `events --for`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code fails loudly by design

use crate::support;
use kube_emulator::{ControlPlane, Options};
use serde_json::{json, Value};
use support::kubectl::{temp_dir, Kubectl};

async fn setup(name: &str) -> (ControlPlane, Kubectl, std::path::PathBuf) {
    let plane = ControlPlane::start(Options::default()).await.expect("control plane starts");
    let dir = temp_dir(name);
    let kubectl = Kubectl::with_kubeconfig(&dir, "kubeconfig", &plane.kubeconfig());
    kubectl.ok(&["create", "namespace", "demo"], None);
    (plane, kubectl, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_create_of_each_kind_speaks_protobuf_and_creates_what_it_says() {
    let (_plane, kubectl, _dir) = setup("create").await;
    let namespaced: &[(&[&str], &str)] = &[
        (&["create", "configmap", "settings", "--from-literal=mode=fast"], "configmap/settings created"),
        (&["create", "secret", "generic", "creds", "--from-literal=token=s3cret"], "secret/creds created"),
        (&["create", "serviceaccount", "runner"], "serviceaccount/runner created"),
        (
            &["create", "role", "reader", "--verb=get,list", "--resource=configmaps"],
            "role.rbac.authorization.k8s.io/reader created",
        ),
        (
            &["create", "rolebinding", "reader", "--role=reader", "--serviceaccount=demo:runner"],
            "rolebinding.rbac.authorization.k8s.io/reader created",
        ),
        (
            &["create", "deployment", "web", "--image=example.com/web:1", "--replicas=0", "--port=8080"],
            "deployment.apps/web created",
        ),
        (&["create", "service", "clusterip", "web", "--tcp=80:8080"], "service/web created"),
        (&["create", "job", "once", "--image=example.com/task:1"], "job.batch/once created"),
        (
            &["create", "cronjob", "nightly", "--image=example.com/task:1", "--schedule=0 3 * * *"],
            "cronjob.batch/nightly created",
        ),
        (&["create", "ingress", "web", "--rule=example.com/=web:80"], "ingress.networking.k8s.io/web created"),
    ];
    for (args, said) in namespaced {
        let mut all = args.to_vec();
        all.extend(["-n", "demo"]);
        assert_eq!(kubectl.ok(&all, None).trim(), *said, "kubectl {all:?}");
    }
    assert_eq!(
        kubectl.ok(&["create", "clusterrole", "pod-reader", "--verb=get", "--resource=pods"], None).trim(),
        "clusterrole.rbac.authorization.k8s.io/pod-reader created"
    );
    assert_eq!(
        kubectl
            .ok(&["create", "clusterrolebinding", "pod-reader", "--clusterrole=pod-reader", "--user=alice"], None)
            .trim(),
        "clusterrolebinding.rbac.authorization.k8s.io/pod-reader created"
    );

    // What was created is what the generators meant, read back in JSON.
    assert_eq!(kubectl.json(&["get", "cm", "settings", "-n", "demo"])["data"], json!({"mode": "fast"}));
    let secret = kubectl.json(&["get", "secret", "creds", "-n", "demo"]);
    assert_eq!((secret["type"].as_str(), secret["data"]["token"].as_str()), (Some("Opaque"), Some("czNjcmV0")));
    let role = kubectl.json(&["get", "role", "reader", "-n", "demo"]);
    assert_eq!(role["rules"], json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]));
    let binding = kubectl.json(&["get", "rolebinding", "reader", "-n", "demo"]);
    assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "runner", "namespace": "demo"}]));
    assert_eq!(binding["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}));
    let cluster_binding = kubectl.json(&["get", "clusterrolebinding", "pod-reader"]);
    assert_eq!(
        cluster_binding["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}])
    );
    let deployment = kubectl.json(&["get", "deployment", "web", "-n", "demo"]);
    // `--replicas=0` is a pointer set to zero: kept, not mistaken for "unset".
    assert_eq!(deployment["spec"]["replicas"], 0);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        (container["image"].as_str(), container["ports"][0]["containerPort"].as_i64()),
        (Some("example.com/web:1"), Some(8080))
    );
    assert_eq!(kubectl.json(&["get", "cronjob", "nightly", "-n", "demo"])["spec"]["schedule"], "0 3 * * *");
    let ingress = kubectl.json(&["get", "ingress", "web", "-n", "demo"]);
    assert_eq!(ingress["spec"]["rules"][0]["host"], "example.com");
    assert_eq!(
        ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"],
        json!({"name": "web", "port": {"number": 80}})
    );
    let service = kubectl.json(&["get", "service", "web", "-n", "demo"]);
    assert_eq!(service["spec"]["ports"][0]["port"], 80);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);

    // The generators sent protobuf and got protobuf back.
    let output = kubectl.run(&["create", "configmap", "traced", "-n", "demo", "-v=8"], None);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    let protobuf_headers = log.matches("Content-Type: application/vnd.kubernetes.protobuf").count();
    assert!(protobuf_headers >= 2, "a protobuf request and response:\n{log}");

    // A second create of the same name is refused as a cluster refuses it (the Status read back from protobuf).
    let stderr = kubectl.fails(&["create", "configmap", "settings", "-n", "demo"], None);
    assert!(stderr.contains("configmaps \"settings\" already exists"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_from_kubectl_create_token_authenticates_as_its_service_account() {
    let (plane, kubectl, dir) = setup("token").await;
    kubectl.ok(&["create", "serviceaccount", "runner", "-n", "demo"], None);
    let token = kubectl.ok(&["create", "token", "runner", "-n", "demo", "--duration=1h"], None);
    let as_runner = Kubectl::with_kubeconfig(&dir, "runner", &plane.token_kubeconfig(token.trim()));
    let whoami = as_runner.json(&["auth", "whoami"]);
    assert_eq!(whoami["status"]["userInfo"]["username"], "system:serviceaccount:demo:runner");
    let stderr = as_runner.fails(&["get", "configmaps", "-n", "demo"], None);
    assert!(
        stderr.contains("configmaps is forbidden: User \"system:serviceaccount:demo:runner\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"demo\""),
        "{stderr}"
    );
    // Every namespace has its default account and the cluster's CA, as kube-controller-manager gives it.
    let account = kubectl.json(&["get", "serviceaccount", "default", "-n", "demo"]);
    assert_eq!(account["metadata"]["name"], "default");
    support::eventually("kube-root-ca.crt published", || async {
        let output = kubectl.run(&["get", "configmap", "kube-root-ca.crt", "-n", "demo", "-o", "json"], None);
        output.status.success()
            && serde_json::from_slice::<Value>(&output.stdout)
                .is_ok_and(|cm| cm["data"]["ca.crt"].as_str() == Some(plane.ca_pem.as_str()))
    })
    .await;
    // And the default namespace holds the `kubernetes` Service on the service CIDR's first address.
    let service = kubectl.json(&["get", "service", "kubernetes", "-n", "default"]);
    assert_eq!(service["spec"]["clusterIP"], "10.96.0.1");
    assert_eq!(service["spec"]["ports"][0]["name"], "https");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    // Changed, it is put back.
    kubectl.ok(
        &[
            "patch",
            "configmap",
            "kube-root-ca.crt",
            "-n",
            "demo",
            "--type=merge",
            "-p",
            r#"{"data":{"ca.crt":"forged"}}"#,
        ],
        None,
    );
    support::eventually("kube-root-ca.crt repaired", || async {
        kubectl.json(&["get", "configmap", "kube-root-ca.crt", "-n", "demo"])["data"]["ca.crt"].as_str()
            == Some(plane.ca_pem.as_str())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_and_rollout_status_follow_the_deployment() {
    let (plane, kubectl, _dir) = setup("scale").await;
    kubectl.ok(&["create", "deployment", "web", "-n", "demo", "--image=example.com/web:1", "--replicas=2"], None);
    assert_eq!(
        kubectl.ok(&["scale", "deployment", "web", "-n", "demo", "--replicas=0"], None).trim(),
        "deployment.apps/web scaled"
    );
    assert_eq!(kubectl.json(&["get", "deployment", "web", "-n", "demo"])["spec"]["replicas"], 0);
    kubectl.ok(&["scale", "deployment/web", "-n", "demo", "--replicas=3", "--current-replicas=0"], None);
    let deployment = kubectl.json(&["get", "deployment", "web", "-n", "demo"]);
    assert_eq!(deployment["spec"]["replicas"], 3);
    let stderr =
        kubectl.fails(&["scale", "deployment/web", "-n", "demo", "--replicas=1", "--current-replicas=2"], None);
    assert!(stderr.contains("Expected replicas to be 2, was 3"), "{stderr}");

    // No Deployment controller runs here: the status a controller would write is written as it would be, and
    // rollout status reads it as it reads a cluster's.
    let generation = deployment["metadata"]["generation"].as_i64().expect("a generation");
    let client = plane.client().await.expect("client");
    let status = json!({"status": {"observedGeneration": generation, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
        "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
                       {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable", "message": "ReplicaSet \"web-1\" has successfully progressed."}]}});
    let (code, body) = support::patch(
        &client,
        "/apis/apps/v1/namespaces/demo/deployments/web/status",
        "application/merge-patch+json",
        &status.to_string(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let said = kubectl.ok(&["rollout", "status", "deployment/web", "-n", "demo", "--timeout=10s"], None);
    assert_eq!(said.trim(), "deployment \"web\" successfully rolled out");

    // `get all` lists the workload kinds of the `all` category.
    kubectl.ok(&["run", "task", "-n", "demo", "--image=example.com/task:1"], None);
    let all = kubectl.ok(&["get", "all", "-n", "demo"], None);
    assert!(all.lines().any(|l| l.starts_with("pod/task ")), "{all}");
    assert!(all.lines().any(|l| l.starts_with("deployment.apps/web ") && l.contains("3/3")), "{all}");
    assert!(!all.contains("configmap"), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edit_replace_force_label_and_annotate_overwrite() {
    let (_plane, kubectl, dir) = setup("edit").await;
    kubectl.ok(&["create", "configmap", "settings", "-n", "demo", "--from-literal=mode=slow"], None);
    let editor = dir.join("editor.sh");
    std::fs::write(&editor, "#!/bin/sh\nsed -i 's/^  mode: slow$/  mode: fast/' \"$1\"\n").expect("editor written");
    std::process::Command::new("chmod").arg("+x").arg(&editor).status().expect("chmod");
    let output = support::kubectl::run(
        kubectl.command(&["edit", "configmap", "settings", "-n", "demo"]).env("KUBE_EDITOR", &editor),
        None,
    );
    assert!(output.status.success(), "{}", support::kubectl::text(&output));
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "configmap/settings edited");
    assert_eq!(kubectl.json(&["get", "cm", "settings", "-n", "demo"])["data"]["mode"], "fast");

    let before = kubectl.json(&["get", "cm", "settings", "-n", "demo"]);
    let yaml = kubectl.ok(&["get", "cm", "settings", "-n", "demo", "-o", "yaml"], None);
    let said = kubectl.ok(&["replace", "--force", "-f", "-"], Some(&yaml));
    assert_eq!(said.trim(), "configmap \"settings\" deleted\nconfigmap/settings replaced");
    let after = kubectl.json(&["get", "cm", "settings", "-n", "demo"]);
    assert_ne!(before["metadata"]["uid"], after["metadata"]["uid"], "replace --force deletes and creates");
    assert_eq!(after["data"]["mode"], "fast");

    kubectl.ok(&["label", "cm", "settings", "-n", "demo", "tier=gold"], None);
    let stderr = kubectl.fails(&["label", "cm", "settings", "-n", "demo", "tier=silver"], None);
    assert!(stderr.contains("'tier' already has a value (gold), and --overwrite is false"), "{stderr}");
    kubectl.ok(&["label", "cm", "settings", "-n", "demo", "tier=silver", "--overwrite"], None);
    kubectl.ok(&["annotate", "cm", "settings", "-n", "demo", "owner=alice"], None);
    let stderr = kubectl.fails(&["annotate", "cm", "settings", "-n", "demo", "owner=bob"], None);
    assert!(
        stderr.contains(
            "--overwrite is false but found the following declared annotation(s): 'owner' already has a value (alice)"
        ),
        "{stderr}"
    );
    kubectl.ok(&["annotate", "cm", "settings", "-n", "demo", "owner=bob", "--overwrite"], None);
    let metadata = kubectl.json(&["get", "cm", "settings", "-n", "demo"])["metadata"].clone();
    assert_eq!(
        (metadata["labels"]["tier"].as_str(), metadata["annotations"]["owner"].as_str()),
        (Some("silver"), Some("bob"))
    );
}

const OWNED: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: OWNED, namespace: demo, ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: UID, blockOwnerDeletion: true}]}
data: {a: "1"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cascades_orphan_and_foreground_and_wait_for_delete() {
    let (_plane, kubectl, _dir) = setup("delete").await;
    for (owner, dependent) in [("owner", "orphaned"), ("owner", "collected")] {
        kubectl.ok(&["create", "configmap", owner, "-n", "demo"], None);
        let uid =
            kubectl.json(&["get", "cm", owner, "-n", "demo"])["metadata"]["uid"].as_str().expect("uid").to_owned();
        kubectl.ok(&["apply", "-f", "-"], Some(&OWNED.replace("OWNED", dependent).replace("UID", &uid)));
        if dependent == "orphaned" {
            kubectl.ok(&["delete", "cm", owner, "-n", "demo", "--cascade=orphan"], None);
            support::eventually("the owner reference removed", || async {
                kubectl.json(&["get", "cm", dependent, "-n", "demo"])["metadata"].get("ownerReferences").is_none()
            })
            .await;
        } else {
            let said = kubectl.ok(&["delete", "cm", owner, "-n", "demo", "--cascade=foreground"], None);
            assert_eq!(said.trim(), "configmap \"owner\" deleted");
            let gone = kubectl.run(&["get", "cm", dependent, "-n", "demo"], None);
            assert!(!gone.status.success(), "a foreground deletion returns once the dependents are gone");
        }
    }
    assert!(kubectl.run(&["get", "cm", "orphaned", "-n", "demo"], None).status.success());

    // A finalizer holds the object; wait --for=delete returns when it is removed.
    kubectl.ok(&["create", "configmap", "held", "-n", "demo"], None);
    kubectl.ok(
        &[
            "patch",
            "cm",
            "held",
            "-n",
            "demo",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ],
        None,
    );
    kubectl.ok(&["delete", "cm", "held", "-n", "demo", "--wait=false"], None);
    let stderr = kubectl.fails(&["wait", "--for=delete", "cm/held", "-n", "demo", "--timeout=1s"], None);
    assert!(stderr.contains("timed out waiting for the condition on configmaps/held"), "{stderr}");
    let mut waiter = kubectl
        .command(&["wait", "--for=delete", "cm/held", "-n", "demo", "--timeout=20s"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("kubectl wait runs");
    kubectl.ok(
        &[
            "patch",
            "cm",
            "held",
            "-n",
            "demo",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
        ],
        None,
    );
    let status = waiter.wait().expect("kubectl wait ends");
    assert!(status.success(), "wait --for=delete succeeds once the object is gone");
}

const RBAC: &str = r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: reader, namespace: demo}
rules:
- {apiGroups: [""], resources: [configmaps], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: demo}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects:
- {kind: User, name: bob, apiGroup: rbac.authorization.k8s.io}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_reconcile_and_can_i_list() {
    let (plane, kubectl, dir) = setup("auth").await;
    let output = kubectl.run(&["auth", "reconcile", "-f", "-"], Some(RBAC));
    let (said, details) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{said}{details}");
    assert_eq!(
        said.trim(),
        "role.rbac.authorization.k8s.io/reader reconciled\nrolebinding.rbac.authorization.k8s.io/reader reconciled"
    );
    assert!(details.contains("reconciliation required create\n\tmissing rules added:"), "{details}");
    assert!(
        details.contains(
            "missing subjects added:\n\t\t{Kind:User APIGroup:rbac.authorization.k8s.io Name:bob Namespace:}"
        ),
        "{details}"
    );
    // Reconciled again, nothing is missing.
    let output = kubectl.run(&["auth", "reconcile", "-f", "-"], Some(RBAC));
    assert!(output.status.success() && output.stderr.is_empty(), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(kubectl.ok(&["auth", "can-i", "list", "configmaps", "-n", "demo", "--as", "bob"], None).trim(), "yes");

    let bob = Kubectl::with_kubeconfig(&dir, "bob", &plane.user_kubeconfig("bob", &[]));
    let rules = bob.ok(&["auth", "can-i", "--list", "-n", "demo"], None);
    let header = rules.lines().next().unwrap_or_default();
    assert!(
        header.starts_with("Resources") && header.contains("Non-Resource URLs") && header.ends_with("Verbs"),
        "{rules}"
    );
    assert!(rules.lines().any(|l| l.starts_with("configmaps ") && l.ends_with("[get list]")), "{rules}");
    assert!(!rules.lines().any(|l| l.starts_with("secrets")), "{rules}");
}

const PRUNED: &str = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: kept, namespace: demo, labels: {set: demo}}
data: {a: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: pruned, namespace: demo, labels: {set: demo}}
data: {a: "2"}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_prune_diff_and_events_for() {
    let (plane, kubectl, _dir) = setup("prune").await;
    kubectl.ok(&["apply", "-f", "-"], Some(PRUNED));
    let kept_only = PRUNED.split("---").next().expect("the first object").to_owned();
    let said = kubectl.ok(&["apply", "--prune", "-l", "set=demo", "-f", "-"], Some(&kept_only));
    assert_eq!(said.trim(), "configmap/kept unchanged\nconfigmap/pruned pruned");
    assert!(!kubectl.run(&["get", "cm", "pruned", "-n", "demo"], None).status.success());

    // diff prints the change it would make and exits 1; with nothing to change it prints nothing and exits 0.
    let changed = kept_only.replace("a: \"1\"", "a: \"changed\"");
    let output = kubectl.run(&["diff", "-f", "-"], Some(&changed));
    let diff = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{diff}{}", String::from_utf8_lossy(&output.stderr));
    assert!(diff.contains("-  a: \"1\"\n+  a: changed"), "{diff}");
    let output = kubectl.run(&["diff", "-f", "-"], Some(&kept_only));
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stdout));
    assert_eq!(kubectl.json(&["get", "cm", "kept", "-n", "demo"])["data"]["a"], "1", "diff changes nothing");

    // events --for lists what was recorded about one object.
    let client = plane.client().await.expect("client");
    let event = json!({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "kept.1", "namespace": "demo"},
        "involvedObject": {"kind": "ConfigMap", "name": "kept", "namespace": "demo", "apiVersion": "v1"},
        "reason": "Checked", "message": "looked at it", "type": "Normal", "source": {"component": "tester"}, "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:00:00Z"});
    let (code, body) = support::post(&client, "/api/v1/namespaces/demo/events", &event).await;
    assert_eq!(code, 201, "{body}");
    let events = kubectl.ok(&["events", "-n", "demo", "--for", "configmap/kept"], None);
    assert!(events.lines().next().is_some_and(|h| h.starts_with("LAST SEEN")), "{events}");
    assert!(
        events.contains("Checked") && events.contains("ConfigMap/kept") && events.contains("looked at it"),
        "{events}"
    );
    let none = kubectl.ok(&["events", "-n", "demo", "--for", "configmap/other"], None);
    assert!(!none.contains("Checked"), "{none}");
}

/// A raw request with a binary body; answers the status code and the body as JSON.
async fn send_bytes(client: &kube::Client, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    use http_body_util::BodyExt;
    let request = http::Request::post(path)
        .header("content-type", content_type)
        .header("accept", "application/json")
        .body(kube::client::Body::from(body))
        .expect("request");
    let response = client.send(request).await.expect("sent");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protobuf_bodies_are_refused_where_kubernetes_refuses_them() {
    use kube_emulator::http::protobuf;
    let (plane, _kubectl, _dir) = setup("protobuf").await;
    let client = plane.client().await.expect("client");
    support::install_widgets(&client).await;
    const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

    // Custom resources have no protobuf form: 415 with kube-apiserver's message.
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
    // (a well-formed protobuf body: the media type alone is refused for custom resources)
    let body = protobuf::encode(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w"}}))
        .unwrap()
        .unwrap();
    let (code, status) = send_bytes(&client, "/apis/example.com/v1/namespaces/demo/widgets", PROTOBUF, body).await;
    assert_eq!((code, status["reason"].as_str()), (415, Some("UnsupportedMediaType")), "{status}");
    assert_eq!(
        status["message"],
        "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    );
    assert!(protobuf::encode(&widget).is_none());

    // A body that is not protobuf, or is cut short, is a 400 naming the problem (never a panic).
    let (code, status) = send_bytes(&client, "/api/v1/namespaces/demo/configmaps", PROTOBUF, b"{}".to_vec()).await;
    assert_eq!((code, status["reason"].as_str()), (400, Some("BadRequest")), "{status}");
    assert_eq!(
        status["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: provided data does not appear to be a protobuf message, expected prefix [107, 56, 115, 0]"
    );
    let whole = protobuf::encode(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cut"}, "data": {"a": "b"}}),
    )
    .unwrap()
    .unwrap();
    let (code, status) =
        send_bytes(&client, "/api/v1/namespaces/demo/configmaps", PROTOBUF, whole[..whole.len() - 8].to_vec()).await;
    assert_eq!(code, 400, "{status}");
    assert_eq!(status["message"], "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: unexpected EOF");

    // The whole body is created, and read back in protobuf when asked for.
    let (code, status) = send_bytes(&client, "/api/v1/namespaces/demo/configmaps", PROTOBUF, whole).await;
    assert_eq!(code, 201, "{status}");
    let request = http::Request::get("/api/v1/namespaces/demo/configmaps/cut")
        .header("accept", PROTOBUF)
        .body(kube::client::Body::empty())
        .expect("request");
    let response = client.send(request).await.expect("sent");
    assert_eq!(response.headers()["content-type"], PROTOBUF);
    let bytes = http_body_util::BodyExt::collect(response.into_body()).await.expect("body").to_bytes();
    let read = protobuf::decode(&bytes).expect("a protobuf ConfigMap");
    assert_eq!(read["data"], json!({"a": "b"}));
    // A custom resource asked for only in protobuf: 406.
    let request = http::Request::get("/apis/example.com/v1/namespaces/demo/widgets")
        .header("accept", PROTOBUF)
        .body(kube::client::Body::empty())
        .expect("request");
    assert_eq!(client.send(request).await.expect("sent").status().as_u16(), 406);
}

//! The Installed API (seed 002, `docs/installed.md`) through the test control plane's aggregation layer, with the
//! real kubectl and copied CSVs disabled: listed in every namespace a global operator watches and only there, got,
//! selected, watched across a phase change, explained; writes refused with 405; RBAC on `installed` decides who
//! lists where; and the server itself refuses whoever reaches it around the aggregation layer.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use axum::body::Bytes;
use kube::api::{Api, ListParams};
use olmv2::api::v1alpha1::ClusterServiceVersion;
use serde_json::Value;

use crate::legacy::{account, apply, csv, installed_globally, kubectl, CRD};
use crate::support::harness::Harness;

const COPIES_OFF: &str =
    "apiVersion: operators.coreos.com/v1\nkind: OLMConfig\nmetadata: {name: cluster}\nspec: {features: {disableCopiedCSVs: true}}\n";

async fn start(name: &str) -> Harness {
    let harness = Harness::start("installed", name, &["ops", "team-a", "team-b"], Duration::from_secs(30)).await;
    apply(&harness, COPIES_OFF);
    harness
}

/// Polls `kubectl get installed <args>` until its output holds `expected`.
async fn wait_listed(harness: &Harness, args: &[&str], expected: &str) -> String {
    let mut all = vec!["get", "installed"];
    all.extend_from_slice(args);
    harness.wait_kubectl(&all, expected).await
}

fn json(harness: &Harness, args: &[&str]) -> Value {
    serde_json::from_str(&kubectl(harness, args)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_lists_gets_selects_explains_and_watches_installed_operators() {
    let harness = start("kubectl").await;
    installed_globally(&harness).await;
    let table = wait_listed(&harness, &["-n", "team-a"], "plumbus.v1.0.0").await;
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "INSTALLATION_NAMESPACE", "CHANNEL", "CURRENT_VERSION", "TARGET_VERSION", "PHASE"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(row, ["plumbus.v1.0.0", "ops", "1.0.0", "1.0.0", "Succeeded"], "no Subscription: no channel");
    let copies = Api::<ClusterServiceVersion>::all(harness.admin.clone())
        .list(&ListParams::default().labels("olm.copiedFrom"))
        .await
        .unwrap();
    assert!(copies.items.is_empty(), "listed without a copied CSV");

    // Across namespaces: one per namespace the global operator watches.
    let all = json(&harness, &["get", "installed", "-A", "-o", "json"]);
    let namespaces: Vec<&str> =
        all["items"].as_array().unwrap().iter().map(|i| i["metadata"]["namespace"].as_str().unwrap()).collect();
    for namespace in ["default", "ops", "team-a", "team-b"] {
        assert!(namespaces.contains(&namespace), "{namespace} in {namespaces:?}");
    }
    let raw = json(&harness, &["get", "--raw", "/apis/packages.operators.coreos.com/v2alpha1/installed"]);
    assert_eq!(raw["kind"], "InstalledList");
    let version = raw["metadata"]["resourceVersion"].as_str().unwrap();
    assert!(
        version.starts_with("changes:")
            && version.contains(",clusterserviceversions:")
            && version.contains(",subscriptions:"),
        "{version}"
    );

    // Get: the object of seed 002, sanitized.
    let object = json(&harness, &["get", "installed", "plumbus.v1.0.0", "-n", "team-b", "-o", "json"]);
    assert_eq!(object["kind"], "Installed");
    assert_eq!(object["apiVersion"], "packages.operators.coreos.com/v2alpha1");
    assert_eq!(object["metadata"]["namespace"], "team-b");
    assert_eq!(object["metadata"]["labels"]["operators.coreos.com/csv"], "plumbus.v1.0.0");
    let shown = &object["status"]["clusterServiceVersion"];
    assert_eq!(shown["metadata"]["namespace"], "ops");
    assert!(shown["metadata"]["annotations"].get("olm.targetNamespaces").is_none(), "{shown}");
    let phase = kubectl(
        &harness,
        &[
            "get",
            "installed",
            "plumbus.v1.0.0",
            "-n",
            "team-a",
            "-o",
            "jsonpath={.status.clusterServiceVersion.status.phase}",
        ],
    );
    assert_eq!(phase, "Succeeded");
    let missing = harness.admin_kubectl(&["get", "installed", "nothing", "-n", "team-a"], None);
    assert!(String::from_utf8_lossy(&missing.stderr)
        .contains("installed.packages.operators.coreos.com \"nothing\" not found"));

    // Selectors.
    let selected = kubectl(
        &harness,
        &["get", "installed", "-n", "team-a", "-l", "operators.coreos.com/csv=plumbus.v1.0.0", "-o", "name"],
    );
    assert_eq!(selected.trim(), "installed.packages.operators.coreos.com/plumbus.v1.0.0");
    let none =
        harness.admin_kubectl(&["get", "installed", "-n", "team-a", "-l", "operators.coreos.com/csv=other"], None);
    assert!(String::from_utf8_lossy(&none.stderr).contains("No resources found in team-a namespace."));
    let by_field =
        kubectl(&harness, &["get", "installed", "-A", "--field-selector", "metadata.namespace=team-b", "-o", "name"]);
    assert_eq!(by_field.trim(), "installed.packages.operators.coreos.com/plumbus.v1.0.0");

    // Explained from the OpenAPI document the aggregation layer merged.
    let explained = kubectl(&harness, &["explain", "installed.status.clusterServiceVersion.spec.version"]);
    assert!(explained.contains("GROUP:      packages.operators.coreos.com"), "{explained}");
    assert!(explained.contains("KIND:       Installed"), "{explained}");

    // Watched: the row, then the row again when the CSV's phase changes.
    let mut watch = harness
        .kubectl_command(&harness.plane.kubeconfig(), &["get", "installed", "-n", "team-a", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, seen) = std::sync::mpsc::channel::<String>();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next = |what: &str| -> String {
        loop {
            let line = seen.recv_timeout(Duration::from_secs(20)).unwrap_or_else(|_| panic!("no line with {what}"));
            if line.contains(what) {
                return line;
            }
        }
    };
    next("Succeeded");
    kubectl(
        &harness,
        &[
            "patch",
            "csv",
            "plumbus.v1.0.0",
            "-n",
            "ops",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"phase":"Failed","reason":"InstallCheckFailed","message":"made to fail"}}"#,
        ],
    );
    let failed = next("Failed");
    assert!(failed.starts_with("plumbus.v1.0.0"), "{failed}");
    watch.kill().unwrap();
    let _ = watch.wait();

    // Writes are not allowed, whoever asks (seed 002's 'Non-Use Cases').
    let manifest = "apiVersion: packages.operators.coreos.com/v2alpha1\nkind: Installed\nmetadata: {name: forged, namespace: team-a}\n";
    let created = harness.admin_kubectl(&["create", "-f", "-"], Some(manifest));
    let stderr = String::from_utf8_lossy(&created.stderr);
    assert!(
        stderr.contains("Error from server (MethodNotAllowed): error when creating \"STDIN\": the server does not allow this method on the requested resource"),
        "{stderr}"
    );
    let deleted = harness.admin_kubectl(&["delete", "installed", "plumbus.v1.0.0", "-n", "team-a"], None);
    assert!(String::from_utf8_lossy(&deleted.stderr).contains("MethodNotAllowed"));
    wait_listed(&harness, &["-n", "team-a"], "plumbus.v1.0.0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_is_listed_only_where_it_watches_and_only_to_who_may_list() {
    let harness = start("scope").await;
    apply(&harness, CRD);
    apply(&harness, &account("team-b", true));
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: own, namespace: team-b}\nspec: {targetNamespaces: [team-b]}\n",
    );
    apply(&harness, &csv("team-b", &[("OwnNamespace", true)]));
    wait_listed(&harness, &["-n", "team-b"], "plumbus.v1.0.0").await;
    let nothing = harness.admin_kubectl(&["get", "installed", "-n", "team-a"], None);
    assert!(nothing.status.success());
    assert!(String::from_utf8_lossy(&nothing.stderr).contains("No resources found in team-a namespace."));
    let absent = harness.admin_kubectl(&["get", "installed", "-n", "mojave"], None);
    assert!(String::from_utf8_lossy(&absent.stderr).contains("No resources found in mojave namespace."));

    // A user may list installed in team-b only: RBAC on the resource decides.
    let role =
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: installed-reader, namespace: team-b}\n\
        rules: [{apiGroups: [packages.operators.coreos.com], resources: [installed], verbs: [get, list, watch]}]\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: dev, namespace: team-b}\n\
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: installed-reader}\n\
        subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: dev}]\n";
    apply(&harness, role);
    let dev = harness.plane.user_kubeconfig("dev", &[]);
    let own = harness.kubectl(&dev, &["get", "installed", "-n", "team-b", "-o", "name"], None);
    assert_eq!(String::from_utf8_lossy(&own.stdout).trim(), "installed.packages.operators.coreos.com/plumbus.v1.0.0");
    // A user who may read one Installed object by name watches it by name (RBAC `resourceNames`).
    let named = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: plumbus-reader, namespace: team-b}\n\
        rules: [{apiGroups: [packages.operators.coreos.com], resources: [installed], resourceNames: [plumbus.v1.0.0], verbs: [get, list, watch]}]\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: one, namespace: team-b}\n\
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: plumbus-reader}\n\
        subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: one}]\n";
    apply(&harness, named);
    let one = harness.plane.user_kubeconfig("one", &[]);
    let watched = harness.kubectl(
        &one,
        &["get", "installed", "plumbus.v1.0.0", "-n", "team-b", "-w", "--request-timeout=3s"],
        None,
    );
    let out = String::from_utf8_lossy(&watched.stdout);
    let err = String::from_utf8_lossy(&watched.stderr);
    assert!(out.contains("plumbus.v1.0.0") && !err.contains("forbidden"), "{out}\n{err}");
    let all = harness.kubectl(&one, &["get", "installed", "-n", "team-b"], None);
    assert!(String::from_utf8_lossy(&all.stderr).contains("forbidden"), "a list of every name is not one name");
    let other = harness.kubectl(&dev, &["get", "installed", "-n", "team-a"], None);
    let refused = String::from_utf8_lossy(&other.stderr);
    assert!(
        refused.contains("cannot list resource \"installed\" in API group \"packages.operators.coreos.com\" in the namespace \"team-a\""),
        "{refused}"
    );
}

/// The request of `user` straight to the API server's address, with the front-proxy's certificate or none.
async fn direct(harness: &Harness, user: &str, groups: &[&str], with_front_proxy_certificate: bool) -> (u16, Bytes) {
    let address = harness.api_address().expect("the Installed API runs");
    let path = "/apis/packages.operators.coreos.com/v2alpha1/namespaces/team-b/installed";
    let destination = kube_emulator::outbound::Destination {
        address,
        server_name: "olmv2-packages.olmv2-system.svc".into(),
        path_and_query: path.into(),
        display: path.into(),
    };
    let identity = harness.plane.front_proxy().ok();
    let trust = kube_emulator::outbound::Trust {
        ca_bundle: None,
        client: if with_front_proxy_certificate { identity.as_ref() } else { None },
    };
    let mut request = http::Request::get("/").header("x-remote-user", user);
    for group in groups {
        request = request.header("x-remote-group", *group);
    }
    kube_emulator::outbound::exchange(&destination, &trust, request, Bytes::new(), Duration::from_secs(10))
        .await
        .expect("answered")
}

/// Around the aggregation layer: headers naming an administrator are nobody's without the front-proxy's
/// certificate, and with it the server asks the cluster whether the user may list.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_server_trusts_identity_headers_only_from_the_aggregation_layer_and_authorizes_each_request() {
    let harness = start("direct").await;
    for _ in 0..100 {
        if harness.api_address().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, body) = direct(&harness, "system:admin", &["system:masters"], false).await;
    assert_eq!(code, 401, "{}", String::from_utf8_lossy(&body));
    let (code, body) = direct(&harness, "nobody", &[], true).await;
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&body));
    let refusal: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        refusal["message"],
        "installed.packages.operators.coreos.com is forbidden: User \"nobody\" cannot list resource \"installed\" in \
         API group \"packages.operators.coreos.com\" in the namespace \"team-b\""
    );
    let (code, body) = direct(&harness, "kubernetes-admin", &["system:masters"], true).await;
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    let listed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(listed["kind"], "InstalledList");
}

/// An operator an Install installed is listed where the Install decided it watches (its CSV record's
/// `olm.targetNamespaces` says where), its Install's status vouching for the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_an_install_installed_is_listed_where_it_watches() {
    use crate::support::installs::{approve_patch, install_yaml, push, wait_state};
    use olmv2::api::v2alpha1::InstallState;
    let harness = Harness::start("installed", "install", &["operators", "team-a"], Duration::from_secs(2)).await;
    apply(&harness, COPIES_OFF);
    let image = push(&harness, "plumbus/2.0.0-alpha", "v2.0.0-alpha").await;
    apply(&harness, &install_yaml("plumbus", &image));
    wait_state(&harness, "plumbus", InstallState::PendingApproval).await;
    kubectl(&harness, &["patch", "install", "plumbus", "--type", "merge", "-p", approve_patch()]);
    wait_state(&harness, "plumbus", InstallState::Applying).await;
    harness.roll_out("operators").await;
    wait_state(&harness, "plumbus", InstallState::Installed).await;
    let record: ClusterServiceVersion =
        Api::namespaced(harness.admin.clone(), "operators").get("plumbus.v2.0.0-alpha").await.unwrap();
    let targets = record.metadata.annotations.unwrap_or_default().get("olm.targetNamespaces").cloned().unwrap();
    let listed = wait_listed(&harness, &["-n", "operators", "-o", "name"], "plumbus.v2.0.0-alpha").await;
    assert_eq!(listed.trim(), "installed.packages.operators.coreos.com/plumbus.v2.0.0-alpha");
    // Where the record says it watches, and only there: the Install's status vouches for its record, which the
    // cache may take in a moment after the record itself.
    let watches_team_a = targets.is_empty() || targets.split(',').any(|t| t == "team-a");
    if watches_team_a {
        wait_listed(&harness, &["-n", "team-a", "-o", "name"], "plumbus.v2.0.0-alpha").await;
    }
    let elsewhere = harness.admin_kubectl(&["get", "installed", "-n", "team-a", "-o", "name"], None);
    let elsewhere = String::from_utf8_lossy(&elsewhere.stdout).into_owned();
    assert_eq!(elsewhere.contains("plumbus.v2.0.0-alpha"), watches_team_a, "targets {targets:?}: {elsewhere}");
}

/// A CSV `name` in namespace `mallet` supporting `mode`, with `annotations` (YAML flow mapping).
fn mallets_csv(name: &str, mode: &str, annotations: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\n\
         metadata: {{name: {name}, namespace: mallet, annotations: {annotations}}}\n\
         spec:\n  displayName: Spoof\n  version: 1.0.0\n  installModes: [{{type: {mode}, supported: true}}]\n\
         \x20 install: {{strategy: deployment, spec: {{deployments: []}}}}\n"
    )
}

/// The names the admin's `kubectl get installed -n <namespace> -o name` lists.
fn listed_in(harness: &Harness, namespace: &str) -> String {
    let output = harness.admin_kubectl(&["get", "installed", "-n", namespace, "-o", "name"], None);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A user who may write CSVs in their own namespace only, and no OperatorGroup anywhere, forges
/// `olm.targetNamespaces` and `olm.operatorGroup` (or relies on an AllNamespaces install mode) to have their CSV
/// listed in namespaces they hold no rights in. Where a CSV is listed comes only from the `status.namespaces` of the
/// one OperatorGroup of its namespace, which only the controller writes: the admin's lists of `victim` and `default`
/// hold none of them; `mallet`'s does. An OperatorGroup an admin makes in `mallet` then moves them, and deleting it
/// takes them back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_csv_author_cannot_list_their_csv_in_namespaces_no_operator_group_targets() {
    let harness = Harness::start("installed", "spoof", &["mallet", "victim"], Duration::from_secs(30)).await;
    apply(&harness, COPIES_OFF);
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: csv-writer, namespace: mallet}\n\
        rules: [{apiGroups: [operators.coreos.com], resources: [clusterserviceversions], verbs: [get, list, create, update, patch]}]\n---\n\
        apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: mallet, namespace: mallet}\n\
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: csv-writer}\n\
        subjects: [{kind: User, apiGroup: rbac.authorization.k8s.io, name: mallet}]\n";
    apply(&harness, role);
    let mallet = harness.plane.user_kubeconfig("mallet", &[]);
    for manifest in [
        mallets_csv("spoof-victim.v1", "SingleNamespace", "{olm.targetNamespaces: victim, olm.operatorGroup: x}"),
        mallets_csv("spoof-all.v1", "AllNamespaces", "{olm.targetNamespaces: '', olm.operatorGroup: x}"),
        mallets_csv("plain-all.v1", "AllNamespaces", "{}"),
    ] {
        let applied = harness.kubectl(&mallet, &["apply", "-f", "-"], Some(&manifest));
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    }
    let forbidden = harness.kubectl(
        &mallet,
        &["apply", "-f", "-"],
        Some(&mallets_csv("x.v1", "AllNamespaces", "{}").replace("namespace: mallet", "namespace: victim")),
    );
    assert!(!forbidden.status.success(), "mallet may write CSVs in mallet only");

    // The last one applied is listed in its own namespace: the cache has taken in all three.
    wait_listed(&harness, &["-n", "mallet", "-o", "name"], "plain-all.v1").await;
    for namespace in ["victim", "default"] {
        let listed = listed_in(&harness, namespace);
        assert!(!listed.contains("spoof") && !listed.contains("plain"), "listed in {namespace}: {listed}");
    }
    let own = listed_in(&harness, "mallet");
    assert!(["spoof-victim.v1", "spoof-all.v1", "plain-all.v1"].iter().all(|name| own.contains(name)), "{own}");
    let everywhere = json(&harness, &["get", "installed", "-A", "-o", "json"]);
    let places: Vec<String> = everywhere["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            format!("{}/{}", i["metadata"]["namespace"].as_str().unwrap(), i["metadata"]["name"].as_str().unwrap())
        })
        .collect();
    assert!(places.iter().all(|place| place.starts_with("mallet/")), "{places:?}");

    // An OperatorGroup an admin makes in mallet, targeting victim: its status (the controller's) moves them there.
    apply(
        &harness,
        "apiVersion: operators.coreos.com/v1\nkind: OperatorGroup\nmetadata: {name: og, namespace: mallet}\nspec: {targetNamespaces: [victim]}\n",
    );
    wait_listed(&harness, &["-n", "victim", "-o", "name"], "plain-all.v1").await;
    assert!(!listed_in(&harness, "default").contains("spoof-all.v1"), "the group targets victim only");
    kubectl(&harness, &["delete", "operatorgroup", "og", "-n", "mallet"]);
    for _ in 0..300 {
        if !listed_in(&harness, "victim").contains(".v1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(listed_in(&harness, "victim"), "", "no group: back to their own namespace only");
    assert!(listed_in(&harness, "mallet").contains("spoof-victim.v1"));
}

/// A controller started again with `--disable-installed-api` withdraws the APIServices it registered before: left
/// behind, they name a Service nobody answers on, every discovery reports the group unavailable and namespace
/// deletion waits on them. One it did not register (OLM v0's packageserver's, for its own Service) is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_controller_told_not_to_serve_the_api_withdraws_its_api_services_and_no_one_elses() {
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let disabled = Arc::new(AtomicBool::new(false));
    let switch = disabled.clone();
    let configure = Box::new(move |options: &mut olmv2::runtime::ControllerOptions, _: &std::path::Path| {
        options.api.disabled = switch.load(Ordering::SeqCst);
    });
    let mut harness =
        Harness::start_configured("installed", "withdrawn", &["olm"], Duration::from_secs(30), configure).await;
    let services = Api::<APIService>::all(harness.admin.clone());
    for version in ["v1", "v2alpha1"] {
        let registered = services.get(&format!("{version}.packages.operators.coreos.com")).await.unwrap();
        let target = registered.spec.unwrap().service.unwrap();
        assert_eq!(target.name.as_deref(), Some("olmv2-packages"), "{version} registered by the controller");
    }
    // OLM v0's packageserver takes v1 back for its own Service while the controller is down.
    harness.stop_controllers();
    services.delete("v1.packages.operators.coreos.com", &Default::default()).await.unwrap();
    harness.wait_gone(&services, "v1.packages.operators.coreos.com", "deleted by the admin").await;
    let olms: APIService = serde_json::from_value(serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1.packages.operators.coreos.com"},
        "spec": {"group": "packages.operators.coreos.com", "version": "v1", "groupPriorityMinimum": 2000,
                 "versionPriority": 15, "insecureSkipTLSVerify": true,
                 "service": {"namespace": "olm", "name": "packageserver-service", "port": 5443}}}))
    .unwrap();
    services.create(&Default::default(), &olms).await.unwrap();

    disabled.store(true, Ordering::SeqCst);
    harness.start_controllers().await;
    harness.wait_gone(&services, "v2alpha1.packages.operators.coreos.com", "withdrawn at start").await;
    let kept = services.get("v1.packages.operators.coreos.com").await.unwrap();
    assert_eq!(
        kept.spec.unwrap().service.unwrap().name.as_deref(),
        Some("packageserver-service"),
        "OLM v0's APIService is not the controller's to withdraw"
    );
}

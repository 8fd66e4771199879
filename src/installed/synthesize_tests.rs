use super::*;
use crate::legacy::membership::COPIED_FROM_LABEL;

fn csv(
    namespace: &str,
    name: &str,
    version: &str,
    annotations: Value,
    labels: Value,
    phase: &str,
) -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations, "labels": labels,
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"install": {"strategy": "deployment"}, "version": version},
        "status": {"phase": phase}
    }))
    .unwrap()
}

fn subscription(namespace: &str, name: &str, channel: &str, installed: &str, current: &str) -> Subscription {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {CREATOR_ANNOTATION: r#"{"username":"alice"}"#, "team": "a"}},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": name, "channel": channel},
        "status": {"installedCSV": installed, "currentCSV": current}
    }))
    .unwrap()
}

/// etcd in `operators` for every namespace, prometheus in `monitoring` for `team-a` and itself, a copy of etcd in
/// `team-a`, and a CSV applied by hand in `dev` that no group placed.
fn cluster() -> (Vec<ClusterServiceVersion>, Vec<Subscription>) {
    let csvs = vec![
        csv(
            "operators",
            "etcdoperator.v0.9.4",
            "0.9.4",
            json!({TARGET_NAMESPACES_ANNOTATION: "", "olm.operatorGroup": "global", CREATOR_ANNOTATION: "{}",
                   "kubectl.kubernetes.io/last-applied-configuration": "{...}", "capabilities": "Full Lifecycle"}),
            json!({}),
            "Succeeded",
        ),
        csv(
            "monitoring",
            "prometheus.v0.27.0",
            "0.27.0",
            json!({TARGET_NAMESPACES_ANNOTATION: "team-a,monitoring"}),
            json!({}),
            "Failed",
        ),
        csv(
            "team-a",
            "etcdoperator.v0.9.4",
            "0.9.4",
            json!({"olm.operatorNamespace": "operators"}),
            json!({COPIED_FROM_LABEL: "operators"}),
            "Succeeded",
        ),
        csv("dev", "by-hand.v1", "1.0.0", json!({}), json!({}), "Pending"),
    ];
    let subscriptions = vec![
        subscription("operators", "etcd", "clusterwide-alpha", "etcdoperator.v0.9.4", "etcdoperator.v0.9.4"),
        subscription("monitoring", "prometheus", "beta", "prometheus.v0.27.0", "prometheus.v0.28.0"),
        subscription("elsewhere", "etcd", "alpha", "etcdoperator.v0.9.4", "etcdoperator.v0.9.4"),
    ];
    (csvs, subscriptions)
}

fn names(objects: &[Value]) -> Vec<&str> {
    objects.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect()
}

#[test]
fn a_namespace_lists_exactly_the_operators_that_watch_it_and_never_a_copy() {
    let (csvs, subscriptions) = cluster();
    let tracked = tracked(&csvs, &subscriptions);
    assert_eq!(tracked.len(), 3, "the copy is not an operator of its own");
    assert_eq!(names(&installed_in(&tracked, "team-a")), ["etcdoperator.v0.9.4", "prometheus.v0.27.0"]);
    assert_eq!(names(&installed_in(&tracked, "team-b")), ["etcdoperator.v0.9.4"], "a global operator, everywhere");
    assert_eq!(names(&installed_in(&tracked, "monitoring")), ["etcdoperator.v0.9.4", "prometheus.v0.27.0"]);
    assert_eq!(names(&installed_in(&tracked, "dev")), ["by-hand.v1", "etcdoperator.v0.9.4"], "no group: its own");
    let unwatched = tracked.iter().filter(|t| t.csv.name_any() != "etcdoperator.v0.9.4").cloned().collect::<Vec<_>>();
    assert!(installed_in(&unwatched, "team-b").is_empty(), "a namespace nothing watches lists nothing");
}

#[test]
fn an_installed_object_is_named_after_its_csv_with_its_subscription_and_the_csv_sanitized() {
    let (csvs, subscriptions) = cluster();
    let tracked = tracked(&csvs, &subscriptions);
    let etcd = installed_in(&tracked, "team-b").remove(0);
    assert_eq!(etcd["apiVersion"], "packages.operators.coreos.com/v2alpha1");
    assert_eq!(etcd["kind"], "Installed");
    assert_eq!(etcd["metadata"]["namespace"], "team-b", "the namespace asked for, not the operator's");
    assert_eq!(etcd["metadata"]["labels"], json!({CSV_LABEL: "etcdoperator.v0.9.4", SUBSCRIPTION_LABEL: "etcd"}));
    let subscription = &etcd["status"]["subscription"];
    assert_eq!(subscription["metadata"]["namespace"], "operators", "the one of its namespace, not elsewhere's");
    assert_eq!(subscription["kind"], "Subscription");
    assert_eq!(subscription["metadata"]["annotations"], json!({"team": "a"}), "no author record");
    let csv = &etcd["status"]["clusterServiceVersion"];
    assert_eq!(csv["kind"], "ClusterServiceVersion");
    assert_eq!(
        csv["metadata"]["annotations"],
        json!({"olm.operatorGroup": "global", "capabilities": "Full Lifecycle"})
    );
    assert!(csv["metadata"].get("managedFields").is_none());
    let by_hand = installed_in(&tracked, "dev").remove(0);
    assert!(by_hand["status"].get("subscription").is_none(), "no Subscription installed it");
    assert_eq!(by_hand["metadata"]["labels"], json!({CSV_LABEL: "by-hand.v1"}));
}

#[test]
fn a_row_says_where_it_runs_its_channel_versions_and_phase() {
    let (mut csvs, subscriptions) = cluster();
    let rows = |csvs: &[ClusterServiceVersion]| -> Vec<[String; 6]> {
        tracked(csvs, &subscriptions).iter().map(|t| row(t, csvs)).collect()
    };
    let etcd = ["etcdoperator.v0.9.4", "operators", "clusterwide-alpha", "0.9.4", "0.9.4", "Succeeded"];
    assert!(rows(&csvs).iter().any(|row| *row == etcd.map(str::to_owned)), "{:?}", rows(&csvs));
    let prometheus =
        |target: &str| ["prometheus.v0.27.0", "monitoring", "beta", "0.27.0", target, "Failed"].map(str::to_owned);
    assert!(rows(&csvs).contains(&prometheus("0.27.0")), "the target's CSV is not there yet");
    csvs.push(csv(
        "monitoring",
        "prometheus.v0.28.0",
        "0.28.0",
        json!({TARGET_NAMESPACES_ANNOTATION: "team-a"}),
        json!({}),
        "Installing",
    ));
    assert!(rows(&csvs).contains(&prometheus("0.28.0")), "{:?}", rows(&csvs));
    let by_hand = ["by-hand.v1", "dev", "", "1.0.0", "1.0.0", "Pending"].map(str::to_owned);
    assert!(rows(&csvs).contains(&by_hand));
    assert_eq!(COLUMNS, ["NAME", "INSTALLATION_NAMESPACE", "CHANNEL", "CURRENT_VERSION", "TARGET_VERSION", "PHASE"]);
}

#[test]
fn watched_namespaces_come_from_the_targets_annotation() {
    let with = |annotations: Value| watches(&csv("ops", "x", "1", annotations, json!({}), "Succeeded"));
    assert_eq!(with(json!({TARGET_NAMESPACES_ANNOTATION: ""})), Watches::All);
    assert_eq!(with(json!({TARGET_NAMESPACES_ANNOTATION: ","})), Watches::All);
    let some = with(json!({TARGET_NAMESPACES_ANNOTATION: "a,b"}));
    assert!(some.includes("a") && some.includes("b") && !some.includes("ops"));
    assert_eq!(with(json!({})), Watches::Namespaces(BTreeSet::from(["ops".to_owned()])));
}

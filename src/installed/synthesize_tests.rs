use super::*;
use crate::api::v1::OPERATOR_GROUP_ANNOTATION;
use crate::api::v1alpha1::COPIED_FROM_LABEL;

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

/// OperatorGroups as the view keeps them: (namespace, name, `status.namespaces`).
fn groups(list: &[(&str, &str, &[&str])]) -> Groups {
    list.iter()
        .map(|(namespace, name, targets)| {
            (((*namespace).to_owned(), (*name).to_owned()), targets.iter().map(|t| (*t).to_owned()).collect())
        })
        .collect()
}

/// The groups of [`cluster`]: a global one in `operators`, one for `team-a` and itself in `monitoring`.
fn cluster_groups() -> Groups {
    groups(&[("operators", "global", &[""]), ("monitoring", "og", &["monitoring", "team-a"])])
}

fn reach<'a>(groups: &'a Groups, installs: &'a Installs) -> Reach<'a> {
    Reach { groups, installs }
}

/// etcd in `operators` for every namespace, prometheus in `monitoring` for `team-a` and itself (their groups', see
/// [`cluster_groups`]), a copy of etcd in `team-a`, and a CSV applied by hand in `dev` that no group placed.
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
    let (groups, installs) = (cluster_groups(), Installs::new());
    let tracked = tracked(&csvs, &subscriptions, reach(&groups, &installs));
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
    let (groups, installs) = (cluster_groups(), Installs::new());
    let tracked = tracked(&csvs, &subscriptions, reach(&groups, &installs));
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
    let (groups, installs) = (cluster_groups(), Installs::new());
    let rows = |csvs: &[ClusterServiceVersion]| -> Vec<[String; 6]> {
        tracked(csvs, &subscriptions, reach(&groups, &installs)).iter().map(|t| row(t, csvs)).collect()
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

/// A CSV `name` in `namespace` supporting `modes`, with `annotations` (whatever its author wrote).
fn authored(namespace: &str, name: &str, modes: &[&str], annotations: Value) -> ClusterServiceVersion {
    let mut csv = csv(namespace, name, "1.0.0", annotations, json!({}), "Failed");
    csv.spec.install_modes = serde_json::from_value(json!(modes
        .iter()
        .map(|mode| json!({"type": mode, "supported": true}))
        .collect::<Vec<_>>()))
    .unwrap();
    csv
}

fn only(namespaces: &[&str]) -> Watches {
    Watches::Namespaces(namespaces.iter().map(|n| (*n).to_owned()).collect())
}

/// Annotations a CSV's author writes never say where it is listed.
#[test]
fn a_csv_without_a_group_is_listed_in_its_own_namespace_whatever_its_annotations_say() {
    let (none, installs) = (Groups::new(), Installs::new());
    let watched = |csv: ClusterServiceVersion| watches(&csv, reach(&none, &installs));
    let forged = json!({TARGET_NAMESPACES_ANNOTATION: "victim", OPERATOR_GROUP_ANNOTATION: "x",
                        "olm.operatorNamespace": "mallet"});
    assert_eq!(watched(authored("mallet", "spoof", &["SingleNamespace"], forged)), only(&["mallet"]));
    let everywhere = json!({TARGET_NAMESPACES_ANNOTATION: "", OPERATOR_GROUP_ANNOTATION: "x"});
    assert_eq!(watched(authored("mallet", "spoof", &["AllNamespaces"], everywhere)), only(&["mallet"]));
    assert_eq!(watched(authored("mallet", "plain", &["AllNamespaces"], json!({}))), only(&["mallet"]), "modes");
    // A group elsewhere (in the victim's namespace, even targeting every namespace) says nothing of this one.
    let elsewhere = groups(&[("victim", "og", &[""]), ("mallet-2", "og", &[""])]);
    let forged = authored("mallet", "spoof", &["AllNamespaces"], json!({TARGET_NAMESPACES_ANNOTATION: ""}));
    assert_eq!(watches(&forged, reach(&elsewhere, &installs)), only(&["mallet"]));
    let (csvs, subscriptions) = (vec![forged], Vec::new());
    let tracked = tracked(&csvs, &subscriptions, reach(&elsewhere, &installs));
    assert!(installed_in(&tracked, "victim").is_empty() && installed_in(&tracked, "default").is_empty());
    assert_eq!(names(&installed_in(&tracked, "mallet")), ["spoof"]);
}

#[test]
fn one_group_lists_its_namespaces_operators_where_its_status_says() {
    let installs = Installs::new();
    let forged = authored("ops", "x", &["AllNamespaces"], json!({TARGET_NAMESPACES_ANNOTATION: "victim"}));
    let with = |targets: &[&str]| watches(&forged, reach(&groups(&[("ops", "og", targets)]), &installs));
    assert_eq!(with(&["a", "b"]), only(&["a", "b"]), "the group's, not the annotation's");
    assert_eq!(with(&[""]), Watches::All, "OLM v0's [\"\"]: every namespace");
    assert_eq!(with(&[]), only(&["ops"]), "no status yet: nowhere else");
    assert!(Watches::All.includes("default"));
}

#[test]
fn several_groups_in_a_namespace_are_none() {
    let installs = Installs::new();
    let two = groups(&[("ops", "a", &[""]), ("ops", "b", &["team-a"])]);
    let global = authored("ops", "x", &["AllNamespaces"], json!({TARGET_NAMESPACES_ANNOTATION: ""}));
    assert_eq!(watches(&global, reach(&two, &installs)), only(&["ops"]));
}

/// An Install's record (`install::content::csv_record`): owned by the Install, which lists it as applied.
fn record(modes: &[&str], owner: &str, uid: &str) -> ClusterServiceVersion {
    let mut record = authored("operators", "plumbus.v1", modes, json!({TARGET_NAMESPACES_ANNOTATION: ""}));
    record.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": owner, "uid": uid
    }))
    .unwrap()]);
    record
}

fn install(name: &str, uid: &str, applied: &[(&str, &str, &str)]) -> Install {
    let applied: Vec<Value> = applied
        .iter()
        .map(|(kind, namespace, name)| {
            json!({"apiVersion": if *kind == "ClusterServiceVersion" { "operators.coreos.com/v1alpha1" } else { "v1" },
                   "kind": kind, "namespace": namespace, "name": name})
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
        "metadata": {"name": name, "uid": uid},
        "spec": {"content": [{"type": "Raw", "raw": "{}"}]},
        "status": {"applied": applied}
    }))
    .unwrap()
}

#[test]
fn an_installs_record_watches_what_the_install_decided_only_when_the_installs_status_lists_it() {
    let none = Groups::new();
    let applied = |installs: &[Install]| -> Installs {
        installs.iter().map(|install| (install.name_any(), Applied::of(install))).collect()
    };
    let plumbus = applied(&[install(
        "plumbus",
        "u1",
        &[("ServiceAccount", "operators", "plumbus"), ("ClusterServiceVersion", "operators", "plumbus.v1")],
    )]);
    assert_eq!(plumbus["plumbus"].csvs.len(), 1, "only the CSVs it applied are kept");
    let watched = |csv: &ClusterServiceVersion, installs: &Installs| watches(csv, reach(&none, installs));
    assert_eq!(watched(&record(&["AllNamespaces"], "plumbus", "u1"), &plumbus), Watches::All);
    assert_eq!(
        watched(&record(&["OwnNamespace"], "plumbus", "u1"), &plumbus),
        only(&["operators"]),
        "the Install's rule: its own namespace when it does not support all"
    );
    // Owner references and the record annotation are the CSV author's: without the Install's word, its own namespace.
    assert_eq!(watched(&record(&["AllNamespaces"], "plumbus", "u2"), &plumbus), only(&["operators"]), "another uid");
    assert_eq!(watched(&record(&["AllNamespaces"], "plumbus", "u1"), &Installs::new()), only(&["operators"]));
    let other = applied(&[install("plumbus", "u1", &[("ClusterServiceVersion", "operators", "other.v1")])]);
    assert_eq!(watched(&record(&["AllNamespaces"], "plumbus", "u1"), &other), only(&["operators"]), "not listed");
    let elsewhere = applied(&[install("plumbus", "u1", &[("ClusterServiceVersion", "team-a", "plumbus.v1")])]);
    assert_eq!(watched(&record(&["AllNamespaces"], "plumbus", "u1"), &elsewhere), only(&["operators"]));
    let mut not_an_install = record(&["AllNamespaces"], "plumbus", "u1");
    not_an_install.metadata.owner_references.as_mut().unwrap()[0].kind = "Operator".into();
    assert_eq!(watched(&not_an_install, &plumbus), only(&["operators"]));
    // With one group in its namespace, the group's status, as for every CSV (and as the Install decides).
    let group = groups(&[("operators", "og", &["team-a"])]);
    assert_eq!(watches(&record(&["AllNamespaces"], "plumbus", "u1"), reach(&group, &plumbus)), only(&["team-a"]));
}

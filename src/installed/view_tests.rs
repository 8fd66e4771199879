use super::*;
use crate::api::v1::TARGET_NAMESPACES_ANNOTATION;
use crate::api::v1alpha1::COPIED_FROM_LABEL;

/// A CSV as its author wrote it: where it is listed is its group's word, not its own.
fn csv(namespace: &str, name: &str, phase: &str, rv: &str) -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "spec": {"install": {"strategy": "deployment"}, "version": "1.0.0",
                 "installModes": [{"type": "AllNamespaces", "supported": true}]},
        "status": {"phase": phase}
    }))
    .unwrap()
}

fn copy(namespace: &str, name: &str, rv: &str) -> ClusterServiceVersion {
    let mut copy = csv(namespace, name, "Succeeded", rv);
    copy.metadata.labels = Some([(COPIED_FROM_LABEL.to_owned(), "operators".to_owned())].into());
    copy
}

/// An OperatorGroup whose status (the controller's) names `targets`.
fn group(namespace: &str, name: &str, targets: &[&str], rv: &str) -> OperatorGroup {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "spec": {"targetNamespaces": ["forged-by-whoever-writes-the-group"]},
        "status": {"namespaces": targets}
    }))
    .unwrap()
}

fn subscription(namespace: &str, name: &str, installed: &str, rv: &str) -> Subscription {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv},
        "spec": {"source": "c", "sourceNamespace": "olm", "name": name, "channel": "stable"},
        "status": {"installedCSV": installed, "currentCSV": installed}
    }))
    .unwrap()
}

fn namespaces(names: &[&str]) -> Update {
    Update::NamespacesListed(names.iter().map(|name| ((*name).to_owned(), "1".to_owned())).collect())
}

/// `etcd` in `operators` for all namespaces, `prom` in `monitoring` for `team-a` only (their groups'); namespaces
/// operators, monitoring, team-a, team-b.
fn view() -> View {
    let mut view = View::new(DEFAULT_HISTORY, "e");
    view.apply(namespaces(&["operators", "monitoring", "team-a", "team-b"]));
    view.apply(Update::OperatorGroupsListed(vec![
        group("operators", "global", &[""], "5"),
        group("monitoring", "og", &["team-a"], "6"),
    ]));
    view.apply(Update::InstallsListed(Vec::new()));
    view.apply(Update::CsvsListed(vec![
        csv("operators", "etcd.v1", "Succeeded", "10"),
        csv("monitoring", "prom.v1", "Succeeded", "11"),
        copy("team-a", "etcd.v1", "12"),
    ]));
    view.apply(Update::SubscriptionsListed(vec![subscription("operators", "etcd", "etcd.v1", "20")]));
    view
}

/// A version without its `changes` part: the tracked resources' versions.
fn resources(version: &str) -> String {
    version.split(',').filter(|part| !part.starts_with("changes:")).collect::<Vec<_>>().join(",")
}

fn names(listed: &[(String, Arc<Entry>)]) -> Vec<String> {
    listed.iter().map(|(namespace, entry)| format!("{namespace}/{}", entry.name())).collect()
}

/// The events of what one update changed, seen by a watch of `scope`.
fn seen(view: &View, logged: &Option<Arc<Logged>>, scope: Option<&str>) -> Vec<Event> {
    events(logged.as_ref().expect("a change"), scope, &view.namespaces())
}

fn kinds(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| format!("{} {}/{}", e.kind, e.namespace, e.entry.name())).collect()
}

#[test]
fn a_namespace_lists_the_operators_watching_it_and_only_if_it_exists() {
    let view = view();
    assert_eq!(names(&view.listed(Some("team-a"))), ["team-a/etcd.v1", "team-a/prom.v1"]);
    assert_eq!(names(&view.listed(Some("team-b"))), ["team-b/etcd.v1"]);
    assert!(view.listed(Some("mojave")).is_empty(), "a namespace that does not exist lists nothing");
    assert_eq!(
        names(&view.listed(None)),
        ["monitoring/etcd.v1", "operators/etcd.v1", "team-a/etcd.v1", "team-a/prom.v1", "team-b/etcd.v1"]
    );
    let (namespace, entry) = &view.listed(Some("team-b"))[0];
    let object = entry.object_in(namespace, &entry.version);
    assert_eq!(object["metadata"]["namespace"], "team-b");
    assert_eq!(object["metadata"]["labels"]["operators.coreos.com/sub"], "etcd");
    let version = object["metadata"]["resourceVersion"].as_str().unwrap();
    assert_eq!(
        resources(version),
        "clusterserviceversions:12,installs:0,namespaces:1,operatorgroups:6,subscriptions:20"
    );
    assert!(version.starts_with("changes:e-"), "{version}");
}

#[test]
fn the_composite_version_follows_each_resource() {
    let mut view = view();
    assert_eq!(
        resources(&view.version()),
        "clusterserviceversions:12,installs:0,namespaces:1,operatorgroups:6,subscriptions:20"
    );
    view.apply(Update::Csv(csv("operators", "etcd.v1", "Failed", "30")));
    assert_eq!(
        resources(&view.version()),
        "clusterserviceversions:30,installs:0,namespaces:1,operatorgroups:6,subscriptions:20"
    );
}

#[test]
fn a_phase_change_is_one_modification_in_every_namespace_watched() {
    let mut view = view();
    let logged = view.apply(Update::Csv(csv("operators", "etcd.v1", "Failed", "30")));
    assert_eq!(logged.as_ref().unwrap().changes.len(), 1);
    let events = seen(&view, &logged, Some("team-a"));
    assert_eq!(kinds(&events), ["MODIFIED team-a/etcd.v1"]);
    assert_eq!(events[0].object()["status"]["clusterServiceVersion"]["status"]["phase"], "Failed");
    assert_eq!(events[0].entry.cells[5], "Failed");
    assert_eq!(events[0].object()["metadata"]["resourceVersion"], view.version());
    assert_eq!(kinds(&seen(&view, &logged, None)).len(), 4, "all four namespaces");
    assert!(seen(&view, &logged, Some("mojave")).is_empty());
}

#[test]
fn what_changes_no_object_records_nothing() {
    let mut view = view();
    assert!(view.apply(Update::Subscription(subscription("team-b", "other", "none", "31"))).is_none());
    assert!(view.apply(Update::Csv(copy("team-b", "etcd.v1", "32"))).is_none(), "copies are never tracked");
    // Listed again, the same: nothing.
    assert!(view.apply(namespaces(&["operators", "monitoring", "team-a", "team-b"])).is_none());
    assert!(view
        .apply(Update::SubscriptionsListed(vec![subscription("operators", "etcd", "etcd.v1", "20")]))
        .is_none());
}

#[test]
fn an_operator_removed_or_narrowed_is_deleted_where_it_no_longer_watches() {
    let mut view = view();
    let logged = view.apply(Update::OperatorGroup(group("operators", "global", &["team-b"], "40")));
    assert_eq!(kinds(&seen(&view, &logged, Some("team-a"))), ["DELETED team-a/etcd.v1"]);
    assert_eq!(kinds(&seen(&view, &logged, Some("team-b"))), ["MODIFIED team-b/etcd.v1"]);
    let logged = view.apply(Update::CsvDeleted(csv("monitoring", "prom.v1", "Succeeded", "41")));
    let deleted = seen(&view, &logged, Some("team-a"));
    assert_eq!(kinds(&deleted), ["DELETED team-a/prom.v1"]);
    assert_eq!(deleted[0].object()["metadata"]["resourceVersion"], view.version(), "the deletion's version");
    assert!(view.listed(Some("team-a")).is_empty());
}

#[test]
fn a_namespace_made_or_deleted_adds_or_deletes_what_watches_it() {
    let mut view = view();
    let logged = view.apply(Update::Namespace { name: "team-c".into(), resource_version: "50".into() });
    assert_eq!(kinds(&seen(&view, &logged, Some("team-c"))), ["ADDED team-c/etcd.v1"]);
    assert!(seen(&view, &logged, Some("team-a")).is_empty());
    assert_eq!(names(&view.listed(Some("team-c"))), ["team-c/etcd.v1"]);
    let logged = view.apply(Update::NamespaceDeleted { name: "team-a".into(), resource_version: "51".into() });
    assert_eq!(kinds(&seen(&view, &logged, None)), ["DELETED team-a/etcd.v1", "DELETED team-a/prom.v1"]);
    assert!(view.listed(Some("team-a")).is_empty());
}

#[test]
fn a_watch_resumes_from_any_version_the_log_holds() {
    let mut view = view();
    let start = view.version();
    view.apply(Update::Csv(csv("operators", "etcd.v1", "Failed", "60")));
    let middle = view.version();
    view.apply(Update::Csv(csv("operators", "etcd.v1", "Succeeded", "61")));
    let all = view.namespaces();
    let phases = |logged: Vec<Arc<Logged>>| -> Vec<String> {
        logged.iter().flat_map(|l| events(l, Some("team-b"), &all)).map(|e| e.entry.cells[5].clone()).collect()
    };
    assert_eq!(phases(view.since(&start).unwrap()), ["Failed", "Succeeded"]);
    assert_eq!(phases(view.since(&middle).unwrap()), ["Succeeded"]);
    assert!(view.since(&view.version()).unwrap().is_empty());
    // The parts may come in any order: the version is the same.
    let reordered: Vec<&str> = middle.split(',').rev().collect();
    assert_eq!(phases(view.since(&reordered.join(",")).unwrap()), ["Succeeded"]);
}

#[test]
fn a_watch_resumes_from_a_version_no_change_was_logged_at() {
    let mut view = view();
    // Changes that change no Installed object still move the version on: a list is taken at such a version.
    assert!(view.apply(Update::Subscription(subscription("team-b", "other", "none", "70"))).is_none());
    let listed = view.version();
    assert_eq!(
        resources(&listed),
        "clusterserviceversions:12,installs:0,namespaces:1,operatorgroups:6,subscriptions:70"
    );
    assert!(view.apply(Update::Namespace { name: "team-a".into(), resource_version: "71".into() }).is_none());
    view.apply(Update::Csv(csv("operators", "etcd.v1", "Failed", "72")));
    let resumed = view.since(&listed).unwrap();
    assert_eq!(resumed.len(), 1, "the change after the list, and only it");
    let events = events(&resumed[0], Some("team-a"), &view.namespaces());
    assert_eq!(kinds(&events), ["MODIFIED team-a/etcd.v1"]);
}

#[test]
fn one_update_is_logged_once_whatever_it_changed() {
    let mut view = view();
    let logged = view
        .apply(Update::CsvsListed(vec![
            csv("operators", "etcd.v2", "Succeeded", "80"),
            csv("monitoring", "prom.v1", "Failed", "81"),
        ]))
        .unwrap();
    assert_eq!(logged.changes.len(), 3, "etcd.v1 gone, etcd.v2 added, prom.v1 modified");
    assert_eq!(view.since(&view.version()).unwrap().len(), 0);
    // A list that no longer holds the newest object does not move the resource's version back, and the deletion
    // it brings is resumed to all the same: the version names the state, not only the resources' versions.
    let before = view.version();
    view.apply(Update::CsvsListed(vec![csv("operators", "etcd.v2", "Succeeded", "80")]));
    assert_eq!(
        resources(&view.version()),
        "clusterserviceversions:81,installs:0,namespaces:1,operatorgroups:6,subscriptions:20"
    );
    let resumed = view.since(&before).unwrap();
    assert_eq!(kinds(&events(&resumed[0], Some("team-a"), &view.namespaces())), ["DELETED team-a/prom.v1"]);
}

#[test]
fn a_version_the_log_no_longer_holds_is_expired() {
    let mut view = View::new(2, "e");
    view.apply(namespaces(&["a"]));
    view.apply(Update::Csv(csv("a", "x.v1", "Pending", "1")));
    let old = view.version();
    let mut held = String::new();
    for (phase, rv) in [("Installing", "2"), ("Succeeded", "3"), ("Failed", "4")] {
        view.apply(Update::Csv(csv("a", "x.v1", phase, rv)));
        if phase == "Succeeded" {
            held = view.version();
        }
    }
    assert_eq!(view.since(&old).unwrap_err(), ResumeError::Expired { asked: old.clone(), current: view.version() });
    assert_eq!(view.since(&held).unwrap().len(), 1, "held");
    let expired = |version: &str| matches!(view.since(version), Err(ResumeError::Expired { .. }));
    assert!(expired(&held.replace("changes:e-", "changes:other-")), "another process's");
    assert!(expired(&format!("changes:e-99,{}", resources(&held))), "never given");
    assert!(matches!(view.since("garbage"), Err(ResumeError::Invalid(_))));
    assert!(matches!(view.since("clusterserviceversions:3"), Err(ResumeError::Invalid(_))), "no changes part");
    assert!(matches!(view.since(""), Err(ResumeError::Invalid(_))));
}

/// A CSV whose author wrote `olm.targetNamespaces` (and `olm.operatorGroup`) in a namespace without
/// a group is listed in its own namespace only.
#[test]
fn forged_targets_list_a_csv_nowhere_but_its_own_namespace() {
    let mut view = view();
    view.apply(namespaces(&["operators", "monitoring", "team-a", "team-b", "mallet", "victim"]));
    let mut forged = csv("mallet", "spoof.v1", "Failed", "90");
    forged.metadata.annotations = Some(
        [
            (TARGET_NAMESPACES_ANNOTATION.to_owned(), "victim".to_owned()),
            ("olm.operatorGroup".to_owned(), "x".to_owned()),
        ]
        .into(),
    );
    let logged = view.apply(Update::Csv(forged.clone()));
    assert_eq!(kinds(&seen(&view, &logged, None)), ["ADDED mallet/spoof.v1"]);
    forged.metadata.annotations = Some(
        [(TARGET_NAMESPACES_ANNOTATION.to_owned(), String::new()), ("olm.operatorGroup".to_owned(), "x".to_owned())]
            .into(),
    );
    forged.metadata.resource_version = Some("91".into());
    let logged = view.apply(Update::Csv(forged));
    assert_eq!(kinds(&seen(&view, &logged, None)), ["MODIFIED mallet/spoof.v1"], "every namespace, forged: the same");
    assert_eq!(names(&view.listed(Some("victim"))), ["victim/etcd.v1"], "the global operator only");
    assert_eq!(names(&view.listed(None)).iter().filter(|n| n.ends_with("/spoof.v1")).count(), 1);
}

#[test]
fn a_group_whose_status_changes_moves_the_operators_of_its_namespace() {
    let mut view = view();
    let logged = view.apply(Update::OperatorGroup(group("monitoring", "og", &["team-a", "team-b"], "100")));
    assert_eq!(kinds(&seen(&view, &logged, None)), ["MODIFIED team-a/prom.v1", "ADDED team-b/prom.v1"]);
    assert_eq!(
        resources(&view.version()),
        "clusterserviceversions:12,installs:0,namespaces:1,operatorgroups:100,subscriptions:20"
    );
    // A write that moves nothing the view reads (the group's spec, `lastUpdated`): nothing changes.
    assert!(view.apply(Update::OperatorGroup(group("monitoring", "og", &["team-a", "team-b"], "101"))).is_none());
    // A second group: OLM v0 takes it as none, so its own namespace only.
    let logged = view.apply(Update::OperatorGroup(group("monitoring", "other", &[""], "102")));
    assert_eq!(
        kinds(&seen(&view, &logged, None)),
        ["ADDED monitoring/prom.v1", "DELETED team-a/prom.v1", "DELETED team-b/prom.v1"]
    );
    // Back to one, targeting every namespace.
    let logged = view.apply(Update::OperatorGroupDeleted(group("monitoring", "og", &[], "103")));
    assert_eq!(kinds(&seen(&view, &logged, Some("team-b"))), ["ADDED team-b/prom.v1"]);
    assert_eq!(names(&view.listed(Some("operators"))), ["operators/etcd.v1", "operators/prom.v1"]);
    // Re-listed without any group: everything back in its own namespace, as one logged update.
    let before = view.version();
    view.apply(Update::OperatorGroupsListed(Vec::new()));
    assert_eq!(names(&view.listed(None)), ["monitoring/prom.v1", "operators/etcd.v1"]);
    let resumed = view.since(&before).unwrap();
    assert_eq!(resumed.len(), 1);
    let deleted = kinds(&events(&resumed[0], Some("team-a"), &view.namespaces()));
    assert_eq!(deleted, ["DELETED team-a/prom.v1", "DELETED team-a/etcd.v1"]);
}

fn install(name: &str, uid: &str, csvs: &[(&str, &str)], rv: &str) -> Install {
    let applied: Vec<Value> = csvs
        .iter()
        .map(|(namespace, name)| {
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                   "namespace": namespace, "name": name})
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "uid": uid, "resourceVersion": rv},
        "spec": {"content": [{"type": "Raw", "raw": "{}"}]},
        "status": {"applied": applied}
    }))
    .unwrap()
}

#[test]
fn an_installs_record_is_listed_where_the_install_decided_once_its_status_lists_it() {
    let mut view = view();
    view.apply(namespaces(&["operators", "monitoring", "team-a", "team-b", "apps"]));
    let mut record = csv("apps", "plumbus.v1", "Succeeded", "110");
    record.metadata.owner_references = Some(vec![serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": "plumbus", "uid": "u1"
    }))
    .unwrap()]);
    let logged = view.apply(Update::Csv(record));
    assert_eq!(kinds(&seen(&view, &logged, None)), ["ADDED apps/plumbus.v1"], "applied before the status says so");
    let logged = view.apply(Update::Install(install("plumbus", "u1", &[("apps", "plumbus.v1")], "111")));
    let added = kinds(&seen(&view, &logged, None));
    assert_eq!(added.len(), 5, "every namespace: {added:?}");
    assert!(
        added.contains(&"MODIFIED apps/plumbus.v1".to_owned()) && added.contains(&"ADDED team-a/plumbus.v1".into())
    );
    assert!(resources(&view.version()).contains("installs:111"));
    // Status writes that leave what it applied alone change nothing shown.
    assert!(view.apply(Update::Install(install("plumbus", "u1", &[("apps", "plumbus.v1")], "112"))).is_none());
    // An Install of that name made again (another uid) does not vouch for the old one's record.
    let logged = view.apply(Update::Install(install("plumbus", "u2", &[("apps", "plumbus.v1")], "113")));
    assert_eq!(kinds(&seen(&view, &logged, Some("team-a"))), ["DELETED team-a/plumbus.v1"]);
    view.apply(Update::InstallsListed(vec![install("plumbus", "u1", &[("apps", "plumbus.v1")], "114")]));
    assert_eq!(names(&view.listed(Some("team-b"))), ["team-b/etcd.v1", "team-b/plumbus.v1"]);
    let logged = view.apply(Update::InstallDeleted(install("plumbus", "u1", &[("apps", "plumbus.v1")], "115")));
    assert_eq!(kinds(&seen(&view, &logged, Some("team-b"))), ["DELETED team-b/plumbus.v1"]);
    assert_eq!(names(&view.listed(Some("apps"))), ["apps/etcd.v1", "apps/plumbus.v1"]);
}

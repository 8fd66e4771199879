use super::*;
use crate::api::v2alpha1::CREATOR_ANNOTATION;
use crate::install::content::CSV_RECORD_ANNOTATION;
use serde_json::json;

fn subscription(namespace: &str, package: &str, channel: Option<&str>, manual: bool) -> Subscription {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": package, "namespace": namespace, "uid": format!("uid-{namespace}-{package}")},
        "spec": {"source": "community", "sourceNamespace": "olm", "name": package, "channel": channel,
                 "installPlanApproval": if manual { "Manual" } else { "Automatic" }}
    }))
    .unwrap()
}

/// The Install the InstallPlan loop made for `namespace/package`, installed.
fn install_for(namespace: &str, package: &str) -> Install {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
        "metadata": {"name": format!("{package}.{namespace}"), "generation": 1,
                     "annotations": {SUBSCRIPTION_ANNOTATION: format!("{namespace}/{package}"),
                                     CREATOR_ANNOTATION: r#"{"username":"admin"}"#}},
        "spec": {"content": []},
        "status": {"state": "Installed", "observedGeneration": 1,
                   "granted": [{"scope": "Namespaced", "namespaces": [namespace], "verbs": ["create"],
                                "apiGroups": ["apps"], "resources": ["deployments"]}]}
    }))
    .unwrap()
}

fn operator(
    name: &str,
    package: Option<&str>,
    entrypoint: Option<&str>,
    channel: Option<&str>,
    namespace: Option<&str>,
) -> Operator {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
        "metadata": {"name": name, "uid": format!("uid-{name}"),
                     "annotations": {CREATOR_ANNOTATION: r#"{"username":"admin","groups":["system:masters"]}"#}},
        "spec": {"installNamespace": namespace, "updates": {"type": "CatalogSource", "catalogSource": {
            "package": package, "entrypoint": entrypoint, "channel": channel,
            "ref": {"name": "community", "namespace": "olm"}}}}
    }))
    .unwrap()
}

struct Cluster {
    subscriptions: Vec<Subscription>,
    installs: Vec<Install>,
    operators: Vec<Operator>,
    entrypoints: BTreeMap<(String, String, String), (String, Vec<String>)>,
    asked: Vec<&'static str>,
    csvs: Vec<ClusterServiceVersion>,
    bundle_images: Option<BTreeMap<(String, String, String), String>>,
    copies: BTreeMap<(String, String), Vec<String>>,
}

impl Cluster {
    fn new() -> Self {
        Self {
            subscriptions: vec![subscription("ops", "plumbus", Some("stable"), false)],
            installs: vec![install_for("ops", "plumbus")],
            operators: vec![],
            entrypoints: BTreeMap::new(),
            asked: vec!["ops", "dev"],
            csvs: Vec::new(),
            bundle_images: Some(BTreeMap::new()),
            copies: BTreeMap::new(),
        }
    }

    fn plan(&self) -> Vec<SubscriptionPlan> {
        let asked = |namespace: &str| self.asked.contains(&namespace);
        plan(&Inputs {
            subscriptions: &self.subscriptions,
            installs: &self.installs,
            operators: &self.operators,
            asked: &asked,
            entrypoints: &self.entrypoints,
            default_namespace: "operators",
            csvs: &self.csvs,
            bundle_images: self.bundle_images.as_ref(),
            copies: &self.copies,
        })
    }
}

#[test]
fn a_subscription_without_an_operator_gets_one_generated_as_it_says() {
    let mut cluster = Cluster::new();
    let mut configured = subscription("ops", "plumbus", Some("stable"), true);
    configured.spec.config = serde_json::from_value(json!({"env": [{"name": "A", "value": "b"}]})).unwrap();
    cluster.subscriptions = vec![configured];
    let plans = cluster.plan();
    let plan = &plans[0];
    assert_eq!(plan.blocked, None);
    assert!(plan.asked && plan.manual);
    assert_eq!(plan.install.as_deref(), Some("plumbus.ops"));
    assert_eq!(plan.granted.len(), 1, "what the operator holds today is shown");
    let operator = plan.operator.as_ref().unwrap();
    assert_eq!((operator.name.as_str(), operator.exists, operator.associated), ("plumbus", false, false));
    let updates = operator.spec.updates.as_ref().unwrap().catalog_source.as_ref().unwrap();
    assert_eq!(updates.package.as_deref(), Some("plumbus"));
    assert_eq!(updates.channel.as_deref(), Some("stable"));
    assert_eq!(updates.approval, UpdateApproval::Manual);
    assert_eq!((updates.catalog_ref.namespace.as_str(), updates.catalog_ref.name.as_str()), ("olm", "community"));
    assert_eq!(operator.spec.install_namespace.as_deref(), Some("ops"), "the operator stays where it runs");
    assert_eq!(operator.spec.config.as_ref().unwrap().env[0].name, "A", "the configuration goes along");
    assert!(!plan.install_adopted);
}

#[test]
fn an_operator_of_the_same_package_channel_catalog_and_namespace_is_chosen() {
    let mut cluster = Cluster::new();
    cluster.operators = vec![operator("my-plumbus", Some("plumbus"), None, Some("stable"), Some("ops"))];
    let operator_choice = cluster.plan()[0].operator.clone().unwrap();
    assert_eq!((operator_choice.name.as_str(), operator_choice.exists), ("my-plumbus", true));
    // Another channel, namespace or catalog does not match: then the package's name is taken.
    for other in [
        operator("plumbus", Some("plumbus"), None, Some("beta"), Some("ops")),
        operator("plumbus", Some("plumbus"), None, Some("stable"), None),
        operator("plumbus", Some("fleeb"), None, Some("stable"), Some("ops")),
    ] {
        cluster.operators = vec![other];
        let plan = &cluster.plan()[0];
        assert_eq!(plan.blocked.as_ref().map(|b| b.reason), Some("OperatorNameTaken"), "{plan:?}");
        assert!(!plan.blocked.as_ref().unwrap().transient);
    }
}

#[test]
fn an_operator_naming_only_an_entrypoint_matches_through_the_catalog() {
    let mut cluster = Cluster::new();
    cluster.operators = vec![operator("p", None, Some("plumbus.v2.0.0"), None, Some("ops"))];
    assert_eq!(cluster.plan()[0].operator.as_ref().unwrap().name, "plumbus", "unknown entrypoint: no match");
    cluster.entrypoints.insert(
        ("olm".into(), "community".into(), "plumbus.v2.0.0".into()),
        ("plumbus".into(), vec!["alpha".into(), "stable".into()]),
    );
    assert_eq!(cluster.plan()[0].operator.as_ref().unwrap().name, "p");
}

#[test]
fn a_matching_operator_with_an_install_of_its_own_would_install_twice() {
    let mut cluster = Cluster::new();
    cluster.operators = vec![operator("my-plumbus", Some("plumbus"), None, Some("stable"), Some("ops"))];
    let mut own = install_for("x", "y");
    own.metadata.name = Some("my-plumbus".into());
    cluster.installs.push(own);
    assert_eq!(cluster.plan()[0].blocked.as_ref().map(|b| b.reason), Some("OperatorAlreadyInstalled"));
}

#[test]
fn a_package_subscribed_in_two_asked_namespaces_blocks_both() {
    let mut cluster = Cluster::new();
    cluster.subscriptions.push(subscription("dev", "plumbus", Some("stable"), false));
    cluster.installs.push(install_for("dev", "plumbus"));
    let plans = cluster.plan();
    assert_eq!(plans.len(), 2);
    for plan in &plans {
        let blocked = plan.blocked.as_ref().expect("blocked");
        assert_eq!(blocked.reason, "PackageSubscribedInSeveralNamespaces");
        assert!(blocked.message.contains("dev, ops"), "{}", blocked.message);
    }
    // Asked one namespace at a time, each is adoptable (the other then finds the name taken).
    cluster.asked = vec!["ops"];
    let plans = cluster.plan();
    let ops = plans.iter().find(|p| p.namespace == "ops").unwrap();
    assert_eq!(ops.blocked, None);
    assert!(!plans.iter().find(|p| p.namespace == "dev").unwrap().asked);
}

#[test]
fn an_operator_that_is_not_installed_yet_waits() {
    let mut cluster = Cluster::new();
    cluster.installs.clear();
    let blocked = cluster.plan()[0].blocked.clone().unwrap();
    assert_eq!(blocked.reason, "SubscriptionNotInstalled");
    assert!(blocked.transient && blocked.message.contains("plumbus.ops"), "{blocked:?}");
    let mut installing = install_for("ops", "plumbus");
    installing.status.as_mut().unwrap().state = Some(crate::api::v2alpha1::InstallState::Applying);
    cluster.installs = vec![installing];
    assert_eq!(cluster.plan()[0].blocked.as_ref().map(|b| b.reason), Some("InstallNotSettled"));
}

#[test]
fn an_install_made_by_someone_else_is_not_the_subscriptions() {
    let mut cluster = Cluster::new();
    cluster.installs[0].metadata.annotations = None;
    let blocked = cluster.plan()[0].blocked.clone().unwrap();
    assert_eq!(blocked.reason, "InstallNameTaken");
    assert!(!blocked.transient, "a person must rename or delete it");
}

/// After a crash halfway: the Operator made, the Install adopted, the Subscription still there.
#[test]
fn adoption_resumes_from_what_an_earlier_pass_did() {
    let mut cluster = Cluster::new();
    let mut generated = operator("plumbus", Some("plumbus"), None, Some("stable"), Some("ops"));
    generated.annotations_mut().insert(OPERATOR_INSTALL_ANNOTATION.to_owned(), "plumbus.ops".to_owned());
    cluster.operators = vec![generated];
    let plan = &cluster.plan()[0];
    assert_eq!(plan.blocked, None);
    let choice = plan.operator.as_ref().unwrap();
    assert!(choice.exists && choice.associated);
    assert!(!plan.install_adopted);
    // The Install adopted: its Subscription annotation gone, its origin recorded, owned by the Operator; a second
    // Subscription of the package elsewhere does not block what is under way.
    let install = &mut cluster.installs[0];
    let annotations = install.metadata.annotations.as_mut().unwrap();
    annotations.remove(SUBSCRIPTION_ANNOTATION);
    annotations.insert(ADOPTED_FROM_ANNOTATION.into(), adopted_from("ops", "plumbus"));
    annotations.insert(ADOPTED_FROM_UID_ANNOTATION.into(), "uid-ops-plumbus".into());
    install.metadata.owner_references =
        Some(vec![serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v2alpha1",
        "kind": "Operator", "name": "plumbus", "uid": "uid-plumbus", "controller": true}))
        .unwrap()]);
    install.status.as_mut().unwrap().state = Some(crate::api::v2alpha1::InstallState::Applying);
    cluster.subscriptions.push(subscription("dev", "plumbus", Some("stable"), false));
    let plans = cluster.plan();
    let plan = plans.iter().find(|p| p.namespace == "ops").unwrap();
    assert_eq!(plan.blocked, None, "an adopted Install re-applying is no reason to wait");
    assert!(plan.install_adopted);
    // A Subscription of the name made again after the adoption is not the one adopted.
    cluster.subscriptions.retain(|s| s.namespace().as_deref() != Some("ops"));
    let mut remade = subscription("ops", "plumbus", Some("stable"), false);
    remade.metadata.uid = Some("uid-new".into());
    cluster.subscriptions.push(remade);
    let plans = cluster.plan();
    let plan = plans.iter().find(|p| p.namespace == "ops").unwrap();
    assert_eq!(plan.install, None, "{plan:?}");
    assert_eq!(plan.blocked.as_ref().map(|b| b.reason), Some("InstallNameTaken"));
}

#[test]
fn an_operator_matches_only_on_the_installs_terms() {
    let mut cluster = Cluster::new();
    // Made by someone else: their Operator would drive an Install approved for another person.
    let mut theirs = operator("my-plumbus", Some("plumbus"), None, Some("stable"), Some("ops"));
    theirs.annotations_mut().insert(CREATOR_ANNOTATION.into(), r#"{"username":"mallory"}"#.into());
    cluster.operators = vec![theirs];
    assert_eq!(cluster.plan()[0].operator.as_ref().unwrap().name, "plumbus", "not matched: one is generated");
    // Automatic where the Subscription is Manual.
    cluster.subscriptions = vec![subscription("ops", "plumbus", Some("stable"), true)];
    cluster.operators = vec![operator("my-plumbus", Some("plumbus"), None, Some("stable"), Some("ops"))];
    assert_eq!(cluster.plan()[0].operator.as_ref().unwrap().name, "plumbus");
    let mut manual = operator("my-plumbus", Some("plumbus"), None, Some("stable"), Some("ops"));
    manual.spec.updates.as_mut().unwrap().catalog_source.as_mut().unwrap().approval = UpdateApproval::Manual;
    cluster.operators = vec![manual.clone()];
    assert_eq!(cluster.plan()[0].operator.as_ref().unwrap().name, "my-plumbus");
    // Another configuration of the Deployments.
    manual.spec.config = serde_json::from_value(json!({"env": [{"name": "A", "value": "b"}]})).unwrap();
    cluster.operators = vec![manual];
    assert_eq!(cluster.plan()[0].operator.as_ref().unwrap().name, "plumbus");
}

#[test]
fn an_install_under_another_operator_is_left_alone() {
    let mut cluster = Cluster::new();
    cluster.installs[0].metadata.owner_references =
        Some(vec![serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v2alpha1",
        "kind": "Operator", "name": "other", "uid": "uid-other", "controller": true}))
        .unwrap()]);
    let blocked = cluster.plan()[0].blocked.clone().unwrap();
    assert_eq!(blocked.reason, "InstallOwnedElsewhere");
    assert!(blocked.message.contains("other"));
}

#[test]
fn a_subscription_made_again_from_an_operator_is_not_adopted_again() {
    let mut cluster = Cluster::new();
    cluster.subscriptions[0]
        .annotations_mut()
        .insert(crate::migration::revert::REVERTED_FROM_ANNOTATION.into(), "Operator plumbus".into());
    let blocked = cluster.plan()[0].blocked.clone().unwrap();
    assert_eq!(blocked.reason, "RevertedFromOperator");
    assert!(!blocked.transient);
}

/// A CSV OLM v0 installed in `namespace` for `package`, with its phase, targets and one rule of each kind.
fn v0_csv(namespace: &str, name: &str, phase: &str, annotations: serde_json::Value) -> ClusterServiceVersion {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "annotations": annotations},
        "spec": {"install": {"strategy": "deployment", "spec": {
            "permissions": [{"serviceAccountName": "plumbus", "rules": [
                {"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}],
            "clusterPermissions": [{"serviceAccountName": "plumbus", "rules": [
                {"verbs": ["list"], "apiGroups": [""], "resources": ["nodes"]}]}]}}},
        "status": {"phase": phase}
    }))
    .unwrap()
}

/// The cluster as OLM v0 left it: the Subscription's installed CSV, no Install; the catalog holding its bundle.
fn v0_cluster() -> Cluster {
    let mut cluster = Cluster::new();
    cluster.installs.clear();
    cluster.subscriptions[0].status =
        Some(serde_json::from_value(json!({"installedCSV": "plumbus.v1", "currentCSV": "plumbus.v1"})).unwrap());
    cluster.subscriptions[0].annotations_mut().insert(CREATOR_ANNOTATION.into(), r#"{"username":"admin"}"#.into());
    cluster.csvs = vec![v0_csv("ops", "plumbus.v1", "Succeeded", json!({"olm.targetNamespaces": ""}))];
    cluster.bundle_images = Some(BTreeMap::from([(
        ("olm".to_owned(), "community".to_owned(), "plumbus.v1".to_owned()),
        "registry.example/plumbus@sha256:1".to_owned(),
    )]));
    cluster
}

#[test]
fn an_operator_olm_v0_installed_gets_an_install_that_takes_it_over() {
    let mut cluster = v0_cluster();
    cluster.copies.insert(("ops".into(), "plumbus.v1".into()), vec!["team-a".into(), "team-b".into()]);
    cluster.copies.insert(("ops".into(), "other.v1".into()), vec!["team-c".into()]);
    let plan = &cluster.plan()[0];
    assert_eq!(plan.blocked, None, "{plan:?}");
    let takeover = plan.takeover.clone().expect("a takeover");
    assert_eq!(takeover.copies, ["team-a", "team-b"], "the copies it removes, only its own");
    assert_eq!(
        (takeover.csv.as_str(), takeover.uid.as_str(), takeover.image.as_deref(), takeover.to_create),
        ("plumbus.v1", "uid-plumbus.v1", Some("registry.example/plumbus@sha256:1"), true)
    );
    assert_eq!(plan.install.as_deref(), Some("plumbus.ops"), "named as the InstallPlan loop names it");
    assert_eq!(plan.operator.as_ref().map(|o| (o.name.as_str(), o.exists)), Some(("plumbus", false)));
    // What it holds today: what its CSV declares, where OLM v0 granted it (all namespaces here: cluster-wide).
    let scopes: Vec<(PermissionScope, &str)> =
        plan.granted.iter().map(|p| (p.scope, p.resources[0].as_str())).collect();
    assert_eq!(scopes, [(PermissionScope::Cluster, "configmaps"), (PermissionScope::Cluster, "nodes")]);

    let mut one_namespace = v0_cluster();
    one_namespace.csvs = vec![v0_csv("ops", "plumbus.v1", "Succeeded", json!({"olm.targetNamespaces": "ops"}))];
    let plan = &one_namespace.plan()[0];
    assert_eq!(
        (plan.granted[0].scope, plan.granted[0].namespaces.clone()),
        (PermissionScope::Namespaced, vec!["ops".to_owned()])
    );

    // A plan that reads no catalog still says so, without the image.
    let mut no_catalogs = v0_cluster();
    no_catalogs.bundle_images = None;
    let plan = &no_catalogs.plan()[0];
    assert_eq!((plan.blocked.clone(), plan.takeover.as_ref().map(|t| t.image.clone())), (None, Some(None)));
}

#[test]
fn the_takeover_install_is_the_installplan_loops_recording_the_csv() {
    let cluster = v0_cluster();
    let body =
        takeover_manifest(&cluster.subscriptions[0], "plumbus.v1", "uid-plumbus.v1", "registry.example/p@sha256:1");
    let annotations = &body["metadata"]["annotations"];
    assert_eq!(body["metadata"]["name"], "plumbus.ops");
    assert_eq!(annotations[TAKES_OVER_CSV_ANNOTATION], "ops/plumbus.v1");
    assert_eq!(annotations[TAKES_OVER_CSV_UID_ANNOTATION], "uid-plumbus.v1");
    assert_eq!(annotations[SUBSCRIPTION_ANNOTATION], "ops/plumbus");
    assert_eq!(annotations[CREATOR_ANNOTATION], r#"{"username":"admin"}"#, "on behalf of the Subscription's author");
    assert_eq!(body["spec"]["content"][0]["manifestImage"], "registry.example/p@sha256:1");
}

#[test]
fn what_is_not_an_operator_olm_v0_installed_and_succeeded_is_not_taken_over() {
    let reason = |cluster: &Cluster| cluster.plan()[0].blocked.clone().map(|b| (b.reason, b.transient));
    let mut missing = v0_cluster();
    missing.bundle_images = Some(BTreeMap::new());
    assert_eq!(reason(&missing), Some(("BundleNotInCatalog", false)));
    let mut installing = v0_cluster();
    installing.csvs = vec![v0_csv("ops", "plumbus.v1", "Installing", json!({}))];
    assert_eq!(reason(&installing), Some(("InstalledCSVNotSucceeded", true)));
    let mut record = v0_cluster();
    record.csvs = vec![v0_csv("ops", "plumbus.v1", "Succeeded", json!({CSV_RECORD_ANNOTATION: "someone"}))];
    assert_eq!(reason(&record), Some(("SubscriptionNotInstalled", true)), "an Install's record is the Install's");
    let mut copy = v0_cluster();
    copy.csvs = vec![v0_csv("ops", "plumbus.v1", "Succeeded", json!({"olm.operatorNamespace": "elsewhere"}))];
    assert_eq!(reason(&copy), Some(("SubscriptionNotInstalled", true)), "a copy is not the operator");
    let mut elsewhere = v0_cluster();
    elsewhere.csvs = vec![v0_csv("dev", "plumbus.v1", "Succeeded", json!({}))];
    assert_eq!(reason(&elsewhere), Some(("SubscriptionNotInstalled", true)));
    let mut nothing_installed = v0_cluster();
    nothing_installed.subscriptions[0].status = None;
    assert_eq!(reason(&nothing_installed), Some(("SubscriptionNotInstalled", true)));
}

#[test]
fn a_takeover_install_waiting_for_approval_needs_a_person_then_adoption_goes_on() {
    let mut cluster = v0_cluster();
    let body =
        takeover_manifest(&cluster.subscriptions[0], "plumbus.v1", "uid-plumbus.v1", "registry.example/p@sha256:1");
    let mut install: Install = serde_json::from_value(body).unwrap();
    install.metadata.generation = Some(1);
    install.status = Some(
        serde_json::from_value(json!({"state": "PendingApproval", "observedGeneration": 1,
            "pending": {"count": 7, "permissions": []}}))
        .unwrap(),
    );
    cluster.installs = vec![install.clone()];
    let plan = &cluster.plan()[0];
    let blocked = plan.blocked.clone().unwrap();
    assert_eq!((blocked.reason, blocked.transient), ("InstallPendingApproval", false));
    assert!(
        blocked.message.contains("kubectl olmv2 approve plumbus.ops") && blocked.message.contains("7"),
        "{blocked:?}"
    );
    let takeover = plan.takeover.clone().unwrap();
    assert_eq!((takeover.csv.as_str(), takeover.to_create), ("plumbus.v1", false));
    // Approved and applied: adopted as any Subscription's Install.
    install.status.as_mut().unwrap().state = Some(crate::api::v2alpha1::InstallState::Installed);
    cluster.installs = vec![install];
    let plan = &cluster.plan()[0];
    assert_eq!(plan.blocked, None);
    assert_eq!(plan.operator.as_ref().map(|o| o.name.as_str()), Some("plumbus"));
    assert!(plan.takeover.is_some(), "the plan still says where it came from");
}

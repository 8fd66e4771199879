//! The CSV loop's decisions, without a cluster: OLM's phase machine, requirements and strategy.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::PolicyRule;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;

use super::phase::{set_phase, transition, Chain, Components, Observed, CONDITIONS_LIMIT};
use super::requirements::{requirements, Cluster};
use super::strategy::{check, deployments, Unhealthy, SPEC_HASH_LABEL};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use crate::bundle::gohash::policy_rule as go_json;
use crate::legacy::intersection::ApiReconciliation;
use crate::legacy::membership::Membership;
use crate::rbac::Rule;

fn now(seconds: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + seconds).expect("time"))
}

fn csv() -> ClusterServiceVersion {
    serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "plumbus.v1", "namespace": "ops", "uid": "csv-uid",
                     "annotations": {"olm.targetNamespaces": "", "alm-examples": "[]",
                                     "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
        "spec": {"install": {"strategy": "deployment", "spec": {
            "deployments": [{"name": "plumbus", "label": {"app": "plumbus"}, "spec": {
                "selector": {"matchLabels": {"app": "plumbus"}},
                "template": {"metadata": {"labels": {"app": "plumbus"}, "annotations": {"own": "kept"}},
                             "spec": {"serviceAccountName": "plumbus", "containers": [{"name": "m", "image": "i",
                                      "env": [{"name": "A", "value": "1"}]}]}}}}],
            "permissions": [{"serviceAccountName": "plumbus",
                             "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}],
            "clusterPermissions": [{"serviceAccountName": "plumbus",
                                    "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list"]}]}]}},
                 "customresourcedefinitions": {"owned": [{"name": "plumbuses.example.com", "version": "v1", "kind": "Plumbus"}]},
                 "installModes": [{"type": "AllNamespaces", "supported": true}]}}))
    .expect("csv")
}

fn observed() -> Observed {
    Observed {
        group_failure: None,
        annotations_missing: false,
        no_targets: false,
        install_modes: Ok(()),
        static_group: false,
        apis: ApiReconciliation::NoConflict,
        requirements: (true, Vec::new()),
        author: Ok(()),
        health: Ok(()),
        now: now(0),
        chain: Chain::default(),
        components: Components::default(),
    }
}

fn status(phase: CsvPhase, reason: &str) -> ClusterServiceVersionStatus {
    ClusterServiceVersionStatus {
        phase,
        reason: Some(reason.into()),
        last_transition_time: Some(now(0)),
        ..Default::default()
    }
}

#[test]
fn a_new_csv_walks_to_succeeded_with_olms_reasons() {
    let steps = [
        (CsvPhase::None, "", (CsvPhase::Pending, "RequirementsUnknown", "requirements not yet checked")),
        (
            CsvPhase::Pending,
            "RequirementsUnknown",
            (CsvPhase::InstallReady, "AllRequirementsMet", "all requirements found, attempting install"),
        ),
        (
            CsvPhase::InstallReady,
            "AllRequirementsMet",
            (CsvPhase::Installing, "InstallSucceeded", "waiting for install components to report healthy"),
        ),
        (
            CsvPhase::Installing,
            "InstallSucceeded",
            (CsvPhase::Succeeded, "InstallSucceeded", "install strategy completed with no errors"),
        ),
    ];
    for (phase, reason, (next, next_reason, message)) in steps {
        let outcome = transition(&status(phase, reason), observed());
        assert_eq!(outcome.phase, Some((next, next_reason, message.to_owned())), "from {phase:?}");
        assert_eq!(outcome.install, phase == CsvPhase::InstallReady);
        assert_eq!(outcome.api_roles, next == CsvPhase::Succeeded, "roles with Succeeded");
    }
}

#[test]
fn group_problems_fail_the_csv_and_heal_to_pending() {
    let outcome = transition(
        &status(CsvPhase::Succeeded, "InstallSucceeded"),
        Observed { group_failure: Membership::NoOperatorGroup.failure(), ..observed() },
    );
    assert_eq!(
        outcome.phase,
        Some((CsvPhase::Failed, "NoOperatorGroup", "csv in namespace with no operatorgroups".into()))
    );
    let unsupported = Observed {
        install_modes: Err((
            "UnsupportedOperatorGroup",
            "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace".into(),
        )),
        ..observed()
    };
    let outcome = transition(&status(CsvPhase::Pending, "RequirementsUnknown"), unsupported);
    assert_eq!(
        outcome.phase.map(|(phase, reason, _)| (phase, reason)),
        Some((CsvPhase::Failed, "UnsupportedOperatorGroup"))
    );
    let outcome = transition(&status(CsvPhase::Failed, "UnsupportedOperatorGroup"), observed());
    assert_eq!(
        outcome.phase,
        Some((CsvPhase::Pending, "RequirementsUnknown", "InstallModes now support target namespaces".into()))
    );
}

#[test]
fn missing_annotations_are_written_before_anything_else() {
    let outcome = transition(&status(CsvPhase::None, ""), Observed { annotations_missing: true, ..observed() });
    assert!(outcome.annotate);
    assert_eq!(outcome.phase, None);
    let outcome =
        transition(&status(CsvPhase::None, ""), Observed { annotations_missing: true, no_targets: true, ..observed() });
    assert_eq!(outcome.phase.map(|(_, reason, _)| reason), Some("NoTargetNamespaces"));
}

#[test]
fn provided_api_conflicts_fail_and_remove_the_deployments() {
    let outcome = transition(
        &status(CsvPhase::Succeeded, "InstallSucceeded"),
        Observed { apis: ApiReconciliation::Conflict, ..observed() },
    );
    assert_eq!(
        outcome.phase,
        Some((
            CsvPhase::Failed,
            "InterOperatorGroupOwnerConflict",
            "intersecting operatorgroups provide the same apis".into()
        ))
    );
    assert!(outcome.remove_deployments);
    // Already failing so: nothing more.
    let again = transition(
        &status(CsvPhase::Failed, "InterOperatorGroupOwnerConflict"),
        Observed { apis: ApiReconciliation::Conflict, ..observed() },
    );
    assert_eq!(again.phase, None);
    let added = transition(&status(CsvPhase::None, ""), Observed { apis: ApiReconciliation::Add, ..observed() });
    assert_eq!(added.group_apis, Some(ApiReconciliation::Add));
    let static_group = transition(
        &status(CsvPhase::None, ""),
        Observed { apis: ApiReconciliation::Add, static_group: true, ..observed() },
    );
    assert_eq!(static_group.phase.map(|(_, reason, _)| reason), Some("CannotModifyStaticOperatorGroupProvidedAPIs"));
    let healed = transition(&status(CsvPhase::Failed, "InterOperatorGroupOwnerConflict"), observed());
    assert_eq!(
        healed.phase.map(|(phase, _, message)| (phase, message)),
        Some((CsvPhase::Pending, "OperatorGroup no longer intersecting with conflicting owner".into()))
    );
}

#[test]
fn unmet_requirements_wait_in_pending_and_fail_a_succeeded_csv() {
    let unmet = || Observed { requirements: (false, Vec::new()), ..observed() };
    let outcome = transition(&status(CsvPhase::Pending, "RequirementsUnknown"), unmet());
    assert_eq!(
        outcome.phase,
        Some((CsvPhase::Pending, "RequirementsNotMet", "one or more requirements couldn't be found".into()))
    );
    assert!(outcome.requirement_status.is_some());
    let outcome = transition(&status(CsvPhase::Succeeded, "InstallSucceeded"), unmet());
    assert_eq!(outcome.phase, Some((CsvPhase::Failed, "RequirementsNotMet", "requirements no longer met".into())));
    let outcome = transition(&status(CsvPhase::Failed, "RequirementsNotMet"), unmet());
    assert_eq!(outcome.phase, Some((CsvPhase::Pending, "RequirementsNotMet", "requirements not met".into())));
}

#[test]
fn an_author_who_may_not_create_deployments_fails_the_install() {
    let outcome = transition(
        &status(CsvPhase::InstallReady, "AllRequirementsMet"),
        Observed { author: Err("nope".into()), ..observed() },
    );
    assert!(!outcome.install);
    assert_eq!(
        outcome.phase,
        Some((CsvPhase::Failed, "InstallComponentFailed", "install strategy failed: nope".into()))
    );
}

#[test]
fn a_failed_install_stays_failed_while_the_author_still_may_not_and_heals_once_they_may() {
    let failed = status(CsvPhase::Failed, "InstallComponentFailed");
    let refused = transition(&failed, Observed { author: Err("nope".into()), ..observed() });
    assert_eq!(refused.phase, None, "no round through Pending: nothing is written while nothing changed");
    assert!(!refused.install);
    let allowed = transition(&failed, observed());
    assert_eq!(
        allowed.phase.map(|(phase, reason, _)| (phase, reason)),
        Some((CsvPhase::Succeeded, "InstallSucceeded"))
    );
}

#[test]
fn health_moves_installing_and_succeeded_as_olm_does() {
    let waiting = Unhealthy::Waiting("waiting for deployment plumbus to become ready: x".into());
    let outcome = transition(
        &status(CsvPhase::Installing, "InstallSucceeded"),
        Observed { health: Err(waiting.clone()), ..observed() },
    );
    assert_eq!(
        outcome.phase,
        Some((
            CsvPhase::Installing,
            "InstallWaiting",
            "installing: waiting for deployment plumbus to become ready: x".into()
        ))
    );
    let late = Observed { health: Err(waiting.clone()), now: now(301), ..observed() };
    assert_eq!(
        transition(&status(CsvPhase::Installing, "InstallSucceeded"), late).phase,
        Some((CsvPhase::Failed, "InstallCheckFailed", "install timeout".into()))
    );
    let outcome =
        transition(&status(CsvPhase::Succeeded, "InstallSucceeded"), Observed { health: Err(waiting), ..observed() });
    assert_eq!(outcome.phase.map(|(phase, reason, _)| (phase, reason)), Some((CsvPhase::Failed, "ComponentUnhealthy")));
    let outdated = Observed { health: Err(Unhealthy::Outdated("deployment changed".into())), ..observed() };
    assert_eq!(
        transition(&status(CsvPhase::Succeeded, "InstallSucceeded"), outdated).phase.map(|(p, _, _)| p),
        Some(CsvPhase::InstallReady)
    );
    let healthy = transition(&status(CsvPhase::Succeeded, "InstallSucceeded"), observed());
    assert!(healthy.api_roles);
    let recovered = transition(&status(CsvPhase::Failed, "ComponentUnhealthy"), observed());
    assert_eq!(recovered.phase.map(|(phase, _, _)| phase), Some(CsvPhase::Succeeded));
}

#[test]
fn history_grows_on_a_new_phase_or_reason_and_keeps_twenty() {
    let mut current = ClusterServiceVersionStatus::default();
    current = set_phase(&current, (CsvPhase::Pending, "RequirementsNotMet", "a"), &now(1)).expect("changed");
    assert!(
        set_phase(&current, (CsvPhase::Pending, "RequirementsNotMet", "a"), &now(2)).is_none(),
        "unchanged: not written"
    );
    let message_only = set_phase(&current, (CsvPhase::Pending, "RequirementsNotMet", "b"), &now(3)).expect("changed");
    assert_eq!(message_only.conditions.len(), 1);
    assert_eq!(message_only.last_transition_time, Some(now(1)));
    for index in 0..30 {
        let phase = if index % 2 == 0 { CsvPhase::Failed } else { CsvPhase::Pending };
        current = set_phase(&current, (phase, "X", "m"), &now(10 + index)).expect("changed");
    }
    assert_eq!(current.conditions.len(), CONDITIONS_LIMIT);
    assert_eq!(current.conditions.last().map(|c| c.last_transition_time.clone()), Some(Some(now(39))));
}

#[test]
fn rules_print_as_go_marshals_them() {
    let rule: PolicyRule =
        serde_json::from_value(json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}))
            .expect("rule");
    assert_eq!(go_json(&rule), r#"{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}"#);
    let url: PolicyRule =
        serde_json::from_value(json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})).expect("rule");
    assert_eq!(go_json(&url), r#"{"verbs":["get"],"nonResourceURLs":["/metrics"]}"#);
}

fn crd(established: bool) -> CustomResourceDefinition {
    let status = if established { "True" } else { "False" };
    serde_json::from_value(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "plumbuses.example.com", "uid": "crd-uid"},
        "spec": {"group": "example.com", "names": {"plural": "plumbuses", "kind": "Plumbus"}, "scope": "Namespaced",
                 "versions": [{"name": "v1", "served": true, "storage": true}]},
        "status": {"conditions": [{"type": "Established", "status": status}, {"type": "NamesAccepted", "status": "True"}]}}))
    .expect("crd")
}

fn platform() -> super::platform::Platform<'static> {
    static SERVED: std::sync::OnceLock<std::collections::BTreeSet<(String, String, String)>> =
        std::sync::OnceLock::new();
    static SERVICES: std::sync::OnceLock<
        BTreeMap<String, k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>,
    > = std::sync::OnceLock::new();
    super::platform::Platform {
        server_version: Some("v1.33.0"),
        served: SERVED.get_or_init(Default::default),
        api_services: SERVICES.get_or_init(Default::default),
    }
}

#[test]
fn requirements_report_crds_accounts_and_rules() {
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "plumbus", "namespace": "ops", "uid": "sa-uid"}}))
            .expect("sa");
    let accounts: BTreeMap<String, ServiceAccount> = [("plumbus".to_owned(), account)].into();
    let crds: BTreeMap<String, CustomResourceDefinition> = [("plumbuses.example.com".to_owned(), crd(true))].into();
    let configmaps = || vec![Rule::resource(&["get"], &[""], &["configmaps"])];
    let held = move |_: &str| (configmaps(), Vec::new());
    let (met, statuses) =
        requirements(&csv(), &Cluster { crds: &crds, accounts: &accounts, held: &held, platform: platform() });
    assert!(!met, "the cluster rule is not held");
    assert_eq!(statuses[0].status, "Present");
    assert_eq!(statuses[0].message, "CRD is present and Established condition is true");
    let account = &statuses[1];
    assert_eq!((account.kind.as_str(), account.status.as_str()), ("ServiceAccount", "PresentNotSatisfied"));
    assert_eq!(account.message, "Policy rule not satisfied for service account");
    assert_eq!(account.uuid, None, "OLM v0 records the uid of a CRD, never of a ServiceAccount");
    let dependents: Vec<(&str, &str)> =
        account.dependents.iter().map(|d| (d.status.as_str(), d.message.as_deref().unwrap_or_default())).collect();
    assert_eq!(
        dependents,
        [
            ("Satisfied", r#"namespaced rule:{"verbs":["get"],"apiGroups":[""],"resources":["configmaps"]}"#),
            ("NotSatisfied", r#"cluster rule:{"verbs":["list"],"apiGroups":[""],"resources":["namespaces"]}"#),
        ]
    );
    let everything = |_: &str| (Rule::full_authority(), Rule::full_authority());
    let (met, _) =
        requirements(&csv(), &Cluster { crds: &crds, accounts: &accounts, held: &everything, platform: platform() });
    assert!(met);
    let missing = BTreeMap::new();
    let (met, statuses) = requirements(
        &csv(),
        &Cluster { crds: &missing, accounts: &BTreeMap::new(), held: &everything, platform: platform() },
    );
    assert!(!met);
    assert_eq!((statuses[0].status.as_str(), statuses[0].message.as_str()), ("NotPresent", "CRD is not present"));
    assert_eq!(
        (statuses[1].status.as_str(), statuses[1].message.as_str()),
        ("NotPresent", "Service account does not exist")
    );
    let unavailable: BTreeMap<String, CustomResourceDefinition> =
        [("plumbuses.example.com".to_owned(), crd(false))].into();
    let (_, statuses) = requirements(
        &csv(),
        &Cluster { crds: &unavailable, accounts: &accounts, held: &everything, platform: platform() },
    );
    assert_eq!(statuses[0].status, "PresentNotAvailable");
}

#[test]
fn deployments_carry_olms_labels_annotations_and_environment() {
    let deployment = &deployments(&csv())[0];
    let labels = &deployment["metadata"]["labels"];
    assert_eq!(labels["app"], "plumbus");
    assert_eq!(labels["olm.owner"], "plumbus.v1");
    assert_eq!(labels["olm.owner.kind"], "ClusterServiceVersion");
    assert_eq!(labels["olm.owner.namespace"], "ops");
    assert_eq!(labels["olm.managed"], "true");
    assert!(labels[SPEC_HASH_LABEL].is_string());
    let owner = &deployment["metadata"]["ownerReferences"][0];
    assert_eq!(
        (owner["kind"].as_str(), owner["controller"].as_bool(), owner["blockOwnerDeletion"].as_bool()),
        (Some("ClusterServiceVersion"), Some(false), Some(false))
    );
    let template = &deployment["spec"]["template"];
    assert_eq!(template["metadata"]["annotations"]["own"], "kept");
    assert_eq!(template["metadata"]["annotations"]["alm-examples"], "[]");
    assert_eq!(template["metadata"]["annotations"]["olm.targetNamespaces"], "");
    assert!(template["metadata"]["annotations"].get("kubectl.kubernetes.io/last-applied-configuration").is_none());
    assert_eq!(
        template["spec"]["containers"][0]["env"],
        json!([{"name": "A", "value": "1"}, {"name": "OPERATOR_CONDITION_NAME", "value": "plumbus.v1"}])
    );
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 1);
}

fn live(ready: bool, hash: &str, targets: &str) -> Deployment {
    let available = if ready { "True" } else { "False" };
    serde_json::from_value(json!({"metadata": {"name": "plumbus", "generation": 1, "labels": {SPEC_HASH_LABEL: hash}},
        "spec": {"selector": {}, "template": {"metadata": {"annotations": {"olm.targetNamespaces": targets}}}},
        "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1,
                   "conditions": [{"type": "Available", "status": available, "message": "Deployment does not have minimum availability."}]}}))
    .expect("deployment")
}

#[test]
fn the_check_finds_missing_outdated_and_rolling_deployments() {
    let csv = csv();
    let hash = deployments(&csv)[0]["metadata"]["labels"][SPEC_HASH_LABEL].as_str().expect("hash").to_owned();
    assert_eq!(check(&csv, &BTreeMap::new()), Err(Unhealthy::Missing("missing deployment with name=plumbus".into())));
    let found = |deployment: Deployment| BTreeMap::from([("plumbus".to_owned(), deployment)]);
    assert_eq!(check(&csv, &found(live(true, &hash, ""))), Ok(()));
    assert_eq!(
        check(&csv, &found(live(false, &hash, ""))),
        Err(Unhealthy::Waiting("waiting for deployment plumbus to become ready: deployment \"plumbus\" not available: Deployment does not have minimum availability.".into()))
    );
    assert!(
        matches!(check(&csv, &found(live(true, "old", ""))), Err(Unhealthy::Outdated(message)) if message.starts_with("deployment changed old hash=old"))
    );
    assert!(
        matches!(check(&csv, &found(live(true, &hash, "a"))), Err(Unhealthy::Outdated(message)) if message.starts_with("unexpected annotation on deployment"))
    );
}

fn chain(replaces: Option<(&str, CsvPhase)>, replaced_by: Option<(&str, CsvPhase)>) -> Chain {
    Chain {
        replaces: replaces.map(|(name, phase)| (name.to_owned(), phase)),
        replaced_by: replaced_by.map(|(name, phase)| (name.to_owned(), phase)),
        ..Chain::default()
    }
}

#[test]
fn an_upgrade_replaces_the_old_csv_as_olm_does() {
    // The new one waits in Pending until the old one steps aside.
    let waiting = Observed { chain: chain(Some(("old", CsvPhase::Succeeded)), None), ..observed() };
    let outcome = transition(&status(CsvPhase::Pending, "RequirementsUnknown"), waiting);
    assert_eq!(outcome.phase, None);
    assert!(outcome.requirement_status.is_some());
    // The old one sees it and goes Replacing.
    let old = Observed { chain: chain(None, Some(("new", CsvPhase::Pending))), ..observed() };
    let outcome = transition(&status(CsvPhase::Succeeded, "InstallSucceeded"), old);
    assert_eq!(outcome.phase, Some((CsvPhase::Replacing, "BeingReplaced", "being replaced by csv: new".into())));
    // The new one installs.
    let ready = Observed { chain: chain(Some(("old", CsvPhase::Replacing)), None), ..observed() };
    let outcome = transition(&status(CsvPhase::Pending, "RequirementsUnknown"), ready);
    assert_eq!(outcome.phase.map(|(phase, _, _)| phase), Some(CsvPhase::InstallReady));
    // The old one is deleted once the new one Succeeded, not before.
    let pending = Observed { chain: chain(None, Some(("new", CsvPhase::Installing))), ..observed() };
    assert_eq!(transition(&status(CsvPhase::Replacing, "BeingReplaced"), pending).phase, None);
    let done = Observed { chain: chain(None, Some(("new", CsvPhase::Succeeded))), ..observed() };
    let outcome = transition(&status(CsvPhase::Replacing, "BeingReplaced"), done);
    assert_eq!(
        outcome.phase,
        Some((
            CsvPhase::Deleting,
            "Replaced",
            "has been replaced by a newer ClusterServiceVersion that has successfully installed.".into()
        ))
    );
    assert!(transition(&status(CsvPhase::Deleting, "Replaced"), observed()).delete);
    // A middle CSV of a chain waits for the oldest to go.
    let middle = Observed {
        chain: chain(Some(("oldest", CsvPhase::Replacing)), Some(("new", CsvPhase::Succeeded))),
        ..observed()
    };
    assert_eq!(transition(&status(CsvPhase::Replacing, "BeingReplaced"), middle).phase, None);
}

#[test]
fn a_failed_csv_is_replaced_only_with_fail_forward_and_owner_conflicts_fail() {
    let replaced = || chain(None, Some(("new", CsvPhase::Pending)));
    let plain = Observed { chain: replaced(), health: Err(Unhealthy::Missing("m".into())), ..observed() };
    let outcome = transition(&status(CsvPhase::Failed, "ComponentUnhealthy"), plain);
    assert_ne!(outcome.phase.map(|(phase, _, _)| phase), Some(CsvPhase::Replacing));
    let forward = Observed { chain: Chain { fail_forward: true, ..replaced() }, ..observed() };
    let outcome = transition(&status(CsvPhase::Failed, "ComponentUnhealthy"), forward);
    assert_eq!(
        outcome.phase,
        Some((
            CsvPhase::Replacing,
            "BeingReplaced",
            "Fail Forward is enabled, allowing Failed csv to be replaced by csv: new".into()
        ))
    );
    let conflict = Observed { chain: Chain { crd_owner_conflict: true, ..Chain::default() }, ..observed() };
    let outcome = transition(&status(CsvPhase::Pending, "RequirementsUnknown"), conflict);
    assert_eq!(outcome.phase, Some((CsvPhase::Failed, "OwnerConflict", "conflicting CRD owner in namespace".into())));
}

#[path = "components_phase_tests.rs"]
mod components;

#[test]
fn only_a_namespace_coming_or_going_wakes_the_csvs() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::PartialObjectMeta;
    let namespace = |uid: &str, labels: &[(&str, &str)], deleting: bool| {
        let mut namespace = PartialObjectMeta::<Namespace>::default();
        namespace.metadata.name = Some("team-a".into());
        namespace.metadata.uid = Some(uid.into());
        namespace.metadata.labels = Some(labels.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect());
        namespace.metadata.deletion_timestamp = deleting.then(|| now(0));
        super::arrival_or_deletion(&namespace)
    };
    let first = namespace("uid-1", &[], false);
    assert_eq!(first, namespace("uid-1", &[("olm.operatorgroup.uid/g", "")], false), "a label is no news to a CSV");
    assert_ne!(first, namespace("uid-1", &[], true), "its deletion started");
    assert_ne!(first, namespace("uid-2", &[], false), "a namespace of the same name made again");
}

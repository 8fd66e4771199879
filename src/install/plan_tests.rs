use serde_json::json;

use super::*;
use crate::api::v2alpha1::ContentType;
use crate::install::gate::Gate;

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(key, value)| ((*key).to_owned(), (*value).to_owned())).collect()
}

fn content(digest: &str) -> Vec<ResolvedContent> {
    vec![ResolvedContent {
        content_type: ContentType::Raw,
        manifest_image: None,
        digest: digest.into(),
        config_digest: None,
    }]
}

fn rule() -> PendingPermission {
    serde_json::from_value(
        json!({"scope": "Cluster", "apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}),
    )
    .unwrap()
}

#[test]
fn a_content_change_needs_a_person_before_a_manual_install_does() {
    assert_eq!(person_required(&annotations(&[])), (None, None));
    let manual = annotations(&[(MANUAL_APPROVAL_ANNOTATION, "true")]);
    assert_eq!(person_required(&manual), (Some(PersonRequired::Manual), None));
    let not_manual = annotations(&[(MANUAL_APPROVAL_ANNOTATION, "false")]);
    assert_eq!(person_required(&not_manual), (None, None));
    let changed = annotations(&[(MANUAL_APPROVAL_ANNOTATION, "true"), (CONTENT_CHANGED_BY_ANNOTATION, "bob")]);
    assert_eq!(person_required(&changed), (Some(PersonRequired::ContentChanged), Some("bob".to_owned())));
}

#[test]
fn the_same_content_is_the_recorded_one_at_the_recorded_generation() {
    let previous = InstallStatus { resolved: content("a"), observed_generation: Some(2), ..InstallStatus::default() };
    assert!(same_content(&previous, &content("a"), Some(2)));
    assert!(!same_content(&previous, &content("a"), Some(3)), "a new generation may move the content");
    assert!(!same_content(&previous, &content("b"), Some(2)));
}

#[test]
fn a_grant_or_new_content_is_let_through_and_a_reapply_is_not() {
    assert!(!lets_through(&[], &content("a"), &content("a")), "drift repaired, resync: no approval relied on");
    assert!(lets_through(&[rule()], &content("a"), &content("a")));
    assert!(lets_through(&[], &content("b"), &content("a")));
    assert!(lets_through(&[], &content("a"), &[]), "content never let through");
}

fn crd(versions: &[&str], stored: &[&str], labels: serde_json::Value) -> Value {
    let versions: Vec<_> = versions.iter().map(|name| json!({"name": name})).collect();
    json!({"kind": "CustomResourceDefinition", "metadata": {"name": "plumbai.example.com", "labels": labels},
        "spec": {"versions": versions}, "status": {"storedVersions": stored}})
}

#[test]
fn an_existing_object_is_applied_only_when_the_install_owns_it_or_takes_it_over() {
    let config_map = json!({"kind": "ConfigMap", "metadata": {"name": "x"}});
    assert_eq!(existing(&config_map, &config_map, false, false, false), Existing::NotOwned);
    let applied = Existing::Apply { disown: false, check_crd: false };
    assert_eq!(existing(&config_map, &config_map, true, false, false), applied, "applied before");
    assert_eq!(existing(&config_map, &config_map, false, true, false), applied, "made by a pass that failed after");
    assert_eq!(existing(&config_map, &config_map, false, false, true), applied, "taken over, without OLM's labels");
    let olm = json!({"kind": "ConfigMap", "metadata": {"name": "x", "labels": {"olm.owner": "plumbus.v1"}}});
    assert_eq!(existing(&config_map, &olm, false, false, true), Existing::Apply { disown: true, check_crd: false });
    // OLM's labels kept when the content itself carries them; not disowned when not taken over.
    assert_eq!(existing(&olm, &olm, false, false, true), applied);
    assert_eq!(existing(&config_map, &olm, true, false, false), applied);
}

#[test]
fn a_crd_is_checked_against_its_existing_resources_unless_it_drops_a_stored_version() {
    let live = crd(&["v1"], &["v1"], json!({}));
    let kept = crd(&["v1", "v2"], &[], json!({}));
    assert_eq!(existing(&kept, &live, true, false, false), Existing::Apply { disown: false, check_crd: true });
    let dropped = crd(&["v2"], &[], json!({}));
    assert_eq!(existing(&dropped, &live, true, false, false), Existing::DropsStoredVersion("v1".into()));
    assert_eq!(existing(&dropped, &live, false, false, false), Existing::NotOwned, "ownership is asked first");
}

#[test]
fn the_csvs_succeed_once_nothing_rolls_out() {
    assert_eq!(
        csv_phase(&[]),
        ("Succeeded", "InstallSucceeded", "install strategy completed with no errors".to_owned())
    );
    assert_eq!(
        csv_phase(&["a".into(), "b".into()]),
        ("Installing", "InstallWaiting", "waiting for deployments a, b to become available".to_owned())
    );
}

fn object(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "operators"}})
}

#[test]
fn the_apply_step_reads_what_it_judges_and_everything_when_it_compares() {
    let config_map = object("ConfigMap", "x");
    let applied = vec![applied_ref(&config_map)];
    assert!(!must_read(&config_map, &applied, false), "applied before: nothing to judge");
    assert!(must_read(&config_map, &[], false), "not applied before: it may be someone else's");
    assert!(must_read(&config_map, &applied, true), "a settled Install compares every object");
    let crd = crd(&["v1"], &[], json!({}));
    assert!(must_read(&crd, &[applied_ref(&crd)], false), "a CRD's stored versions and resources");
}

#[test]
fn live_objects_that_hold_what_was_applied_are_not_drift_and_a_missing_label_is_relabelled() {
    let mut wanted = object("ConfigMap", "x");
    wanted["data"] = json!({"a": "1"});
    let unlabelled = wanted.clone();
    wanted["metadata"]["labels"] = json!({"operators.coreos.com/plumbus": ""});
    let label = Some("operators.coreos.com/plumbus");
    let same = compare_with_live(&[wanted.clone()], &[Some(wanted.clone())], label);
    assert_eq!(same, (vec![], false));
    assert_eq!(compare_with_live(&[wanted.clone()], &[Some(unlabelled)], label), (vec![], true));
    let mut changed = wanted.clone();
    changed["data"]["a"] = json!("2");
    let diverged = vec!["ConfigMap operators/x".to_owned()];
    assert_eq!(compare_with_live(&[wanted.clone()], &[Some(changed)], label), (diverged.clone(), false));
    assert_eq!(compare_with_live(&[wanted], &[None], label), (diverged, false), "deleted is drift too");
}

fn ownership<'a>(applied_before: &'a [AppliedObject], taken: Option<&'a (Takeover, TakenCsv)>) -> Ownership<'a> {
    Ownership { applied_before, install: "plumbus", uid: "install-uid", taken }
}

#[test]
fn the_apply_plan_refuses_someone_elses_object_and_prunes_what_the_content_dropped() {
    let mine = object("ConfigMap", "mine");
    let theirs = object("ConfigMap", "theirs");
    let dropped = object("Secret", "dropped");
    let before = vec![applied_ref(&mine), applied_ref(&dropped)];
    let objects = vec![mine.clone(), theirs.clone()];
    let refused = admit(&objects, &[None, Some(theirs.clone())], &ownership(&before, None));
    assert!(
        matches!(refused, Err(ApplyError::NotOwned { ref object }) if object == "ConfigMap operators/theirs"),
        "{refused:?}"
    );
    let plan = admit(&objects, &[None, None], &ownership(&before, None)).unwrap();
    assert_eq!(plan, ApplyPlan { prune: vec![applied_ref(&dropped)], ..ApplyPlan::default() });
    let mut created = theirs.clone();
    created["metadata"]["ownerReferences"] = json!([{"uid": "install-uid"}]);
    let plan = admit(&objects, &[None, Some(created)], &ownership(&before, None)).unwrap();
    assert!(plan.check_crds.is_empty() && plan.disown.is_empty(), "made by a pass that failed halfway");
}

#[test]
fn the_apply_plan_checks_crds_refuses_a_dropped_stored_version_and_disowns_what_it_takes_over() {
    let live = crd(&["v1"], &["v1"], json!({}));
    let kept = crd(&["v1", "v2"], &[], json!({}));
    let before = vec![applied_ref(&kept)];
    let plan = admit(std::slice::from_ref(&kept), &[Some(live.clone())], &ownership(&before, None)).unwrap();
    assert_eq!(plan.check_crds, vec![0]);
    let dropped = crd(&["v2"], &[], json!({}));
    let refused = admit(&[dropped], &[Some(live)], &ownership(&before, None));
    assert!(matches!(refused, Err(ApplyError::UnsafeCrdUpgrade { ref version, .. }) if version == "v1"), "{refused:?}");
    // A cluster-scoped object OLM v0 labelled for the CSV taken over: applied over, then its labels removed.
    let takeover = Takeover { namespace: "operators".into(), name: "plumbus.v1".into(), uid: "csv-uid".into() };
    let taken = (takeover, TakenCsv { owned_crds: Default::default(), copies: Default::default() });
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}});
    let mut labelled = role.clone();
    labelled["metadata"]["labels"] = json!({"olm.owner": "plumbus.v1", "olm.owner.namespace": "operators",
        "olm.owner.kind": "ClusterServiceVersion"});
    let plan = admit(std::slice::from_ref(&role), &[Some(labelled.clone())], &ownership(&[], Some(&taken))).unwrap();
    assert_eq!(plan.disown, vec![0]);
    assert!(admit(&[role], &[Some(labelled)], &ownership(&[], None)).is_err(), "not taken over: someone else's");
}

fn observed<'a>(
    previous: &'a InstallStatus,
    resolved: &'a [ResolvedContent],
    missing: &'a [PendingPermission],
) -> Observed<'a> {
    Observed {
        approval: Approval::Unapproved,
        generation: Some(1),
        previous,
        policy: None,
        resolved,
        objects: &[],
        to_approve: missing,
        follows: &[],
        needed: missing,
        own_grants: &[],
        person: None,
    }
}

#[test]
fn the_decision_shows_what_is_missing_and_holds_content_over_a_policy() {
    let previous = InstallStatus::default();
    let resolved = content("a");
    let missing = [rule()];
    let decision = decide(&observed(&previous, &resolved, &missing));
    assert!(matches!(decision.gate, Gate::AwaitApproval { ref pending, .. } if pending == &missing), "{decision:?}");
    assert_eq!(decision.held, None, "no policy");
    assert!(!decision.same_content);
    let nothing = decide(&observed(&previous, &resolved, &[]));
    assert_eq!(nothing.gate, Gate::Apply { grant: vec![] });
    let policy: PolicyStatus = serde_json::from_value(json!({"state": "Exceeds", "violations": [
        {"policy": "p", "message": "create configmaps is over the ceiling"}]}))
    .unwrap();
    let over = decide(&Observed { policy: Some(&policy), ..observed(&previous, &resolved, &missing) });
    assert!(over.held.is_some(), "new content over a policy is held: {over:?}");
    let settled =
        InstallStatus { resolved: resolved.clone(), observed_generation: Some(1), ..InstallStatus::default() };
    assert!(decide(&observed(&settled, &resolved, &[])).same_content);
    let own = [rule()];
    let granted = decide(&Observed { own_grants: &own, ..observed(&previous, &resolved, &[]) }).granted;
    assert_eq!(granted, own, "what the grants say counts as granted, recorded or not");
}

#[test]
fn a_settled_install_whose_objects_hold_writes_nothing_and_one_changed_is_applied_again() {
    let config_map = object("ConfigMap", "x");
    let before = vec![applied_ref(&config_map)];
    let objects = vec![config_map.clone()];
    let held = decide_apply(&objects, &[Some(config_map.clone())], true, None, &ownership(&before, None));
    assert!(matches!(held, ApplyDecision::Unchanged), "{held:?}");
    let gone = decide_apply(&objects, &[None], true, None, &ownership(&before, None));
    assert!(
        matches!(gone, ApplyDecision::Apply { ref diverged, .. } if diverged == &["ConfigMap operators/x".to_owned()]),
        "{gone:?}"
    );
    let first = decide_apply(&objects, &[None], false, None, &ownership(&[], None));
    assert!(
        matches!(first, ApplyDecision::Apply { ref diverged, .. } if diverged.is_empty()),
        "not compared: {first:?}"
    );
    let theirs = decide_apply(&objects, &[Some(config_map.clone())], false, None, &ownership(&[], None));
    assert!(matches!(theirs, ApplyDecision::Refused(ApplyError::NotOwned { .. })), "{theirs:?}");
}

fn plumbus_crd(versions: Value) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "plumbi.example.com"},
        "spec": {"group": "example.com", "names": {"kind": "Plumbus", "plural": "plumbi"}, "versions": versions}})
}

#[test]
fn an_object_of_a_version_the_contents_crd_adds_is_read_at_a_version_served_now() {
    let resource =
        json!({"apiVersion": "example.com/v2", "kind": "Plumbus", "metadata": {"name": "p", "namespace": "n"}});
    let content_crd =
        plumbus_crd(json!([{"name": "v1", "served": true}, {"name": "v2", "served": true, "storage": true}]));
    let live_crd =
        plumbus_crd(json!([{"name": "v1", "served": true, "storage": true}, {"name": "v0", "served": true}]));
    let read = read_at(&resource, &[(&content_crd, Some(&live_crd))]).expect("read");
    assert_eq!(read.api_version, "example.com/v1", "the live CRD's stored version: v2 is not served yet");
    assert_eq!((read.name.as_str(), read.namespace.as_deref()), ("p", Some("n")));
    let served = plumbus_crd(json!([{"name": "v2", "served": true, "storage": true}]));
    assert_eq!(read_at(&resource, &[(&content_crd, Some(&served))]), Some(applied_ref(&resource)), "served: as it is");
    assert_eq!(read_at(&resource, &[(&content_crd, None)]), None, "no CRD yet: nothing of its kind exists");
    let config_map = object("ConfigMap", "x");
    assert_eq!(read_at(&config_map, &[(&content_crd, None)]), Some(applied_ref(&config_map)), "not the content's API");
}

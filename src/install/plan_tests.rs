use serde_json::json;

use super::*;
use crate::api::v2alpha1::ContentType;

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

//! Copied CSVs as OLM v0 makes them (`csvCopyPrototype`, `syncCopyCSV`, `removeDanglingChildCSVs`): a copy of an
//! operator's CSV in every namespace its group targets, so that users of those namespaces see the operator
//! (`kubectl get csv` there, the console), its phase mirrored and its reason `Copied`. The `OLMConfig` named
//! `cluster` can turn them off for groups targeting every namespace (they then stay only in the namespaces given to
//! `--protectedCopiedCSVNamespaces`), which is what keeps memory and API traffic flat in the namespace count.

use std::collections::{BTreeMap, BTreeSet};

use kube::api::ObjectMeta;

use super::membership::{is_copied, is_install_record, COPIED_FROM_LABEL, COPIED_REASON};
use crate::api::v1::{OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};
use crate::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use crate::api::v2alpha1::CREATOR_ANNOTATION;

/// The condition type, reasons and messages of the `OLMConfig`, and the event of a CSV whose copies are off.
pub const DISABLED_COPIED_CSVS: &str = "DisabledCopiedCSVs";
pub const COPIED_CSVS_ENABLED: &str = "CopiedCSVsEnabled";
pub const COPIED_CSVS_DISABLED: &str = "CopiedCSVsDisabled";

/// Reasons of a CSV that is not copied (OLM's `uncopiableReasons`).
const UNCOPIABLE_REASONS: &[&str] = &[
    COPIED_REASON,
    "InvalidInstallModes",
    "NoTargetNamespaces",
    "UnsupportedOperatorGroup",
    "NoOperatorGroup",
    "TooManyOperatorGroups",
    "InterOperatorGroupOwnerConflict",
    "CannotModifyStaticOperatorGroupProvidedAPIs",
];

/// Whether `csv` is not copied: not yet processed, or failing for a reason about its group (OLM's `IsUncopiable`).
pub fn is_uncopiable(csv: &ClusterServiceVersion) -> bool {
    let status = csv.status.clone().unwrap_or_default();
    status.phase == CsvPhase::None
        || status.reason.as_deref().is_some_and(|reason| UNCOPIABLE_REASONS.contains(&reason))
}

/// The copy of `original` (in no namespace yet): its name, annotations and labels (without `olm.targetNamespaces`,
/// the client's last-applied copy, the `operators.coreos.com/` component labels and, unlike OLM, the author record,
/// which names a person to every reader of the namespace), `olm.copiedFrom`, its whole spec, and its status with
/// reason `Copied`.
pub fn prototype(original: &ClusterServiceVersion) -> ClusterServiceVersion {
    let namespace = original.metadata.namespace.clone().unwrap_or_default();
    let dropped =
        [TARGET_NAMESPACES_ANNOTATION, "kubectl.kubernetes.io/last-applied-configuration", CREATOR_ANNOTATION];
    let annotations: BTreeMap<String, String> = original
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(key, _)| !dropped.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    let mut labels: BTreeMap<String, String> = original
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(key, _)| !key.starts_with("operators.coreos.com/"))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    labels.insert(COPIED_FROM_LABEL.to_owned(), namespace.clone());
    let mut status = original.status.clone().unwrap_or_default();
    status.reason = Some(COPIED_REASON.to_owned());
    status.message = Some(format!("The operator is running in {namespace} but is managing this namespace"));
    ClusterServiceVersion {
        metadata: ObjectMeta {
            name: original.metadata.name.clone(),
            annotations: Some(annotations),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: original.spec.clone(),
        status: Some(status),
    }
}

/// What a copy on the cluster lacks of its prototype: its metadata and spec, its status, or both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Drift {
    pub object: bool,
    pub status: bool,
}

/// How `copy` differs from `prototype` (labels, annotations and spec; status). Anything added to a copy by hand
/// counts: OLM replaces a copy whole, so a tampered one is put back.
pub fn drift(copy: &ClusterServiceVersion, prototype: &ClusterServiceVersion) -> Drift {
    let labels = |csv: &ClusterServiceVersion| csv.metadata.labels.clone().unwrap_or_default();
    let annotations = |csv: &ClusterServiceVersion| csv.metadata.annotations.clone().unwrap_or_default();
    let spec = |csv: &ClusterServiceVersion| serde_json::to_value(&csv.spec).unwrap_or_default();
    let status = |csv: &ClusterServiceVersion| serde_json::to_value(&csv.status).unwrap_or_default();
    Drift {
        object: labels(copy) != labels(prototype)
            || annotations(copy) != annotations(prototype)
            || spec(copy) != spec(prototype),
        status: status(copy) != status(prototype),
    }
}

/// The namespaces `original` must have copies in: none for a group of its own namespace only; otherwise the existing
/// namespaces of its group's targets (every namespace for a global group) but its own, unless copies are disabled
/// and the group is global: then only the protected namespaces.
pub fn copy_namespaces(
    original_namespace: &str,
    group_namespaces: &[String],
    existing: &BTreeSet<String>,
    enabled: bool,
    protected: &BTreeSet<String>,
) -> BTreeSet<String> {
    let global = group_namespaces.iter().any(String::is_empty);
    if group_namespaces == [original_namespace] || group_namespaces.is_empty() {
        return BTreeSet::new();
    }
    let wanted: BTreeSet<String> = if global && !enabled {
        protected.clone()
    } else if global {
        existing.clone()
    } else {
        group_namespaces.iter().cloned().collect()
    };
    wanted.into_iter().filter(|namespace| namespace != original_namespace && existing.contains(namespace)).collect()
}

/// Whether a copy must go, as OLM's `removeDanglingChildCSVs` decides: it names no operator namespace, its original
/// (`parent`) is gone, failed on a provided-API conflict, no longer targets the copy's namespace, or lives in it.
pub fn dangling(copy: &ClusterServiceVersion, parent: Option<&ClusterServiceVersion>) -> bool {
    is_copied(copy) && dangling_copy(&copy.metadata, parent)
}

/// [`dangling`] of an object known to be a copy (labelled `olm.copiedFrom`, as the copied-CSV loop's watch selects
/// them: `is_copied` holds for it whatever its status says), judged on its metadata alone.
pub fn dangling_copy(copy: &ObjectMeta, parent: Option<&ClusterServiceVersion>) -> bool {
    let annotations = copy.annotations.clone().unwrap_or_default();
    if !annotations.contains_key(OPERATOR_NAMESPACE_ANNOTATION) {
        return true;
    }
    let Some(parent) = parent.filter(|parent| !is_copied(parent)) else { return true };
    let status = parent.status.clone().unwrap_or_default();
    if status.phase == CsvPhase::Failed && status.reason.as_deref() == Some("InterOperatorGroupOwnerConflict") {
        return true;
    }
    let namespace = copy.namespace.clone().unwrap_or_default();
    if let Some(targets) =
        parent.metadata.annotations.as_ref().map(|a| a.get(TARGET_NAMESPACES_ANNOTATION).cloned().unwrap_or_default())
    {
        let targets: BTreeSet<&str> = targets.split(',').collect();
        if !targets.contains("") && !targets.contains(namespace.as_str()) {
            return true;
        }
    }
    parent.metadata.namespace.as_deref() == Some(namespace.as_str())
}

/// What the copied-CSV loop does with a copy, judged on its metadata and its original as a store holds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// It holds what this process wrote, or its original is not copied: nothing to do.
    Keep,
    /// Changed by someone else (by hand, or before this process started): its original's copies are synced again,
    /// which puts it back where it drifted.
    SyncOriginal,
    /// Its original is an Install record: it goes once the Install is an Operator's (`adopted_copies`).
    AdoptedRecord,
    /// The store has no original for it or says it dangles: judged again on the copy and the original read live,
    /// as a store may lag, before anything is deleted; so is a copy of an original being deleted.
    ReadLive,
}

/// Judges the copy `copy` (labelled `olm.copiedFrom`) given its original as stored and whether it is at or before
/// this process's last write of it (`own`).
pub fn judge(copy: &ObjectMeta, stored: Option<&ClusterServiceVersion>, own: bool) -> Judgement {
    match stored {
        // An original being deleted may be gone already; its deletion reached this loop by a watch of its own.
        Some(parent) if parent.metadata.deletion_timestamp.is_none() && !dangling_copy(copy, Some(parent)) => {
            if is_install_record(parent) {
                Judgement::AdoptedRecord
            } else if own || is_uncopiable(parent) {
                Judgement::Keep
            } else {
                Judgement::SyncOriginal
            }
        }
        _ => Judgement::ReadLive,
    }
}

/// The `OLMConfig` condition for copies, given whether they are enabled and whether every global group's operators
/// have exactly the copies they should (OLM's `getCopiedCSVsCondition`): (status, reason, message).
pub fn olm_config_condition(enabled: bool, all_as_expected: bool) -> (&'static str, &'static str, &'static str) {
    match (enabled, all_as_expected) {
        (true, true) => ("False", COPIED_CSVS_ENABLED, "Copied CSVs are enabled and present across the cluster"),
        (true, false) => {
            ("False", COPIED_CSVS_ENABLED, "Copied CSVs are enabled and at least one copied CSVs is missing")
        }
        (false, false) => (
            "False",
            COPIED_CSVS_DISABLED,
            "Copied CSVs are disabled and at least one unexpected copied CSV was found for an operator installed in AllNamespace mode",
        ),
        (false, true) => (
            "True",
            COPIED_CSVS_DISABLED,
            "Copied CSVs are disabled and no unexpected copied CSVs were found for operators installed in AllNamespace mode",
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn original() -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "plumbus.v1", "namespace": "ops", "uid": "u",
                "annotations": {"olm.targetNamespaces": "", "olm.operatorNamespace": "ops", "olm.operatorGroup": "og",
                                "kubectl.kubernetes.io/last-applied-configuration": "{}", CREATOR_ANNOTATION: "{}", "alm-examples": "[]"},
                "labels": {"operators.coreos.com/plumbus.ops": "", "olm.api.1": "provided"}},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}, "displayName": "Plumbus"},
            "status": {"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"}}))
        .expect("csv")
    }

    #[test]
    fn a_copy_keeps_spec_and_phase_and_says_where_the_operator_runs() {
        let copy = prototype(&original());
        let annotations = copy.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(
            annotations.keys().collect::<Vec<_>>(),
            ["alm-examples", "olm.operatorGroup", "olm.operatorNamespace"]
        );
        let labels = copy.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("olm.copiedFrom").map(String::as_str), Some("ops"));
        assert_eq!(labels.get("olm.api.1").map(String::as_str), Some("provided"));
        assert!(!labels.contains_key("operators.coreos.com/plumbus.ops"));
        let status = copy.status.clone().unwrap_or_default();
        assert_eq!(status.phase, CsvPhase::Succeeded);
        assert_eq!(status.reason.as_deref(), Some("Copied"));
        assert_eq!(status.message.as_deref(), Some("The operator is running in ops but is managing this namespace"));
        assert_eq!(copy.spec, original().spec);
        assert!(is_copied(&copy));
    }

    #[test]
    fn drift_sees_tampering_of_metadata_spec_and_status() {
        let copy = prototype(&original());
        assert_eq!(drift(&copy, &copy), Drift::default());
        let mut tampered = copy.clone();
        tampered.metadata.labels.get_or_insert_default().insert("extra".into(), "x".into());
        assert_eq!(drift(&tampered, &copy), Drift { object: true, status: false });
        let mut phase = copy.clone();
        phase.status.get_or_insert_default().phase = CsvPhase::Failed;
        assert_eq!(drift(&phase, &copy), Drift { object: false, status: true });
    }

    #[test]
    fn copies_go_where_the_group_targets_unless_disabled_for_global_groups() {
        let existing: BTreeSet<String> = ["ops", "a", "b", "c"].map(String::from).into();
        let protected: BTreeSet<String> = ["c", "ops", "gone"].map(String::from).into();
        let all = vec![String::new()];
        assert_eq!(copy_namespaces("ops", &all, &existing, true, &protected), ["a", "b", "c"].map(String::from).into());
        assert_eq!(copy_namespaces("ops", &all, &existing, false, &protected), ["c"].map(String::from).into());
        let some = vec!["a".to_owned(), "ops".to_owned(), "missing".to_owned()];
        assert_eq!(copy_namespaces("ops", &some, &existing, false, &protected), ["a"].map(String::from).into());
        assert!(copy_namespaces("ops", &["ops".to_owned()], &existing, true, &protected).is_empty());
    }

    #[test]
    fn dangling_copies_are_those_olm_removes() {
        let parent = original();
        let mut copy = prototype(&parent);
        copy.metadata.namespace = Some("a".into());
        assert!(!dangling(&copy, Some(&parent)));
        assert!(dangling(&copy, None), "original gone");
        let mut conflicted = parent.clone();
        conflicted.status = Some(
            serde_json::from_value(json!({"phase": "Failed", "reason": "InterOperatorGroupOwnerConflict"}))
                .expect("status"),
        );
        assert!(dangling(&copy, Some(&conflicted)));
        let mut narrowed = parent.clone();
        narrowed.metadata.annotations.get_or_insert_default().insert("olm.targetNamespaces".into(), "b,c".into());
        assert!(dangling(&copy, Some(&narrowed)));
        let mut unannotated = copy.clone();
        unannotated.metadata.annotations.get_or_insert_default().remove("olm.operatorNamespace");
        assert!(dangling(&unannotated, Some(&parent)));
        assert!(!dangling(&parent, None), "an original is never dangling");
        for (copy, parent) in [(&copy, Some(&parent)), (&copy, None), (&copy, Some(&narrowed)), (&unannotated, None)] {
            assert_eq!(dangling_copy(&copy.metadata, parent), dangling(copy, parent), "a copy's metadata says as much");
        }
    }

    #[test]
    fn a_copy_someone_else_changed_syncs_its_original_and_a_doubtful_one_is_read_live() {
        let parent = original();
        let mut copy = prototype(&parent);
        copy.metadata.namespace = Some("a".into());
        let copy = &copy.metadata;
        assert_eq!(judge(copy, Some(&parent), true), Judgement::Keep, "the copier's own write");
        assert_eq!(judge(copy, Some(&parent), false), Judgement::SyncOriginal, "changed by someone else");
        let mut unsupported = parent.clone();
        unsupported.status = Some(
            serde_json::from_value(json!({"phase": "Failed", "reason": "UnsupportedOperatorGroup"})).expect("status"),
        );
        assert_eq!(judge(copy, Some(&unsupported), false), Judgement::Keep, "an uncopiable original is left alone");
        assert_eq!(judge(copy, None, true), Judgement::ReadLive, "no original in the store");
        let mut narrowed = parent.clone();
        narrowed.metadata.annotations.get_or_insert_default().insert("olm.targetNamespaces".into(), "b".into());
        assert_eq!(judge(copy, Some(&narrowed), true), Judgement::ReadLive, "dangling by the store: confirmed live");
        let mut record = parent.clone();
        record
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(crate::install::content::CSV_RECORD_ANNOTATION.into(), "plumbus".into());
        assert_eq!(judge(copy, Some(&record), false), Judgement::AdoptedRecord);
        let mut deleted = parent.clone();
        deleted.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(judge(copy, Some(&deleted), true), Judgement::ReadLive, "an original being deleted");
    }

    #[test]
    fn uncopiable_csvs_are_unprocessed_or_failing_about_their_group() {
        assert!(!is_uncopiable(&original()));
        let mut fresh = original();
        fresh.status = None;
        assert!(is_uncopiable(&fresh));
        let mut unsupported = original();
        unsupported.status.get_or_insert_default().reason = Some("UnsupportedOperatorGroup".into());
        assert!(is_uncopiable(&unsupported));
    }

    #[test]
    fn the_olm_config_condition_has_olms_four_states() {
        assert_eq!(olm_config_condition(false, true).0, "True");
        assert_eq!(
            olm_config_condition(true, false).2,
            "Copied CSVs are enabled and at least one copied CSVs is missing"
        );
        assert_eq!(olm_config_condition(false, false).1, "CopiedCSVsDisabled");
    }
}

//! Which OperatorGroup a CSV belongs to, as OLM v0's `operatorGroupForCSV` decides (none, one, or too many in its
//! namespace), the `olm.*` annotations membership writes on the CSV (and on its Deployments' pod templates), and
//! which CSVs the legacy loops leave alone: copies (their original is the member) and Install records (the Install
//! owns their content).

use std::collections::BTreeMap;

use super::targets::Targets;
use crate::api::v1::{
    OperatorGroup, OPERATOR_GROUP_ANNOTATION, OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION,
};
use crate::api::v1alpha1::ClusterServiceVersion;
/// Shared with the code reading them: defined with the API.
pub use crate::api::v1alpha1::{is_copied, COPIED_FROM_LABEL, COPIED_REASON};
use crate::install::content::CSV_RECORD_ANNOTATION;

/// The annotations a member of group `name` in `namespace` is given, as OLM's `setOperatorGroupAnnotations` writes
/// them: the group's name and namespace, and `olm.targetNamespaces` only once the group's `status.namespaces` names
/// targets. A group without them (new, or selecting no namespace) must not hand its members `""`, which reads as
/// all namespaces: a CSV annotated so would be installed for every namespace before its group has decided.
pub fn group_annotations(name: &str, namespace: &str, status_namespaces: &[String]) -> BTreeMap<String, String> {
    let mut annotations: BTreeMap<String, String> = [
        (OPERATOR_GROUP_ANNOTATION.to_owned(), name.to_owned()),
        (OPERATOR_NAMESPACE_ANNOTATION.to_owned(), namespace.to_owned()),
    ]
    .into();
    if !status_namespaces.is_empty() {
        annotations
            .insert(TARGET_NAMESPACES_ANNOTATION.to_owned(), Targets::from_status(status_namespaces).annotation());
    }
    annotations
}

/// Whether `current` (a CSV's annotations) differs from what membership of group `name` in `namespace` with
/// `status_namespaces` gives, as OLM's `operatorGroupAnnotationsDiffer`: a missing `olm.targetNamespaces` always
/// differs, and the targets compare with the group's (`""` while it names none).
fn annotations_differ(
    current: &BTreeMap<String, String>,
    name: &str,
    namespace: &str,
    status_namespaces: &[String],
) -> bool {
    current.get(OPERATOR_NAMESPACE_ANNOTATION).map(String::as_str) != Some(namespace)
        || current.get(OPERATOR_GROUP_ANNOTATION).map(String::as_str) != Some(name)
        || current.get(TARGET_NAMESPACES_ANNOTATION) != Some(&Targets::from_status(status_namespaces).annotation())
}

/// Whether `csv` is the record of an Install: the Install controller applies its content and writes its phase.
pub fn is_install_record(csv: &ClusterServiceVersion) -> bool {
    csv.metadata.annotations.as_ref().is_some_and(|annotations| annotations.contains_key(CSV_RECORD_ANNOTATION))
}

/// A CSV's group, or why it has none: the phase-`Failed` reason and message OLM gives.
#[derive(Debug)]
pub enum Membership<'a> {
    Member(&'a OperatorGroup),
    NoOperatorGroup,
    TooManyOperatorGroups,
}

impl Membership<'_> {
    /// OLM's reason and message for a CSV without a group.
    pub fn failure(&self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::Member(_) => None,
            Self::NoOperatorGroup => Some(("NoOperatorGroup", "csv in namespace with no operatorgroups")),
            Self::TooManyOperatorGroups => Some((
                "TooManyOperatorGroups",
                "csv created in namespace with multiple operatorgroups, can't pick one automatically",
            )),
        }
    }
}

/// The group of a CSV among the groups of its namespace.
pub fn membership(groups: &[OperatorGroup]) -> Membership<'_> {
    match groups {
        [] => Membership::NoOperatorGroup,
        [group] => Membership::Member(group),
        _ => Membership::TooManyOperatorGroups,
    }
}

/// The annotations to write on `csv` for it to be a member of `group` (empty when it needs none): OLM's
/// `operatorGroupAnnotationsDiffer` then `setOperatorGroupAnnotations`, with the targets read from the group's
/// status. While the group names no targets this is never empty for a CSV without `olm.targetNamespaces`, as in
/// OLM: the CSV waits, annotated with the group alone.
pub fn missing_annotations(csv: &ClusterServiceVersion, group: &OperatorGroup) -> BTreeMap<String, String> {
    let targets = group.status.as_ref().map(|status| status.namespaces.as_slice()).unwrap_or(&[]);
    let name = group.metadata.name.as_deref().unwrap_or_default();
    let namespace = group.metadata.namespace.as_deref().unwrap_or_default();
    let current = csv.metadata.annotations.clone().unwrap_or_default();
    if annotations_differ(&current, name, namespace, targets) {
        group_annotations(name, namespace, targets)
    } else {
        BTreeMap::new()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csv(annotations: serde_json::Value, labels: serde_json::Value, reason: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "a", "namespace": "ns", "annotations": annotations, "labels": labels},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}},
            "status": {"reason": reason}}))
        .expect("csv")
    }

    fn group(namespaces: &[&str]) -> OperatorGroup {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": "ns"}, "spec": {}, "status": {"namespaces": namespaces}}))
        .expect("group")
    }

    #[test]
    fn copies_are_told_apart_three_ways() {
        assert!(!is_copied(&csv(json!({"olm.operatorNamespace": "ns"}), json!({}), "InstallSucceeded")));
        assert!(is_copied(&csv(json!({}), json!({}), "Copied")));
        assert!(is_copied(&csv(json!({"olm.operatorNamespace": "other"}), json!({}), "")));
        assert!(is_copied(&csv(json!({}), json!({"olm.copiedFrom": "other"}), "")));
    }

    #[test]
    fn one_group_makes_a_member_and_others_fail_with_olms_reasons() {
        assert_eq!(membership(&[]).failure(), Some(("NoOperatorGroup", "csv in namespace with no operatorgroups")));
        let groups = [group(&["ns"]), group(&[""])];
        assert_eq!(membership(&groups).failure().map(|(reason, _)| reason), Some("TooManyOperatorGroups"));
        assert!(matches!(membership(&groups[..1]), Membership::Member(group) if std::ptr::eq(group, &groups[0])));
    }

    #[test]
    fn members_carry_the_groups_annotations() {
        let member = csv(json!({}), json!({}), "");
        let missing = missing_annotations(&member, &group(&["b", "a"]));
        assert_eq!(missing.get("olm.targetNamespaces").map(String::as_str), Some("a,b"));
        assert_eq!(missing.get("olm.operatorGroup").map(String::as_str), Some("og"));
        assert_eq!(missing.get("olm.operatorNamespace").map(String::as_str), Some("ns"));
        let annotated = csv(serde_json::to_value(&missing).expect("json"), json!({}), "");
        assert!(missing_annotations(&annotated, &group(&["a", "b"])).is_empty());
        let global = missing_annotations(&annotated, &group(&[""]));
        assert_eq!(global.get("olm.targetNamespaces").map(String::as_str), Some(""));
    }

    #[test]
    fn a_group_naming_no_targets_yet_gives_its_members_none() {
        let member = csv(json!({}), json!({}), "");
        let undecided = missing_annotations(&member, &group(&[]));
        assert_eq!(undecided.get("olm.operatorGroup").map(String::as_str), Some("og"));
        assert_eq!(undecided.get("olm.targetNamespaces"), None, "\"\" would read as all namespaces");
        let grouped = csv(serde_json::to_value(&undecided).expect("json"), json!({}), "");
        assert!(!missing_annotations(&grouped, &group(&[])).is_empty(), "it waits for the group's targets");
        let annotations = json!({"olm.operatorGroup": "og", "olm.operatorNamespace": "ns", "olm.targetNamespaces": ""});
        let all_before = csv(annotations, json!({}), "");
        assert!(missing_annotations(&all_before, &group(&[])).is_empty(), "as OLM compares, \"\" equals no targets");
    }
}

//! Where an original CSV's copies go (OLM v0's `syncCopyCSV` and `ensureCSVsInNamespaces`): every namespace its
//! group targets but its own, none when copies are disabled for a global group (but the protected namespaces), and
//! no decision while the CSV is uncopiable. The CSV pass decides it; `legacy::copier` writes it.

use std::collections::BTreeSet;

use kube::ResourceExt;

use crate::api::v1::{OLMConfig, OperatorGroup, OLM_CONFIG_NAME, OPERATOR_NAMESPACE_ANNOTATION};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::controller::client::{ClientError, ControllerClient};
use crate::legacy::copies::{copy_namespaces, is_uncopiable};
use crate::legacy::membership::missing_annotations;

/// Whether copied CSVs are enabled: the `OLMConfig` `cluster` does not disable them (absent: enabled).
pub async fn copies_enabled(client: &ControllerClient) -> Result<bool, ClientError> {
    Ok(enabled_by(client.all::<OLMConfig>().get_opt(OLM_CONFIG_NAME).await?.as_ref()))
}

/// Whether `config` (the `OLMConfig` `cluster`, if any) leaves copied CSVs enabled.
pub fn enabled_by(config: Option<&OLMConfig>) -> bool {
    !config
        .and_then(|config| config.spec.features.as_ref())
        .and_then(|features| features.disable_copied_csvs)
        .unwrap_or(false)
}

/// What a pass over an original decided about its copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Copying {
    /// The namespaces its copies must be in; None when they are left as they are.
    pub wanted: Option<BTreeSet<String>>,
    /// Copies are off for it: copies disabled and its group targets every namespace.
    pub disabled: bool,
}

/// Where the copies of `original` (its status as just written), member of `group`, go, given the namespaces that
/// exist (not terminating), the protected ones, whether copies are enabled (they are off only for global groups) and
/// whether the original may have copies (on the cluster or on their way; asked only when no copy is wanted). An
/// original its group's annotations do not yet describe, or that is uncopiable (not processed, failing about its
/// group), has its copies left as they are, as OLM leaves them; so has one that wants none and has none, for which
/// the copier would have nothing to do (every pass over a CSV whose copies are disabled, resyncs included).
pub fn copying(
    original: &ClusterServiceVersion,
    group: &OperatorGroup,
    existing: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    copies_enabled: bool,
    copies_present: impl FnOnce() -> bool,
) -> Copying {
    let namespace = original.namespace().unwrap_or_default();
    let annotated_here = original.annotations().get(OPERATOR_NAMESPACE_ANNOTATION) == Some(&namespace);
    if !annotated_here || !missing_annotations(original, group).is_empty() || is_uncopiable(original) {
        return Copying::default();
    }
    let targets = group.status.as_ref().map(|status| status.namespaces.clone()).unwrap_or_default();
    let global = targets.iter().any(String::is_empty);
    let enabled = !global || copies_enabled;
    let wanted = copy_namespaces(&namespace, &targets, existing, enabled, protected);
    let wanted = (!wanted.is_empty() || copies_present()).then_some(wanted);
    Copying { wanted, disabled: global && !enabled }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn group(targets: &[&str]) -> OperatorGroup {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": "ops"}, "spec": {},
            "status": {"namespaces": targets, "lastUpdated": null}}))
        .expect("group")
    }

    fn original(targets: &str, phase: &str, reason: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "plumbus.v1", "namespace": "ops", "annotations": {
                "olm.operatorGroup": "og", "olm.operatorNamespace": "ops", "olm.targetNamespaces": targets}},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}}},
            "status": {"phase": phase, "reason": reason}}))
        .expect("csv")
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn copies_go_to_the_targets_but_the_original_s_namespace() {
        let existing = set(&["ops", "a", "b", "c"]);
        let decided = copying(
            &original("a,b", "Succeeded", "InstallSucceeded"),
            &group(&["a", "b"]),
            &existing,
            &set(&[]),
            true,
            || false,
        );
        assert_eq!(decided, Copying { wanted: Some(set(&["a", "b"])), disabled: false });
        let global =
            copying(&original("", "Succeeded", "InstallSucceeded"), &group(&[""]), &existing, &set(&[]), true, || {
                false
            });
        assert_eq!(global, Copying { wanted: Some(set(&["a", "b", "c"])), disabled: false });
    }

    #[test]
    fn disabled_copies_of_a_global_group_stay_only_in_protected_namespaces() {
        let existing = set(&["ops", "a", "b"]);
        let csv = original("", "Succeeded", "InstallSucceeded");
        let decided = copying(&csv, &group(&[""]), &existing, &set(&["b"]), false, || false);
        assert_eq!(decided, Copying { wanted: Some(set(&["b"])), disabled: true });
        let static_group = copying(
            &original("a", "Succeeded", "InstallSucceeded"),
            &group(&["a"]),
            &existing,
            &set(&[]),
            false,
            || false,
        );
        assert_eq!(
            static_group,
            Copying { wanted: Some(set(&["a"])), disabled: false },
            "only global groups lose them"
        );
    }

    #[test]
    fn an_original_that_wants_no_copy_asks_only_to_remove_those_it_may_have() {
        let existing = set(&["ops", "a"]);
        let csv = original("", "Succeeded", "InstallSucceeded");
        let none = copying(&csv, &group(&[""]), &existing, &set(&[]), false, || false);
        assert_eq!(none, Copying { wanted: None, disabled: true }, "no copy wanted, none there: nothing to ask");
        let some = copying(&csv, &group(&[""]), &existing, &set(&[]), false, || true);
        assert_eq!(some, Copying { wanted: Some(set(&[])), disabled: true }, "its copies must go");
        let own = copying(
            &original("ops", "Succeeded", "InstallSucceeded"),
            &group(&["ops"]),
            &existing,
            &set(&[]),
            true,
            || false,
        );
        assert_eq!(own, Copying { wanted: None, disabled: false }, "a group of its own namespace: no copy");
        let wanted =
            copying(&csv, &group(&[""]), &existing, &set(&[]), true, || panic!("asked though copies are wanted"));
        assert_eq!(wanted, Copying { wanted: Some(set(&["a"])), disabled: false });
    }

    #[test]
    fn copies_of_an_uncopiable_or_unannotated_original_are_left_as_they_are() {
        let existing = set(&["ops", "a"]);
        let failing = original("", "Failed", "UnsupportedOperatorGroup");
        assert_eq!(copying(&failing, &group(&[""]), &existing, &set(&[]), true, || false), Copying::default());
        let stale = original("a", "Succeeded", "InstallSucceeded");
        assert_eq!(
            copying(&stale, &group(&[""]), &existing, &set(&[]), true, || false),
            Copying::default(),
            "targets not yet annotated"
        );
    }
}

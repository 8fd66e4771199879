//! An OperatorGroup's target namespaces as OLM v0 computes them, how they are written (`status.namespaces` and the
//! `olm.targetNamespaces` annotation), and whether a CSV's install modes support them, with OLM's messages (users
//! and scripts read them in `kubectl get csv`).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::v1::OperatorGroupSpec;
use crate::api::v1alpha1::{InstallMode, InstallModeType};
use crate::labels::selector_matches;

/// The namespaces a group targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Targets {
    /// Every namespace (no targets and an empty or absent selector).
    All,
    /// These namespaces; possibly none (a selector matching nothing).
    Namespaces(BTreeSet<String>),
}

/// A group whose targets cannot be computed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TargetsError {
    /// `""` (all namespaces) named among explicit targets.
    #[error("TargetNamespaces cannot contain NamespaceAll: [{}]", .0.join(" "))]
    NamespaceAllInTargets(Vec<String>),
}

/// The targets of a group, given every namespace and its labels: explicit `targetNamespaces` win over the selector
/// (whether or not they exist, as in OLM); a nil or empty selector targets all namespaces.
pub fn targets(
    spec: &OperatorGroupSpec,
    namespaces: &[(String, BTreeMap<String, String>)],
) -> Result<Targets, TargetsError> {
    if !spec.target_namespaces.is_empty() {
        if spec.target_namespaces.iter().any(String::is_empty) {
            return Err(TargetsError::NamespaceAllInTargets(spec.target_namespaces.clone()));
        }
        return Ok(Targets::Namespaces(spec.target_namespaces.iter().cloned().collect()));
    }
    if spec.is_global() {
        return Ok(Targets::All);
    }
    let selector = spec.selector.clone().unwrap_or_default();
    Ok(Targets::Namespaces(
        namespaces
            .iter()
            .filter(|(_, labels)| selector_matches(&selector, labels))
            .map(|(name, _)| name.clone())
            .collect(),
    ))
}

impl Targets {
    /// `status.namespaces`: `[""]` for all namespaces, otherwise the namespaces (sorted here; OLM's order is that of
    /// a Go map, so sorting only makes the status stable).
    pub fn status_namespaces(&self) -> Vec<String> {
        match self {
            Self::All => vec![String::new()],
            Self::Namespaces(namespaces) => namespaces.iter().cloned().collect(),
        }
    }

    /// The `olm.targetNamespaces` annotation: `""` for all namespaces, otherwise sorted and comma-joined.
    pub fn annotation(&self) -> String {
        match self {
            Self::All => String::new(),
            Self::Namespaces(namespaces) => namespaces.iter().cloned().collect::<Vec<_>>().join(","),
        }
    }

    /// Read back from `status.namespaces` (`[""]` is all namespaces).
    pub fn from_status(namespaces: &[String]) -> Self {
        if namespaces.iter().any(String::is_empty) {
            Self::All
        } else {
            Self::Namespaces(namespaces.iter().cloned().collect())
        }
    }

    /// Whether `namespace` is targeted.
    pub fn contains(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Namespaces(namespaces) => namespaces.contains(namespace),
        }
    }
}

/// The reason and message a CSV fails with when its install modes do not fit its group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    pub reason: &'static str,
    pub message: String,
}

/// Whether the install modes `modes` of a CSV in `operator_namespace` support the `olm.targetNamespaces` annotation
/// `annotation`, as OLM's `InstallModeSet.Supports` decides: a mode not listed is unsupported, a duplicate mode is
/// `InvalidInstallModes`; the annotation is split on commas, so `""` is all namespaces.
pub fn supports(modes: &[InstallMode], operator_namespace: &str, annotation: &str) -> Result<(), Unsupported> {
    let mut set = BTreeMap::new();
    for mode in modes {
        if set.insert(mode.mode, mode.supported).is_some() {
            let listed: Vec<String> =
                modes.iter().map(|mode| format!("{{{:?} {}}}", mode.mode, mode.supported)).collect();
            return Err(Unsupported {
                reason: "InvalidInstallModes",
                message: format!("InstallMode list contains duplicates, cannot make set: [{}]", listed.join(" ")),
            });
        }
    }
    let supported = |mode: InstallModeType| set.get(&mode).copied().unwrap_or(false);
    let unsupported = |message: String| Err(Unsupported { reason: "UnsupportedOperatorGroup", message });
    let namespaces: Vec<&str> = annotation.split(',').collect();
    match namespaces.as_slice() {
        [] => unsupported(
            "operatorgroup has invalid selected namespaces, cannot configure to watch zero namespaces".into(),
        ),
        [one] if *one == operator_namespace && !supported(InstallModeType::OwnNamespace) => {
            unsupported("OwnNamespace InstallModeType not supported, cannot configure to watch own namespace".into())
        }
        [""] if !supported(InstallModeType::AllNamespaces) => {
            unsupported("AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces".into())
        }
        [one] if *one != operator_namespace && !one.is_empty() && !supported(InstallModeType::SingleNamespace) => {
            unsupported("SingleNamespace InstallModeType not supported, cannot configure to watch one namespace".into())
        }
        [_] => Ok(()),
        many if !supported(InstallModeType::MultiNamespace) => unsupported(format!(
            "MultiNamespace InstallModeType not supported, cannot configure to watch {} namespaces",
            many.len()
        )),
        many => {
            for namespace in many {
                if *namespace == operator_namespace && !supported(InstallModeType::OwnNamespace) {
                    return unsupported(
                        "OwnNamespace InstallModeType not supported, cannot configure to watch own namespace".into(),
                    );
                }
                if namespace.is_empty() {
                    return unsupported(
                        "operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1"
                            .into(),
                    );
                }
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    use super::*;

    fn namespaces() -> Vec<(String, BTreeMap<String, String>)> {
        vec![
            ("a".into(), [("team".to_owned(), "x".to_owned())].into()),
            ("b".into(), [("team".to_owned(), "y".to_owned())].into()),
            ("c".into(), [("team".to_owned(), "x".to_owned())].into()),
        ]
    }

    fn selector(team: &str) -> Option<LabelSelector> {
        Some(LabelSelector { match_labels: Some([("team".to_owned(), team.to_owned())].into()), ..Default::default() })
    }

    #[test]
    fn explicit_targets_win_over_the_selector_and_need_not_exist() {
        let spec = OperatorGroupSpec {
            target_namespaces: vec!["b".into(), "gone".into()],
            selector: selector("x"),
            ..Default::default()
        };
        let targets = targets(&spec, &namespaces()).expect("targets");
        assert_eq!(targets.status_namespaces(), ["b", "gone"]);
        assert_eq!(targets.annotation(), "b,gone");
    }

    #[test]
    fn the_selector_picks_namespaces_by_label() {
        let spec = OperatorGroupSpec { selector: selector("x"), ..Default::default() };
        assert_eq!(targets(&spec, &namespaces()).expect("targets").annotation(), "a,c");
        let nothing = OperatorGroupSpec { selector: selector("z"), ..Default::default() };
        assert_eq!(targets(&nothing, &namespaces()), Ok(Targets::Namespaces(BTreeSet::new())));
    }

    #[test]
    fn no_targets_and_no_selector_is_every_namespace() {
        let targets = targets(&OperatorGroupSpec::default(), &namespaces()).expect("targets");
        assert_eq!(targets, Targets::All);
        assert_eq!(targets.status_namespaces(), [""]);
        assert_eq!(targets.annotation(), "");
        assert_eq!(Targets::from_status(&targets.status_namespaces()), Targets::All);
        assert!(targets.contains("anything"));
    }

    #[test]
    fn all_namespaces_among_explicit_targets_is_refused() {
        let spec = OperatorGroupSpec { target_namespaces: vec!["a".into(), String::new()], ..Default::default() };
        let error = targets(&spec, &namespaces()).expect_err("refused");
        assert_eq!(error.to_string(), "TargetNamespaces cannot contain NamespaceAll: [a ]");
    }

    fn modes(supported: &[InstallModeType]) -> Vec<InstallMode> {
        [
            InstallModeType::OwnNamespace,
            InstallModeType::SingleNamespace,
            InstallModeType::MultiNamespace,
            InstallModeType::AllNamespaces,
        ]
        .into_iter()
        .map(|mode| InstallMode { mode, supported: supported.contains(&mode) })
        .collect()
    }

    #[test]
    fn each_shape_of_targets_needs_its_install_mode() {
        use InstallModeType::*;
        let message = |modes: &[InstallModeType], annotation: &str| {
            supports(&self::modes(modes), "ops", annotation).err().map(|unsupported| unsupported.message)
        };
        assert_eq!(message(&[OwnNamespace], "ops"), None);
        assert_eq!(
            message(&[AllNamespaces], "ops").as_deref(),
            Some("OwnNamespace InstallModeType not supported, cannot configure to watch own namespace")
        );
        assert_eq!(message(&[AllNamespaces], ""), None);
        assert_eq!(
            message(&[OwnNamespace], "").as_deref(),
            Some("AllNamespaces InstallModeType not supported, cannot configure to watch all namespaces")
        );
        assert_eq!(message(&[SingleNamespace], "other"), None);
        assert_eq!(
            message(&[OwnNamespace, MultiNamespace], "other").as_deref(),
            Some("SingleNamespace InstallModeType not supported, cannot configure to watch one namespace")
        );
        assert_eq!(message(&[MultiNamespace], "a,b"), None);
        assert_eq!(
            message(&[SingleNamespace], "a,b,c").as_deref(),
            Some("MultiNamespace InstallModeType not supported, cannot configure to watch 3 namespaces")
        );
        assert_eq!(
            message(&[MultiNamespace], "a,ops").as_deref(),
            Some("OwnNamespace InstallModeType not supported, cannot configure to watch own namespace")
        );
        assert_eq!(message(&[MultiNamespace, OwnNamespace], "a,ops"), None);
        assert_eq!(
            message(&[MultiNamespace], "a,").as_deref(),
            Some("operatorgroup has invalid selected namespaces, NamespaceAll found when |selected namespaces| > 1")
        );
    }

    #[test]
    fn an_unlisted_mode_is_unsupported_and_duplicates_are_invalid() {
        assert_eq!(supports(&[], "ops", "ops").expect_err("unsupported").reason, "UnsupportedOperatorGroup");
        let duplicated = vec![
            InstallMode { mode: InstallModeType::OwnNamespace, supported: true },
            InstallMode { mode: InstallModeType::OwnNamespace, supported: false },
        ];
        let invalid = supports(&duplicated, "ops", "ops").expect_err("invalid");
        assert_eq!(invalid.reason, "InvalidInstallModes");
        assert_eq!(
            invalid.message,
            "InstallMode list contains duplicates, cannot make set: [{OwnNamespace true} {OwnNamespace false}]"
        );
    }
}

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
/// exist (not terminating), the protected ones and whether copies are enabled (they are off only for global
/// groups). An original its group's annotations do not yet describe, or that is uncopiable (not processed, failing
/// about its group), has its copies left as they are, as OLM leaves them.
pub fn copying(
    original: &ClusterServiceVersion,
    group: &OperatorGroup,
    existing: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    copies_enabled: bool,
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
    Copying { wanted: Some(wanted), disabled: global && !enabled }
}

//! The defaults of persistent volumes and their claims: kubernetes' `SetDefaults_PersistentVolume`,
//! `_PersistentVolumeClaim` and `_PersistentVolumeClaimSpec`, and the volume sources' (`pod::in_tree_sources`: a
//! PersistentVolume's sources are the in-tree ones pods have, with the same `+default` markers). A claim is defaulted
//! alike as a PersistentVolumeClaim object and as a StatefulSet's volume claim template.

use serde_json::{json, Value};

use super::{child, pod, set_if_absent, set_if_zero};

/// `SetDefaults_PersistentVolumeClaim` (a Pending phase) and the spec's defaults.
pub fn claim(claim: &mut Value) {
    if let Some(spec) = child(claim, &["spec"]) {
        claim_spec(spec);
    }
    if let Some(status) = child(claim, &["status"]) {
        set_if_zero(status, "phase", json!("Pending"));
    }
}

/// `SetDefaults_PersistentVolumeClaimSpec`: claims are of filesystems unless they ask for a block device. Also
/// the spec of a pod's ephemeral volume claim template.
pub fn claim_spec(spec: &mut Value) {
    set_if_absent(spec, "volumeMode", json!("Filesystem"));
}

/// `SetDefaults_PersistentVolume` (a Pending phase, the Retain reclaim policy, a filesystem) and its source's.
pub fn persistent_volume(object: &mut Value) {
    if let Some(spec) = child(object, &["spec"]) {
        set_if_zero(spec, "persistentVolumeReclaimPolicy", json!("Retain"));
        set_if_absent(spec, "volumeMode", json!("Filesystem"));
        pod::in_tree_sources(spec);
    }
    if let Some(status) = child(object, &["status"]) {
        set_if_zero(status, "phase", json!("Pending"));
    }
}

#[cfg(test)]
mod tests;

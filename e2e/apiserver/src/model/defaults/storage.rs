//! The defaults of persistent volumes and their claims: kubernetes' `SetDefaults_PersistentVolume`,
//! `_PersistentVolumeClaim` and `_PersistentVolumeClaimSpec`, and the in-tree volume sources' (`in_tree_sources`: a
//! PersistentVolume's sources are the in-tree ones pods' volumes have, with the same `+default` markers, so `pod`
//! takes them from here). A claim is defaulted alike as a PersistentVolumeClaim object, a StatefulSet's volume claim
//! template and a pod's ephemeral volume claim template.

use serde_json::{json, Value};

use super::{child, existing, set_if_absent, set_if_zero};

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
        in_tree_sources(spec);
    }
    if let Some(status) = child(object, &["status"]) {
        set_if_zero(status, "phase", json!("Pending"));
    }
}

/// The defaults of the in-tree sources a pod's volume or a PersistentVolume's spec (`holder`) may name: the host
/// path's type, and the `+default` markers of iSCSI, RBD, Azure disk and ScaleIO sources (the same in their
/// PersistentVolume forms).
pub fn in_tree_sources(holder: &mut Value) {
    if let Some(host_path) = existing(holder, &["hostPath"]) {
        set_if_absent(host_path, "type", json!(""));
    }
    if let Some(iscsi) = existing(holder, &["iscsi"]) {
        set_if_zero(iscsi, "iscsiInterface", json!("default"));
    }
    if let Some(rbd) = existing(holder, &["rbd"]) {
        set_if_zero(rbd, "pool", json!("rbd"));
        set_if_zero(rbd, "user", json!("admin"));
        set_if_zero(rbd, "keyring", json!("/etc/ceph/keyring"));
    }
    if let Some(azure_disk) = existing(holder, &["azureDisk"]) {
        set_if_absent(azure_disk, "cachingMode", json!("ReadWrite"));
        set_if_absent(azure_disk, "fsType", json!("ext4"));
        set_if_absent(azure_disk, "readOnly", json!(false));
        set_if_absent(azure_disk, "kind", json!("Shared"));
    }
    if let Some(scale_io) = existing(holder, &["scaleIO"]) {
        set_if_zero(scale_io, "storageMode", json!("ThinProvisioned"));
        set_if_zero(scale_io, "fsType", json!("xfs"));
    }
}

#[cfg(test)]
mod tests;

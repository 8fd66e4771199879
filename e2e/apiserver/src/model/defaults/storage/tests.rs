//! The defaults of PersistentVolumeClaims and PersistentVolumes against what kube-apiserver v1.33 fills in, and the
//! explicit values it keeps.

use serde_json::json;

use crate::model::defaults::tests::defaulted;

#[test]
fn a_claim_is_a_pending_filesystem_unless_it_says_otherwise() {
    let claim = defaulted(
        "",
        "PersistentVolumeClaim",
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}),
    );
    assert_eq!(
        claim,
        json!({"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}})
    );
    let explicit =
        defaulted("", "PersistentVolumeClaim", json!({"spec": {"volumeMode": "Block"}, "status": {"phase": "Bound"}}));
    assert_eq!(explicit, json!({"spec": {"volumeMode": "Block"}, "status": {"phase": "Bound"}}));
}

#[test]
fn a_persistent_volume_is_a_pending_retained_filesystem_and_its_source_is_defaulted() {
    let volume = defaulted(
        "",
        "PersistentVolume",
        json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/data"}}}),
    );
    assert_eq!(
        volume,
        json!({"metadata": {"name": "pv"}, "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/data", "type": ""}, "persistentVolumeReclaimPolicy": "Retain",
            "volumeMode": "Filesystem"}, "status": {"phase": "Pending"}})
    );
    let spec = |spec| defaulted("", "PersistentVolume", json!({"spec": spec}))["spec"].clone();
    let rbd = spec(json!({"rbd": {"monitors": ["m"], "image": "i"}, "persistentVolumeReclaimPolicy": ""}));
    assert_eq!(
        rbd["rbd"],
        json!({"monitors": ["m"], "image": "i", "pool": "rbd", "user": "admin", "keyring": "/etc/ceph/keyring"})
    );
    assert_eq!(rbd["persistentVolumeReclaimPolicy"], "Retain", "a plain string: empty is unset");
    let iscsi = spec(json!({"iscsi": {"targetPortal": "p", "iqn": "q", "lun": 0}}));
    assert_eq!(iscsi["iscsi"]["iscsiInterface"], "default");
    let scale_io = spec(json!({"scaleIO": {"gateway": "g", "system": "s", "secretRef": {"name": "s"}}}));
    assert_eq!(
        (&scale_io["scaleIO"]["storageMode"], &scale_io["scaleIO"]["fsType"]),
        (&json!("ThinProvisioned"), &json!("xfs"))
    );
    let explicit = spec(json!({"persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Block",
        "local": {"path": "/mnt"}}));
    assert_eq!(
        explicit,
        json!({"persistentVolumeReclaimPolicy": "Delete", "volumeMode": "Block", "local": {"path": "/mnt"}})
    );
    let released = defaulted("", "PersistentVolume", json!({"status": {"phase": "Released"}}));
    assert_eq!(released["status"], json!({"phase": "Released"}));
}

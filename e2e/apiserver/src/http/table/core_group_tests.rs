//! Tests of the core printers: realistic objects, their exact cells.

use super::super::printed;
use serde_json::json;

const NOW: &str = "2026-03-01T12:00:00Z";

fn names(columns: &[(String, String, u64)]) -> Vec<String> {
    columns.iter().map(|(name, kind, priority)| format!("{name}:{kind}:{priority}")).collect()
}

#[test]
fn configuration_kinds() {
    let created = json!({"name": "x", "creationTimestamp": "2026-03-01T11:56:40Z"});
    let (columns, cells) =
        printed("", "ConfigMap", &json!({"metadata": created, "data": {"a": "1"}, "binaryData": {"b": "AA=="}}), NOW);
    assert_eq!(names(&columns), ["Name:string:0", "Data:string:0", "Age:string:0"]);
    assert_eq!(cells, [json!("x"), json!(2), json!("3m20s")]);
    let secret = json!({"metadata": created, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
    let (columns, cells) = printed("", "Secret", &secret, NOW);
    assert_eq!(names(&columns), ["Name:string:0", "Type:string:0", "Data:string:0", "Age:string:0"]);
    assert_eq!(cells, [json!("x"), json!("kubernetes.io/tls"), json!(2), json!("3m20s")]);
    let (columns, cells) = printed("", "ServiceAccount", &json!({"metadata": created}), NOW);
    assert_eq!(names(&columns), ["Name:string:0", "Secrets:string:0", "Age:string:0"]);
    assert_eq!(cells, [json!("x"), json!(0), json!("3m20s")]);
    let (_, cells) = printed("", "Namespace", &json!({"metadata": created, "status": {"phase": "Active"}}), NOW);
    assert_eq!(cells, [json!("x"), json!("Active"), json!("3m20s")]);
}

#[test]
fn events_of_either_api() {
    let core = json!({"metadata": {"name": "web.1"}, "type": "Warning", "reason": "BackOff", "message": " restarting \n",
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
        "source": {"component": "kubelet", "host": "node-1"}, "count": 4,
        "firstTimestamp": "2026-03-01T10:00:00Z", "lastTimestamp": "2026-03-01T11:59:00Z"});
    let (columns, cells) = printed("", "Event", &core, NOW);
    assert_eq!(
        names(&columns),
        [
            "Last Seen:string:0",
            "Type:string:0",
            "Reason:string:0",
            "Object:string:0",
            "Subobject:string:1",
            "Source:string:1",
            "Message:string:0",
            "First Seen:string:1",
            "Count:string:1",
            "Name:string:1"
        ]
    );
    assert_eq!(
        cells,
        [
            json!("60s"),
            json!("Warning"),
            json!("BackOff"),
            json!("pod/web"),
            json!("spec.containers{app}"),
            json!("kubelet, node-1"),
            json!("restarting"),
            json!("120m"),
            json!(4),
            json!("web.1")
        ]
    );
    let new = json!({"metadata": {"name": "op.1"}, "eventTime": "2026-03-01T11:00:00.000000Z", "type": "Normal",
        "reason": "Synced", "note": "done", "reportingController": "ctrl", "regarding": {"kind": "Operator"}});
    let (_, cells) = printed("events.k8s.io", "Event", &new, NOW);
    assert_eq!(
        cells,
        [
            json!("60m"),
            json!("Normal"),
            json!("Synced"),
            json!("operator"),
            json!(""),
            json!("ctrl"),
            json!("done"),
            json!("60m"),
            json!(1),
            json!("op.1")
        ]
    );
}

#[test]
fn claims_show_capacity_once_bound() {
    let pending = json!({"metadata": {"name": "data", "creationTimestamp": "2026-02-27T08:59:00Z"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, "storageClassName": "fast"},
        "status": {"phase": "Pending"}});
    let (columns, cells) = printed("", "PersistentVolumeClaim", &pending, NOW);
    assert_eq!(
        names(&columns),
        [
            "Name:string:0",
            "Status:string:0",
            "Volume:string:0",
            "Capacity:string:0",
            "Access Modes:string:0",
            "StorageClass:string:0",
            "VolumeAttributesClass:string:0",
            "Age:string:0",
            "VolumeMode:string:1"
        ]
    );
    assert_eq!(
        cells,
        [
            json!("data"),
            json!("Pending"),
            json!(""),
            json!(""),
            json!(""),
            json!("fast"),
            json!("<unset>"),
            json!("2d3h"),
            json!("<unset>")
        ]
    );
    let mut bound = pending.clone();
    bound["spec"]["volumeName"] = json!("pv-1");
    bound["spec"]["volumeMode"] = json!("Filesystem");
    bound["metadata"]["annotations"] = json!({"volume.beta.kubernetes.io/storage-class": "legacy"});
    bound["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:00Z");
    bound["status"] = json!({"phase": "Bound", "capacity": {"storage": "2048Mi"},
        "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"]});
    let (_, cells) = printed("", "PersistentVolumeClaim", &bound, NOW);
    assert_eq!(
        cells[1..7],
        [json!("Terminating"), json!("pv-1"), json!("2Gi"), json!("RWO,RWX"), json!("legacy"), json!("<unset>")]
    );
    assert_eq!(cells[8], json!("Filesystem"));
}

#[test]
fn volumes_show_their_claim() {
    let volume = json!({"metadata": {"name": "pv-1", "creationTimestamp": "2026-03-01T11:00:00Z"},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadOnlyMany"], "persistentVolumeReclaimPolicy": "Retain",
            "claimRef": {"namespace": "shop", "name": "data"}, "storageClassName": "fast", "volumeMode": "Block",
            "volumeAttributesClassName": "gold"},
        "status": {"phase": "Bound", "reason": ""}});
    let (columns, cells) = printed("", "PersistentVolume", &volume, NOW);
    assert_eq!(columns.len(), 11);
    assert_eq!(columns[10], ("VolumeMode".to_owned(), "string".to_owned(), 1));
    assert_eq!(
        cells,
        [
            json!("pv-1"),
            json!("10Gi"),
            json!("ROX"),
            json!("Retain"),
            json!("Bound"),
            json!("shop/data"),
            json!("fast"),
            json!("gold"),
            json!(""),
            json!("60m"),
            json!("Block")
        ]
    );
    let (_, cells) = printed("", "PersistentVolume", &json!({"metadata": {"name": "bare"}}), NOW);
    assert_eq!(
        cells,
        [
            json!("bare"),
            json!("0"),
            json!(""),
            json!(""),
            json!(""),
            json!(""),
            json!(""),
            json!("<unset>"),
            json!(""),
            json!("<unknown>"),
            json!("<unset>")
        ]
    );
}

//! Printers of the core kinds that hold configuration and storage: Namespace, ConfigMap, Secret, ServiceAccount,
//! Event (core and events.k8s.io, one storage), PersistentVolume and PersistentVolumeClaim.

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as core;
use serde_json::{json, Value};

use super::duration::age;
use super::format::{count, first_non_empty, items, name, text};
use super::quantity::quantity;
use super::{age_column, doc, name_column, string, Printer};

pub(super) fn printer(group: &str, kind: &str) -> Option<Printer> {
    let (columns, cells): (fn() -> Vec<Value>, super::Cells) = match (group, kind) {
        ("", "Namespace") => (|| vec![name_column(), string("Status", 0, String::new()), age_column()], namespace),
        ("", "ConfigMap") => {
            (|| vec![name_column(), string("Data", 0, doc::<core::ConfigMap>("data")), age_column()], config_map)
        }
        ("", "Secret") => (
            || {
                let secret = doc::<core::Secret>;
                vec![name_column(), string("Type", 0, secret("type")), string("Data", 0, secret("data")), age_column()]
            },
            secret,
        ),
        ("", "ServiceAccount") => (
            || vec![name_column(), string("Secrets", 0, doc::<core::ServiceAccount>("secrets")), age_column()],
            service_account,
        ),
        ("" | "events.k8s.io", "Event") => {
            (event_columns, |o, now| event(&crate::model::events::to_core(o.clone()), now))
        }
        ("", "PersistentVolume") => (volume_columns, volume),
        ("", "PersistentVolumeClaim") => (claim_columns, claim),
        _ => return None,
    };
    Some(Printer { columns, cells })
}

fn namespace(o: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(o), json!(text(&o["status"]["phase"])), json!(age(&o["metadata"]["creationTimestamp"], now))]
}

fn config_map(o: &Value, now: Timestamp) -> Vec<Value> {
    let entries = count(&o["data"]) + count(&o["binaryData"]);
    vec![name(o), json!(entries), json!(age(&o["metadata"]["creationTimestamp"], now))]
}

fn secret(o: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name(o),
        json!(text(&o["type"])),
        json!(count(&o["data"])),
        json!(age(&o["metadata"]["creationTimestamp"], now)),
    ]
}

fn service_account(o: &Value, now: Timestamp) -> Vec<Value> {
    vec![name(o), json!(count(&o["secrets"])), json!(age(&o["metadata"]["creationTimestamp"], now))]
}

fn event_columns() -> Vec<Value> {
    let event = doc::<core::Event>;
    let mut name = name_column();
    name["priority"] = json!(1);
    vec![
        string("Last Seen", 0, event("lastTimestamp")),
        string("Type", 0, event("type")),
        string("Reason", 0, event("reason")),
        string("Object", 0, event("involvedObject")),
        string("Subobject", 1, doc::<core::ObjectReference>("fieldPath")),
        string("Source", 1, event("source")),
        string("Message", 0, event("message")),
        string("First Seen", 1, event("firstTimestamp")),
        string("Count", 1, event("count")),
        name,
    ]
}

/// An Event's row, from its core form: times from the deprecated timestamps or else the event time and series, a
/// count of 1 for a singleton of the new API, the object as `kind/name`, the source or else the reporter.
fn event(event: &Value, now: Timestamp) -> Vec<Value> {
    let first_seen = if event["firstTimestamp"].is_string() { &event["firstTimestamp"] } else { &event["eventTime"] };
    let first_seen = age(first_seen, now);
    let mut last_seen =
        if event["lastTimestamp"].is_string() { age(&event["lastTimestamp"], now) } else { first_seen.clone() };
    let mut count = event["count"].as_i64().unwrap_or(0);
    if event["series"].is_object() {
        last_seen = age(&event["series"]["lastObservedTime"], now);
        count = event["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let involved = &event["involvedObject"];
    let kind = text(&involved["kind"]).to_lowercase();
    let target = match text(&involved["name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_non_empty(text(&event["source"]["component"]), text(&event["reportingComponent"]));
    let instance = first_non_empty(text(&event["source"]["host"]), text(&event["reportingInstance"]));
    let source = if instance.is_empty() { component.to_owned() } else { format!("{component}, {instance}") };
    vec![
        json!(last_seen),
        json!(text(&event["type"])),
        json!(text(&event["reason"])),
        json!(target),
        json!(text(&involved["fieldPath"])),
        json!(source),
        json!(text(&event["message"]).trim()),
        json!(first_seen),
        json!(count),
        name(event),
    ]
}

fn volume_columns() -> Vec<Value> {
    let (spec, status) = (doc::<core::PersistentVolumeSpec>, doc::<core::PersistentVolumeStatus>);
    vec![
        name_column(),
        string("Capacity", 0, spec("capacity")),
        string("Access Modes", 0, spec("accessModes")),
        string("Reclaim Policy", 0, spec("persistentVolumeReclaimPolicy")),
        string("Status", 0, status("phase")),
        string("Claim", 0, spec("claimRef")),
        string("StorageClass", 0, String::new()),
        string("VolumeAttributesClass", 0, String::new()),
        string("Reason", 0, status("reason")),
        age_column(),
        string("VolumeMode", 1, spec("volumeMode")),
    ]
}

fn volume(o: &Value, now: Timestamp) -> Vec<Value> {
    let spec = &o["spec"];
    let claim = match &spec["claimRef"] {
        Value::Object(_) => format!("{}/{}", text(&spec["claimRef"]["namespace"]), text(&spec["claimRef"]["name"])),
        _ => String::new(),
    };
    vec![
        name(o),
        json!(capacity(&spec["capacity"])),
        json!(access_modes(&spec["accessModes"])),
        json!(text(&spec["persistentVolumeReclaimPolicy"])),
        json!(phase(o)),
        json!(claim),
        json!(storage_class(o, &spec["storageClassName"])),
        json!(unset_or(&spec["volumeAttributesClassName"])),
        json!(text(&o["status"]["reason"])),
        json!(age(&o["metadata"]["creationTimestamp"], now)),
        json!(unset_or(&spec["volumeMode"])),
    ]
}

fn claim_columns() -> Vec<Value> {
    let (spec, status) = (doc::<core::PersistentVolumeClaimSpec>, doc::<core::PersistentVolumeClaimStatus>);
    vec![
        name_column(),
        string("Status", 0, status("phase")),
        string("Volume", 0, spec("volumeName")),
        string("Capacity", 0, status("capacity")),
        string("Access Modes", 0, status("accessModes")),
        string("StorageClass", 0, String::new()),
        string("VolumeAttributesClass", 0, String::new()),
        age_column(),
        string("VolumeMode", 1, spec("volumeMode")),
    ]
}

/// A claim shows its capacity and access modes once bound to a volume, from its status.
fn claim(o: &Value, now: Timestamp) -> Vec<Value> {
    let spec = &o["spec"];
    let volume = text(&spec["volumeName"]);
    let (capacity_cell, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (capacity(&o["status"]["capacity"]), access_modes(&o["status"]["accessModes"]))
    };
    vec![
        name(o),
        json!(phase(o)),
        json!(volume),
        json!(capacity_cell),
        json!(modes),
        json!(storage_class(o, &spec["storageClassName"])),
        json!(unset_or(&spec["volumeAttributesClassName"])),
        json!(age(&o["metadata"]["creationTimestamp"], now)),
        json!(unset_or(&spec["volumeMode"])),
    ]
}

/// The phase, `Terminating` once deletion started.
fn phase(o: &Value) -> &str {
    if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else {
        text(&o["status"]["phase"])
    }
}

/// The `storage` quantity of a resource list as `Quantity.String()` prints it (`0` when there is none).
fn capacity(resources: &Value) -> String {
    let given = text(&resources["storage"]);
    if given.is_empty() {
        return "0".to_owned();
    }
    quantity(given).unwrap_or_else(|| given.to_owned())
}

/// Access modes abbreviated, each once, in a fixed order.
fn access_modes(modes: &Value) -> String {
    let modes: Vec<&str> = items(modes).iter().map(text).collect();
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .iter()
        .filter(|(mode, _)| modes.contains(mode))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

/// The storage class: the beta annotation when present (even empty), else the field.
fn storage_class<'a>(o: &'a Value, field: &'a Value) -> &'a str {
    match o["metadata"]["annotations"].get("volume.beta.kubernetes.io/storage-class") {
        Some(class) => text(class),
        None => text(field),
    }
}

fn unset_or(value: &Value) -> &str {
    value.as_str().unwrap_or("<unset>")
}

#[cfg(test)]
#[path = "core_group_tests.rs"]
mod tests;

//! Events are one resource served by two APIs, as in kube-apiserver: core `v1` Events are what is stored, and
//! `events.k8s.io/v1` Events are converted to and from them (`regarding` is `involvedObject`, `note` is `message`,
//! the `deprecated*` fields are the core ones), so an event recorded through either API is listed and watched
//! through both. Also the fields an Event list can be selected by, under each API's names (their values are read as
//! `storage::selectors::field_value` reads them).

use serde_json::{Map, Value};

/// `events.k8s.io/v1` field ↔ core `v1` field, for the fields whose names differ.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// Whether `group`/`plural` is the `events.k8s.io` view of the core Events.
pub fn is_events_api(group: &str, plural: &str) -> bool {
    group == "events.k8s.io" && plural == "events"
}

/// An `events.k8s.io/v1` Event as the core `v1` Event it is stored as.
pub fn to_core(object: Value) -> Value {
    rename(object, |name| RENAMED.iter().find(|(events, _)| *events == name).map(|(_, core)| *core), "v1")
}

/// A stored core `v1` Event as `events.k8s.io/v1` serves it.
pub fn from_core(object: Value) -> Value {
    rename(object, |name| RENAMED.iter().find(|(_, core)| *core == name).map(|(events, _)| *events), "events.k8s.io/v1")
}

fn rename(object: Value, renamed: impl Fn(&str) -> Option<&'static str>, api_version: &str) -> Value {
    let Value::Object(fields) = object else {
        return object;
    };
    let mut converted: Map<String, Value> = fields
        .into_iter()
        .map(|(name, value)| match renamed(&name) {
            Some(other) => (other.to_owned(), value),
            None => (name, value),
        })
        .collect();
    converted.insert("apiVersion".into(), Value::String(api_version.into()));
    Value::Object(converted)
}

/// The core Event fields a field selector may name, beyond `metadata.name` and `metadata.namespace`.
const SELECTABLE: [&str; 11] = [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// The stored (core) field a selector on Events names, or None when Events cannot be selected by it. Under
/// `events.k8s.io` the names are that API's (`regarding.name`, `reportingController`), as kube-apiserver converts them.
pub fn selectable_field(events_api: bool, field: &str) -> Option<String> {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return Some(field.to_owned());
    }
    if !events_api {
        return SELECTABLE.contains(&field).then(|| field.to_owned());
    }
    match field {
        "reason" | "type" => Some(field.to_owned()),
        "reportingController" => Some("reportingComponent".to_owned()),
        _ => field
            .strip_prefix("regarding.")
            .map(|rest| format!("involvedObject.{rest}"))
            .filter(|core| SELECTABLE.contains(&core.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn recorded() -> Value {
        json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "plumbus.1", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "olmv2-install-controller",
            "reportingInstance": "olmv2-install-controller", "action": "Reconcile", "reason": "ContentApplied",
            "type": "Normal", "note": "applied 9 objects",
            "regarding": {"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": "plumbus", "uid": "u1"},
            "deprecatedCount": 2})
    }

    #[test]
    fn an_events_api_event_is_stored_as_a_core_event_and_served_back_unchanged() {
        let core = to_core(recorded());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "plumbus");
        assert_eq!(core["message"], "applied 9 objects");
        assert_eq!(core["reportingComponent"], "olmv2-install-controller");
        assert_eq!(core["count"], 2);
        assert!(core.get("regarding").is_none() && core.get("note").is_none());
        assert_eq!(from_core(core), recorded());
    }

    #[test]
    fn selectors_name_core_fields_under_either_api() {
        assert_eq!(selectable_field(false, "involvedObject.uid").as_deref(), Some("involvedObject.uid"));
        assert_eq!(selectable_field(false, "regarding.uid"), None);
        assert_eq!(selectable_field(true, "regarding.uid").as_deref(), Some("involvedObject.uid"));
        assert_eq!(selectable_field(true, "reportingController").as_deref(), Some("reportingComponent"));
        assert_eq!(selectable_field(true, "involvedObject.uid"), None);
        assert_eq!(selectable_field(true, "source"), None);
        assert_eq!(selectable_field(false, "note"), None);
        assert_eq!(selectable_field(true, "metadata.name").as_deref(), Some("metadata.name"));
    }

    #[test]
    fn source_falls_back_to_the_reporting_controller() {
        use crate::storage::selectors::field_value;
        let core = to_core(recorded());
        assert_eq!(field_value(&core, "source"), "olmv2-install-controller");
        assert_eq!(field_value(&core, "involvedObject.kind"), "Install");
        assert_eq!(field_value(&core, "involvedObject.namespace"), "");
        let old = json!({"source": {"component": "kubelet"}, "reportingComponent": ""});
        assert_eq!(field_value(&old, "source"), "kubelet");
    }
}

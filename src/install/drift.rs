//! Drift: whether a live object still holds what the Install applied. Every field the applied manifest sets must
//! hold the same value live; fields the server or other controllers add (defaults, status, more metadata) are not
//! drift. Lists must keep their length and each item is compared the same way.

use base64::Engine as _;
use serde_json::Value;

/// Whether `live` still holds every field of `applied`.
pub fn holds(applied: &Value, live: &Value) -> bool {
    let (Some(applied), Some(live)) = (applied.as_object(), live.as_object()) else { return false };
    applied.iter().all(|(field, value)| match field.as_str() {
        "apiVersion" | "kind" | "status" => true,
        "metadata" => metadata_holds(value, &live["metadata"]),
        "stringData" if live.get("kind").and_then(Value::as_str) == Some("Secret") => {
            string_data_holds(value, &live["data"])
        }
        _ => live.get(field).is_some_and(|live| contains(value, live)),
    })
}

/// `applied` without the label `key` (none: as it is).
pub fn without_label(applied: &Value, key: Option<&str>) -> Value {
    let mut object = applied.clone();
    if let (Some(key), Some(labels)) = (key, object["metadata"]["labels"].as_object_mut()) {
        labels.remove(key);
        // Labels the content did not have at all are not asked for either.
        if labels.is_empty() {
            if let Some(metadata) = object["metadata"].as_object_mut() {
                metadata.remove("labels");
            }
        }
    }
    object
}

fn metadata_holds(applied: &Value, live: &Value) -> bool {
    ["labels", "annotations"].iter().all(|field| match applied.get(*field) {
        Some(wanted) => contains(wanted, &live[*field]),
        None => true,
    })
}

/// A Secret's `stringData` is write-only: the server stores it base64-encoded in `data`.
fn string_data_holds(applied: &Value, data: &Value) -> bool {
    let Some(applied) = applied.as_object() else { return false };
    applied.iter().all(|(key, text)| {
        let encoded = base64::engine::general_purpose::STANDARD.encode(text.as_str().unwrap_or_default());
        data[key].as_str() == Some(encoded.as_str())
    })
}

fn contains(wanted: &Value, live: &Value) -> bool {
    match (wanted, live) {
        (Value::Object(wanted), Value::Object(live)) => wanted.iter().all(|(key, value)| match live.get(key) {
            Some(live) => contains(value, live),
            None => value.is_null(),
        }),
        (Value::Array(wanted), Value::Array(live)) => {
            wanted.len() == live.len() && wanted.iter().zip(live).all(|(wanted, live)| contains(wanted, live))
        }
        (Value::Number(wanted), Value::Number(live)) => wanted.as_f64() == live.as_f64(),
        _ => wanted == live,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(replicas: u32, image: &str) -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "o", "labels": {"app": "d"}},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    #[test]
    fn server_additions_are_not_drift() {
        let applied = deployment(1, "busybox");
        let mut live = deployment(1, "busybox");
        live["metadata"]["uid"] = json!("u");
        live["metadata"]["labels"]["added"] = json!("by someone");
        live["spec"]["template"]["spec"]["containers"][0]["terminationMessagePath"] = json!("/dev/termination-log");
        live["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        live["status"] = json!({"replicas": 1});
        assert!(holds(&applied, &live));
    }

    #[test]
    fn changed_or_removed_fields_are_drift() {
        let applied = deployment(1, "busybox");
        assert!(!holds(&applied, &deployment(3, "busybox")));
        assert!(!holds(&applied, &deployment(1, "evil")));
        let mut unlabelled = deployment(1, "busybox");
        unlabelled["metadata"]["labels"] = json!({});
        assert!(!holds(&applied, &unlabelled));
        let mut extra_container = deployment(1, "busybox");
        extra_container["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .expect("list")
            .push(json!({"name": "sidecar", "image": "x"}));
        assert!(!holds(&applied, &extra_container));
    }

    #[test]
    fn secret_string_data_is_compared_with_the_stored_data() {
        let applied =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"tls.crt": "PEM"}});
        let live =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"tls.crt": "UEVN"}});
        assert!(holds(&applied, &live));
        let changed =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"tls.crt": "eA=="}});
        assert!(!holds(&applied, &changed));
    }

    #[test]
    fn integers_and_floats_of_the_same_value_match() {
        assert!(holds(&json!({"spec": {"n": 1}}), &json!({"spec": {"n": 1.0}})));
    }

    #[test]
    fn a_label_added_to_what_is_applied_is_told_apart_from_drift() {
        let mut labelled = deployment(1, "i");
        labelled["metadata"]["labels"]["v2alpha1.operators.coreos.com/plumbus"] = json!("");
        let live = deployment(1, "i");
        assert!(!holds(&labelled, &live), "the label is missing live");
        let key = Some("v2alpha1.operators.coreos.com/plumbus");
        assert!(holds(&without_label(&labelled, key), &live), "but nothing else is");
        assert_eq!(without_label(&labelled, None), labelled);
        let mut bare =
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a", "namespace": "o"}});
        let live = bare.clone();
        bare["metadata"]["labels"] = json!({"v2alpha1.operators.coreos.com/plumbus": ""});
        assert!(holds(&without_label(&bare, key), &live), "no labels asked where the content had none");
        let changed = deployment(2, "i");
        assert!(!holds(&without_label(&labelled, key), &changed), "drift is still drift");
    }
}

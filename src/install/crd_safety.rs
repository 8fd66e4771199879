//! CRD upgrade safety, as OLM v0 refuses an unsafe CRD update (`SafeStorageVersionUpgrade`): a new CRD must still
//! list every version the existing CRD's `status.storedVersions` holds, or custom resources stored in a dropped
//! version would be lost without a storage migration.

use serde_json::Value;

/// The first stored version of the live CRD that the new CRD drops, if it drops one. A live CRD without stored
/// versions (not yet reported) has nothing to lose.
pub fn dropped_stored_version(live: &Value, new: &Value) -> Option<String> {
    let served: Vec<&str> = new["spec"]["versions"]
        .as_array()
        .map(|versions| versions.iter().filter_map(|v| v["name"].as_str()).collect())
        .unwrap_or_default();
    let stored = live["status"]["storedVersions"].as_array()?;
    stored.iter().filter_map(Value::as_str).find(|version| !served.contains(version)).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(versions: &[&str], stored: Option<&[&str]>) -> Value {
        let versions: Vec<Value> =
            versions.iter().map(|v| json!({"name": v, "served": true, "storage": false})).collect();
        let mut crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "plumbai.how.theydoit.com"},
                             "spec": {"versions": versions}});
        if let Some(stored) = stored {
            crd["status"] = json!({"storedVersions": stored});
        }
        crd
    }

    #[test]
    fn a_new_crd_must_keep_every_stored_version() {
        let live = crd(&["v1alpha1", "v1"], Some(&["v1alpha1", "v1"]));
        assert_eq!(dropped_stored_version(&live, &crd(&["v1", "v2"], None)), Some("v1alpha1".into()));
        assert_eq!(dropped_stored_version(&live, &crd(&["v1alpha1", "v1", "v2"], None)), None);
        let migrated = crd(&["v1alpha1", "v1"], Some(&["v1"]));
        assert_eq!(dropped_stored_version(&migrated, &crd(&["v1"], None)), None, "a version no longer stored may go");
        assert_eq!(dropped_stored_version(&crd(&["v1"], None), &crd(&["v2"], None)), None, "nothing stored yet");
    }
}

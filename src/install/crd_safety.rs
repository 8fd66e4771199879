//! CRD upgrade safety, as OLM v0 refuses an unsafe CRD update (`SafeStorageVersionUpgrade`): a new CRD must still
//! list every version the existing CRD's `status.storedVersions` holds, or custom resources stored in a dropped
//! version would be lost without a storage migration. And a CRD of content never names an API the cluster serves
//! otherwise (a built-in resource, an aggregated API).

use serde_json::Value;

use super::objects::applied_ref;
use crate::api::v2alpha1::AppliedObject;
use crate::rbac::KindIndex;

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

/// The content's CustomResourceDefinitions that name a resource the API server already serves (`served`: discovery,
/// before the content's own CRDs are added) and that this Install did not apply before: each is either another's CRD
/// (the apply refuses to take it over) or a built-in or aggregated API (`clusterroles.rbac.authorization.k8s.io`),
/// which kube-apiserver keeps serving whatever CRD claims its name. The caller reads each: one with no CRD object
/// behind it is refused, so that rules on a built-in resource are never counted as the content's own API.
pub fn crds_naming_served_apis(objects: &[Value], served: &KindIndex, applied: &[AppliedObject]) -> Vec<AppliedObject> {
    objects
        .iter()
        .filter(|object| object["kind"] == "CustomResourceDefinition")
        .filter(|crd| {
            let (Some(group), Some(plural)) = (crd["spec"]["group"].as_str(), crd["spec"]["names"]["plural"].as_str())
            else {
                return false;
            };
            served.namespaced_resource(group, plural).is_some()
        })
        .map(applied_ref)
        .filter(|reference| !applied.contains(reference))
        .collect()
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

    fn named(group: &str, plural: &str) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
               "metadata": {"name": format!("{plural}.{group}")},
               "spec": {"group": group, "scope": "Cluster", "names": {"kind": "X", "plural": plural},
                        "versions": [{"name": "v1", "served": true, "storage": true}]}})
    }

    #[test]
    fn a_crd_naming_a_served_api_is_to_be_checked_unless_this_install_applied_it() {
        let mut served = KindIndex::default();
        served.add_crds([&named("rbac.authorization.k8s.io", "clusterroles")]);
        let builtin = named("rbac.authorization.k8s.io", "clusterroles");
        let new = named("how.theydoit.com", "plumbai");
        let objects =
            [builtin.clone(), new, json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})];
        let found = crds_naming_served_apis(&objects, &served, &[]);
        assert_eq!(found, vec![applied_ref(&builtin)], "only the CRD naming a served resource");
        assert!(crds_naming_served_apis(&objects, &served, &[applied_ref(&builtin)]).is_empty(), "applied before");
        assert!(crds_naming_served_apis(&objects, &KindIndex::default(), &[]).is_empty(), "nothing served");
    }
}

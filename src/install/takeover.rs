//! The one exception to "content never takes over an existing object" (docs/security.md, invariants 9 and 13): an
//! Install the adoption loop made for an operator OLM v0 installed (`docs/migration.md`, 'Operators OLM v0
//! installed') may, on its first apply, take over the objects OLM v0 made for that operator's CSV, whose lives
//! already ended with that CSV: the CSV itself (it becomes the Install's record), the namespace's objects that name
//! it as their owner, the cluster-scoped ones OLM labels as its (`olm.owner`), and the CRDs the content's CSV owns.
//! Only the controller writes the annotations naming the CSV (the validating webhook refuses anyone else). Pure
//! functions.

use std::collections::BTreeSet;

use serde_json::Value;

use super::grants::INSTALL_ANNOTATION;
use crate::api::v2alpha1::{Install, TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION};
use crate::legacy::roles::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};

/// OLM's labels on the cluster-scoped objects of a CSV, removed from those taken over.
pub const OWNER_LABELS: [&str; 3] = [OWNER_LABEL, OWNER_NAMESPACE_LABEL, OWNER_KIND_LABEL];

/// Whether a live object carries OLM's owner labels.
pub fn labelled_by_olm(live: &Value) -> bool {
    OWNER_LABELS.iter().any(|label| live["metadata"]["labels"][label].is_string())
}

/// The CSV an Install takes over: `namespace/name` and uid, both recorded by the controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Takeover {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// The CSV `install` takes over, if the controller made it to take over one.
pub fn takeover_of(install: &Install) -> Option<Takeover> {
    let annotations = install.metadata.annotations.as_ref()?;
    let (namespace, name) = annotations.get(TAKES_OVER_CSV_ANNOTATION)?.split_once('/')?;
    let uid = annotations.get(TAKES_OVER_CSV_UID_ANNOTATION)?;
    if namespace.is_empty() || name.is_empty() || uid.is_empty() {
        return None;
    }
    Some(Takeover { namespace: namespace.to_owned(), name: name.to_owned(), uid: uid.clone() })
}

/// The CRDs the content's CSVs own (`spec.customresourcedefinitions.owned`), by name.
pub fn owned_crds(objects: &[Value]) -> BTreeSet<String> {
    objects
        .iter()
        .filter(|object| object["kind"] == "ClusterServiceVersion")
        .flat_map(|csv| csv["spec"]["customresourcedefinitions"]["owned"].as_array().cloned().unwrap_or_default())
        .filter_map(|owned| owned["name"].as_str().map(str::to_owned))
        .collect()
}

/// Whether the live object `live` is one OLM v0 made for the CSV taken over, so that the Install `install` may
/// apply over it: the CSV itself (same uid); an object of its namespace owned by it (an owner reference to its uid:
/// an owner reference across namespaces means nothing to Kubernetes); a cluster-scoped object OLM labels as the
/// CSV's (`olm.owner`, `olm.owner.namespace`, `olm.owner.kind`); a CRD of the content that the content's CSV owns
/// (`owned_crds`) and no other Install applied. Never a Namespace.
pub fn made_for_csv(live: &Value, takeover: &Takeover, owned_crds: &BTreeSet<String>, install: &str) -> bool {
    let metadata = &live["metadata"];
    let kind = live["kind"].as_str().unwrap_or_default();
    if kind == "Namespace" {
        return false;
    }
    if kind == "ClusterServiceVersion" {
        return metadata["uid"] == takeover.uid.as_str() && metadata["namespace"] == takeover.namespace.as_str();
    }
    if kind == "CustomResourceDefinition" {
        let name = metadata["name"].as_str().unwrap_or_default();
        let applied_by = metadata["annotations"][INSTALL_ANNOTATION].as_str();
        return owned_crds.contains(name) && applied_by.is_none_or(|other| other == install);
    }
    match metadata["namespace"].as_str() {
        Some(namespace) => {
            namespace == takeover.namespace
                && metadata["ownerReferences"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|owner| owner["uid"] == takeover.uid.as_str() && owner["kind"] == "ClusterServiceVersion")
        }
        None => {
            let labels = &metadata["labels"];
            labels[OWNER_LABEL] == takeover.name.as_str()
                && labels[OWNER_NAMESPACE_LABEL] == takeover.namespace.as_str()
                && labels[OWNER_KIND_LABEL] == "ClusterServiceVersion"
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn takeover() -> Takeover {
        Takeover { namespace: "operators".into(), name: "grumbo.v0.1.0".into(), uid: "csv-uid".into() }
    }

    fn owned_by(uid: &str, namespace: &str) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "grumbo", "namespace": namespace,
            "ownerReferences": [{"kind": "ClusterServiceVersion", "name": "grumbo.v0.1.0", "uid": uid}]}})
    }

    #[test]
    fn only_the_controllers_two_annotations_name_a_csv() {
        let install = |annotations: Value| -> Install {
            serde_json::from_value(json!({"metadata": {"name": "grumbo.operators", "annotations": annotations},
                "spec": {"content": []}}))
            .unwrap()
        };
        let both = install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v0.1.0",
            TAKES_OVER_CSV_UID_ANNOTATION: "csv-uid"}));
        assert_eq!(takeover_of(&both), Some(takeover()));
        assert_eq!(takeover_of(&install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v0.1.0"}))), None);
        assert_eq!(takeover_of(&install(json!({TAKES_OVER_CSV_UID_ANNOTATION: "csv-uid"}))), None);
        let nameless = install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/", TAKES_OVER_CSV_UID_ANNOTATION: "u"}));
        assert_eq!(takeover_of(&nameless), None);
    }

    #[test]
    fn the_csv_itself_is_taken_over_by_uid_only() {
        let csv = |uid: &str, namespace: &str| {
            json!({"kind": "ClusterServiceVersion", "metadata": {"name": "grumbo.v0.1.0", "namespace": namespace,
                "uid": uid}})
        };
        let none = BTreeSet::new();
        assert!(made_for_csv(&csv("csv-uid", "operators"), &takeover(), &none, "i"));
        assert!(!made_for_csv(&csv("another", "operators"), &takeover(), &none, "i"), "made again under the name");
        assert!(!made_for_csv(&csv("csv-uid", "elsewhere"), &takeover(), &none, "i"));
    }

    #[test]
    fn namespaced_objects_are_taken_over_when_owned_by_the_csv_in_its_namespace() {
        let none = BTreeSet::new();
        assert!(made_for_csv(&owned_by("csv-uid", "operators"), &takeover(), &none, "i"));
        assert!(!made_for_csv(&owned_by("other-uid", "operators"), &takeover(), &none, "i"));
        assert!(!made_for_csv(&owned_by("csv-uid", "team-a"), &takeover(), &none, "i"), "no owner across namespaces");
        let mut not_a_csv = owned_by("csv-uid", "operators");
        not_a_csv["metadata"]["ownerReferences"][0]["kind"] = json!("ConfigMap");
        assert!(!made_for_csv(&not_a_csv, &takeover(), &none, "i"));
        let unowned =
            json!({"kind": "ServiceAccount", "metadata": {"name": "olmv2-controller", "namespace": "operators"}});
        assert!(!made_for_csv(&unowned, &takeover(), &none, "i"));
    }

    #[test]
    fn cluster_scoped_objects_are_taken_over_by_olms_owner_labels() {
        let labelled = |name: &str, namespace: &str, kind: &str| {
            json!({"kind": "ClusterRole", "metadata": {"name": "grumbo-x", "labels": {
                OWNER_LABEL: name, OWNER_NAMESPACE_LABEL: namespace, OWNER_KIND_LABEL: kind}}})
        };
        let none = BTreeSet::new();
        assert!(made_for_csv(
            &labelled("grumbo.v0.1.0", "operators", "ClusterServiceVersion"),
            &takeover(),
            &none,
            "i"
        ));
        assert!(!made_for_csv(&labelled("grumbo.v0.1.0", "team-a", "ClusterServiceVersion"), &takeover(), &none, "i"));
        assert!(!made_for_csv(&labelled("other.v1", "operators", "ClusterServiceVersion"), &takeover(), &none, "i"));
        assert!(!made_for_csv(&labelled("grumbo.v0.1.0", "operators", "OperatorGroup"), &takeover(), &none, "i"));
        let namespace = json!({"kind": "Namespace", "metadata": {"name": "operators", "labels": {
            OWNER_LABEL: "grumbo.v0.1.0", OWNER_NAMESPACE_LABEL: "operators", OWNER_KIND_LABEL: "ClusterServiceVersion"}}});
        assert!(!made_for_csv(&namespace, &takeover(), &none, "i"), "a Namespace never");
    }

    #[test]
    fn crds_are_taken_over_when_the_contents_csv_owns_them_and_no_other_install_applied_them() {
        let csv = json!({"kind": "ClusterServiceVersion", "spec": {"customresourcedefinitions": {"owned": [
            {"name": "grumbos.example.com", "version": "v1", "kind": "Grumbo"}]}}});
        let owned = owned_crds(&[csv, json!({"kind": "Deployment"})]);
        assert_eq!(owned, BTreeSet::from(["grumbos.example.com".to_owned()]));
        let crd = |name: &str, applied_by: Option<&str>| {
            let mut crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": name}});
            if let Some(install) = applied_by {
                crd["metadata"]["annotations"] = json!({INSTALL_ANNOTATION: install});
            }
            crd
        };
        assert!(made_for_csv(&crd("grumbos.example.com", None), &takeover(), &owned, "mine"));
        assert!(made_for_csv(&crd("grumbos.example.com", Some("mine")), &takeover(), &owned, "mine"));
        assert!(!made_for_csv(&crd("grumbos.example.com", Some("theirs")), &takeover(), &owned, "mine"));
        assert!(!made_for_csv(&crd("plumbi.example.com", None), &takeover(), &owned, "mine"), "not the CSV's");
    }
}

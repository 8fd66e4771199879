//! The one exception to "content never takes over an existing object" (docs/security.md, invariants 9 and 13): an
//! Install the controller made for a Subscription whose installed CSV no Install applied (an operator OLM v0
//! installed: `docs/migration.md`, 'Operators OLM v0 installed') may, on its first apply, take over the objects made
//! for that CSV, whose lives already ended with it: the CSV itself (it becomes the Install's record), the objects of
//! its namespace that name it as their owner, those of other namespaces that name one of its copies there, the
//! cluster-scoped ones OLM labels as its (`olm.owner`), and the CRDs both it and the content's CSV own. Only while that
//! CSV is still the one recorded (same uid, not being deleted). Only the controller writes the annotations naming
//! the CSV (the validating webhook refuses anyone else). Pure functions, and the pass's step that reads the CSV
//! taken over ([`taken_over`]).

use std::collections::{BTreeMap, BTreeSet};

use kube::api::{ListParams, ObjectMeta, PartialObjectMeta};
use kube::ResourceExt;
use serde_json::Value;

use super::cluster::{list_error, Cluster, ClusterError};
use super::grants::INSTALL_ANNOTATION;
use super::reconcile::{Context, Pass, ReconcileError};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::api::v1alpha1::COPIED_FROM_LABEL;
use crate::api::v1alpha1::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::api::v2alpha1::{AppliedObject, Install, TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION};

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
    takeover_in(&install.metadata)
}

/// [`takeover_of`] on an Install's metadata alone (as a metadata watch sees it).
pub fn takeover_in(install: &ObjectMeta) -> Option<Takeover> {
    let annotations = install.annotations.as_ref()?;
    let (namespace, name) = annotations.get(TAKES_OVER_CSV_ANNOTATION)?.split_once('/')?;
    let uid = annotations.get(TAKES_OVER_CSV_UID_ANNOTATION)?;
    if namespace.is_empty() || name.is_empty() || uid.is_empty() {
        return None;
    }
    Some(Takeover { namespace: namespace.to_owned(), name: name.to_owned(), uid: uid.clone() })
}

/// The takeover of this pass: only on the Install's first apply (it applied nothing yet; a first apply that failed
/// halfway is still the first). Afterwards what it applied is its own, and nothing else is ever taken over.
pub fn first_apply(install: &Install, applied: &[AppliedObject]) -> Option<Takeover> {
    takeover_of(install).filter(|_| applied.is_empty())
}

/// The CSV taken over, as it is now: what it owns, and its copies (uid → namespace).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakenCsv {
    pub owned_crds: BTreeSet<String>,
    pub copies: BTreeMap<String, String>,
}

/// The CSV taken over as read now (`live`, found by namespace and name) and the metadata of the copied CSVs
/// (`olm.copiedFrom`) of the cluster: `None` when it is gone, made again under the name (another uid) or being
/// deleted, so that nothing is taken over for it.
pub fn taken_csv(takeover: &Takeover, live: Option<&ClusterServiceVersion>, copied: &[ObjectMeta]) -> Option<TakenCsv> {
    let live = live.filter(|csv| {
        csv.uid().as_deref() == Some(takeover.uid.as_str()) && csv.metadata.deletion_timestamp.is_none()
    })?;
    let owned_crds = live
        .spec
        .custom_resource_definitions
        .iter()
        .flat_map(|definitions| &definitions.owned)
        .map(|crd| crd.name.clone())
        .collect();
    let copies = copied
        .iter()
        .filter(|copy| copy.name.as_deref() == Some(&takeover.name))
        .filter(|copy| copy.namespace.as_deref().is_some_and(|namespace| namespace != takeover.namespace))
        .filter(|copy| copy.labels.as_ref().and_then(|l| l.get(COPIED_FROM_LABEL)) == Some(&takeover.namespace))
        .filter_map(|copy| Some((copy.uid.clone()?, copy.namespace.clone()?)))
        .collect();
    Some(TakenCsv { owned_crds, copies })
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

/// Whether the live object `live` was made for the CSV taken over, so that the Install `install` may apply over it:
/// the CSV itself (same uid); an object of its namespace owned by it (an owner reference to its uid); an object of
/// another namespace owned by its copy there (OLM's Roles and bindings in a group's targets; an owner reference
/// across namespaces means nothing to Kubernetes); a cluster-scoped object OLM labels as the CSV's (`olm.owner`,
/// `olm.owner.namespace`, `olm.owner.kind`); a CRD that the CSV owns and the content's CSV too (`content_crds`),
/// that no other Install applied. Never a Namespace.
pub fn made_for_csv(
    live: &Value,
    takeover: &Takeover,
    csv: &TakenCsv,
    content_crds: &BTreeSet<String>,
    install: &str,
) -> bool {
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
        return csv.owned_crds.contains(name)
            && content_crds.contains(name)
            && applied_by.is_none_or(|other| other == install);
    }
    match metadata["namespace"].as_str() {
        Some(namespace) => metadata["ownerReferences"].as_array().into_iter().flatten().any(|owner| {
            let uid = owner["uid"].as_str().unwrap_or_default();
            let of_csv = owner["kind"] == "ClusterServiceVersion" && owner["name"] == takeover.name.as_str();
            let the_csv = namespace == takeover.namespace && uid == takeover.uid;
            let its_copy = csv.copies.get(uid).is_some_and(|copy_namespace| copy_namespace == namespace);
            of_csv && (the_csv || its_copy)
        }),
        None => {
            let labels = &metadata["labels"];
            labels[OWNER_LABEL] == takeover.name.as_str()
                && labels[OWNER_NAMESPACE_LABEL] == takeover.namespace.as_str()
                && labels[OWNER_KIND_LABEL] == "ClusterServiceVersion"
        }
    }
}

/// The pass's step after the gate: for an Install made for an operator OLM v0 installed, on its first apply, the CSV
/// whose objects it takes over, while that CSV is the one recorded.
pub async fn taken_over(ctx: &Context, pass: &Pass<'_>) -> Result<Option<(Takeover, TakenCsv)>, ReconcileError> {
    Ok(match first_apply(pass.install, &pass.previous.applied) {
        Some(takeover) => ctx.cluster.taken_csv(&takeover).await?.map(|csv| (takeover, csv)),
        None => None,
    })
}

impl Cluster {
    /// The CSV an Install takes over, as it is now (`takeover::taken_csv`): read by namespace and name, its copies
    /// among the copied CSVs' metadata.
    pub async fn taken_csv(&self, takeover: &Takeover) -> Result<Option<TakenCsv>, ClusterError> {
        let live = self
            .client
            .namespaced::<ClusterServiceVersion>(&takeover.namespace)
            .get_opt(&takeover.name)
            .await
            .map_err(list_error("the CSV taken over"))?;
        let copied = ListParams::default()
            .labels(&format!("{COPIED_FROM_LABEL}={}", takeover.namespace))
            .fields(&format!("metadata.name={}", takeover.name));
        let copies = self
            .client
            .all::<PartialObjectMeta<ClusterServiceVersion>>()
            .list_with(&copied)
            .await
            .map_err(list_error("the copies of the CSV taken over"))?;
        let metadata: Vec<ObjectMeta> = copies.into_iter().map(|copy| copy.metadata).collect();
        Ok(taken_csv(takeover, live.as_ref(), &metadata))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn takeover() -> Takeover {
        Takeover { namespace: "operators".into(), name: "grumbo.v0.1.0".into(), uid: "csv-uid".into() }
    }

    fn taken() -> TakenCsv {
        TakenCsv {
            owned_crds: BTreeSet::from(["grumbos.example.com".to_owned()]),
            copies: BTreeMap::from([("copy-uid".to_owned(), "team-a".to_owned())]),
        }
    }

    fn owned_by(uid: &str, namespace: &str) -> Value {
        json!({"kind": "Deployment", "metadata": {"name": "grumbo", "namespace": namespace,
            "ownerReferences": [{"kind": "ClusterServiceVersion", "name": "grumbo.v0.1.0", "uid": uid}]}})
    }

    fn install(annotations: Value) -> Install {
        serde_json::from_value(json!({"metadata": {"name": "grumbo.operators", "annotations": annotations},
            "spec": {"content": []}}))
        .unwrap()
    }

    fn csv(namespace: &str, uid: &str, labels: Value) -> ClusterServiceVersion {
        serde_json::from_value(json!({"metadata": {"name": "grumbo.v0.1.0", "namespace": namespace, "uid": uid,
            "labels": labels},
            "spec": {"install": {"strategy": "deployment"}, "customresourcedefinitions": {"owned": [
                {"name": "grumbos.example.com", "version": "v1", "kind": "Grumbo"}]}}}))
        .unwrap()
    }

    #[test]
    fn only_the_controllers_two_annotations_name_a_csv_and_only_for_the_first_apply() {
        let both = install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v0.1.0",
            TAKES_OVER_CSV_UID_ANNOTATION: "csv-uid"}));
        assert_eq!(takeover_of(&both), Some(takeover()));
        assert_eq!(first_apply(&both, &[]), Some(takeover()));
        let applied = AppliedObject {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some("operators".into()),
            name: "grumbo".into(),
        };
        assert_eq!(first_apply(&both, &[applied]), None, "once applied, nothing more is taken over");
        assert_eq!(takeover_of(&install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v0.1.0"}))), None);
        assert_eq!(takeover_of(&install(json!({TAKES_OVER_CSV_UID_ANNOTATION: "csv-uid"}))), None);
        let nameless = install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/", TAKES_OVER_CSV_UID_ANNOTATION: "u"}));
        assert_eq!(takeover_of(&nameless), None);
    }

    #[test]
    fn only_the_csv_recorded_is_taken_over_with_its_crds_and_copies() {
        let live = csv("operators", "csv-uid", json!({}));
        let copies = [
            csv("team-a", "copy-uid", json!({COPIED_FROM_LABEL: "operators"})).metadata,
            csv("team-b", "stray-uid", json!({COPIED_FROM_LABEL: "elsewhere"})).metadata,
            csv("operators", "csv-uid", json!({COPIED_FROM_LABEL: "operators"})).metadata,
        ];
        assert_eq!(taken_csv(&takeover(), Some(&live), &copies), Some(taken()));
        let remade = csv("operators", "new-uid", json!({}));
        assert_eq!(taken_csv(&takeover(), Some(&remade), &copies), None, "made again under the name");
        assert_eq!(taken_csv(&takeover(), None, &copies), None, "gone");
        let mut deleting = live.clone();
        deleting.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        assert_eq!(taken_csv(&takeover(), Some(&deleting), &copies), None, "being deleted");
    }

    #[test]
    fn the_csv_itself_is_taken_over_by_uid_only() {
        let csv = |uid: &str, namespace: &str| {
            json!({"kind": "ClusterServiceVersion", "metadata": {"name": "grumbo.v0.1.0", "namespace": namespace,
                "uid": uid}})
        };
        let none = BTreeSet::new();
        assert!(made_for_csv(&csv("csv-uid", "operators"), &takeover(), &taken(), &none, "i"));
        assert!(!made_for_csv(&csv("another", "operators"), &takeover(), &taken(), &none, "i"), "made again");
        assert!(!made_for_csv(&csv("csv-uid", "elsewhere"), &takeover(), &taken(), &none, "i"));
        assert!(!made_for_csv(&csv("copy-uid", "team-a"), &takeover(), &taken(), &none, "i"), "a copy is not it");
    }

    #[test]
    fn namespaced_objects_are_taken_over_when_owned_by_the_csv_or_its_copy_where_they_are() {
        let none = BTreeSet::new();
        let taken = taken();
        assert!(made_for_csv(&owned_by("csv-uid", "operators"), &takeover(), &taken, &none, "i"));
        assert!(made_for_csv(&owned_by("copy-uid", "team-a"), &takeover(), &taken, &none, "i"), "its copy's");
        assert!(!made_for_csv(&owned_by("copy-uid", "team-b"), &takeover(), &taken, &none, "i"), "copy elsewhere");
        assert!(!made_for_csv(&owned_by("other-uid", "operators"), &takeover(), &taken, &none, "i"));
        assert!(!made_for_csv(&owned_by("csv-uid", "team-a"), &takeover(), &taken, &none, "i"), "across namespaces");
        let mut not_a_csv = owned_by("csv-uid", "operators");
        not_a_csv["metadata"]["ownerReferences"][0]["kind"] = json!("ConfigMap");
        assert!(!made_for_csv(&not_a_csv, &takeover(), &taken, &none, "i"));
        let mut another_name = owned_by("csv-uid", "operators");
        another_name["metadata"]["ownerReferences"][0]["name"] = json!("plumbus.v1");
        assert!(!made_for_csv(&another_name, &takeover(), &taken, &none, "i"));
        let unowned =
            json!({"kind": "ServiceAccount", "metadata": {"name": "olmv2-controller", "namespace": "operators"}});
        assert!(!made_for_csv(&unowned, &takeover(), &taken, &none, "i"));
    }

    #[test]
    fn cluster_scoped_objects_are_taken_over_by_olms_owner_labels() {
        let labelled = |name: &str, namespace: &str, kind: &str| {
            json!({"kind": "ClusterRole", "metadata": {"name": "grumbo-x", "labels": {
                OWNER_LABEL: name, OWNER_NAMESPACE_LABEL: namespace, OWNER_KIND_LABEL: kind}}})
        };
        let (none, taken) = (BTreeSet::new(), taken());
        let ours = labelled("grumbo.v0.1.0", "operators", "ClusterServiceVersion");
        assert!(made_for_csv(&ours, &takeover(), &taken, &none, "i"));
        assert!(labelled_by_olm(&ours));
        for other in [
            labelled("grumbo.v0.1.0", "team-a", "ClusterServiceVersion"),
            labelled("other.v1", "operators", "ClusterServiceVersion"),
            labelled("grumbo.v0.1.0", "operators", "OperatorGroup"),
        ] {
            assert!(!made_for_csv(&other, &takeover(), &taken, &none, "i"), "{other}");
        }
        let namespace = json!({"kind": "Namespace", "metadata": {"name": "operators", "labels": {
            OWNER_LABEL: "grumbo.v0.1.0", OWNER_NAMESPACE_LABEL: "operators", OWNER_KIND_LABEL: "ClusterServiceVersion"}}});
        assert!(!made_for_csv(&namespace, &takeover(), &taken, &none, "i"), "a Namespace never");
        assert!(!labelled_by_olm(&json!({"metadata": {"labels": {"app": "x"}}})));
    }

    #[test]
    fn crds_are_taken_over_when_both_csvs_own_them_and_no_other_install_applied_them() {
        let content = json!({"kind": "ClusterServiceVersion", "spec": {"customresourcedefinitions": {"owned": [
            {"name": "grumbos.example.com", "version": "v1", "kind": "Grumbo"},
            {"name": "plumbi.example.com", "version": "v1", "kind": "Plumbus"}]}}});
        let content_crds = owned_crds(&[content, json!({"kind": "Deployment"})]);
        assert_eq!(content_crds.len(), 2);
        let crd = |name: &str, applied_by: Option<&str>| {
            let mut crd = json!({"kind": "CustomResourceDefinition", "metadata": {"name": name}});
            if let Some(install) = applied_by {
                crd["metadata"]["annotations"] = json!({INSTALL_ANNOTATION: install});
            }
            crd
        };
        let taken = taken();
        assert!(made_for_csv(&crd("grumbos.example.com", None), &takeover(), &taken, &content_crds, "mine"));
        assert!(made_for_csv(&crd("grumbos.example.com", Some("mine")), &takeover(), &taken, &content_crds, "mine"));
        assert!(!made_for_csv(&crd("grumbos.example.com", Some("theirs")), &takeover(), &taken, &content_crds, "mine"));
        assert!(
            !made_for_csv(&crd("plumbi.example.com", None), &takeover(), &taken, &content_crds, "mine"),
            "the content claims it, the CSV taken over never owned it"
        );
        let only_taken = BTreeSet::new();
        assert!(!made_for_csv(&crd("grumbos.example.com", None), &takeover(), &taken, &only_taken, "mine"));
    }
}

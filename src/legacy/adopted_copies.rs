//! The copied CSVs of an adopted operator (seed 004, 'Deprecate Copied ClusterServiceVersions'; seed 002's surrogate
//! owner). Once an Install has taken over a CSV OLM v0 installed, that CSV is the Install's record, which is never
//! copied; once the Install is an Operator's, the copies OLM v0 made of the CSV go. What a copy owned in its
//! namespace (the Roles and RoleBindings its operator was given there) passes to the Operator first, a
//! cluster-scoped owner Kubernetes accepts for namespaced objects, so that it lives as long as the operator rather
//! than being garbage-collected with the copy; the copy is then deleted orphaning anything else that named it.
//! Pure decisions; the copied-CSV loop (`copied`) does the writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use crate::api::v1alpha1::ClusterServiceVersion;
use crate::api::v2alpha1::Install;
use crate::install::takeover::{takeover_in, takeover_of};

/// The Operator an adopted Install belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorOwner {
    pub name: String,
    pub uid: String,
}

/// The Operator owning `install` (its controller reference, read from its metadata), if one does: the copies of its
/// record go then.
pub fn operator_of(install: &ObjectMeta) -> Option<OperatorOwner> {
    install
        .owner_references
        .iter()
        .flatten()
        .find(|owner| owner.kind == "Operator" && owner.controller == Some(true))
        .map(|owner| OperatorOwner { name: owner.name.clone(), uid: owner.uid.clone() })
}

/// The Operator whose Install took over `record` (an original CSV carrying an Install's record annotation), if
/// one owns it: only then do the record's copies go. The annotation alone proves nothing (whoever may write CSVs
/// can set it), so the Install must be the one made to take over exactly this CSV (its controller-only annotations
/// name its namespace, name and uid) and the CSV must be that Install's (an owner reference to its uid).
pub fn adopted_operator(record: &ClusterServiceVersion, install: &Install) -> Option<OperatorOwner> {
    let takeover = takeover_of(install)?;
    let same = record.namespace().as_deref() == Some(takeover.namespace.as_str())
        && record.name_any() == takeover.name
        && record.uid().as_deref() == Some(takeover.uid.as_str());
    let install_uid = install.uid()?;
    let owned = record.owner_references().iter().any(|owner| owner.uid == install_uid);
    if same && owned {
        operator_of(&install.metadata)
    } else {
        None
    }
}

/// The CSV (namespace and name) whose copies a change of `install` (its metadata) may let go: the one it took over,
/// once an Operator controls it. Adoption is the last step, and may come after every event of the record itself, so
/// the copies wait for it here; each is still judged against the Install and the record before it is deleted.
pub fn adopted_takeover(install: &ObjectMeta) -> Option<(String, String)> {
    operator_of(install)?;
    takeover_in(install).map(|takeover| (takeover.namespace, takeover.name))
}

/// A dependent's owner references with the copy's (`copy_uid`) replaced by the Operator's, or `None` when it names
/// no such copy. The Operator's reference neither controls nor blocks: the dependent keeps whatever controller it
/// had, and deleting the Operator is never held up by it.
pub fn reowned(owners: &[OwnerReference], copy_uid: &str, operator: &OperatorOwner) -> Option<Vec<OwnerReference>> {
    if !owners.iter().any(|owner| owner.uid == copy_uid) {
        return None;
    }
    let mut references: Vec<OwnerReference> = owners.iter().filter(|owner| owner.uid != copy_uid).cloned().collect();
    if !references.iter().any(|owner| owner.uid == operator.uid) {
        references.push(OwnerReference {
            api_version: "operators.coreos.com/v2alpha1".into(),
            kind: "Operator".into(),
            name: operator.name.clone(),
            uid: operator.uid.clone(),
            controller: None,
            block_owner_deletion: None,
        });
    }
    Some(references)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::api::v2alpha1::{TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION};

    fn operator() -> OperatorOwner {
        OperatorOwner { name: "grumbo".into(), uid: "operator-uid".into() }
    }

    fn reference(kind: &str, uid: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: "v1".into(),
            kind: kind.into(),
            name: "x".into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        }
    }

    #[test]
    fn only_an_install_controlled_by_an_operator_belongs_to_one() {
        let install = |owners: serde_json::Value| -> Install {
            serde_json::from_value(json!({"metadata": {"name": "grumbo.operators", "ownerReferences": owners},
                "spec": {"content": []}}))
            .unwrap()
        };
        let controlled = install(json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
            "name": "grumbo", "uid": "operator-uid", "controller": true}]));
        assert_eq!(operator_of(&controlled.metadata), Some(operator()));
        let referenced = install(json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
            "name": "grumbo", "uid": "operator-uid"}]));
        assert_eq!(operator_of(&referenced.metadata), None, "a mere reference is not adoption");
        assert_eq!(operator_of(&install(json!([])).metadata), None);
    }

    #[test]
    fn a_records_copies_go_only_for_the_install_that_took_exactly_it_over() {
        let install = |annotations: serde_json::Value| -> Install {
            serde_json::from_value(json!({"metadata": {"name": "grumbo.operators", "uid": "install-uid",
                "annotations": annotations,
                "ownerReferences": [{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
                    "name": "grumbo", "uid": "operator-uid", "controller": true}]},
                "spec": {"content": []}}))
            .unwrap()
        };
        let taking = install(json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v1",
            TAKES_OVER_CSV_UID_ANNOTATION: "csv-uid"}));
        let record = |namespace: &str, uid: &str, owner: &str| -> ClusterServiceVersion {
            serde_json::from_value(json!({"metadata": {"name": "grumbo.v1", "namespace": namespace, "uid": uid,
                "ownerReferences": [{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
                    "name": "grumbo.operators", "uid": owner}]},
                "spec": {"install": {"strategy": "deployment"}}}))
            .unwrap()
        };
        assert_eq!(adopted_operator(&record("operators", "csv-uid", "install-uid"), &taking), Some(operator()));
        // Someone's CSV merely annotated as that Install's record: another uid, another namespace, not owned.
        assert_eq!(adopted_operator(&record("operators", "other-uid", "install-uid"), &taking), None);
        assert_eq!(adopted_operator(&record("team-a", "csv-uid", "install-uid"), &taking), None);
        assert_eq!(adopted_operator(&record("operators", "csv-uid", "someone"), &taking), None);
        // An Install that took nothing over (an Operator's own) never removes copies.
        assert_eq!(adopted_operator(&record("operators", "csv-uid", "install-uid"), &install(json!({}))), None);
    }

    #[test]
    fn an_installs_change_lets_copies_go_only_once_an_operator_controls_the_install_that_took_a_csv_over() {
        let install = |annotations: serde_json::Value, owners: serde_json::Value| -> ObjectMeta {
            serde_json::from_value(json!({"name": "grumbo.operators", "annotations": annotations,
                "ownerReferences": owners}))
            .unwrap()
        };
        let taking = json!({TAKES_OVER_CSV_ANNOTATION: "operators/grumbo.v1", TAKES_OVER_CSV_UID_ANNOTATION: "u"});
        let controlled = json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
            "name": "grumbo", "uid": "operator-uid", "controller": true}]);
        assert_eq!(
            adopted_takeover(&install(taking.clone(), controlled.clone())),
            Some(("operators".to_owned(), "grumbo.v1".to_owned()))
        );
        // Not adopted yet: the copies stay until it is.
        assert_eq!(adopted_takeover(&install(taking, json!([]))), None);
        // An Operator's own Install, which took nothing over.
        assert_eq!(adopted_takeover(&install(json!({}), controlled)), None);
    }

    #[test]
    fn the_copys_reference_becomes_the_operators_and_others_stay() {
        let owners =
            vec![reference("ClusterServiceVersion", "copy-uid", None), reference("Thing", "other", Some(true))];
        let reowned = reowned(&owners, "copy-uid", &operator()).expect("named the copy");
        let uids: Vec<&str> = reowned.iter().map(|owner| owner.uid.as_str()).collect();
        assert_eq!(uids, ["other", "operator-uid"]);
        let added = &reowned[1];
        assert_eq!((added.kind.as_str(), added.name.as_str()), ("Operator", "grumbo"));
        assert_eq!((added.controller, added.block_owner_deletion), (None, None));
        assert_eq!(reowned[0].controller, Some(true), "its controller is kept");
    }

    #[test]
    fn a_dependent_of_something_else_is_left_alone_and_the_operator_is_named_once() {
        assert_eq!(reowned(&[reference("ClusterServiceVersion", "another-copy", None)], "copy-uid", &operator()), None);
        let both =
            vec![reference("ClusterServiceVersion", "copy-uid", None), reference("Operator", "operator-uid", None)];
        let reowned = reowned(&both, "copy-uid", &operator()).expect("named the copy");
        assert_eq!(reowned.len(), 1);
    }
}

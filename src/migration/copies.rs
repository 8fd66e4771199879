//! The copied CSVs of an adopted operator (seed 004, 'Deprecate Copied ClusterServiceVersions'; seed 002's surrogate
//! owner). Once an Install has taken over a CSV OLM v0 installed, that CSV is the Install's record, which is never
//! copied; once the Install is an Operator's, the copies OLM v0 made of the CSV go. What a copy owned in its
//! namespace (the Roles and RoleBindings its operator was given there) passes to the Operator first, a
//! cluster-scoped owner Kubernetes accepts for namespaced objects, so that it lives as long as the operator rather
//! than being garbage-collected with the copy; the copy is then deleted orphaning anything else that named it.
//! Pure decisions; the copied-CSV loop (`legacy::copied`) does the writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::api::v2alpha1::Install;

/// The Operator an adopted Install belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OperatorOwner {
    pub name: String,
    pub uid: String,
}

/// The Operator owning `install` (its controller reference), if one does: the copies of its record go then.
pub fn operator_of(install: &Install) -> Option<OperatorOwner> {
    install
        .owner_references()
        .iter()
        .find(|owner| owner.kind == "Operator" && owner.controller == Some(true))
        .map(|owner| OperatorOwner { name: owner.name.clone(), uid: owner.uid.clone() })
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
        assert_eq!(operator_of(&controlled), Some(operator()));
        let referenced = install(json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
            "name": "grumbo", "uid": "operator-uid"}]));
        assert_eq!(operator_of(&referenced), None, "a mere reference is not adoption");
        assert_eq!(operator_of(&install(json!([]))), None);
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

//! Whether a CSV's provided APIs may join its OperatorGroup's `olm.providedAPIs`, as OLM v0's
//! `ReconcileAPIIntersection` decides: two groups whose targets intersect (a group's own namespace counts as a
//! target unless it targets all namespaces, which intersects every group) must not provide the same API, so that
//! one namespace never has two operators reconciling one kind.

use std::collections::BTreeSet;

use super::apis::{group_provided_apis, ApiSet};
use crate::api::v1::OperatorGroup;

/// A group as the intersection check sees it: its targets (from its status) and its provided APIs (annotation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSurface {
    pub namespace: String,
    pub name: String,
    /// Target namespaces plus the group's own; `""` among them means every namespace.
    pub targets: BTreeSet<String>,
    pub provided: ApiSet,
}

impl GroupSurface {
    pub fn of(group: &OperatorGroup) -> Self {
        let namespace = group.metadata.namespace.clone().unwrap_or_default();
        let mut targets: BTreeSet<String> =
            group.status.as_ref().map(|status| status.namespaces.iter().cloned().collect()).unwrap_or_default();
        let global = group.status.as_ref().and_then(|status| status.namespaces.first()).is_some_and(String::is_empty);
        if !targets.is_empty() && !global {
            targets.insert(namespace.clone());
        }
        let provided = group_provided_apis(group);
        Self { namespace, name: group.metadata.name.clone().unwrap_or_default(), targets, provided }
    }

    fn is_all(&self) -> bool {
        self.targets.contains("")
    }

    /// Whether the targets of two groups share a namespace (all namespaces share every namespace of a non-empty set).
    pub fn intersects(&self, other: &GroupSurface) -> bool {
        if self.is_all() {
            return !other.targets.is_empty();
        }
        if other.is_all() {
            return !self.targets.is_empty();
        }
        self.targets.intersection(&other.targets).next().is_some()
    }
}

/// What to do with a CSV's provided APIs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApiReconciliation {
    /// Nothing to change.
    NoConflict,
    /// Add them to the group's annotation.
    Add,
    /// Remove them from the group's annotation (they are there, and an intersecting group provides them too).
    Remove,
    /// An intersecting group provides them: the CSV fails with `InterOperatorGroupOwnerConflict`.
    Conflict,
}

/// OLM's decision for APIs `add` of a CSV in `group`, given every `other` group of the cluster.
pub fn reconcile(add: &ApiSet, group: &GroupSurface, others: &[GroupSurface]) -> ApiReconciliation {
    let provided_elsewhere: ApiSet = others
        .iter()
        .filter(|other| group.intersects(other))
        .flat_map(|other| other.provided.iter().cloned())
        .collect();
    let intersecting = add.intersection(&provided_elsewhere).next().is_some();
    let subset = add.is_subset(&group.provided);
    match (subset, intersecting) {
        (true, true) => ApiReconciliation::Remove,
        (false, true) => ApiReconciliation::Conflict,
        (false, false) => ApiReconciliation::Add,
        (true, false) => ApiReconciliation::NoConflict,
    }
}

#[cfg(test)]
mod tests {
    use super::super::apis::ApiKey;
    use super::*;

    fn surface(namespace: &str, targets: &[&str], provided: &[&str]) -> GroupSurface {
        let mut set: BTreeSet<String> = targets.iter().map(|t| (*t).to_owned()).collect();
        if !set.is_empty() && !set.contains("") {
            set.insert(namespace.to_owned());
        }
        GroupSurface {
            namespace: namespace.into(),
            name: "og".into(),
            targets: set,
            provided: provided.iter().map(|kind| key(kind)).collect(),
        }
    }

    fn key(kind: &str) -> ApiKey {
        ApiKey { kind: kind.into(), version: "v1".into(), group: "example.com".into() }
    }

    fn apis(kinds: &[&str]) -> ApiSet {
        kinds.iter().map(|kind| key(kind)).collect()
    }

    #[test]
    fn a_new_api_without_competition_is_added_then_settles() {
        let group = surface("a", &["a"], &[]);
        assert_eq!(reconcile(&apis(&["P"]), &group, &[]), ApiReconciliation::Add);
        let group = surface("a", &["a"], &["P"]);
        assert_eq!(reconcile(&apis(&["P"]), &group, &[]), ApiReconciliation::NoConflict);
        assert_eq!(reconcile(&ApiSet::new(), &group, &[]), ApiReconciliation::NoConflict);
    }

    #[test]
    fn an_intersecting_group_providing_the_api_is_a_conflict() {
        let group = surface("a", &["a"], &[]);
        let global = surface("b", &[""], &["P"]);
        assert_eq!(reconcile(&apis(&["P"]), &group, std::slice::from_ref(&global)), ApiReconciliation::Conflict);
        // Once both provide it, this group gives it up.
        let holding = surface("a", &["a"], &["P"]);
        assert_eq!(reconcile(&apis(&["P"]), &holding, &[global]), ApiReconciliation::Remove);
    }

    #[test]
    fn disjoint_groups_may_provide_the_same_api() {
        let group = surface("a", &["a"], &[]);
        let other = surface("b", &["b", "c"], &["P"]);
        assert_eq!(reconcile(&apis(&["P"]), &group, &[other]), ApiReconciliation::Add);
        // A group targeting this group's namespace intersects through its own namespace.
        let reaching = surface("b", &["a"], &["P"]);
        assert_eq!(reconcile(&apis(&["P"]), &group, &[reaching]), ApiReconciliation::Conflict);
    }

    #[test]
    fn a_group_not_yet_synced_intersects_nothing() {
        let group = surface("a", &["a"], &[]);
        let unsynced = surface("b", &[], &["P"]);
        assert_eq!(reconcile(&apis(&["P"]), &group, &[unsynced]), ApiReconciliation::Add);
        let global = surface("c", &[""], &[]);
        assert!(!global.intersects(&surface("b", &[], &[])));
        assert!(global.intersects(&surface("d", &["x"], &[])));
    }
}

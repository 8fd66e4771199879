//! Which CSVs a change of an OperatorGroup concerns, decided without a cluster. A group's change concerns the CSVs
//! of its namespace (membership, targets, annotations, copies) and the CSVs providing an API the group lists in
//! `olm.providedAPIs`, now or at its last change: a conflict between intersecting groups may have begun or ended.
//! No other CSV's pass could decide differently, and waking every CSV on every group's change made the passes
//! quadratic in groups (a hundred groups each written a few times while they settle woke a hundred CSVs each
//! time). OLM requeues the same CSVs: those of the group's namespaces and the providers of its APIs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kube::runtime::reflector::{ObjectRef, Store};
use kube::ResourceExt;

use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::legacy::apis::{group_provided_apis, provided_apis, ApiSet};

/// The CSVs among `csvs` that a change of `group`, which listed `before` at its last change, concerns.
pub fn concerned_by_group(
    group: &OperatorGroup,
    before: &ApiSet,
    csvs: &[Arc<ClusterServiceVersion>],
) -> Vec<ObjectRef<ClusterServiceVersion>> {
    let namespace = group.namespace();
    let listed: ApiSet = group_provided_apis(group).union(before).cloned().collect();
    csvs.iter()
        .filter(|csv| {
            csv.namespace() == namespace || provided_apis(csv).is_ok_and(|provided| !provided.is_disjoint(&listed))
        })
        .map(|csv| ObjectRef::from_obj(csv.as_ref()))
        .collect()
}

/// Remembers what each group listed at its last change, so that the change removing an API still wakes that API's
/// providers. A group gone from `groups` (the store the changes come from, which takes a deletion before it is
/// seen here) is forgotten.
pub struct GroupApis {
    groups: Store<OperatorGroup>,
    listed: Mutex<HashMap<ObjectRef<OperatorGroup>, ApiSet>>,
}

impl GroupApis {
    pub fn new(groups: Store<OperatorGroup>) -> Self {
        Self { groups, listed: Mutex::default() }
    }

    /// What `group` listed at its last change, recording what it lists now.
    pub fn before(&self, group: &OperatorGroup) -> ApiSet {
        let key = ObjectRef::from_obj(group);
        let now = group_provided_apis(group);
        let gone = self.groups.get(&key).is_none();
        let mut listed = self.listed.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let before = if gone { listed.remove(&key) } else { listed.insert(key, now) };
        before.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn group(namespace: &str, apis: &str) -> OperatorGroup {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": namespace, "annotations": {"olm.providedAPIs": apis}},
            "spec": {}}))
        .expect("group")
    }

    fn csv(namespace: &str, name: &str, owned: &str) -> Arc<ClusterServiceVersion> {
        let (plural_group, kind) = owned.split_once('/').expect("crd/kind");
        Arc::new(
            serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "ClusterServiceVersion", "metadata": {"name": name, "namespace": namespace},
                "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}},
                         "customresourcedefinitions": {"owned": [
                             {"name": plural_group, "version": "v1", "kind": kind}]}}}))
            .expect("csv"),
        )
    }

    fn names(refs: Vec<ObjectRef<ClusterServiceVersion>>) -> Vec<String> {
        refs.into_iter().map(|at| format!("{}/{}", at.namespace.unwrap_or_default(), at.name)).collect()
    }

    #[test]
    fn a_group_concerns_its_namespace_and_the_providers_of_its_apis_only() {
        let csvs = [
            csv("ops", "own", "plumbuses.example.com/Plumbus"),
            csv("elsewhere", "rival", "plumbuses.example.com/Plumbus"),
            csv("third", "unrelated", "grumbos.example.com/Grumbo"),
        ];
        let changed = group("ops", "Plumbus.v1.example.com");
        assert_eq!(names(concerned_by_group(&changed, &ApiSet::new(), &csvs)), ["ops/own", "elsewhere/rival"]);
        let listing_nothing = group("ops", "");
        assert_eq!(names(concerned_by_group(&listing_nothing, &ApiSet::new(), &csvs)), ["ops/own"]);
    }

    #[test]
    fn an_api_the_group_no_longer_lists_still_wakes_its_providers() {
        let csvs = [csv("elsewhere", "rival", "plumbuses.example.com/Plumbus")];
        let before = group_provided_apis(&group("ops", "Plumbus.v1.example.com"));
        let pruned = group("ops", "");
        assert_eq!(names(concerned_by_group(&pruned, &before, &csvs)), ["elsewhere/rival"]);
        assert!(concerned_by_group(&pruned, &ApiSet::new(), &csvs).is_empty());
    }

    #[test]
    fn what_a_group_listed_is_remembered_while_it_exists() {
        let (store, mut writer) = kube::runtime::reflector::store::<OperatorGroup>();
        let apis = GroupApis::new(store);
        let listing = group("ops", "Plumbus.v1.example.com");
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(listing.clone()));
        assert!(apis.before(&listing).is_empty(), "first seen: nothing before");
        let pruned = group("ops", "");
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(pruned.clone()));
        assert_eq!(apis.before(&pruned), group_provided_apis(&listing), "the change removing an API returns it");
        assert!(apis.before(&pruned).is_empty());
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(listing.clone()));
        apis.before(&listing);
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Delete(listing.clone()));
        assert_eq!(apis.before(&listing), group_provided_apis(&listing), "deleted: what it listed, then forgotten");
        assert!(apis.before(&listing).is_empty(), "forgotten once deleted");
    }
}

//! What one pass over an OperatorGroup decides, as OLM v0's `syncOperatorGroups` does, in its order: the
//! `MultipleOperatorGroup` condition, the ServiceAccount it names (`OperatorGroupServiceAccount` when it is missing,
//! which stops the pass), the target namespaces (`status.namespaces` and `lastUpdated`, written alone so that CSVs
//! are annotated on the next pass, from the status others see), then the members' `olm.*` annotations, the three
//! aggregating ClusterRoles, and pruning `olm.providedAPIs` of APIs no member provides any more.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::Value;

use super::super::apis::{api_set_string, group_provided_apis, provided_apis, ApiSet};
use super::super::membership::{group_annotations, is_copied, is_install_record};
use super::super::roles::{group_role, SUFFIXES};
use super::super::targets::targets;
use crate::api::v1::{OperatorGroup, OperatorGroupStatus};
use crate::api::v1alpha1::{ClusterServiceVersion, CsvPhase};
use crate::controller::conditions::{conditions, Wanted, TRUE};

pub const MULTIPLE_OPERATOR_GROUP: &str = "MultipleOperatorGroup";
pub const MULTIPLE_OPERATOR_GROUPS_FOUND: &str = "MultipleOperatorGroupsFound";
pub const SERVICE_ACCOUNT_CONDITION: &str = "OperatorGroupServiceAccount";
pub const SERVICE_ACCOUNT_NOT_FOUND: &str = "ServiceAccountNotFound";

/// The ServiceAccount a group names, as found.
pub enum Account<'a> {
    /// The group names none.
    NotNamed,
    /// The group names one that does not exist.
    Missing(&'a str),
    Found(&'a ServiceAccount),
}

/// What a pass over a group read.
pub struct Observed<'a> {
    pub group: &'a OperatorGroup,
    /// How many groups its namespace holds, itself included.
    pub groups_in_namespace: usize,
    pub account: Account<'a>,
    /// Every namespace and its labels (read only for a group with a selector).
    pub namespaces: &'a [(String, BTreeMap<String, String>)],
    /// The CSVs of the group's namespace.
    pub csvs: &'a [ClusterServiceVersion],
    pub now: Time,
}

/// What the pass writes.
#[derive(Debug, Default, PartialEq)]
pub struct Decision {
    /// The status, when it changed.
    pub status: Option<OperatorGroupStatus>,
    /// Why the pass stopped early (a missing ServiceAccount, targets that cannot be computed): logged, retried.
    pub stopped: Option<String>,
    /// CSVs whose `olm.*` group annotations must be set: name and the three annotations.
    pub annotate: Vec<(String, BTreeMap<String, String>)>,
    /// The three aggregating ClusterRoles.
    pub roles: Vec<Value>,
    /// The pruned `olm.providedAPIs` value, when it must shrink.
    pub provided_apis: Option<String>,
}

impl Decision {
    /// Whether the pass changed the group's targets (`status.namespaces`) from `group`'s.
    pub fn targets_changed(&self, group: &OperatorGroup) -> bool {
        let before = group.status.as_ref().map(|status| status.namespaces.as_slice()).unwrap_or_default();
        self.status.as_ref().is_some_and(|status| status.namespaces != before)
    }
}

pub fn decide(observed: &Observed<'_>) -> Decision {
    let group = observed.group;
    let previous = group.status.clone().unwrap_or_default();
    let mut status = previous.clone();
    let (changed, stopped) = conditions_and_account(observed, &previous, &mut status);
    if stopped.is_some() {
        return Decision { status: changed.then_some(status), stopped, ..Decision::default() };
    }

    let targets = match targets(&group.spec, observed.namespaces) {
        Ok(targets) => targets,
        Err(error) => {
            return Decision {
                status: changed.then_some(status),
                stopped: Some(error.to_string()),
                ..Decision::default()
            }
        }
    };
    let namespaces = targets.status_namespaces();
    if !same_set(&namespaces, &previous.namespaces) {
        status.namespaces = namespaces;
        status.last_updated = Some(observed.now.clone());
        return Decision { status: Some(status), ..Decision::default() };
    }

    Decision { status: changed.then_some(status), ..settled_writes(observed, &previous.namespaces) }
}

/// Sets the group's conditions (`MultipleOperatorGroup`, and `OperatorGroupServiceAccount` when the account it
/// names is missing) and its ServiceAccount reference on `status`, which starts as `previous`. Returns whether that
/// changed the status, and why the pass stops there (the account is missing; its last reference is kept).
fn conditions_and_account(
    observed: &Observed<'_>,
    previous: &OperatorGroupStatus,
    status: &mut OperatorGroupStatus,
) -> (bool, Option<String>) {
    let mut wanted: Vec<Wanted> = Vec::new();
    if observed.groups_in_namespace > 1 {
        wanted.push((
            MULTIPLE_OPERATOR_GROUP,
            TRUE,
            MULTIPLE_OPERATOR_GROUPS_FOUND.into(),
            "Multiple OperatorGroup found in the same namespace".into(),
        ));
    }
    let mut stopped = None;
    let account_ref = match &observed.account {
        Account::NotNamed => None,
        Account::Missing(name) => {
            wanted.push((
                SERVICE_ACCOUNT_CONDITION,
                TRUE,
                SERVICE_ACCOUNT_NOT_FOUND.into(),
                format!("ServiceAccount {name} not found"),
            ));
            stopped = Some(format!("failed to get service account, sa={name}: not found"));
            previous.service_account_ref.clone()
        }
        Account::Found(account) => Some(reference(account)),
    };
    status.conditions = conditions(wanted, &previous.conditions, None, &observed.now);
    let mut changed = status.conditions != previous.conditions;
    if account_ref != previous.service_account_ref {
        status.service_account_ref = account_ref;
        status.last_updated = Some(observed.now.clone());
        changed = true;
    }
    (changed, stopped)
}

/// What a pass over a group whose targets are settled (`status_namespaces`, as its status says) writes beside the
/// status: the members' `olm.*` annotations, the three aggregating ClusterRoles over every API the group and its
/// members provide, and `olm.providedAPIs` pruned (unless the group's APIs are static).
fn settled_writes(observed: &Observed<'_>, status_namespaces: &[String]) -> Decision {
    let group = observed.group;
    let name = group.metadata.name.clone().unwrap_or_default();
    let namespace = group.metadata.namespace.clone().unwrap_or_default();
    let annotations = group_annotations(&name, &namespace, status_namespaces);
    let members: Vec<&ClusterServiceVersion> =
        observed.csvs.iter().filter(|csv| !is_copied(csv) && !is_install_record(csv)).collect();
    let annotate = to_annotate(&members, &annotations);

    let group_apis = group_provided_apis(group);
    let member_apis: Vec<(ApiSet, &ClusterServiceVersion)> =
        members.iter().filter_map(|csv| provided_apis(csv).ok().map(|apis| (apis, *csv))).collect();
    let all_apis: ApiSet =
        group_apis.iter().cloned().chain(member_apis.iter().flat_map(|(apis, _)| apis.iter().cloned())).collect();
    let roles = SUFFIXES.iter().map(|suffix| group_role(&namespace, &name, suffix, &all_apis)).collect();
    let provided_apis = if group.spec.static_provided_apis { None } else { pruned(&group_apis, &member_apis) };
    Decision { status: None, stopped: None, annotate, roles, provided_apis }
}

/// The members whose annotations differ from the group's `annotations`, each named with the annotations to set.
fn to_annotate(
    members: &[&ClusterServiceVersion],
    annotations: &BTreeMap<String, String>,
) -> Vec<(String, BTreeMap<String, String>)> {
    members
        .iter()
        .filter(|csv| {
            let current = csv.metadata.annotations.clone().unwrap_or_default();
            // A write only where it changes something: while the group names no targets, a member already
            // carrying its name and namespace is left alone (it waits, as OLM's no-op update leaves it).
            annotations.iter().any(|(key, value)| current.get(key) != Some(value))
        })
        .map(|csv| (csv.metadata.name.clone().unwrap_or_default(), annotations.clone()))
        .collect()
}

/// OLM's `pruneProvidedAPIs`: the annotation shrinks to the APIs members still provide, unless a member providing
/// an API not yet in it is still being set up (None or Pending, not deleted): then it waits for that member.
fn pruned(group_apis: &ApiSet, members: &[(ApiSet, &ClusterServiceVersion)]) -> Option<String> {
    let mut kept = ApiSet::new();
    for (apis, csv) in members {
        for api in apis {
            if group_apis.contains(api) {
                kept.insert(api.clone());
            } else {
                let phase = csv.status.as_ref().map(|status| status.phase).unwrap_or_default();
                if csv.metadata.deletion_timestamp.is_none() && matches!(phase, CsvPhase::None | CsvPhase::Pending) {
                    return None;
                }
            }
        }
    }
    (kept.len() < group_apis.len()).then(|| api_set_string(&kept))
}

/// A reference to the ServiceAccount found. Unlike OLM, without its resourceVersion: OLM's changes with the label it
/// applies to the account, which rewrites the group's status on every other pass.
fn reference(account: &ServiceAccount) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: account.metadata.name.clone(),
        namespace: account.metadata.namespace.clone(),
        uid: account.metadata.uid.clone(),
        ..ObjectReference::default()
    }
}

fn same_set(a: &[String], b: &[String]) -> bool {
    let a: std::collections::BTreeSet<&String> = a.iter().collect();
    let b: std::collections::BTreeSet<&String> = b.iter().collect();
    a == b
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn group(spec: serde_json::Value, status: serde_json::Value, annotations: serde_json::Value) -> OperatorGroup {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": "og", "namespace": "ops", "annotations": annotations}, "spec": spec, "status": status}))
        .expect("group")
    }

    fn csv(name: &str, crd: &str, phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": name, "namespace": "ops"},
            "spec": {"install": {"strategy": "deployment", "spec": {"deployments": []}},
                     "customresourcedefinitions": {"owned": [{"name": crd, "version": "v1", "kind": "Plumbus"}]}},
            "status": {"phase": phase}}))
        .expect("csv")
    }

    fn observed<'a>(group: &'a OperatorGroup, csvs: &'a [ClusterServiceVersion]) -> Observed<'a> {
        Observed {
            group,
            groups_in_namespace: 1,
            account: Account::NotNamed,
            namespaces: &[],
            csvs,
            now: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn new_targets_are_written_alone_first() {
        let group = group(json!({}), json!({}), json!({}));
        let decision = decide(&observed(&group, &[]));
        assert!(decision.targets_changed(&group), "members are annotated on the next pass");
        let status = decision.status.expect("status");
        assert_eq!(status.namespaces, [""]);
        assert!(status.last_updated.is_some());
        assert!(decision.roles.is_empty() && decision.annotate.is_empty());
    }

    #[test]
    fn a_settled_group_annotates_members_and_aggregates_their_apis() {
        let group = group(json!({}), json!({"namespaces": [""]}), json!({}));
        let csvs = [csv("a", "plumbuses.example.com", "Succeeded")];
        let decision = decide(&observed(&group, &csvs));
        assert_eq!(decision.status, None);
        assert!(!decision.targets_changed(&group));
        assert_eq!(decision.annotate.len(), 1);
        assert_eq!(decision.annotate[0].1.get("olm.targetNamespaces").map(String::as_str), Some(""));
        assert_eq!(decision.roles.len(), 3);
        assert_eq!(decision.roles[0]["aggregationRule"]["clusterRoleSelectors"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_group_selecting_no_namespace_gives_its_members_no_targets() {
        let group = group(json!({"selector": {"matchLabels": {"team": "z"}}}), json!({}), json!({}));
        let csvs = [csv("a", "plumbuses.example.com", "")];
        let decision = decide(&observed(&group, &csvs));
        assert!(!decision.targets_changed(&group), "no namespaces, as none before");
        assert_eq!(decision.annotate.len(), 1);
        let annotations = &decision.annotate[0].1;
        assert_eq!(annotations.get("olm.operatorGroup").map(String::as_str), Some("og"));
        assert_eq!(annotations.get("olm.targetNamespaces"), None, "\"\" would read as all namespaces");
    }

    #[test]
    fn mates_and_a_missing_account_are_conditions() {
        let group = group(json!({"serviceAccountName": "gone"}), json!({"namespaces": [""]}), json!({}));
        let decision =
            decide(&Observed { groups_in_namespace: 2, account: Account::Missing("gone"), ..observed(&group, &[]) });
        assert!(!decision.targets_changed(&group), "new conditions alone are not new targets");
        let status = decision.status.expect("status");
        let conditions: Vec<(&str, &str, &str)> =
            status.conditions.iter().map(|c| (c.type_.as_str(), c.reason.as_str(), c.message.as_str())).collect();
        assert_eq!(
            conditions,
            [
                (
                    "MultipleOperatorGroup",
                    "MultipleOperatorGroupsFound",
                    "Multiple OperatorGroup found in the same namespace"
                ),
                ("OperatorGroupServiceAccount", "ServiceAccountNotFound", "ServiceAccount gone not found"),
            ]
        );
        assert!(decision.stopped.is_some());
    }

    #[test]
    fn provided_apis_are_pruned_unless_static_or_a_member_is_pending() {
        let annotations = json!({"olm.providedAPIs": "Gone.v1.example.com,Plumbus.v1.example.com"});
        let kept = [csv("a", "plumbuses.example.com", "Succeeded")];
        let group_ = group(json!({}), json!({"namespaces": [""]}), annotations.clone());
        assert_eq!(decide(&observed(&group_, &kept)).provided_apis.as_deref(), Some("Plumbus.v1.example.com"));
        let pending = [csv("a", "plumbuses.example.com", "Succeeded"), csv("b", "new.other.io", "Pending")];
        assert_eq!(decide(&observed(&group_, &pending)).provided_apis, None);
        let fixed = group(json!({"staticProvidedAPIs": true}), json!({"namespaces": [""]}), annotations);
        assert_eq!(decide(&observed(&fixed, &kept)).provided_apis, None);
    }
}

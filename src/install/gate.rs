//! The approval gate (DESIGN decision 6): whether an Install's content may be applied now, and which rules must be
//! granted first. An approval covers the pending set recorded in the status when it was given (the set the webhook
//! checked the approver against); anything needed beyond it sends the Install back to Unapproved.

use crate::api::v2alpha1::{Approval, PendingPermission, PermissionScope};
use crate::rbac::missing::rule_of;
use crate::rbac::{breakdown, rule_covers};

/// What the controller does next with an Install whose content resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Grant `grant` (possibly nothing) to the ServiceAccount, then apply the content.
    Apply { grant: Vec<PendingPermission> },
    /// Wait for a person holding `pending` to approve; first set `spec.approval` back to Unapproved when
    /// `revoke_approval`, because the approval on record does not cover what is needed now.
    AwaitApproval { pending: Vec<PendingPermission>, revoke_approval: bool },
}

/// Decides from the approval on the spec, the pending set recorded when it was given, and what is missing now.
/// `manual` Installs (an Operator's updates approved by hand) wait for a person even when nothing is missing.
pub fn gate(approval: Approval, approved: &[PendingPermission], missing: &[PendingPermission], manual: bool) -> Gate {
    if manual && approval != Approval::Approved {
        return Gate::AwaitApproval { pending: missing.to_vec(), revoke_approval: false };
    }
    if missing.is_empty() {
        return Gate::Apply { grant: Vec::new() };
    }
    if approval == Approval::Approved && covered_by(approved, missing) {
        return Gate::Apply { grant: missing.to_vec() };
    }
    Gate::AwaitApproval { pending: missing.to_vec(), revoke_approval: approval == Approval::Approved }
}

/// Whether every rule of `wanted`, in every place it applies, is inside `approved`. A cluster-scoped approval covers
/// the same rule in any namespace, as a ClusterRoleBinding does.
pub fn covered_by(approved: &[PendingPermission], wanted: &[PendingPermission]) -> bool {
    wanted.iter().all(|permission| {
        let places: Vec<Option<&str>> = match permission.scope {
            PermissionScope::Cluster => vec![None],
            PermissionScope::Namespaced => permission.namespaces.iter().map(|n| Some(n.as_str())).collect(),
        };
        let rule = rule_of(permission);
        places.into_iter().all(|place| {
            breakdown(&rule).iter().all(|atom| {
                approved.iter().filter(|owner| applies_in(owner, place)).any(|owner| rule_covers(&rule_of(owner), atom))
            })
        })
    })
}

fn applies_in(approved: &PendingPermission, place: Option<&str>) -> bool {
    match (approved.scope, place) {
        (PermissionScope::Cluster, _) => true,
        (PermissionScope::Namespaced, Some(namespace)) => approved.namespaces.iter().any(|n| n == namespace),
        (PermissionScope::Namespaced, None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespaced(verbs: &[&str], resources: &[&str], namespaces: &[&str]) -> PendingPermission {
        PendingPermission {
            scope: PermissionScope::Namespaced,
            namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
            verbs: verbs.iter().map(|v| (*v).to_owned()).collect(),
            api_groups: vec![String::new()],
            resources: resources.iter().map(|r| (*r).to_owned()).collect(),
            resource_names: vec![],
            non_resource_urls: vec![],
        }
    }

    fn cluster(verbs: &[&str], resources: &[&str]) -> PendingPermission {
        PendingPermission { scope: PermissionScope::Cluster, namespaces: vec![], ..namespaced(verbs, resources, &[]) }
    }

    #[test]
    fn nothing_missing_applies_without_approval() {
        assert_eq!(gate(Approval::Unapproved, &[], &[], false), Gate::Apply { grant: vec![] });
    }

    #[test]
    fn missing_rules_wait_for_approval() {
        let missing = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        assert_eq!(
            gate(Approval::Unapproved, &[], &missing, false),
            Gate::AwaitApproval { pending: missing.clone(), revoke_approval: false }
        );
    }

    #[test]
    fn approval_of_the_recorded_set_grants_what_is_missing() {
        let missing = vec![namespaced(&["get", "list"], &["secrets"], &["operators"])];
        assert_eq!(gate(Approval::Approved, &missing, &missing, false), Gate::Apply { grant: missing.clone() });
    }

    #[test]
    fn approval_grants_only_what_is_still_missing() {
        let approved = vec![namespaced(&["get", "list", "create"], &["secrets", "configmaps"], &["operators"])];
        let missing = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        assert_eq!(gate(Approval::Approved, &approved, &missing, false), Gate::Apply { grant: missing.clone() });
    }

    #[test]
    fn needing_more_than_was_approved_revokes_the_approval() {
        let approved = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        let missing = vec![namespaced(&["get", "delete"], &["secrets"], &["operators"])];
        assert_eq!(
            gate(Approval::Approved, &approved, &missing, false),
            Gate::AwaitApproval { pending: missing.clone(), revoke_approval: true }
        );
    }

    #[test]
    fn an_approval_recorded_for_nothing_covers_nothing() {
        let missing = vec![cluster(&["*"], &["*"])];
        assert_eq!(
            gate(Approval::Approved, &[], &missing, false),
            Gate::AwaitApproval { pending: missing.clone(), revoke_approval: true }
        );
    }

    #[test]
    fn another_namespace_is_not_covered() {
        let approved = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        assert!(!covered_by(&approved, &[namespaced(&["get"], &["secrets"], &["kube-system"])]));
        assert!(!covered_by(&approved, &[namespaced(&["get"], &["secrets"], &["operators", "kube-system"])]));
    }

    #[test]
    fn cluster_approval_covers_every_namespace_but_not_the_reverse() {
        let approved_cluster = vec![cluster(&["get"], &["secrets"])];
        assert!(covered_by(&approved_cluster, &[namespaced(&["get"], &["secrets"], &["operators", "other"])]));
        let approved_namespaced = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        assert!(!covered_by(&approved_namespaced, &[cluster(&["get"], &["secrets"])]));
    }

    #[test]
    fn wildcards_and_names_follow_rbac_coverage() {
        let approved = vec![cluster(&["*"], &["*"])];
        let mut named = cluster(&["get"], &["secrets"]);
        named.resource_names = vec!["one".into()];
        assert!(covered_by(&approved, &[named.clone()]));
        assert!(!covered_by(&[named], &[cluster(&["get"], &["secrets"])]));
    }

    #[test]
    fn a_manual_install_waits_for_a_person_even_when_nothing_is_missing() {
        assert_eq!(
            gate(Approval::Unapproved, &[], &[], true),
            Gate::AwaitApproval { pending: vec![], revoke_approval: false }
        );
        assert_eq!(gate(Approval::Approved, &[], &[], true), Gate::Apply { grant: vec![] });
        assert_eq!(gate(Approval::Unapproved, &[], &[], false), Gate::Apply { grant: vec![] });
    }
}

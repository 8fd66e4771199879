//! The approval gate (docs/design.md, 'Approval'): whether an Install's content may be applied now, and which rules
//! must be granted first. An approval covers the pending set and the content recorded in the status when it was given
//! (what the webhook checked the approver against): anything needed beyond that set, or other content (a moved tag, a
//! new image) sends the Install back to Unapproved.
//!
//! Two kinds of wait: the ServiceAccount lacks rules (a person holding them approves the missing ones), or the
//! content itself needs a person (a Manual Operator's update, content changed by someone who does not hold what the
//! account was granted): then every rule the content uses is pending, so the approver holds all the content can do,
//! and the approval binds to the content's digests.
//!
//! And content over an InstallPolicy waits at the gate whatever was approved, unless it runs on as let through
//! before ([`held_by_policy`]).

use crate::api::v2alpha1::{
    AppliedObject, Approval, InstallStatus, PendingPermission, PendingReason, PermissionScope, PolicyStatus,
    ResolvedContent,
};
use crate::rbac::missing::rule_of;
use crate::rbac::{breakdown, rule_covers};

/// Why the content itself needs a person's approval, whatever permissions are missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PersonRequired {
    /// The Install's Operator approves updates by hand.
    Manual,
    /// Someone who does not hold what the account was granted changed the content.
    ContentChanged,
}

/// What the gate decides on.
#[derive(Clone, Copy, Debug)]
pub struct GateInput<'a> {
    pub approval: Approval,
    /// The pending set recorded in the status, which an approval on the spec was judged against.
    pub recorded_pending: &'a [PendingPermission],
    /// The content recorded in the status beside that pending set: what an approval was given for.
    pub recorded_content: &'a [ResolvedContent],
    /// The content last let through the gate.
    pub approved_content: &'a [ResolvedContent],
    /// The content as resolved now.
    pub resolved: &'a [ResolvedContent],
    /// The rules the ServiceAccount lacks for it, for a person to approve.
    pub missing: &'a [PendingPermission],
    /// The rules it lacks that follow from a `create` granted before (`follows`): granted with whatever is applied,
    /// never pending themselves.
    pub follows: &'a [PendingPermission],
    /// Every rule the content needs, nothing counted as held.
    pub needed: &'a [PendingPermission],
    pub person: Option<PersonRequired>,
}

/// What the controller does next with an Install whose content resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Gate {
    /// Grant `grant` (possibly nothing) to the ServiceAccount, then apply the content.
    Apply { grant: Vec<PendingPermission> },
    /// Wait for a person holding `pending` to approve; first set `spec.approval` back to Unapproved when
    /// `revoke_approval`, because the approval on record does not cover what is needed now.
    AwaitApproval { pending: Vec<PendingPermission>, reason: PendingReason, revoke_approval: bool },
}

/// Decides whether the content may be applied.
pub fn gate(input: &GateInput<'_>) -> Gate {
    let approved = input.approval == Approval::Approved;
    // An approval stands for the pending set and the content the status showed when it was given; an approval
    // given while nothing was pending (or before anything was computed) covers nothing.
    let approval_covers = |wanted: &[PendingPermission]| {
        approved
            && input.recorded_content == input.resolved
            && !input.recorded_pending.is_empty()
            && covered_by(input.recorded_pending, wanted)
    };
    if let Some(person) = input.person {
        // A Manual Install's approval binds to digests, so content already let through stays approved. A content
        // change is marked until the controller applied what a person approved after it (the namespaces may have
        // changed with the same digests), so the mark alone keeps it waiting.
        let already_approved = person == PersonRequired::Manual && input.resolved == input.approved_content;
        let nothing_to_approve = input.needed.is_empty() && input.missing.is_empty() && input.follows.is_empty();
        if !(already_approved || nothing_to_approve) {
            if approval_covers(input.needed) {
                return Gate::Apply { grant: with_follows(input) };
            }
            let reason = match person {
                PersonRequired::Manual => PendingReason::ManualApproval,
                PersonRequired::ContentChanged => PendingReason::ContentChanged,
            };
            return Gate::AwaitApproval { pending: input.needed.to_vec(), reason, revoke_approval: approved };
        }
    }
    if input.missing.is_empty() {
        return Gate::Apply { grant: input.follows.to_vec() };
    }
    if approval_covers(input.missing) {
        return Gate::Apply { grant: with_follows(input) };
    }
    Gate::AwaitApproval {
        pending: input.missing.to_vec(),
        reason: PendingReason::Permissions,
        revoke_approval: approved,
    }
}

/// What the account lacks: the rules a person approved and those that follow from a granted `create`.
fn with_follows(input: &GateInput<'_>) -> Vec<PendingPermission> {
    add_grants(input.missing, input.follows)
}

/// The rules granted so far with `grant` added, sorted and without repeats.
pub fn add_grants(granted: &[PendingPermission], grant: &[PendingPermission]) -> Vec<PendingPermission> {
    let mut all: Vec<PendingPermission> = granted.iter().chain(grant).cloned().collect();
    all.sort();
    all.dedup();
    all
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

/// The summary of the policies the content exceeds, when it must wait for them: content let through before a policy
/// tightened keeps running where it was (re-applied with what it holds and nothing more); anything else over a
/// policy waits, whatever was approved.
pub fn held_by_policy(
    policy: Option<&PolicyStatus>,
    decision: &Gate,
    resolved: &[ResolvedContent],
    previous: &InstallStatus,
    placed: &[AppliedObject],
) -> Option<String> {
    let violations = policy.filter(|p| crate::policy::exceeds(Some(p)))?;
    let running = match decision {
        Gate::Apply { grant } => {
            crate::policy::runs_on(grant, resolved, &previous.approved_content, placed, &previous.applied)
        }
        Gate::AwaitApproval { .. } => false,
    };
    (!running).then(|| crate::policy::summary(&violations.violations))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::{PolicyState, PolicyViolation};

    fn placed(name: &str) -> AppliedObject {
        AppliedObject {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some("operators".into()),
            name: name.into(),
        }
    }

    fn exceeding() -> PolicyStatus {
        PolicyStatus {
            state: Some(PolicyState::Exceeds),
            violations: vec![PolicyViolation { policy: "tight".into(), message: "ConfigMap x is forbidden".into() }],
        }
    }

    #[test]
    fn content_over_a_policy_waits_unless_it_runs_on_as_let_through_before() {
        let previous =
            InstallStatus { approved_content: content("a"), applied: vec![placed("x")], ..InstallStatus::default() };
        let apply_nothing = Gate::Apply { grant: Vec::new() };
        let here = [placed("x")];
        assert_eq!(held_by_policy(None, &apply_nothing, &content("b"), &previous, &here), None, "no policy");
        let within = PolicyStatus { state: Some(PolicyState::Within), violations: Vec::new() };
        assert_eq!(held_by_policy(Some(&within), &apply_nothing, &content("b"), &previous, &here), None);
        let over = exceeding();
        // What ran before, where it ran, granting nothing: runs on.
        assert_eq!(held_by_policy(Some(&over), &apply_nothing, &content("a"), &previous, &here), None);
        let summary = Some("InstallPolicy tight: ConfigMap x is forbidden".to_owned());
        // Other content, another place, a grant, or an approval awaited: waits.
        assert_eq!(held_by_policy(Some(&over), &apply_nothing, &content("b"), &previous, &here), summary);
        assert_eq!(held_by_policy(Some(&over), &apply_nothing, &content("a"), &previous, &[placed("y")]), summary);
        let granting = Gate::Apply { grant: vec![cluster(&["create"], &["configmaps"])] };
        assert_eq!(held_by_policy(Some(&over), &granting, &content("a"), &previous, &here), summary);
        let awaiting = Gate::AwaitApproval {
            pending: vec![cluster(&["create"], &["configmaps"])],
            reason: crate::api::v2alpha1::PendingReason::Permissions,
            revoke_approval: false,
        };
        assert_eq!(held_by_policy(Some(&over), &awaiting, &content("a"), &previous, &here), summary);
        // Never installed: nothing runs on.
        let fresh = InstallStatus::default();
        assert_eq!(held_by_policy(Some(&over), &apply_nothing, &content("a"), &fresh, &here), summary);
    }

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

    fn content(digest: &str) -> Vec<ResolvedContent> {
        vec![ResolvedContent {
            content_type: crate::api::v2alpha1::ContentType::ManifestImage,
            manifest_image: Some(format!("registry/bundle@{digest}")),
            digest: digest.into(),
            config_digest: None,
        }]
    }

    /// An Install resolved to `d1`, never approved before, with `missing` and `needed`.
    fn input<'a>(
        approval: Approval,
        recorded: &'a [PendingPermission],
        resolved: &'a [ResolvedContent],
        missing: &'a [PendingPermission],
        needed: &'a [PendingPermission],
    ) -> GateInput<'a> {
        GateInput {
            approval,
            recorded_pending: recorded,
            recorded_content: resolved,
            approved_content: &[],
            resolved,
            missing,
            follows: &[],
            needed,
            person: None,
        }
    }

    fn awaits(pending: &[PendingPermission], reason: PendingReason, revoke_approval: bool) -> Gate {
        Gate::AwaitApproval { pending: pending.to_vec(), reason, revoke_approval }
    }

    #[test]
    fn nothing_missing_applies_without_approval() {
        let d1 = content("sha256:1");
        assert_eq!(gate(&input(Approval::Unapproved, &[], &d1, &[], &[])), Gate::Apply { grant: vec![] });
    }

    #[test]
    fn missing_rules_wait_for_approval() {
        let d1 = content("sha256:1");
        let missing = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        assert_eq!(
            gate(&input(Approval::Unapproved, &[], &d1, &missing, &missing)),
            awaits(&missing, PendingReason::Permissions, false)
        );
    }

    #[test]
    fn approval_of_the_recorded_set_grants_what_is_missing() {
        let d1 = content("sha256:1");
        let missing = vec![namespaced(&["get", "list"], &["secrets"], &["operators"])];
        assert_eq!(
            gate(&input(Approval::Approved, &missing, &d1, &missing, &missing)),
            Gate::Apply { grant: missing.clone() }
        );
    }

    #[test]
    fn approval_grants_only_what_is_still_missing() {
        let d1 = content("sha256:1");
        let approved = vec![namespaced(&["get", "list", "create"], &["secrets", "configmaps"], &["operators"])];
        let missing = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        assert_eq!(
            gate(&input(Approval::Approved, &approved, &d1, &missing, &approved)),
            Gate::Apply { grant: missing.clone() }
        );
    }

    #[test]
    fn needing_more_than_was_approved_revokes_the_approval() {
        let d1 = content("sha256:1");
        let approved = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        let missing = vec![namespaced(&["get", "delete"], &["secrets"], &["operators"])];
        assert_eq!(
            gate(&input(Approval::Approved, &approved, &d1, &missing, &missing)),
            awaits(&missing, PendingReason::Permissions, true)
        );
    }

    #[test]
    fn an_approval_recorded_for_nothing_covers_nothing() {
        let d1 = content("sha256:1");
        let missing = vec![cluster(&["*"], &["*"])];
        assert_eq!(
            gate(&input(Approval::Approved, &[], &d1, &missing, &missing)),
            awaits(&missing, PendingReason::Permissions, true)
        );
    }

    #[test]
    fn an_approval_given_for_other_content_covers_nothing() {
        // Approved while the status showed d1; the tag moved to d2, which needs no more: still a new approval.
        let (d1, d2) = (content("sha256:1"), content("sha256:2"));
        let missing = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        let mut moved = input(Approval::Approved, &missing, &d2, &missing, &missing);
        moved.recorded_content = &d1;
        assert_eq!(gate(&moved), awaits(&missing, PendingReason::Permissions, true));
    }

    /// The image `digest` installed with the deployment configuration of digest `config`.
    fn configured(digest: &str, config: &str) -> Vec<ResolvedContent> {
        let mut resolved = content(digest);
        resolved[0].config_digest = Some(config.into());
        resolved
    }

    #[test]
    fn the_same_image_with_another_deployment_configuration_is_other_content() {
        // A configuration can point the operator at other images or mount a Secret: a changed payload, even though
        // it needs no new permission.
        let (before, after) = (configured("sha256:1", "sha256:a"), configured("sha256:1", "sha256:b"));
        let needed = vec![namespaced(&["create", "get"], &["deployments"], &["operators"])];
        let mut manual = input(Approval::Unapproved, &[], &after, &[], &needed);
        manual.approved_content = &before;
        manual.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&manual), awaits(&needed, PendingReason::ManualApproval, false));
        manual.approved_content = &after;
        assert_eq!(gate(&manual), Gate::Apply { grant: vec![] }, "the configuration let through before");
        let unconfigured = content("sha256:1");
        manual.approved_content = &unconfigured;
        assert_eq!(gate(&manual), awaits(&needed, PendingReason::ManualApproval, false), "a configuration added");
        // An approval given while the status showed one configuration covers no other.
        let missing = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        let mut reconfigured = input(Approval::Approved, &missing, &after, &missing, &missing);
        reconfigured.recorded_content = &before;
        assert_eq!(gate(&reconfigured), awaits(&missing, PendingReason::Permissions, true));
    }

    #[test]
    fn a_manual_install_waits_for_a_person_holding_everything_the_content_uses() {
        let d1 = content("sha256:1");
        let needed = vec![namespaced(&["create", "get"], &["deployments"], &["operators"])];
        // Nothing is missing (the account was granted it all before), yet a person must approve every rule used.
        let mut waiting = input(Approval::Unapproved, &[], &d1, &[], &needed);
        waiting.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&waiting), awaits(&needed, PendingReason::ManualApproval, false));
        let mut approved = input(Approval::Approved, &needed, &d1, &[], &needed);
        approved.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&approved), Gate::Apply { grant: vec![] });
    }

    #[test]
    fn a_manual_approval_binds_to_the_digest_it_was_given_for() {
        let (d1, d2) = (content("sha256:1"), content("sha256:2"));
        let needed = vec![namespaced(&["create"], &["deployments"], &["operators"])];
        // d1 was approved and applied; its tag moved to d2: a new update, waiting, the stale approval revoked.
        let mut moved = input(Approval::Approved, &needed, &d2, &[], &needed);
        moved.recorded_content = &d1;
        moved.approved_content = &d1;
        moved.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&moved), awaits(&needed, PendingReason::ManualApproval, true));
        // Once applied, the approved content keeps being applied (drift, resync) without asking again.
        let mut settled = input(Approval::Approved, &[], &d1, &[], &needed);
        settled.approved_content = &d1;
        settled.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&settled), Gate::Apply { grant: vec![] });
    }

    #[test]
    fn an_approval_with_nothing_pending_is_no_blank_cheque() {
        let d1 = content("sha256:1");
        let needed = vec![cluster(&["*"], &["*"])];
        let mut manual = input(Approval::Approved, &[], &d1, &[], &needed);
        manual.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&manual), awaits(&needed, PendingReason::ManualApproval, true));
    }

    #[test]
    fn content_changed_by_someone_not_holding_the_grants_needs_every_rule_approved() {
        let (d1, d2) = (content("sha256:1"), content("sha256:2"));
        let needed = vec![cluster(&["create", "get"], &["clusterrolebindings"])];
        let mut changed = input(Approval::Unapproved, &[], &d2, &[], &needed);
        changed.approved_content = &d1;
        changed.person = Some(PersonRequired::ContentChanged);
        assert_eq!(gate(&changed), awaits(&needed, PendingReason::ContentChanged, false));
        // Approving a smaller set than the content uses is not enough.
        let partial = vec![cluster(&["get"], &["clusterrolebindings"])];
        let mut under = input(Approval::Approved, &partial, &d2, &[], &needed);
        under.approved_content = &d1;
        under.person = Some(PersonRequired::ContentChanged);
        assert_eq!(gate(&under), awaits(&needed, PendingReason::ContentChanged, true));
    }

    #[test]
    fn a_marked_change_waits_even_with_the_same_digests() {
        // Only spec.namespaces changed: the digests are those approved before, the mark still holds it back.
        let d1 = content("sha256:1");
        let needed = vec![cluster(&["create"], &["configmaps"])];
        let mut moved = input(Approval::Approved, &[], &d1, &[], &needed);
        moved.approved_content = &d1;
        moved.person = Some(PersonRequired::ContentChanged);
        assert_eq!(gate(&moved), awaits(&needed, PendingReason::ContentChanged, true));
        let mut approved = input(Approval::Approved, &needed, &d1, &[], &needed);
        approved.approved_content = &d1;
        approved.person = Some(PersonRequired::ContentChanged);
        assert_eq!(gate(&approved), Gate::Apply { grant: vec![] });
    }

    #[test]
    fn content_that_needs_nothing_at_all_has_nothing_to_approve() {
        let d1 = content("sha256:1");
        let mut empty = input(Approval::Unapproved, &[], &d1, &[], &[]);
        empty.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&empty), Gate::Apply { grant: vec![] });
    }

    #[test]
    fn rules_following_from_a_granted_create_apply_without_a_person_and_are_never_pending() {
        let d1 = content("sha256:1");
        let mut renamed = namespaced(&["get", "patch"], &["roles"], &["operators"]);
        renamed.resource_names = vec!["plumbus.v2".into()];
        let follows = vec![renamed];
        let mut upgrade = input(Approval::Unapproved, &[], &d1, &[], &follows);
        upgrade.follows = &follows;
        assert_eq!(gate(&upgrade), Gate::Apply { grant: follows.clone() }, "nothing else missing: applied");
        // Beside rules a person must approve, only those are pending; the approval grants both.
        let secrets = vec![namespaced(&["get"], &["secrets"], &["operators"])];
        let mut more = input(Approval::Unapproved, &[], &d1, &secrets, &secrets);
        more.follows = &follows;
        assert_eq!(gate(&more), awaits(&secrets, PendingReason::Permissions, false));
        let mut approved = input(Approval::Approved, &secrets, &d1, &secrets, &secrets);
        approved.follows = &follows;
        assert_eq!(gate(&approved), Gate::Apply { grant: add_grants(&secrets, &follows) });
        // Content that needs a person still does: every rule it uses is pending, and granted once approved.
        let mut manual = input(Approval::Unapproved, &[], &d1, &[], &follows);
        manual.follows = &follows;
        manual.person = Some(PersonRequired::Manual);
        assert_eq!(gate(&manual), awaits(&follows, PendingReason::ManualApproval, false));
        manual.approval = Approval::Approved;
        manual.recorded_pending = &follows;
        assert_eq!(gate(&manual), Gate::Apply { grant: follows.clone() });
    }

    #[test]
    fn grants_add_up_without_repeats() {
        let a = namespaced(&["get"], &["secrets"], &["operators"]);
        let b = cluster(&["list"], &["nodes"]);
        let all = add_grants(std::slice::from_ref(&a), &[b.clone(), a.clone()]);
        assert_eq!(all.len(), 2);
        assert!(all.contains(&a) && all.contains(&b));
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
}

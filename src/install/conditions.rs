//! An Install's conditions, state and events, from the outcome of one reconcile: which conditions each outcome
//! reports, and which of them are abnormal. The conventions (every type always present, transition times,
//! events from changes) are `controller::conditions`'.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::v2alpha1::{InstallState, PendingReason, PolicyState, PolicyStatus};
use crate::controller::conditions::v2alpha1::{
    COMPONENTS_DIVERGE, CONTENT_IMPORT_ERROR, EXCEEDS_POLICY, INSTALLED, INVALID_CONTENT, PENDING_APPROVAL,
    PROGRESSING, UPDATE_APPROVAL_REQUIRED,
};
use crate::controller::conditions::{self as shared, EventPolicy, Transition, Wanted, FALSE, TRUE};

/// The reason seed 004 gives for pending permissions.
pub const UNSATISFIED_PERMISSIONS: &str = "UnsatisfiedPermissions";
/// PendingApproval reason of an Install whose content someone changed without holding what its account was granted.
pub const CONTENT_CHANGE_APPROVAL_REQUIRED: &str = "ContentChangeApprovalRequired";
/// The reason seed 004 gives for a failed image pull.
pub const MANIFEST_IMAGE_PULL_FAILED: &str = "ManifestImagePullFailed";
/// ExceedsPolicy reason of new content over an InstallPolicy: never applied, whoever approves.
pub const CONTENT_EXCEEDS_POLICY: &str = "ContentExceedsPolicy";
/// ExceedsPolicy reason of content applied before a policy tightened: it keeps running, with nothing new granted.
pub const INSTALLED_CONTENT_EXCEEDS_POLICY: &str = "InstalledContentExceedsPolicy";
/// The reason seed 004 gives for live objects that differ from what was applied.
pub const COMPONENTS_DIVERGE_FROM_RESOLVED_CONTENT: &str = "ComponentsDivergeFromResolvedContent";

/// How one reconcile of an Install ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An image could not be pulled.
    ImportFailed { message: String },
    /// The content is not installable; `reason` is the error's category.
    Invalid { reason: &'static str, message: String },
    /// Permissions wait for approval, for `reason`; `changed_by` names who changed the content when that is why;
    /// `installed_before` when earlier content keeps running meanwhile.
    AwaitingApproval {
        count: usize,
        reason: PendingReason,
        changed_by: Option<String>,
        account: String,
        installed_before: bool,
    },
    /// Granting or applying failed; `reason` is the error's category.
    ApplyFailed { reason: &'static str, message: String },
    /// The content needs more than an InstallPolicy allows (`summary` says what, and which policy): nothing is
    /// granted or applied; `installed_before` when earlier content keeps running meanwhile.
    ExceedsPolicy { summary: String, installed_before: bool },
    /// Everything applied: `rolling_out` names Deployments not yet available, `diverged` the objects found changed
    /// since the last apply (and applied again).
    Applied { objects: usize, account: String, rolling_out: Vec<String>, diverged: Vec<String> },
}

/// `(type, status, reason, message)` of every condition for `outcome`.
fn wanted(outcome: &Outcome) -> [Wanted; 6] {
    match outcome {
        Outcome::ImportFailed { message } => when_import_failed(message),
        Outcome::Invalid { reason, message } => when_invalid(reason, message),
        Outcome::AwaitingApproval { count, reason, changed_by, account, installed_before } => {
            when_awaiting_approval(*count, *reason, changed_by.as_deref(), account, *installed_before)
        }
        Outcome::ExceedsPolicy { installed_before, .. } => when_exceeding_policy(*installed_before),
        Outcome::ApplyFailed { reason, message } => when_apply_failed(reason, message),
        Outcome::Applied { objects, account, rolling_out, diverged } => {
            when_applied(*objects, account, rolling_out, diverged)
        }
    }
}

/// The status, reason and message of a condition that cannot be told before the content is resolved.
fn unresolved() -> (&'static str, String, String) {
    ("Unknown", "ContentUnresolved".to_owned(), "the content has not been resolved".to_owned())
}

/// An image could not be pulled: only the import and the install can be told; the rest waits for the content.
fn when_import_failed(message: &str) -> [Wanted; 6] {
    let (status, reason, text) = unresolved();
    [
        (CONTENT_IMPORT_ERROR, "True", MANIFEST_IMAGE_PULL_FAILED.into(), message.to_owned()),
        (INVALID_CONTENT, status, reason.clone(), text.clone()),
        (PENDING_APPROVAL, status, reason.clone(), text.clone()),
        (INSTALLED, "False", MANIFEST_IMAGE_PULL_FAILED.into(), "a manifest image pull has failed".into()),
        (PROGRESSING, "False", MANIFEST_IMAGE_PULL_FAILED.into(), "retrying the pull with backoff".into()),
        (COMPONENTS_DIVERGE, status, reason, text),
    ]
}

/// The content is not installable (for `reason`, the error's category): its permissions and components cannot be
/// told, as it was never resolved into objects.
fn when_invalid(reason: &str, message: &str) -> [Wanted; 6] {
    let (status, unresolved_reason, text) = unresolved();
    [
        (CONTENT_IMPORT_ERROR, "False", "ContentImported".into(), "all content was imported".into()),
        (INVALID_CONTENT, "True", reason.into(), message.to_owned()),
        (PENDING_APPROVAL, status, unresolved_reason.clone(), text.clone()),
        (INSTALLED, "False", "InvalidContent".into(), "the content cannot be installed".into()),
        (PROGRESSING, "False", "InvalidContent".into(), "waiting for the content to be fixed".into()),
        (COMPONENTS_DIVERGE, status, unresolved_reason, text),
    ]
}

/// Permissions wait for a person: nothing new is applied, and the install says whether earlier content keeps
/// running meanwhile.
fn when_awaiting_approval(
    count: usize,
    reason: PendingReason,
    changed_by: Option<&str>,
    account: &str,
    installed_before: bool,
) -> [Wanted; 6] {
    let installed_message = if installed_before {
        "the update waits for approval; what was installed before keeps running".to_owned()
    } else {
        "nothing is applied until the pending permissions are approved".to_owned()
    };
    [
        (CONTENT_IMPORT_ERROR, "False", "ContentImported".into(), "all content was imported".into()),
        (INVALID_CONTENT, "False", "ContentValid".into(), "the content can be installed".into()),
        pending_approval_condition(count, reason, changed_by, account),
        (INSTALLED, "False", "AwaitingApproval".into(), installed_message),
        (PROGRESSING, "False", "AwaitingApproval".into(), "waiting for approval".into()),
        (COMPONENTS_DIVERGE, "Unknown", "AwaitingApproval".into(), "the resolved content is not applied yet".into()),
    ]
}

/// The PendingApproval condition of content waiting for a person: each reason names who may approve, so the
/// message tells the user whom to ask.
fn pending_approval_condition(count: usize, reason: PendingReason, changed_by: Option<&str>, account: &str) -> Wanted {
    match reason {
        PendingReason::ManualApproval => (
            PENDING_APPROVAL,
            "True",
            UPDATE_APPROVAL_REQUIRED.into(),
            format!("updates are approved by hand: a person holding the {count} rules this content uses must set spec.approval to Approved"),
        ),
        PendingReason::ContentChanged => (
            PENDING_APPROVAL,
            "True",
            CONTENT_CHANGE_APPROVAL_REQUIRED.into(),
            format!(
                "{} changed the content without holding what ServiceAccount {account} was granted: a person holding the {count} rules it uses must approve it",
                changed_by.unwrap_or("someone")
            ),
        ),
        PendingReason::Permissions => (
            PENDING_APPROVAL,
            "True",
            UNSATISFIED_PERMISSIONS.into(),
            format!("pending approval of {count} unsatisfied permissions for ServiceAccount {account}"),
        ),
    }
}

/// The content exceeds an InstallPolicy: nothing is granted or applied, and no approval can change that, so
/// nothing is pending either.
fn when_exceeding_policy(installed_before: bool) -> [Wanted; 6] {
    let installed_message = if installed_before {
        "the content exceeds an InstallPolicy; what was installed before keeps running"
    } else {
        "the content exceeds an InstallPolicy: nothing is applied"
    };
    [
        (CONTENT_IMPORT_ERROR, "False", "ContentImported".into(), "all content was imported".into()),
        (INVALID_CONTENT, "False", "ContentValid".into(), "the content can be installed".into()),
        (
            PENDING_APPROVAL,
            "False",
            EXCEEDS_POLICY.into(),
            "nothing can be approved: the content exceeds an InstallPolicy".into(),
        ),
        (INSTALLED, "False", EXCEEDS_POLICY.into(), installed_message.into()),
        (PROGRESSING, "False", EXCEEDS_POLICY.into(), "waiting for the content or the policy to change".into()),
        (COMPONENTS_DIVERGE, "Unknown", EXCEEDS_POLICY.into(), "the resolved content is not applied".into()),
    ]
}

/// Granting or applying failed (for `reason`, the error's category): the content was fine, and the apply is
/// retried.
fn when_apply_failed(reason: &str, message: &str) -> [Wanted; 6] {
    [
        (CONTENT_IMPORT_ERROR, "False", "ContentImported".into(), "all content was imported".into()),
        (INVALID_CONTENT, "False", "ContentValid".into(), "the content can be installed".into()),
        (PENDING_APPROVAL, "False", "PermissionsSatisfied".into(), "no permission is pending".into()),
        (INSTALLED, "False", reason.into(), message.to_owned()),
        (PROGRESSING, "True", "Retrying".into(), "retrying the apply with backoff".into()),
        (COMPONENTS_DIVERGE, "Unknown", reason.into(), "the content is not fully applied".into()),
    ]
}

/// Everything applied: Progressing names the Deployments still rolling out, and ComponentsDiverge the objects
/// found changed since the last apply, so a user sees what the controller just put back.
fn when_applied(objects: usize, account: &str, rolling_out: &[String], diverged: &[String]) -> [Wanted; 6] {
    let progressing = if rolling_out.is_empty() {
        ("False", "Complete".to_owned(), "every Deployment is available".to_owned())
    } else {
        ("True", "DeploymentsRollingOut".to_owned(), format!("waiting for Deployments {}", rolling_out.join(", ")))
    };
    let diverge = if diverged.is_empty() {
        (
            "False",
            "ComponentsMatchResolvedContent".to_owned(),
            "on-cluster components match the resolved content".to_owned(),
        )
    } else {
        (
            "True",
            COMPONENTS_DIVERGE_FROM_RESOLVED_CONTENT.to_owned(),
            format!("on-cluster components diverge from resolved content, applied again: {}", diverged.join(", ")),
        )
    };
    [
        (CONTENT_IMPORT_ERROR, "False", "ContentImported".into(), "all content was imported".into()),
        (INVALID_CONTENT, "False", "ContentValid".into(), "the content can be installed".into()),
        (PENDING_APPROVAL, "False", "PermissionsSatisfied".into(), "no permission is pending".into()),
        (INSTALLED, "True", "ContentApplied".into(), format!("applied {objects} objects as ServiceAccount {account}")),
        (PROGRESSING, progressing.0, progressing.1, progressing.2),
        (COMPONENTS_DIVERGE, diverge.0, diverge.1, diverge.2),
    ]
}

/// The ExceedsPolicy condition: how the content measures against the InstallPolicies (`policy`, absent when there is
/// none or the content was not resolved).
fn policy_condition(outcome: &Outcome, policy: Option<&PolicyStatus>) -> Wanted {
    if let Outcome::ExceedsPolicy { summary, installed_before } = outcome {
        let running = if *installed_before { "; what was installed before keeps running" } else { "" };
        return (
            EXCEEDS_POLICY,
            "True",
            CONTENT_EXCEEDS_POLICY.into(),
            format!("the content exceeds a policy and no approval can let it through{running}: {summary}"),
        );
    }
    if matches!(outcome, Outcome::ImportFailed { .. } | Outcome::Invalid { .. }) {
        return (EXCEEDS_POLICY, "Unknown", "ContentUnresolved".into(), "the content has not been resolved".into());
    }
    match policy.filter(|status| status.state.is_some()) {
        None => (EXCEEDS_POLICY, "False", "NoPolicy".into(), "no InstallPolicy exists".into()),
        Some(status) if status.state == Some(PolicyState::Within) => {
            (EXCEEDS_POLICY, "False", "WithinPolicy".into(), "the content fits every InstallPolicy".into())
        }
        Some(status) => (
            EXCEEDS_POLICY,
            "True",
            INSTALLED_CONTENT_EXCEEDS_POLICY.into(),
            format!(
                "the content was let through before a policy changed and exceeds it now: it keeps running, is granted \
                 nothing more, and its next update waits until it fits: {}",
                crate::policy::summary(&status.violations)
            ),
        ),
    }
}

/// The conditions for `outcome`, keeping each transition time when its status did not change.
pub fn conditions(
    outcome: &Outcome,
    policy: Option<&PolicyStatus>,
    previous: &[Condition],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    let wanted = wanted(outcome).into_iter().chain([policy_condition(outcome, policy)]);
    shared::conditions(wanted, previous, generation, now)
}

/// What the status written for `outcome` says (its conditions, from the `previous` ones, and its state), and the
/// events that change tells.
pub struct Reported {
    pub conditions: Vec<Condition>,
    pub state: InstallState,
    pub transitions: Vec<Transition>,
}

/// The conditions, state and events of a status written for `outcome` ([`conditions`], [`state`],
/// [`transitions`]).
pub fn reported(
    outcome: &Outcome,
    policy: Option<&PolicyStatus>,
    previous: &[Condition],
    generation: Option<i64>,
    now: &Time,
) -> Reported {
    let conditions = conditions(outcome, policy, previous, generation, now);
    let transitions = transitions(previous, &conditions);
    Reported { conditions, state: state(outcome), transitions }
}

/// The one-word state for `kubectl get`.
pub fn state(outcome: &Outcome) -> InstallState {
    match outcome {
        Outcome::ImportFailed { .. } | Outcome::Invalid { .. } | Outcome::ApplyFailed { .. } => InstallState::Failed,
        Outcome::AwaitingApproval { .. } => InstallState::PendingApproval,
        Outcome::ExceedsPolicy { .. } => InstallState::ExceedsPolicy,
        Outcome::Applied { rolling_out, .. } if !rolling_out.is_empty() => InstallState::Applying,
        Outcome::Applied { .. } => InstallState::Installed,
    }
}

/// An Install's abnormal states: a failure, or permissions waiting for a person (a Normal event: nothing is wrong).
const EVENTS: EventPolicy = EventPolicy { abnormal, normal_types: &[PENDING_APPROVAL] };

/// One event per condition whose status or reason changed; abnormal states are warnings.
pub fn transitions(previous: &[Condition], current: &[Condition]) -> Vec<Transition> {
    let mut transitions = shared::transitions(previous, current, &EVENTS);
    transitions.extend(first_install(previous, current));
    transitions
}

fn abnormal(condition: &Condition) -> bool {
    match condition.type_.as_str() {
        INSTALLED => condition.status == FALSE && condition.reason != "AwaitingApproval",
        PROGRESSING => false,
        _ => condition.status == TRUE,
    }
}

/// A first reconcile that installs at once still deserves one event.
fn first_install(previous: &[Condition], current: &[Condition]) -> Option<Transition> {
    let installed = current.iter().find(|c| c.type_ == INSTALLED && c.status == "True")?;
    previous.is_empty().then(|| Transition {
        warning: false,
        reason: installed.reason.clone(),
        note: installed.message.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(text: &str) -> Time {
        Time(text.parse().expect("timestamp"))
    }

    fn find<'a>(conditions: &'a [Condition], type_: &str) -> &'a Condition {
        conditions.iter().find(|c| c.type_ == type_).expect("condition present")
    }

    fn applied(rolling_out: &[&str], diverged: &[&str]) -> Outcome {
        Outcome::Applied {
            objects: 3,
            account: "olm/plumbus".into(),
            rolling_out: rolling_out.iter().map(|s| (*s).to_owned()).collect(),
            diverged: diverged.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn pending_permissions_use_the_seed_reason() {
        let outcome = Outcome::AwaitingApproval {
            count: 4,
            reason: PendingReason::Permissions,
            changed_by: None,
            account: "olm/plumbus".into(),
            installed_before: false,
        };
        let conditions = conditions(&outcome, None, &[], Some(2), &time("2026-01-01T00:00:00Z"));
        let pending = find(&conditions, PENDING_APPROVAL);
        assert_eq!((pending.status.as_str(), pending.reason.as_str()), ("True", UNSATISFIED_PERMISSIONS));
        assert!(pending.message.contains("4 unsatisfied permissions"));
        assert_eq!(pending.observed_generation, Some(2));
        assert_eq!(find(&conditions, INSTALLED).status, "False");
        assert_eq!(state(&outcome), InstallState::PendingApproval);
    }

    #[test]
    fn every_condition_type_is_always_present() {
        for outcome in [
            Outcome::ImportFailed { message: "x".into() },
            Outcome::Invalid { reason: "ContentKindUnknown", message: "x".into() },
            Outcome::ApplyFailed { reason: "ApplyForbidden", message: "x".into() },
            applied(&[], &[]),
        ] {
            let conditions = conditions(&outcome, None, &[], None, &time("2026-01-01T00:00:00Z"));
            let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
            for expected in
                [PENDING_APPROVAL, CONTENT_IMPORT_ERROR, INVALID_CONTENT, INSTALLED, PROGRESSING, COMPONENTS_DIVERGE]
            {
                assert!(types.contains(&expected), "{expected} missing for {outcome:?}");
            }
        }
    }

    #[test]
    fn a_pull_failure_is_a_content_import_error() {
        let outcome = Outcome::ImportFailed { message: "failed to resolve r/x:1".into() };
        let conditions = conditions(&outcome, None, &[], None, &time("2026-01-01T00:00:00Z"));
        let import = find(&conditions, CONTENT_IMPORT_ERROR);
        assert_eq!((import.status.as_str(), import.reason.as_str()), ("True", MANIFEST_IMAGE_PULL_FAILED));
        assert_eq!(state(&outcome), InstallState::Failed);
    }

    #[test]
    fn transition_time_moves_only_with_the_status() {
        let first = conditions(&applied(&["plumbus"], &[]), None, &[], None, &time("2026-01-01T00:00:00Z"));
        let second = conditions(&applied(&[], &[]), None, &first, None, &time("2026-01-02T00:00:00Z"));
        assert_eq!(find(&second, INSTALLED).last_transition_time, time("2026-01-01T00:00:00Z"));
        assert_eq!(find(&second, PROGRESSING).last_transition_time, time("2026-01-02T00:00:00Z"));
    }

    #[test]
    fn rollout_and_divergence_show_in_progressing_and_components_diverge() {
        let outcome = applied(&["plumbus-operator"], &["Deployment operators/plumbus-operator"]);
        let conditions = conditions(&outcome, None, &[], None, &time("2026-01-01T00:00:00Z"));
        assert_eq!(find(&conditions, PROGRESSING).reason, "DeploymentsRollingOut");
        assert_eq!(find(&conditions, COMPONENTS_DIVERGE).reason, COMPONENTS_DIVERGE_FROM_RESOLVED_CONTENT);
        assert_eq!(state(&outcome), InstallState::Applying);
        assert_eq!(state(&applied(&[], &[])), InstallState::Installed);
    }

    #[test]
    fn a_person_required_by_the_content_is_a_reason_of_its_own() {
        let now = time("2026-01-01T00:00:00Z");
        let waiting = |reason, changed_by: Option<&str>| {
            let outcome = Outcome::AwaitingApproval {
                count: 3,
                reason,
                changed_by: changed_by.map(str::to_owned),
                account: "olmv2-system/plumbus-1".into(),
                installed_before: true,
            };
            find(&conditions(&outcome, None, &[], Some(1), &now), PENDING_APPROVAL).clone()
        };
        let manual = waiting(PendingReason::ManualApproval, None);
        assert_eq!(manual.reason, UPDATE_APPROVAL_REQUIRED);
        assert!(manual.message.contains("3 rules this content uses"), "{}", manual.message);
        let changed = waiting(PendingReason::ContentChanged, Some("bob"));
        assert_eq!(changed.reason, CONTENT_CHANGE_APPROVAL_REQUIRED);
        assert!(changed.message.starts_with("bob changed the content"), "{}", changed.message);
        assert_eq!(waiting(PendingReason::Permissions, None).reason, UNSATISFIED_PERMISSIONS);
    }

    #[test]
    fn events_follow_changes_of_status_or_reason() {
        let now = time("2026-01-01T00:00:00Z");
        let pending = conditions(
            &Outcome::AwaitingApproval {
                count: 1,
                reason: PendingReason::Permissions,
                changed_by: None,
                account: "a".into(),
                installed_before: false,
            },
            None,
            &[],
            None,
            &now,
        );
        let first = transitions(&[], &pending);
        assert_eq!(first.iter().map(|t| t.reason.as_str()).collect::<Vec<_>>(), [UNSATISFIED_PERMISSIONS]);
        assert!(!first[0].warning);
        assert!(transitions(&pending, &pending).is_empty());
        let installed = conditions(&applied(&[], &[]), None, &pending, None, &now);
        let reasons: Vec<String> = transitions(&pending, &installed).into_iter().map(|t| t.reason).collect();
        assert!(reasons.contains(&"ContentApplied".to_owned()), "{reasons:?}");
        assert!(reasons.contains(&"PermissionsSatisfied".to_owned()), "{reasons:?}");
        let failed = conditions(&Outcome::ImportFailed { message: "down".into() }, None, &installed, None, &now);
        let warnings: Vec<Transition> = transitions(&installed, &failed).into_iter().filter(|t| t.warning).collect();
        assert!(warnings.iter().any(|t| t.reason == MANIFEST_IMAGE_PULL_FAILED), "{warnings:?}");
    }

    #[test]
    fn an_immediate_install_records_one_event() {
        let installed = conditions(&applied(&[], &[]), None, &[], None, &time("2026-01-01T00:00:00Z"));
        let events = transitions(&[], &installed);
        assert_eq!(events.iter().filter(|t| t.reason == "ContentApplied").count(), 1, "{events:?}");
    }

    #[test]
    fn content_over_a_policy_is_its_own_state_and_condition() {
        let now = time("2026-01-01T00:00:00Z");
        let outcome = Outcome::ExceedsPolicy { summary: "InstallPolicy p: x".into(), installed_before: true };
        let exceeds = PolicyStatus { state: Some(PolicyState::Exceeds), violations: vec![] };
        let conditions = conditions(&outcome, Some(&exceeds), &[], None, &now);
        let policy = find(&conditions, EXCEEDS_POLICY);
        assert_eq!((policy.status.as_str(), policy.reason.as_str()), ("True", CONTENT_EXCEEDS_POLICY));
        assert!(
            policy.message.ends_with("what was installed before keeps running: InstallPolicy p: x"),
            "{}",
            policy.message
        );
        assert_eq!(find(&conditions, PENDING_APPROVAL).status, "False");
        assert_eq!(find(&conditions, INSTALLED).reason, EXCEEDS_POLICY);
        assert_eq!(state(&outcome), InstallState::ExceedsPolicy);
        let events = transitions(&[], &conditions);
        assert!(events.iter().any(|t| t.warning && t.reason == CONTENT_EXCEEDS_POLICY), "{events:?}");
    }

    #[test]
    fn running_content_over_a_tightened_policy_stays_installed_and_says_so() {
        let now = time("2026-01-01T00:00:00Z");
        let violation =
            crate::api::v2alpha1::PolicyViolation { policy: "p".into(), message: "x is over the ceiling".into() };
        let exceeds = PolicyStatus { state: Some(PolicyState::Exceeds), violations: vec![violation] };
        let conditions = conditions(&applied(&[], &[]), Some(&exceeds), &[], None, &now);
        let policy = find(&conditions, EXCEEDS_POLICY);
        assert_eq!((policy.status.as_str(), policy.reason.as_str()), ("True", INSTALLED_CONTENT_EXCEEDS_POLICY));
        assert!(policy.message.ends_with("InstallPolicy p: x is over the ceiling"), "{}", policy.message);
        assert_eq!(find(&conditions, INSTALLED).status, "True");
        let within = PolicyStatus { state: Some(PolicyState::Within), violations: vec![] };
        let reason = |policy| {
            find(&super::conditions(&applied(&[], &[]), policy, &[], None, &now), EXCEEDS_POLICY).reason.clone()
        };
        assert_eq!(reason(Some(&within)), "WithinPolicy");
        assert_eq!(reason(None), "NoPolicy");
        let unresolved =
            super::conditions(&Outcome::ImportFailed { message: "x".into() }, Some(&within), &[], None, &now);
        assert_eq!(find(&unresolved, EXCEEDS_POLICY).status, "Unknown");
    }
}

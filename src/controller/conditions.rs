//! Status conditions as Kubernetes conventions have them, for every controller: each type a controller reports is
//! always present, carries the generation it describes, and keeps its `lastTransitionTime` while its status stays;
//! and the events that changes of them make. Pure: a controller says which conditions it wants and which of its
//! states are abnormal; writing the status and publishing the events are the caller's (`client`, `events`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const TRUE: &str = "True";
pub const FALSE: &str = "False";
pub const UNKNOWN: &str = "Unknown";

/// Condition types and reasons of the v2alpha1 API that more than one controller writes or reads: an Install
/// reports them, and an Operator shows those of its Install (its own `ContentImportError` and `ComponentsDiverge`
/// among them).
pub mod v2alpha1 {
    pub const PENDING_APPROVAL: &str = "PendingApproval";
    pub const CONTENT_IMPORT_ERROR: &str = "ContentImportError";
    pub const INVALID_CONTENT: &str = "InvalidContent";
    pub const INSTALLED: &str = "Installed";
    pub const PROGRESSING: &str = "Progressing";
    pub const COMPONENTS_DIVERGE: &str = "ComponentsDiverge";
    /// Whether an Install's content needs more than an InstallPolicy allows (docs/policy.md).
    pub const EXCEEDS_POLICY: &str = "ExceedsPolicy";
    /// PendingApproval reason of an Install whose Operator approves updates by hand.
    pub const UPDATE_APPROVAL_REQUIRED: &str = "UpdateApprovalRequired";
}

/// A condition a controller wants to report: `(type, status, reason, message)`.
pub type Wanted = (&'static str, &'static str, String, String);

/// The conditions `wanted`, in that order, each keeping the transition time it had in `previous` when its status did
/// not change, and all describing `generation`.
pub fn conditions(
    wanted: impl IntoIterator<Item = Wanted>,
    previous: &[Condition],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    wanted
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let before = previous.iter().find(|c| c.type_ == type_);
            let last_transition_time = match before {
                Some(before) if before.status == status => before.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: type_.to_owned(),
                status: status.to_owned(),
                reason,
                message,
                last_transition_time,
                observed_generation: generation,
            }
        })
        .collect()
}

/// An event to record about the object whose conditions changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

/// How one kind's conditions read as events.
pub struct EventPolicy {
    /// Whether a condition reports an abnormal state (a failure, something waiting): such a condition is an event
    /// even the first time it is set, when a normal one is only news once it changes.
    pub abnormal: fn(&Condition) -> bool,
    /// Condition types whose abnormal states are still Normal events: waiting for a person, an update found.
    pub normal_types: &'static [&'static str],
}

/// One event per condition whose status or reason changed (an Unknown one says nothing); abnormal states are
/// warnings unless their type is one of the policy's normal ones.
pub fn transitions(previous: &[Condition], current: &[Condition], policy: &EventPolicy) -> Vec<Transition> {
    current
        .iter()
        .filter(|condition| condition.status != UNKNOWN)
        .filter(|condition| {
            !previous
                .iter()
                .any(|p| p.type_ == condition.type_ && p.status == condition.status && p.reason == condition.reason)
        })
        .filter(|condition| previous.iter().any(|p| p.type_ == condition.type_) || (policy.abnormal)(condition))
        .map(|condition| Transition {
            warning: (policy.abnormal)(condition) && !policy.normal_types.contains(&condition.type_.as_str()),
            reason: condition.reason.clone(),
            note: condition.message.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(text: &str) -> Time {
        Time(text.parse().expect("timestamp"))
    }

    fn wanted(type_: &'static str, status: &'static str, reason: &str) -> Wanted {
        (type_, status, reason.to_owned(), format!("{type_} is {status}"))
    }

    const POLICY: EventPolicy = EventPolicy { abnormal: |c| c.status == TRUE, normal_types: &["Waiting"] };

    #[test]
    fn transition_times_move_only_with_the_status() {
        let first = conditions([wanted("Ready", FALSE, "Starting")], &[], Some(1), &time("2026-01-01T00:00:00Z"));
        let same = conditions([wanted("Ready", FALSE, "Pulling")], &first, Some(2), &time("2026-01-02T00:00:00Z"));
        assert_eq!(same[0].last_transition_time, time("2026-01-01T00:00:00Z"));
        assert_eq!(same[0].observed_generation, Some(2));
        let moved = conditions([wanted("Ready", TRUE, "Done")], &same, Some(2), &time("2026-01-03T00:00:00Z"));
        assert_eq!(moved[0].last_transition_time, time("2026-01-03T00:00:00Z"));
    }

    #[test]
    fn normal_conditions_are_events_once_they_change_and_abnormal_ones_at_once() {
        let now = time("2026-01-01T00:00:00Z");
        let first = conditions([wanted("Failed", TRUE, "Broken"), wanted("Ready", FALSE, "Starting")], &[], None, &now);
        let events = transitions(&[], &first, &POLICY);
        assert_eq!(events, [Transition { warning: true, reason: "Broken".into(), note: "Failed is True".into() }]);
        assert!(transitions(&first, &first, &POLICY).is_empty());
        let next = conditions([wanted("Failed", FALSE, "Fixed"), wanted("Ready", UNKNOWN, "Gone")], &first, None, &now);
        let reasons: Vec<String> = transitions(&first, &next, &POLICY).into_iter().map(|t| t.reason).collect();
        assert_eq!(reasons, ["Fixed"], "an Unknown condition is no event");
    }

    #[test]
    fn abnormal_states_of_normal_types_are_normal_events() {
        let waiting = conditions([wanted("Waiting", TRUE, "ForAPerson")], &[], None, &time("2026-01-01T00:00:00Z"));
        let events = transitions(&[], &waiting, &POLICY);
        assert_eq!(events.len(), 1);
        assert!(!events[0].warning);
    }
}

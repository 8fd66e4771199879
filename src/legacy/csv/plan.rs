//! The pure decisions of a CSV pass beside the phase machine (`phase::transition`): which CSVs the loop runs, the
//! status a pass leaves and the event it publishes, and when the CSV is looked at again.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;

use super::phase::{set_phase, Outcome};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus, CsvPhase};
use crate::controller::conditions::Transition;
use crate::legacy::membership::{is_copied, is_install_record};

/// Whether the loop runs `csv`: not a copy (its original's pass keeps it), not the record of an Install (whose pass
/// writes it), unless that record still carries this loop's finalizer and is being deleted (a CSV OLM v0 installed
/// that an Install took over: its deletion is still this loop's to finish).
pub(super) fn runs(csv: &ClusterServiceVersion, has_finalizer: bool) -> bool {
    let finalizing = csv.metadata.deletion_timestamp.is_some() && has_finalizer;
    !(is_copied(csv) || (is_install_record(csv) && !finalizing))
}

/// The status a pass leaves (from `status`, after the certificates were rotated or not) and the event of its phase
/// change, if it changed one.
pub(super) fn next_status(
    status: &ClusterServiceVersionStatus,
    outcome: &Outcome,
    rotated: bool,
    now: &Time,
) -> (ClusterServiceVersionStatus, Option<Transition>) {
    let mut next = if rotated { super::rotation::rotated_status(status, now) } else { status.clone() };
    if let Some(statuses) = &outcome.requirement_status {
        next.requirement_status = statuses.clone();
    }
    let Some((phase, reason, message)) = &outcome.phase else { return (next, None) };
    match set_phase(&next, (*phase, reason, message), now) {
        Some(moved) => {
            let event =
                Transition { warning: *phase == CsvPhase::Failed, reason: (*reason).to_owned(), note: message.clone() };
            (moved, Some(event))
        }
        None => (next, None),
    }
}

/// When the CSV is looked at again: at the resync once it settled, after the retry interval while it waits on the
/// cluster (requirements, a rollout), at once when the pass changed something the next pass builds on.
pub(super) fn next_action(
    status: &ClusterServiceVersionStatus,
    next: &ClusterServiceVersionStatus,
    outcome: &Outcome,
    resync: Duration,
    retry: Duration,
) -> Action {
    let unchanged = next == status;
    let settled = next.phase == CsvPhase::Succeeded || outcome.phase.is_none() && outcome.group_apis.is_none();
    if settled && unchanged {
        Action::requeue(resync)
    } else if unchanged && !outcome.annotate && outcome.group_apis.is_none() {
        Action::requeue(retry)
    } else {
        Action::requeue(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::legacy::intersection::ApiReconciliation;

    const RESYNC: Duration = Duration::from_secs(600);
    const RETRY: Duration = Duration::from_secs(5);

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("time"))
    }

    fn status(phase: CsvPhase) -> ClusterServiceVersionStatus {
        ClusterServiceVersionStatus { phase, reason: Some("R".into()), message: Some("m".into()), ..Default::default() }
    }

    fn moving(phase: CsvPhase, reason: &'static str) -> Outcome {
        Outcome { phase: Some((phase, reason, "said".into())), ..Outcome::default() }
    }

    #[test]
    fn copies_and_install_records_are_left_to_their_owners() {
        let csv = |annotations: serde_json::Value, deleting: bool| -> ClusterServiceVersion {
            let mut csv = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "metadata": {"name": "a", "namespace": "ops", "annotations": annotations}, "spec": {"install": {"strategy": "deployment"}}});
            if deleting {
                csv["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
            }
            serde_json::from_value(csv).expect("csv")
        };
        assert!(runs(&csv(json!({}), false), false));
        assert!(!runs(&csv(json!({"olm.operatorNamespace": "elsewhere"}), false), true), "a copy");
        let record = json!({"v2alpha1.operators.coreos.com/install-record": "plumbus"});
        assert!(!runs(&csv(record.clone(), false), true), "an Install's record");
        assert!(!runs(&csv(record.clone(), true), false), "being deleted without the loop's finalizer");
        assert!(runs(&csv(record, true), true), "a taken-over CSV's deletion is the loop's to finish");
    }

    #[test]
    fn a_phase_change_moves_the_status_and_makes_an_event_a_failure_a_warning() {
        let (next, event) = next_status(&status(CsvPhase::Pending), &moving(CsvPhase::Failed, "Broken"), false, &now());
        assert_eq!((next.phase, next.reason.as_deref()), (CsvPhase::Failed, Some("Broken")));
        let event = event.expect("an event");
        assert!(event.warning);
        assert_eq!((event.reason.as_str(), event.note.as_str()), ("Broken", "said"));
        let (_, event) = next_status(&status(CsvPhase::Pending), &moving(CsvPhase::Succeeded, "Ok"), false, &now());
        assert!(!event.expect("an event").warning);
    }

    #[test]
    fn an_unchanged_phase_makes_no_event_and_requirements_are_written_alone() {
        let same = Outcome { phase: Some((CsvPhase::Pending, "R", "m".into())), ..Outcome::default() };
        let (next, event) = next_status(&status(CsvPhase::Pending), &same, false, &now());
        assert_eq!((next, event), (status(CsvPhase::Pending), None));
        let statuses = vec![crate::api::v1alpha1::RequirementStatus { name: "x".into(), ..Default::default() }];
        let requirements = Outcome { requirement_status: Some(statuses.clone()), ..Outcome::default() };
        let (next, event) = next_status(&status(CsvPhase::Pending), &requirements, false, &now());
        assert_eq!((next.requirement_status, event), (statuses, None));
    }

    #[test]
    fn rotated_certificates_are_recorded_in_the_status() {
        let (next, _) = next_status(&status(CsvPhase::Installing), &Outcome::default(), true, &now());
        assert_ne!(next, status(CsvPhase::Installing));
        assert_eq!(next, super::super::rotation::rotated_status(&status(CsvPhase::Installing), &now()));
    }

    #[test]
    fn a_settled_csv_waits_for_the_resync_a_waiting_one_for_the_retry_a_changed_one_not_at_all() {
        let succeeded = status(CsvPhase::Succeeded);
        let health = Outcome { phase: Some((CsvPhase::Succeeded, "R", "m".into())), ..Outcome::default() };
        assert_eq!(next_action(&succeeded, &succeeded, &health, RESYNC, RETRY), Action::requeue(RESYNC));
        let quiet = Outcome::default();
        let pending = status(CsvPhase::Pending);
        assert_eq!(next_action(&pending, &pending, &quiet, RESYNC, RETRY), Action::requeue(RESYNC));
        let waiting = Outcome { phase: Some((CsvPhase::Pending, "R", "m".into())), ..Outcome::default() };
        assert_eq!(next_action(&pending, &pending, &waiting, RESYNC, RETRY), Action::requeue(RETRY));
        let moved = status(CsvPhase::InstallReady);
        assert_eq!(next_action(&pending, &moved, &waiting, RESYNC, RETRY), Action::requeue(Duration::ZERO));
        let annotate = Outcome { annotate: true, ..waiting };
        assert_eq!(next_action(&pending, &pending, &annotate, RESYNC, RETRY), Action::requeue(Duration::ZERO));
        let apis = Outcome { group_apis: Some(ApiReconciliation::Add), ..Outcome::default() };
        assert_eq!(next_action(&pending, &pending, &apis, RESYNC, RETRY), Action::requeue(Duration::ZERO));
    }
}

//! The decisions of an Install's pass that were not a sibling module's already (`gate`, `follows`, `policy`,
//! `crd_safety`, `drift`, `conditions`): whether a person must approve whatever is pending, whether the pass lets
//! something through the gate, what to do with an object of the content
//! that exists, and what the content's CSVs say of the rollout. Pure: the pass (`reconcile`) reads, calls these, and
//! writes.

use std::collections::BTreeMap;

use serde_json::Value;

use super::gate::PersonRequired;
use crate::api::v2alpha1::{
    InstallStatus, PendingPermission, ResolvedContent, CONTENT_CHANGED_BY_ANNOTATION, MANUAL_APPROVAL_ANNOTATION,
};

/// Who changed the content, when a change marked it (the Install's `CONTENT_CHANGED_BY_ANNOTATION`), and whether
/// a person must approve whatever is pending: a content change always, a Manual Install's update too.
pub fn person_required(annotations: &BTreeMap<String, String>) -> (Option<PersonRequired>, Option<String>) {
    let changed_by = annotations.get(CONTENT_CHANGED_BY_ANNOTATION).cloned();
    let manual = annotations.get(MANUAL_APPROVAL_ANNOTATION).is_some_and(|value| value == "true");
    let person = if changed_by.is_some() {
        Some(PersonRequired::ContentChanged)
    } else if manual {
        Some(PersonRequired::Manual)
    } else {
        None
    };
    (person, changed_by)
}

/// Whether the content resolved now is what the status recorded for this generation (a settled Install is then
/// checked for drift rather than applied again).
pub fn same_content(previous: &InstallStatus, resolved: &[ResolvedContent], generation: Option<i64>) -> bool {
    previous.resolved == resolved && previous.observed_generation == generation
}

/// Whether the pass lets something through that an approval stands for: a grant, or content not let through
/// before. A settled Install applying the same content again (drift, resync) relies on no approval.
pub fn lets_through(grant: &[PendingPermission], resolved: &[ResolvedContent], approved: &[ResolvedContent]) -> bool {
    !grant.is_empty() || resolved != approved
}

/// What becomes of an object of the content that exists already.
#[derive(Debug, PartialEq, Eq)]
pub enum Existing {
    /// Someone else's: never taken over.
    NotOwned,
    /// A CRD whose stored version the new one no longer serves.
    DropsStoredVersion(String),
    /// Applied; its OLM v0 owner labels removed afterwards when `disown`; a CRD's existing resources checked
    /// against its new schema first when `check_crd`.
    Apply { disown: bool, check_crd: bool },
}

/// An object the Install did not apply before, or a CRD, found `live`: what the Install applied before is its own
/// (`owned_before`), as is what it created (`created`, a failed pass's half) and what it takes over from OLM v0
/// (`taken_over`); anything else that exists is never taken over.
pub fn existing(object: &Value, live: &Value, owned_before: bool, created: bool, taken_over: bool) -> Existing {
    if !owned_before && !created && !taken_over {
        return Existing::NotOwned;
    }
    if let Some(version) = super::crd_safety::dropped_stored_version(live, object) {
        return Existing::DropsStoredVersion(version);
    }
    let disown = taken_over && super::takeover::labelled_by_olm(live) && !super::takeover::labelled_by_olm(object);
    Existing::Apply { disown, check_crd: object["kind"] == "CustomResourceDefinition" }
}

/// The phase, reason and message the content's CSVs are given: Succeeded, or Installing while `rolling_out` (the
/// Deployments not available yet) is not empty, in OLM v0's words.
pub fn csv_phase(rolling_out: &[String]) -> (&'static str, &'static str, String) {
    if rolling_out.is_empty() {
        ("Succeeded", "InstallSucceeded", "install strategy completed with no errors".to_owned())
    } else {
        (
            "Installing",
            "InstallWaiting",
            format!("waiting for deployments {} to become available", rolling_out.join(", ")),
        )
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;

//! The decisions of an Install's pass, pure: the pass's own ([`decide`]: the gate's, from `gate`; whether a policy
//! holds the content; whether it is the content recorded; what counts as granted), the apply step's
//! ([`decide_apply`]: drift, from `drift`; whose each existing object is and what is taken over from OLM v0, from
//! `content` and `takeover`; what to check, disown and prune), whether a person must approve whatever is pending,
//! whether the pass lets something through the gate, and what the content's CSVs say of the rollout. The pass
//! (`reconcile`) observes, calls these, and has its steps write.

use std::collections::BTreeMap;

use serde_json::Value;

use super::content::{created_by, to_prune};
use super::drift;
use super::gate::{add_grants, gate, held_by_policy, Gate, GateInput, PersonRequired};
use super::objects::{applied_ref, describe, ApplyError};
use super::takeover::{made_for_csv, owned_crds, TakenCsv, Takeover};
use crate::api::v2alpha1::{
    AppliedObject, Approval, InstallStatus, PendingPermission, PolicyStatus, ResolvedContent,
    CONTENT_CHANGED_BY_ANNOTATION, MANUAL_APPROVAL_ANNOTATION,
};

/// What the pass's decision reads of what it observed.
#[derive(Clone, Copy)]
pub struct Observed<'a> {
    pub approval: Approval,
    pub generation: Option<i64>,
    /// The status as the pass found it.
    pub previous: &'a InstallStatus,
    /// How the content measures against the InstallPolicies of the moment.
    pub policy: Option<&'a PolicyStatus>,
    /// The content as resolved now, and its objects.
    pub resolved: &'a [ResolvedContent],
    pub objects: &'a [Value],
    /// The rules the account lacks for a person to approve, those following from a `create` granted before, and
    /// every rule the content needs.
    pub to_approve: &'a [PendingPermission],
    pub follows: &'a [PendingPermission],
    pub needed: &'a [PendingPermission],
    /// What was granted for the Install, read from the grants themselves.
    pub own_grants: &'a [PendingPermission],
    pub person: Option<PersonRequired>,
}

/// What the pass does, decided from what it observed.
#[derive(Debug, PartialEq, Eq)]
pub struct Decision {
    /// Content held over an InstallPolicy: the summary of what it exceeds.
    pub held: Option<String>,
    /// What the gate lets through, or the pending set to show.
    pub gate: Gate,
    /// Whether the content is what the status recorded for this generation (a settled Install is then compared with
    /// what is live rather than applied again).
    pub same_content: bool,
    /// What the status records as granted: what it recorded, and what the grants themselves say (a pass that failed
    /// after granting still counts them).
    pub granted: Vec<PendingPermission>,
}

/// The pass's decision: the gate's (`gate`), whether a policy holds the content (`gate::held_by_policy`: content
/// already running keeps running), whether the content is the same as recorded, and what counts as granted.
pub fn decide(observed: &Observed<'_>) -> Decision {
    let previous = observed.previous;
    let recorded_pending = previous.pending.as_ref().map(|p| p.permissions.as_slice()).unwrap_or_default();
    let decision = gate(&GateInput {
        approval: observed.approval,
        recorded_pending,
        recorded_content: &previous.resolved,
        approved_content: &previous.approved_content,
        resolved: observed.resolved,
        missing: observed.to_approve,
        follows: observed.follows,
        needed: observed.needed,
        person: observed.person,
    });
    let placed: Vec<AppliedObject> = observed.objects.iter().map(applied_ref).collect();
    let held = held_by_policy(observed.policy, &decision, observed.resolved, previous, &placed);
    Decision {
        held,
        gate: decision,
        same_content: same_content(previous, observed.resolved, observed.generation),
        granted: add_grants(&previous.granted, observed.own_grants),
    }
}

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

/// Whether the apply step reads an object as it is live before applying it: every object when it `compare`s a
/// settled Install's content with what is live (drift); otherwise one the Install did not apply before (it may be
/// someone else's) and every CRD (its stored versions, its existing resources).
pub fn must_read(object: &Value, applied_before: &[AppliedObject], compare: bool) -> bool {
    compare || object["kind"] == "CustomResourceDefinition" || !applied_before.contains(&applied_ref(object))
}

/// The reference the apply step reads an object at: its own; but for an object of a kind one of the content's CRDs
/// defines (`crds`: each with what is live of it, read first, as CRDs come first in apply order), a version that CRD
/// serves as it is live, when the content's update brings the object's version (an object's name, owners and
/// annotations are the same at every version; read at a version not served yet, it would be taken for absent, and
/// someone else's object of that name taken over); none while that CRD does not exist (nothing of its kind can).
pub fn read_at(object: &Value, crds: &[(&Value, Option<&Value>)]) -> Option<AppliedObject> {
    let reference = applied_ref(object);
    let (group, version) = reference.api_version.split_once('/').unwrap_or(("", reference.api_version.as_str()));
    let defines =
        |crd: &Value| crd["spec"]["group"] == group && crd["spec"]["names"]["kind"] == reference.kind.as_str();
    let Some((_, live)) = crds.iter().find(|(crd, _)| defines(crd)) else { return Some(reference) };
    let versions = (*live)?["spec"]["versions"].as_array()?;
    let served: Vec<&Value> = versions.iter().filter(|v| v["served"] == true).collect();
    if served.iter().any(|v| v["name"] == version) {
        return Some(reference);
    }
    let stored = served.iter().find(|v| v["storage"] == true).or_else(|| served.first())?;
    let api_version = format!("{group}/{}", stored["name"].as_str()?);
    Some(AppliedObject { api_version, ..reference })
}

/// A settled Install's content against what is `live` (aligned with `objects`): the objects someone changed
/// (drift, to repair), and whether some only lack the component `label`. An Operator that came to own the Install
/// (an adopted Subscription's) labels its objects: applied again, but not drift, which is someone changing what the
/// Install applied.
pub fn compare_with_live(objects: &[Value], live: &[Option<Value>], label: Option<&str>) -> (Vec<String>, bool) {
    let (mut diverged, mut relabel) = (Vec::new(), false);
    for (object, live) in objects.iter().zip(live) {
        match live {
            Some(live) if drift::holds(object, live) => {}
            Some(live) if drift::holds(&drift::without_label(object, label), live) => relabel = true,
            _ => diverged.push(describe(object)),
        }
    }
    (diverged, relabel)
}

/// Whose the objects that exist are: what the Install applied before, what it created (by its name and uid), what
/// it takes over from OLM v0 (`taken`).
pub struct Ownership<'a> {
    pub applied_before: &'a [AppliedObject],
    pub install: &'a str,
    pub uid: &'a str,
    pub taken: Option<&'a (Takeover, TakenCsv)>,
}

/// What the apply step writes besides applying every object: by index into the content, the CRDs whose existing
/// resources are checked first and the objects taken over from OLM v0 to disown once applied; and what it prunes.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ApplyPlan {
    pub check_crds: Vec<usize>,
    pub disown: Vec<usize>,
    pub prune: Vec<AppliedObject>,
}

/// What the apply step does, decided from what it read.
#[derive(Debug)]
pub enum ApplyDecision {
    /// A settled Install whose objects all hold what it applied: nothing to write.
    Unchanged,
    /// Every object applied, with `plan`; `diverged` names the objects someone changed (drift being repaired).
    Apply { plan: ApplyPlan, diverged: Vec<String> },
    /// Refused: an object is someone else's, or a CRD drops a stored version.
    Refused(ApplyError),
}

/// The apply step's decision from the content's objects as they are `live` (aligned with `objects`, as
/// [`must_read`] read them, everything when it `compare`s a settled Install with what is live).
pub fn decide_apply(
    objects: &[Value],
    live: &[Option<Value>],
    compare: bool,
    label: Option<&str>,
    ownership: &Ownership<'_>,
) -> ApplyDecision {
    let (diverged, relabel) = if compare { compare_with_live(objects, live, label) } else { (Vec::new(), false) };
    if compare && diverged.is_empty() && !relabel {
        return ApplyDecision::Unchanged;
    }
    match admit(objects, live, ownership) {
        Ok(plan) => ApplyDecision::Apply { plan, diverged },
        Err(refusal) => ApplyDecision::Refused(refusal),
    }
}

/// Refused at the first object that is someone else's or a CRD dropping a stored version; otherwise what to check,
/// disown and prune.
pub fn admit(objects: &[Value], live: &[Option<Value>], ownership: &Ownership<'_>) -> Result<ApplyPlan, ApplyError> {
    let content_crds = owned_crds(objects);
    let mut plan = ApplyPlan::default();
    for (index, (object, live)) in objects.iter().zip(live).enumerate() {
        let reference = applied_ref(object);
        let owned_before = ownership.applied_before.contains(&reference);
        if owned_before && object["kind"] != "CustomResourceDefinition" {
            continue;
        }
        let Some(live) = live else { continue };
        let taken_over = ownership
            .taken
            .is_some_and(|(takeover, csv)| made_for_csv(live, takeover, csv, &content_crds, ownership.install));
        let created = created_by(live, ownership.install, ownership.uid);
        match existing(object, live, owned_before, created, taken_over) {
            Existing::NotOwned => return Err(ApplyError::NotOwned { object: describe(object) }),
            Existing::DropsStoredVersion(version) => {
                return Err(ApplyError::UnsafeCrdUpgrade { crd: reference.name, version })
            }
            // (Also when a pass that failed halfway applied it already.)
            Existing::Apply { disown, check_crd } => {
                plan.check_crds.extend(check_crd.then_some(index));
                plan.disown.extend(disown.then_some(index));
            }
        }
    }
    plan.prune = to_prune(ownership.applied_before, objects);
    Ok(plan)
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

//! The CSV phase machine of OLM v0's `transitionCSVState`, as a pure function of what a pass observed: membership
//! of an OperatorGroup, install modes, provided-API intersection, then the phases None → Pending → InstallReady →
//! Installing → Succeeded, and back through Failed and Pending, with OLM's phases, reasons and messages. The history
//! in `status.conditions` grows only when the phase or reason changes, and keeps the last 20 entries.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::super::intersection::ApiReconciliation;
use super::strategy::Unhealthy;
use crate::api::v1alpha1::{ClusterServiceVersionStatus, CsvCondition, CsvPhase, RequirementStatus};

/// The most history entries a CSV keeps.
pub const CONDITIONS_LIMIT: usize = 20;
/// How long Installing may wait for healthy Deployments before the install fails.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// What one pass observed about a CSV (beyond the CSV itself).
pub struct Observed {
    /// Why the CSV belongs to no group (OLM's reason and message), when it does not.
    pub group_failure: Option<(&'static str, &'static str)>,
    /// The group's annotations the CSV lacks (empty: it has them).
    pub annotations_missing: bool,
    /// Whether the group targets no namespace (a selector matching nothing), from its spec as OLM computes it.
    pub no_targets: bool,
    /// The install-mode check: Err((reason, message)).
    pub install_modes: Result<(), (&'static str, String)>,
    pub static_group: bool,
    pub apis: ApiReconciliation,
    pub requirements: (bool, Vec<RequirementStatus>),
    /// Whether the CSV's author may create its Deployments (and its components' objects): Err(why not). Read in
    /// InstallReady, and in Failed after an install failed.
    pub author: Result<(), String>,
    pub health: Result<(), Unhealthy>,
    pub now: Time,
    pub chain: Chain,
    /// What OLM checks of owned APIServices and webhooks outside the install (`components`).
    pub components: Components,
}

/// OLM's checks of owned APIServices and webhooks in Pending, Succeeded and Failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Components {
    /// A webhook description OLM refuses (`InvalidWebhookDescription`): its message.
    pub invalid_webhooks: Option<String>,
    /// An owned APIService exists and may not be adopted (`OwnerConflict`).
    pub unadoptable_api_service: bool,
    /// A serving certificate must be replaced (`NeedsCertRotation`).
    pub rotate: bool,
}

/// Where a CSV stands in its replacement chain (`spec.replaces`), from the CSVs of its namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chain {
    /// The CSV it replaces, when that exists: (name, phase).
    pub replaces: Option<(String, CsvPhase)>,
    /// A CSV that replaces it: (name, phase).
    pub replaced_by: Option<(String, CsvPhase)>,
    /// The newest CSV of the chain after it (for fail-forward): (name, phase).
    pub newest: Option<(String, CsvPhase)>,
    /// Whether its group allows replacing failed CSVs (`upgradeStrategy: TechPreviewUnsafeFailForward`).
    pub fail_forward: bool,
    /// Whether a CSV of the namespace outside its chain owns one of its owned CRDs.
    pub crd_owner_conflict: bool,
}

/// What a pass does.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// The new phase, reason and message (when it changes the status).
    pub phase: Option<(CsvPhase, &'static str, String)>,
    pub requirement_status: Option<Vec<RequirementStatus>>,
    /// Write the group's annotations on the CSV.
    pub annotate: bool,
    /// Change the group's `olm.providedAPIs` (Add or Remove) and come back.
    pub group_apis: Option<ApiReconciliation>,
    /// Apply the Deployments.
    pub install: bool,
    /// Delete the CSV's Deployments (a conflict of provided APIs).
    pub remove_deployments: bool,
    /// Make the per-API ClusterRoles (the CSV has Succeeded).
    pub api_roles: bool,
    /// Delete the CSV itself (replaced, in phase Deleting).
    pub delete: bool,
}

/// Reasons of failures about the group that heal once the group fits.
const GROUP_REASONS: &[&str] =
    &["NoTargetNamespaces", "NoOperatorGroup", "TooManyOperatorGroups", "UnsupportedOperatorGroup"];

/// One pass of OLM's `transitionCSVState`: the checks of the CSV's group, install modes and provided APIs end the
/// pass first when they fail; then the CSV's phase decides, and a CSV that is (or becomes) Succeeded gets its roles.
pub fn transition(status: &ClusterServiceVersionStatus, observed: Observed) -> Outcome {
    let reason = status.reason.as_deref().unwrap_or_default();
    let mut outcome = Outcome::default();
    if reason == "InstallComponentFailedNoRetry" {
        return outcome;
    }
    if let Some((failure, message)) = observed.group_failure {
        outcome.phase = fail(failure, message.into());
        return outcome;
    }
    if observed.annotations_missing {
        outcome.annotate = true;
        if observed.no_targets {
            outcome.phase =
                fail("NoTargetNamespaces", "no targetNamespaces are matched operatorgroups namespace selection".into());
        }
        return outcome;
    }
    if let Err((reason, message)) = observed.install_modes {
        outcome.phase = fail(reason, message);
        return outcome;
    }
    if let Some(stopped) = provided_apis(reason, observed.apis, observed.static_group) {
        return stopped;
    }

    match status.phase {
        CsvPhase::None => outcome.phase = to(CsvPhase::Pending, "RequirementsUnknown", "requirements not yet checked"),
        CsvPhase::Pending => from_pending(observed, &mut outcome),
        CsvPhase::InstallReady => from_install_ready(observed.author, &mut outcome),
        CsvPhase::Installing => from_installing(status, &observed, &mut outcome),
        CsvPhase::Succeeded => from_succeeded(observed, &mut outcome),
        CsvPhase::Failed => from_failed(reason, observed, &mut outcome),
        CsvPhase::Replacing => from_replacing(&observed.chain, &mut outcome),
        CsvPhase::Deleting => outcome.delete = true,
        // OLM has no handler for Unknown either: such a CSV stays as it is.
        CsvPhase::Unknown => {}
    }
    // The roles for using its APIs come with a CSV that is (or has just become) Succeeded.
    outcome.api_roles = outcome.phase.as_ref().map_or(status.phase, |(phase, _, _)| *phase) == CsvPhase::Succeeded;
    outcome
}

/// Phase Failed for `reason`, as OLM words it.
fn fail(reason: &'static str, message: String) -> Option<(CsvPhase, &'static str, String)> {
    Some((CsvPhase::Failed, reason, message))
}

/// Phase `phase` for `reason`, with OLM's fixed message.
fn to(phase: CsvPhase, reason: &'static str, message: &str) -> Option<(CsvPhase, &'static str, String)> {
    Some((phase, reason, message.to_owned()))
}

/// OLM's check of the CSV's provided APIs against its group's, in every phase: the outcome that ends the pass when
/// they cannot be provided as they are (a static group asked to change, an intersecting group providing them) or
/// the group's annotation is to change first; None when they fit.
fn provided_apis(reason: &str, apis: ApiReconciliation, static_group: bool) -> Option<Outcome> {
    let mut outcome = Outcome::default();
    match apis {
        ApiReconciliation::Add | ApiReconciliation::Remove if static_group => {
            // OLM's guard compares with the conflict reason, so a CSV already failing so is left as it is.
            if reason != "InterOperatorGroupOwnerConflict" {
                outcome.phase = fail(
                    "CannotModifyStaticOperatorGroupProvidedAPIs",
                    "static provided api operatorgroup cannot be modified by these apis".into(),
                );
                outcome.remove_deployments = true;
            }
        }
        ApiReconciliation::Conflict => {
            if reason != "InterOperatorGroupOwnerConflict" {
                outcome.phase =
                    fail("InterOperatorGroupOwnerConflict", "intersecting operatorgroups provide the same apis".into());
                outcome.remove_deployments = true;
            }
        }
        ApiReconciliation::Add | ApiReconciliation::Remove => outcome.group_apis = Some(apis),
        ApiReconciliation::NoConflict => return None,
    }
    Some(outcome)
}

/// Pending: InstallReady once its requirements are met and nothing it owns conflicts (a refused webhook, a CRD or
/// APIService owned by another), and the CSV it replaces has stepped aside. Its requirements' status is recorded
/// on every pass, for the user to see what is missing.
fn from_pending(observed: Observed, outcome: &mut Outcome) {
    let (met, statuses) = observed.requirements;
    outcome.requirement_status = Some(statuses);
    let chain = &observed.chain;
    outcome.phase = if !met {
        to(CsvPhase::Pending, "RequirementsNotMet", "one or more requirements couldn't be found")
    } else if let Some(message) = &observed.components.invalid_webhooks {
        fail("InvalidWebhookDescription", message.clone())
    } else if chain.crd_owner_conflict {
        fail("OwnerConflict", "conflicting CRD owner in namespace".into())
    } else if observed.components.unadoptable_api_service {
        fail("OwnerConflict", "unable to adopt APIService".into())
    } else if chain.replaces.as_ref().is_some_and(|(_, phase)| *phase != CsvPhase::Replacing) {
        // The CSV it replaces must step aside first (it goes Replacing once it sees this one).
        None
    } else {
        to(CsvPhase::InstallReady, "AllRequirementsMet", "all requirements found, attempting install")
    };
}

/// InstallReady: the Deployments are applied when the CSV's author may create them; otherwise the install fails
/// rather than doing on the author's behalf what it could not do itself.
fn from_install_ready(author: Result<(), String>, outcome: &mut Outcome) {
    match author {
        Err(why) => outcome.phase = fail("InstallComponentFailed", format!("install strategy failed: {why}")),
        Ok(()) => {
            outcome.install = true;
            outcome.phase =
                to(CsvPhase::Installing, "InstallSucceeded", "waiting for install components to report healthy");
        }
    }
}

/// Installing: as the Deployments' health says, until unhealthy Deployments have waited [`INSTALL_TIMEOUT`] since
/// the phase began, when the install fails.
fn from_installing(status: &ClusterServiceVersionStatus, observed: &Observed, outcome: &mut Outcome) {
    outcome.phase = health(&observed.health, CsvPhase::Installing, "InstallWaiting");
    let waited = elapsed(status.last_transition_time.as_ref(), &observed.now);
    if observed.health.is_err() && waited >= INSTALL_TIMEOUT {
        outcome.phase = fail("InstallCheckFailed", "install timeout".into());
    }
}

/// Succeeded: a CSV replacing it takes over first; then a certificate to rotate sends it back to Pending, unmet
/// requirements fail it, and otherwise its Deployments' health keeps or fails it.
fn from_succeeded(observed: Observed, outcome: &mut Outcome) {
    let (met, statuses) = observed.requirements;
    if let Some((next, _)) = &observed.chain.replaced_by {
        outcome.phase = Some((CsvPhase::Replacing, "BeingReplaced", format!("being replaced by csv: {next}")));
    } else if observed.components.rotate {
        outcome.phase = to(CsvPhase::Pending, "NeedsCertRotation", "CSV owns resources that require a cert refresh");
    } else if !met {
        outcome.requirement_status = Some(statuses);
        outcome.phase = fail("RequirementsNotMet", "requirements no longer met".into());
    } else {
        outcome.phase = health(&observed.health, CsvPhase::Failed, "ComponentUnhealthy");
    }
}

/// Failed: with fail-forward, a CSV replacing it takes over; otherwise a failure that has healed, unmet
/// requirements, a certificate to rotate or the Deployments' health send it back to Pending, to be installed again.
fn from_failed(reason: &str, observed: Observed, outcome: &mut Outcome) {
    if observed.chain.fail_forward && observed.chain.replaced_by.is_some() {
        let next = observed.chain.replaced_by.as_ref().map(|(name, _)| name.as_str()).unwrap_or_default();
        outcome.phase = Some((
            CsvPhase::Replacing,
            "BeingReplaced",
            format!("Fail Forward is enabled, allowing Failed csv to be replaced by csv: {next}"),
        ));
        return;
    }
    // The author still may not: failing again after a round through Pending and InstallReady would rewrite the
    // status (and an event) on every retry of an idle cluster. A new author (a change of the spec) or new rights
    // heal it.
    if reason == "InstallComponentFailed" && observed.author.is_err() {
        return;
    }
    let healed = match reason {
        reason if GROUP_REASONS.contains(&reason) => Some("InstallModes now support target namespaces"),
        "InterOperatorGroupOwnerConflict" => Some("OperatorGroup no longer intersecting with conflicting owner"),
        "CannotModifyStaticOperatorGroupProvidedAPIs" => {
            Some("static OperatorGroup and intersecting groups now support providedAPIs")
        }
        _ => None,
    };
    let (met, statuses) = observed.requirements;
    if let Some(message) = healed {
        outcome.phase = to(CsvPhase::Pending, "RequirementsUnknown", message);
    } else if !met {
        outcome.requirement_status = Some(statuses);
        outcome.phase = to(CsvPhase::Pending, "RequirementsNotMet", "requirements not met");
    } else if observed.components.rotate {
        outcome.phase = to(CsvPhase::Pending, "NeedsCertRotation", "owned APIServices need cert refresh");
    } else {
        outcome.phase = health(&observed.health, CsvPhase::Pending, "NeedsReinstall");
    }
}

/// Replacing: the CSV is deleted once the CSV replacing it has Succeeded (with fail-forward, the newest of the
/// chain). Only the oldest of a chain goes first, so a chain is deleted from its start.
fn from_replacing(chain: &Chain, outcome: &mut Outcome) {
    let next = if chain.fail_forward { chain.newest.as_ref() } else { chain.replaced_by.as_ref() };
    if chain.replaces.is_none() && next.is_some_and(|(_, phase)| *phase == CsvPhase::Succeeded) {
        outcome.phase = to(
            CsvPhase::Deleting,
            "Replaced",
            "has been replaced by a newer ClusterServiceVersion that has successfully installed.",
        );
    }
}

/// OLM's `updateInstallStatus`: Succeeded when healthy; a Deployment to apply again goes back to InstallReady; one
/// past its deadline fails the install; otherwise `phase`/`reason` with the rollout's message.
fn health(
    health: &Result<(), Unhealthy>,
    phase: CsvPhase,
    reason: &'static str,
) -> Option<(CsvPhase, &'static str, String)> {
    match health {
        Ok(()) => Some((CsvPhase::Succeeded, "InstallSucceeded", "install strategy completed with no errors".into())),
        Err(Unhealthy::TimedOut(message)) => {
            Some((CsvPhase::Failed, "InstallCheckFailed", format!("install failed: {message}")))
        }
        Err(Unhealthy::Component { reinstall, message }) => {
            Some((if *reinstall { CsvPhase::InstallReady } else { phase }, reason, message.clone()))
        }
        Err(unhealthy @ Unhealthy::Outdated(_)) => {
            Some((CsvPhase::InstallReady, reason, format!("installing: {}", unhealthy.message())))
        }
        Err(unhealthy) => Some((phase, reason, format!("installing: {}", unhealthy.message()))),
    }
}

fn elapsed(since: Option<&Time>, now: &Time) -> Duration {
    since.map(|since| now.0.duration_since(since.0)).and_then(|span| Duration::try_from(span).ok()).unwrap_or_default()
}

/// The status after entering `phase` for `reason` (OLM's `SetPhase`), or None when phase, reason and message are
/// already those (OLM rewrites `lastUpdateTime` on some unchanged passes; here an unchanged CSV is not written).
pub fn set_phase(
    status: &ClusterServiceVersionStatus,
    (phase, reason, message): (CsvPhase, &str, &str),
    now: &Time,
) -> Option<ClusterServiceVersionStatus> {
    if status.phase == phase && status.reason.as_deref() == Some(reason) && status.message.as_deref() == Some(message) {
        return None;
    }
    let mut next = status.clone();
    next.last_update_time = Some(now.clone());
    if next.phase != phase {
        next.phase = phase;
        next.last_transition_time = Some(now.clone());
    }
    next.reason = Some(reason.to_owned());
    next.message = Some(message.to_owned());
    let changed =
        next.conditions.last().is_none_or(|last| last.phase != phase || last.reason.as_deref() != Some(reason));
    if changed {
        next.conditions.push(CsvCondition {
            phase,
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            last_update_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
        });
    }
    if next.conditions.len() > CONDITIONS_LIMIT {
        let excess = next.conditions.len() - CONDITIONS_LIMIT;
        next.conditions.drain(..excess);
    }
    Some(next)
}

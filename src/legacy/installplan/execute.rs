//! How an InstallPlan runs here. OLM v0 applies a plan's steps with its own rights (or an OperatorGroup's
//! ServiceAccount's); this controller never gives an operator a permission nobody who holds it approved, so each
//! bundle of a plan is installed by an Install (`docs/install.md`): one per Subscription, named
//! `<package>.<namespace>`, made on behalf of the Subscription's author (the webhook's record), its content the
//! bundle image. The Install's gate decides: it installs at once within what the namespace's OperatorGroup
//! ServiceAccount holds (where the author may use it: OLM's `attenuatedServiceAccountRef`), and otherwise waits for
//! a person who holds the missing permissions to approve. The plan follows its Installs: `Installing` while one
//! installs or waits (its `Installed` condition says which and why), `Complete` once every bundle is installed.
//!
//! Pure: [`decide`] answers what to create or change and the plan's next status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::plan::{STEP_CREATED, STEP_PRESENT, STEP_UNKNOWN};
use crate::api::v1alpha1::{
    BundleLookup, InstallPlan, InstallPlanCondition, InstallPlanPhase, InstallPlanStatus, Subscription,
};
use crate::api::v2alpha1::{
    DeploymentConfig, Install, InstallState, CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION,
    MANUAL_APPROVAL_ANNOTATION, TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION,
};

/// The annotation naming the Subscription (`<namespace>/<name>`) an Install was made for: only the controller may
/// write it (the webhook refuses anyone else), so it says who the Install serves.
pub use crate::api::v2alpha1::SUBSCRIPTION_ANNOTATION;
/// The catalog bundle an Install holds (shared with Operators' Installs).
pub use crate::operator::desired::BUNDLE_ANNOTATION;
/// OLM's marks on what a plan creates.
pub const GENERATED_BY_ANNOTATION: &str = "olm.generated-by";
pub const MANAGED_LABEL: &str = "olm.managed";
/// The plan's condition, as OLM names it.
pub const INSTALLED: &str = "Installed";
/// Its reasons: OLM's for a failure, ours for a plan waiting on a person.
pub const INSTALL_COMPONENT_FAILED: &str = "InstallComponentFailed";
pub const INSTALL_PENDING_APPROVAL: &str = "InstallPendingApproval";

/// The Install of `package` for a Subscription in `namespace`.
pub fn install_name(package: &str, namespace: &str) -> String {
    format!("{package}.{namespace}")
}

/// What one pass of a plan does.
#[derive(Clone, Debug, Default)]
pub struct Decision {
    /// Subscriptions to create (OLM's Subscription steps): manifests.
    pub create_subscriptions: Vec<Value>,
    /// Installs to create: manifests.
    pub create_installs: Vec<Value>,
    /// Installs whose content moves to a new bundle (the patch, `content_patch`, waits for the author check).
    pub update_installs: Vec<Move>,
    /// The plan's next status.
    pub status: InstallPlanStatus,
    /// An error is being retried (until the retry timeout): look again soon.
    pub retrying: bool,
}

/// When a plan is looked at again: never by itself once it completed or failed; soon while it retries an error
/// or waits for what it just created; otherwise now and then (its Installs' and Subscriptions' changes wake it, and a
/// look now and then covers a missed one).
pub fn next_action(decision: &Decision, retry: std::time::Duration, resync: std::time::Duration) -> Action {
    match decision.status.phase {
        InstallPlanPhase::Complete | InstallPlanPhase::Failed => Action::await_change(),
        _ if decision.retrying || !decision.create_installs.is_empty() || !decision.create_subscriptions.is_empty() => {
            Action::requeue(retry)
        }
        _ => Action::requeue(resync),
    }
}

/// What a plan's pass reads.
pub struct Observed<'a> {
    pub plan: &'a InstallPlan,
    pub subscriptions: &'a [Subscription],
    /// Installs by name.
    pub installs: &'a BTreeMap<String, Install>,
    /// How long after it started installing a plan whose Installs fail is failed (OLM's
    /// `--install-plan-retry-timeout`).
    pub retry_timeout: std::time::Duration,
    /// The namespace's CSVs that no Install applied (OLM v0 installed them, or someone by hand), by name: uid.
    pub installed_by_olm: &'a BTreeMap<String, String>,
}

/// A Subscription's Install to move to `image` (bundle `csv`), as read.
#[derive(Clone, Debug)]
pub struct Move {
    pub install: Install,
    pub subscription: Subscription,
    pub csv: String,
    pub image: String,
}

/// Who a Subscription's author is, for a content-change mark: their username, or the Subscription when none was
/// recorded.
fn author_name(subscription: &Subscription) -> String {
    crate::webhook::csv_author::recorded_author(subscription.annotations())
        .map(|author| author.username)
        .unwrap_or_else(|| format!("the author of Subscription {}", subscription_key(subscription)))
}

fn subscription_key(subscription: &Subscription) -> String {
    format!("{}/{}", subscription.namespace().unwrap_or_default(), subscription.name_any())
}

/// A Subscription's `spec.config` as the Install's deployment configuration (`DeploymentConfig`, the one
/// implementation of OLM's merge rules for Subscriptions, Installs and Operators); none when it sets nothing.
pub fn deployment_config(subscription: &Subscription) -> Option<DeploymentConfig> {
    subscription.spec.config.as_ref().map(DeploymentConfig::from).filter(|config| !config.is_empty())
}

/// The content of a Subscription's Install: the bundle image with the Subscription's configuration.
pub fn desired_content(subscription: &Subscription, image: &str) -> Value {
    let mut content = json!({"type": "ManifestImage", "manifestImage": image});
    if let Some(config) = deployment_config(subscription) {
        content["config"] = json!(config);
    }
    json!([content])
}

/// Whether an Install holds `image` with the Subscription's configuration.
pub fn holds_content(install: &Install, subscription: &Subscription, image: &str) -> bool {
    let entry = install.spec.content.first();
    entry.and_then(|e| e.manifest_image.as_deref()) == Some(image)
        && entry.and_then(|e| e.config.clone()).filter(|c| !c.is_empty()) == deployment_config(subscription)
}

/// The merge patch moving a Subscription's Install to `image` (with its configuration) for bundle `csv`. New content
/// chosen by someone who could not have put it there themselves (`author_may_change` false) waits for a person
/// holding what the account was granted (the approval gate's invariant 5), as a changed Operator source does.
pub fn content_patch(subscription: &Subscription, csv: &str, image: &str, author_may_change: bool) -> Value {
    let mut patch = json!({
        "metadata": {"annotations": {BUNDLE_ANNOTATION: csv,
                                      MANUAL_APPROVAL_ANNOTATION: if manual(subscription) { Some("true") } else { None }}},
        "spec": {"content": desired_content(subscription, image)},
    });
    if manual(subscription) {
        patch["spec"]["approval"] = json!("Unapproved");
    }
    if !author_may_change {
        patch["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION] = json!(author_name(subscription));
        patch["spec"]["approval"] = json!("Unapproved");
    }
    patch
}

/// The Install for a Subscription's bundle: made on behalf of the Subscription's author, its namespace-less content
/// in the Subscription's namespace.
pub fn new_install(subscription: &Subscription, csv: &str, image: &str) -> Value {
    let namespace = subscription.namespace().unwrap_or_default();
    let mut annotations = json!({SUBSCRIPTION_ANNOTATION: subscription_key(subscription), BUNDLE_ANNOTATION: csv});
    // Without a recorded author (a Subscription older than the record), nobody stands as creator: no OperatorGroup
    // account is lent, and everything waits for a person.
    if let Some(creator) = subscription.annotations().get(CREATOR_ANNOTATION) {
        annotations[CREATOR_ANNOTATION] = json!(creator);
    }
    if manual(subscription) {
        annotations[MANUAL_APPROVAL_ANNOTATION] = json!("true");
    }
    json!({
        "apiVersion": "operators.coreos.com/v2alpha1",
        "kind": "Install",
        "metadata": {"name": install_name(&subscription.spec.name, &namespace), "annotations": annotations},
        "spec": {
            "namespaces": [{"from": "default", "to": namespace}],
            "content": desired_content(subscription, image),
        },
    })
}

/// Names, on an Install made for a Subscription in `namespace`, the CSV `csv` (uid `uid`) that OLM v0 installed and
/// that its first apply takes over (`install::takeover`).
pub fn take_over(install: &mut Value, namespace: &str, csv: &str, uid: &str) {
    install["metadata"]["annotations"][TAKES_OVER_CSV_ANNOTATION] = json!(format!("{namespace}/{csv}"));
    install["metadata"]["annotations"][TAKES_OVER_CSV_UID_ANNOTATION] = json!(uid);
}

/// Whether a Subscription approves its updates by hand: its Install then waits for a person holding what it was
/// granted on every content change (whoever approves the InstallPlan), as a Manual Operator's does.
pub fn manual(subscription: &Subscription) -> bool {
    subscription.spec.install_plan_approval == Some(crate::api::v1alpha1::InstallPlanApproval::Manual)
}

/// Whether `subscription` points at `plan` (OLM's `installPlanRef`).
pub fn references(subscription: &Subscription, plan: &InstallPlan) -> bool {
    let reference = subscription.status.as_ref().and_then(|s| s.install_plan_ref.as_ref());
    reference.is_some_and(|r| match (&r.uid, &plan.metadata.uid) {
        (Some(uid), Some(plan_uid)) => uid == plan_uid,
        _ => r.name == plan.metadata.name,
    })
}

/// The author a plan's generated Subscriptions are made on behalf of: the one author of every Subscription that
/// asked for the plan, or nobody when they differ (a dependency is never made on someone else's behalf).
fn common_author(requesters: &[&Subscription]) -> Option<String> {
    let mut authors = requesters.iter().map(|s| s.annotations().get(CREATOR_ANNOTATION));
    let first = authors.next()??;
    authors.all(|author| author == Some(first)).then(|| first.clone())
}

/// Whether `install` is the one this controller made for `subscription`: it names the Subscription, which only the
/// controller can have written (an Install someone else made under that name is never taken over).
pub fn made_for(install: &Install, subscription: &Subscription) -> bool {
    install.annotations().get(SUBSCRIPTION_ANNOTATION) == Some(&subscription_key(subscription))
}

/// The image an Install's content holds.
pub fn installed_image(install: &Install) -> Option<&str> {
    install.spec.content.first()?.manifest_image.as_deref()
}

fn settled(install: &Install) -> bool {
    crate::operator::desired::settled(install)
}

/// Where one bundle of the plan stands.
enum Standing {
    Done,
    Waiting(String),
    /// Waiting for a person to approve.
    AwaitingApproval(String),
    Failing(String),
    /// Failing in a way only someone else can mend, so never terminal: the account may not do something (OLM: it
    /// may yet be given the permission), or an Install someone else made holds the name (it may yet go).
    Blocked(String),
}

impl Standing {
    /// Why it waits, if it waits (installing, or for a person).
    fn waiting(&self) -> Option<&str> {
        match self {
            Self::Waiting(message) | Self::AwaitingApproval(message) => Some(message),
            _ => None,
        }
    }

    /// Why it fails, if it fails (for good after the retry timeout, or blocked).
    fn failing(&self) -> Option<&str> {
        match self {
            Self::Failing(message) | Self::Blocked(message) => Some(message),
            _ => None,
        }
    }
}

/// Whether a failed Install failed because its account may not apply something (`ApplyForbidden`).
fn failed_forbidden(install: &Install) -> bool {
    let conditions = install.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    conditions.iter().any(|c| c.type_ == "Installed" && c.status == "False" && c.reason == "ApplyForbidden")
}

/// The time from `from` to `to`, none when `to` is earlier.
fn elapsed(from: &Time, to: &Time) -> std::time::Duration {
    std::time::Duration::try_from(to.0.duration_since(from.0)).unwrap_or_default()
}

/// Why a failed Install failed: its import or validity error, else why it is not installed.
fn failure_message(install: &Install) -> String {
    let conditions = install.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let with = |type_: &str, status: &str| conditions.iter().find(|c| c.type_ == type_ && c.status == status);
    with("ContentImportError", "True")
        .or_else(|| with("InvalidContent", "True"))
        .or_else(|| with("Installed", "False"))
        .map_or_else(|| "failed".to_owned(), |c| c.message.clone())
}

/// Decides a pass of a plan in phase `Installing`.
pub fn decide(observed: &Observed<'_>, now: &Time) -> Decision {
    let plan = observed.plan;
    let mut status = plan.status.clone().unwrap_or_default();
    status.start_time.get_or_insert_with(|| now.clone());
    let mut decision =
        Decision { create_subscriptions: subscription_steps(observed, &mut status), ..Decision::default() };
    let mut standings = Vec::new();
    let mut done_installs: BTreeMap<String, &Install> = BTreeMap::new();
    for lookup in &status.bundle_lookups {
        let (standing, done) =
            bundle_standing(observed, lookup, &mut decision, &mut status.attenuated_service_account_ref);
        if let Some(install) = done {
            done_installs.insert(lookup.identifier.clone(), install);
        }
        standings.push((lookup.identifier.clone(), standing));
    }
    for step in status.plan.iter_mut().filter(|step| step.resource.kind == "ClusterServiceVersion") {
        if standings.iter().any(|(csv, standing)| *csv == step.resource.name && matches!(standing, Standing::Done)) {
            step.status = STEP_CREATED.into();
        }
    }
    // Once a bundle is installed, every object its Install applied is a step of its own (OLM lists one per manifest).
    for (csv, install) in &done_installs {
        let template = status.plan.iter().find(|s| s.resolving == *csv && s.resource.kind == "ClusterServiceVersion");
        let Some(template) = template.cloned() else { continue };
        for step in applied_steps(install, &template) {
            let listed = status.plan.iter().any(|s| {
                s.resolving == step.resolving
                    && s.resource.kind == step.resource.kind
                    && s.resource.name == step.resource.name
            });
            if !listed {
                status.plan.push(step);
            }
        }
    }
    decision.retrying = conclude(&mut status, &standings, observed.retry_timeout, now);
    decision.status = status;
    decision
}

/// OLM's Subscription steps: the dependencies' Subscriptions, made first (the manifests to create), each step's
/// status marked.
fn subscription_steps(observed: &Observed<'_>, status: &mut InstallPlanStatus) -> Vec<Value> {
    let plan = observed.plan;
    // The Subscriptions this plan was made for (its generated ones aside).
    let requesters: Vec<&Subscription> = observed
        .subscriptions
        .iter()
        .filter(|s| references(s, plan) && s.annotations().get(GENERATED_BY_ANNOTATION) != Some(&plan.name_any()))
        .collect();
    let mut create = Vec::new();
    for step in status.plan.iter_mut().filter(|step| step.resource.kind == "Subscription") {
        let exists = observed.subscriptions.iter().any(|s| s.name_any() == step.resource.name);
        if exists {
            if step.status == STEP_UNKNOWN {
                step.status = STEP_PRESENT.into();
            }
            continue;
        }
        let Some(mut manifest) = step.resource.manifest.as_deref().and_then(|m| serde_json::from_str::<Value>(m).ok())
        else {
            continue;
        };
        manifest["metadata"]["labels"] = json!({MANAGED_LABEL: "true"});
        manifest["metadata"]["annotations"] = json!({GENERATED_BY_ANNOTATION: plan.name_any()});
        if let Some(author) = common_author(&requesters) {
            manifest["metadata"]["annotations"][CREATOR_ANNOTATION] = json!(author);
        }
        create.push(manifest);
        step.status = STEP_CREATED.into();
    }
    create
}

/// Where one bundle of the plan stands, the Install to create or move for it added to `decision`, and its Install
/// when that is settled; OLM's `attenuatedServiceAccountRef` recorded when its Install runs as an OperatorGroup's
/// account.
fn bundle_standing<'a>(
    observed: &Observed<'a>,
    lookup: &BundleLookup,
    decision: &mut Decision,
    attenuated: &mut Option<ObjectReference>,
) -> (Standing, Option<&'a Install>) {
    let plan = observed.plan;
    let namespace = plan.namespace().unwrap_or_default();
    let csv = &lookup.identifier;
    let subscription = plan_subscription(observed, csv);
    if lookup.path.is_empty() {
        let message =
            format!("bundle {csv} has no image: its content is inline in its catalog, which is not installed");
        return (Standing::Failing(message), None);
    }
    let Some(subscription) = subscription else {
        return (Standing::Waiting(format!("waiting for the Subscription of {csv}")), None);
    };
    let name = install_name(&subscription.spec.name, &namespace);
    let install = match observed.installs.get(&name) {
        None => {
            decision.create_installs.push(install_to_create(observed, subscription, lookup, &namespace));
            return (Standing::Waiting(format!("Install {name} is being created")), None);
        }
        Some(install) => install,
    };
    if !made_for(install, subscription) {
        let message = format!(
            "Install {name} exists and was not made for Subscription {}; it is left alone",
            subscription_key(subscription)
        );
        return (Standing::Blocked(message), None);
    }
    if !holds_content(install, subscription, &lookup.path) {
        decision.update_installs.push(Move {
            install: install.clone(),
            subscription: subscription.clone(),
            csv: csv.clone(),
            image: lookup.path.clone(),
        });
        return (Standing::Waiting(format!("Install {name} is moving to {csv}")), None);
    }
    if let Some(account) = attenuated_account(install, &namespace) {
        *attenuated = Some(account);
    }
    if settled(install) {
        return (Standing::Done, Some(install));
    }
    (unsettled_standing(install, &name, csv), None)
}

/// The Subscription this plan moved to bundle `csv`, or the one it generated for it: a plan no Subscription points
/// at any more (superseded) moves nothing.
fn plan_subscription<'a>(observed: &Observed<'a>, csv: &str) -> Option<&'a Subscription> {
    let plan = observed.plan;
    observed.subscriptions.iter().find(|s| {
        (references(s, plan) && s.status.as_ref().and_then(|st| st.current_csv.as_deref()) == Some(csv))
            || (s.annotations().get(GENERATED_BY_ANNOTATION) == Some(&plan.name_any())
                && s.spec.starting_csv.as_deref() == Some(csv))
    })
}

/// The Install to create for `subscription`'s bundle (`lookup`) in `namespace`. An operator OLM v0 installed: its
/// objects are taken over, not clashed with (`install::takeover`). The CSV of this very bundle (a Subscription made
/// again for it), else the one it upgrades from: the Subscription's installed CSV, or the one the bundle replaces.
fn install_to_create(
    observed: &Observed<'_>,
    subscription: &Subscription,
    lookup: &BundleLookup,
    namespace: &str,
) -> Value {
    let csv = &lookup.identifier;
    let mut install = new_install(subscription, csv, &lookup.path);
    let installed = subscription.status.as_ref().and_then(|status| status.installed_csv.as_ref());
    let by_olm = &observed.installed_by_olm;
    let taken = by_olm
        .get_key_value(csv)
        .or_else(|| installed.and_then(|name| by_olm.get_key_value(name)))
        .or_else(|| by_olm.get_key_value(&lookup.replaces));
    if let Some((taken, uid)) = taken {
        take_over(&mut install, namespace, taken, uid);
    }
    install
}

/// OLM's attenuatedServiceAccountRef: the OperatorGroup's account, when the Install runs as it (an account in the
/// plan's `namespace`; the controller's own live in its namespace).
fn attenuated_account(install: &Install, namespace: &str) -> Option<ObjectReference> {
    let account = install.status.as_ref().and_then(|s| s.service_account_ref.as_ref())?;
    (account.namespace == namespace).then(|| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("ServiceAccount".into()),
        name: Some(account.name.clone()),
        namespace: Some(account.namespace.clone()),
        ..ObjectReference::default()
    })
}

/// Where a bundle stands while its Install `name`, holding bundle `csv`, is not settled: waiting for a person,
/// failing (blocked when only someone else can mend it), or still installing.
fn unsettled_standing(install: &Install, name: &str, csv: &str) -> Standing {
    match install.status.as_ref().and_then(|s| s.state) {
        Some(InstallState::PendingApproval) => Standing::AwaitingApproval(format!(
            "Install {name} waits for a person who holds the permissions it needs to approve them \
             (kubectl olmv2 approve {name})"
        )),
        Some(InstallState::Failed) if failed_forbidden(install) => {
            Standing::Blocked(format!("Install {name}: {}", failure_message(install)))
        }
        Some(InstallState::Failed) => Standing::Failing(format!("Install {name}: {}", failure_message(install))),
        _ => Standing::Waiting(format!("Install {name} is installing {csv}")),
    }
}

/// The plan's phase, message and `Installed` condition from where its bundles stand; answers whether an error is
/// being retried. OLM's transitionInstallPlanState: an error is retried until the plan has been installing for the
/// retry timeout, then the plan fails for good; a forbidden error is retried for ever. Time spent waiting for a
/// person (OLM's plans never wait for one while installing) does not count: the clock starts again after it.
fn conclude(
    status: &mut InstallPlanStatus,
    standings: &[(String, Standing)],
    retry_timeout: Duration,
    now: &Time,
) -> bool {
    let waiting: Vec<&str> = standings.iter().filter_map(|(_, standing)| standing.waiting()).collect();
    let failing: Vec<&str> = standings.iter().filter_map(|(_, standing)| standing.failing()).collect();
    let awaiting_approval = standings.iter().any(|(_, standing)| matches!(standing, Standing::AwaitingApproval(_)));
    if awaiting_approval {
        status.start_time = Some(now.clone());
    }
    let terminal = standings.iter().any(|(_, standing)| matches!(standing, Standing::Failing(_)));
    let started = status.start_time.clone().unwrap_or_else(|| now.clone());
    let mut retrying = false;
    status.message = None;
    if !failing.is_empty() {
        if terminal && elapsed(&started, now) >= retry_timeout {
            status.phase = InstallPlanPhase::Failed;
            status.message = Some(failing.join("; "));
        } else {
            status.message = Some(format!("retrying execution due to error: {}", failing.join("; ")));
            retrying = true;
        }
    }
    if !failing.is_empty() {
        set_condition(status, "False", Some(INSTALL_COMPONENT_FAILED), &failing.join("; "), now);
    } else if !waiting.is_empty() {
        let reason = if awaiting_approval { INSTALL_PENDING_APPROVAL } else { "Installing" };
        set_condition(status, "False", Some(reason), &waiting.join("; "), now);
    } else {
        set_condition(status, "True", None, "", now);
        status.phase = InstallPlanPhase::Complete;
    }
    retrying
}

/// A step per object an Install applied (the CSV record being the CSV step already there), from `template`'s
/// bundle and catalog.
fn applied_steps(install: &Install, template: &crate::api::v1alpha1::Step) -> Vec<crate::api::v1alpha1::Step> {
    let applied = install.status.as_ref().map(|s| s.applied.as_slice()).unwrap_or_default();
    applied
        .iter()
        .filter(|object| object.kind != "ClusterServiceVersion")
        .map(|object| {
            let (group, version) = match object.api_version.split_once('/') {
                Some((group, version)) => (group.to_owned(), version.to_owned()),
                None => (String::new(), object.api_version.clone()),
            };
            let mut step = template.clone();
            step.resource.group = group;
            step.resource.version = version;
            step.resource.kind = object.kind.clone();
            step.resource.name = object.name.clone();
            step.resource.manifest = None;
            step.status = STEP_CREATED.into();
            step
        })
        .collect()
}

/// Sets the plan's `Installed` condition, keeping its transition time while its status holds.
fn set_condition(status: &mut InstallPlanStatus, state: &str, reason: Option<&str>, message: &str, now: &Time) {
    let before = status.conditions.iter().find(|c| c.type_ == INSTALLED).cloned();
    let same = before.as_ref().is_some_and(|b| {
        b.status == state && b.reason.as_deref() == reason && b.message.as_deref().unwrap_or_default() == message
    });
    if same {
        return;
    }
    let transition = match &before {
        Some(before) if before.status == state => before.last_transition_time.clone(),
        _ => Some(now.clone()),
    };
    status.conditions.retain(|c| c.type_ != INSTALLED);
    status.conditions.push(InstallPlanCondition {
        type_: INSTALLED.into(),
        status: state.into(),
        last_update_time: Some(now.clone()),
        last_transition_time: transition,
        reason: reason.map(str::to_owned),
        message: (!message.is_empty()).then(|| message.to_owned()),
    });
}

#[cfg(test)]
#[path = "execute_tests.rs"]
mod tests;

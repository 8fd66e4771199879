//! One pass over an Operator: read its source (`source`: a bundle image, or a CatalogSource's catalog with the
//! dependencies of what it resolved), bring its Install and its dependencies' Installs to what was resolved, and
//! write the status computed from its components. Components come from the shared index; an Operator without
//! dependencies costs a few requests whatever the number of kinds, one resolving dependencies also lists the
//! cluster's Installs and CRDs.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::json;

use super::components::Component;
use super::desired::{holds_back, install_patch, installed_bundle, new_install, Target};
use super::kinds::COMPONENT_KINDS;
use super::status::{status, Observed, SourceOutcome, EVENTS};
use super::watch::{api_resource, lock, SharedIndex};
use crate::api::component::component_label_key;
use crate::api::v2alpha1::{
    Install, Operator, OperatorStatus, UpdateApproval, ADOPTED_FROM_ANNOTATION, CONTENT_CHANGED_BY_ANNOTATION,
    CREATOR_ANNOTATION, OPERATOR_INSTALL_ANNOTATION, SUBSCRIPTION_ANNOTATION,
};
use crate::catalog::CatalogCache;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient, Objects};
use crate::controller::conditions::transitions;
use crate::controller::events::Events;
use crate::controller::runner::Basics;

/// The field manager of the Operator controller's writes.
pub const FIELD_MANAGER: &str = "olmv2-operator";

/// How soon an Operator is looked at again while the component kinds are still being listed (a start).
const INDEX_WAIT: Duration = Duration::from_millis(250);

/// Settings of the Operator controller.
#[derive(Clone, Debug)]
pub struct OperatorOptions {
    /// Where namespace-less bundle content of an Operator's Install goes.
    pub install_namespace: String,
}

/// What a reconcile needs.
pub struct Context {
    pub client: ControllerClient,
    pub events: Events,
    pub index: SharedIndex,
    pub catalogs: Arc<CatalogCache>,
    pub options: OperatorOptions,
    /// The metrics, and the pace: a settled object looked at again every `resync` (drift, moved tags, changed
    /// RBAC, catalog polling), a failed or rolling-out one after `retry`.
    pub basics: Basics,
}

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("failed to read Install {name}")]
    ReadInstall {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to write Install {name}")]
    WriteInstall {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to write the status of Operator {name}")]
    WriteStatus {
        name: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for ReconcileError {
    fn category(&self) -> &'static str {
        match self {
            Self::ReadInstall { .. } => "InstallReadFailed",
            Self::WriteInstall { .. } => "InstallWriteFailed",
            Self::WriteStatus { .. } => "StatusWriteFailed",
        }
    }
}

pub async fn reconcile(operator: Arc<Operator>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    if operator.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    if !lock(&ctx.index).settled(COMPONENT_KINDS) {
        // At a start, until every component kind is listed: a status written now would miss components only
        // because they were not read yet, then be written again (with events for each flap).
        return Ok(Action::requeue(INDEX_WAIT));
    }
    let pass = Pass::new(&ctx, &operator);
    let Some(Observation { owned, source, mut dependents }) = observe(&pass).await? else {
        // The Install of its name is still being adopted for it (`observe`).
        return Ok(Action::requeue(ctx.basics.retry));
    };
    let install = match target_of(&operator, &source, &ctx.options) {
        Some(target) => Some(bring_to_target(&pass, &source, &target, owned, &mut dependents).await?),
        None => owned,
    };

    let components = lock(&ctx.index).components_of(&pass.name);
    project_labels(&ctx.client, &pass.name, &components).await;
    report_status(&pass, &components, install.as_ref(), &dependents, &source).await?;
    Ok(Action::requeue(ctx.basics.resync))
}

/// What the steps of one pass over an Operator share: the Operator and the controller's context, the Installs'
/// API, and the names the Operator goes by.
struct Pass<'a> {
    ctx: &'a Context,
    operator: &'a Operator,
    /// The Operator's name.
    name: String,
    /// The name of the Operator's own Install (`own_install_name`).
    install_name: String,
    installs: Objects<Install>,
    /// The Operator's uid (empty when it has none yet).
    uid: String,
}

impl<'a> Pass<'a> {
    /// The pass over `operator`: its names, and the Installs' API of the controller's client.
    fn new(ctx: &'a Context, operator: &'a Operator) -> Self {
        Pass {
            ctx,
            operator,
            name: operator.name_any(),
            install_name: own_install_name(operator),
            installs: ctx.client.all::<Install>(),
            uid: operator.uid().unwrap_or_default(),
        }
    }
}

/// What a pass read before it writes.
struct Observation {
    /// The Operator's own Install, when the Operator owns it.
    owned: Option<Install>,
    /// What the Operator's source came to (a failure when its Install's name is taken).
    source: SourceOutcome,
    /// The Installs the Operator owns for its dependencies.
    dependents: Vec<Install>,
}

/// Reads the Operator's own Install, its source and its dependencies' Installs; `None` while the Install of its
/// name is still the Subscription's that the adoption loop is putting under it.
async fn observe(pass: &Pass<'_>) -> Result<Option<Observation>, ReconcileError> {
    let (ctx, operator, install_name) = (pass.ctx, pass.operator, &pass.install_name);
    let install = read_install(&pass.installs, &ctx.index, operator, install_name).await?;
    let foreign = install.as_ref().is_some_and(|install| !owned_by(install, &pass.uid));
    if foreign && install.as_ref().is_some_and(|install| being_adopted(operator, install)) && recent(operator) {
        // The adoption loop made this Operator for the Subscription's Install and puts the Install under it next:
        // nothing to say until it has. Should it never (its Subscription deleted meanwhile), the name is reported
        // taken once the Operator is a minute old.
        return Ok(None);
    }
    let owned = install.filter(|install| owned_by(install, &pass.uid));
    let source = if foreign {
        SourceOutcome::Failed {
            reason: "InstallNameTaken",
            message: format!(
                "an Install named {install_name} exists that this Operator does not own; it is left alone"
            ),
        }
    } else {
        super::source::source_outcome(ctx, operator, owned.as_ref()).await
    };
    let dependents = read_dependents(pass, &source).await?;
    Ok(Some(Observation { owned, source, dependents }))
}

/// The Installs the Operator owns for its dependencies, read only when there may be some: the source resolved
/// some, or the index knows an Install among its components other than its own.
async fn read_dependents(pass: &Pass<'_>, source: &SourceOutcome) -> Result<Vec<Install>, ReconcileError> {
    // Read only when there may be some: an Operator without dependencies costs no more requests.
    let resolved_some = matches!(source, SourceOutcome::Resolved { dependencies, .. } if !dependencies.is_empty());
    let indexed_some = lock(&pass.ctx.index)
        .components_of(&pass.name)
        .iter()
        .any(|component| component.reference.kind == "Install" && component.reference.name != pass.install_name);
    if resolved_some || indexed_some {
        owned_dependencies(&pass.installs, &pass.name, &pass.install_name, &pass.uid).await
    } else {
        Ok(Vec::new())
    }
}

/// Brings the dependencies' Installs, then the Operator's own (`owned`, when there), to `target`, and clears the
/// Operator's source-change mark once it went over to them. Returns the Operator's Install as it is now.
async fn bring_to_target(
    pass: &Pass<'_>,
    source: &SourceOutcome,
    target: &Target,
    owned: Option<Install>,
    dependents: &mut Vec<Install>,
) -> Result<Install, ReconcileError> {
    let operator = pass.operator;
    let creator = operator.annotations().get(CREATOR_ANNOTATION).map(String::as_str);
    let owner = Owner { name: &pass.name, uid: &pass.uid, creator };
    // Dependencies first, so that the Operator's own content finds what it requires on its way.
    let brought = bring_dependencies(&pass.installs, &owner, source, target, dependents).await?;
    let before = owned.as_ref().map(|install| install.metadata.resource_version.clone());
    let install = bring_install(&pass.installs, &pass.install_name, &owner, owned, target).await?;
    let written = brought.written || before.is_none_or(|version| version != install.metadata.resource_version);
    let holding = brought.held_back || matches!(source, SourceOutcome::Resolved { holding: true, .. });
    if target.changed_by.is_some() && written && !holding {
        // The mark went over to the Installs with what the source changed; the Operator's has done its work.
        // While one of them keeps its bundle, the change is still to come: the mark stays for it.
        clear_source_mark(&pass.ctx.client, operator).await;
    }
    Ok(install)
}

/// Computes the Operator's status from its components, its Installs and its source, and when it changed writes it
/// and publishes an event for each condition that moved.
async fn report_status(
    pass: &Pass<'_>,
    components: &[Component],
    install: Option<&Install>,
    dependents: &[Install],
    source: &SourceOutcome,
) -> Result<(), ReconcileError> {
    let operator = pass.operator;
    let previous = operator.status.clone().unwrap_or_default();
    let observed = Observed {
        name: &pass.name,
        generation: operator.metadata.generation,
        previous: &previous.conditions,
        components,
        install,
        dependencies: dependents,
        source,
        installed_bundle: install.and_then(installed_bundle),
        adopted_from: operator.annotations().get(ADOPTED_FROM_ANNOTATION).map(String::as_str),
    };
    let next = status(&observed, &Time(k8s_openapi::jiff::Timestamp::now()));
    if next != previous {
        write_status(&pass.ctx.client, &pass.name, &next).await?;
        pass.ctx.events.publish(operator, &transitions(&previous.conditions, &next.conditions, &EVENTS)).await;
    }
    Ok(())
}

/// The Operator's own Install as the API server has it. Not asked for when the Operator has no source (it writes no
/// Install: one of its name only decides whether the name is taken) and the Installs' watch knows there is none; one
/// made a moment ago, unseen yet, wakes the Operator once seen (`watch.rs`). An Operator with a source always reads
/// it: what it writes builds on the Install as it is (the bundle installed, the mark of a change).
async fn read_install(
    installs: &Objects<Install>,
    index: &SharedIndex,
    operator: &Operator,
    name: &str,
) -> Result<Option<Install>, ReconcileError> {
    if operator.spec.updates.is_none() && lock(index).install_absent(name) {
        return Ok(None);
    }
    installs.get_opt(name).await.map_err(|source| ReconcileError::ReadInstall { name: name.to_owned(), source })
}

/// Whether the Operator of this uid owns `install`: the only Installs it writes.
pub(super) fn owned_by(install: &Install, operator_uid: &str) -> bool {
    install.owner_references().iter().any(|owner| owner.kind == "Operator" && owner.uid == operator_uid)
}

fn target_of(operator: &Operator, source: &SourceOutcome, options: &OperatorOptions) -> Option<Target> {
    let SourceOutcome::Resolved { image, bundle, .. } = source else { return None };
    let manual = operator
        .spec
        .updates
        .as_ref()
        .and_then(|updates| updates.catalog_source.as_ref())
        .is_some_and(|catalog| catalog.approval == UpdateApproval::Manual);
    Some(Target {
        image: image.clone(),
        bundle: bundle.clone(),
        manual,
        namespace: operator.spec.install_namespace.clone().unwrap_or_else(|| options.install_namespace.clone()),
        changed_by: operator.annotations().get(CONTENT_CHANGED_BY_ANNOTATION).cloned(),
        config: operator.spec.config.clone(),
    })
}

/// Removes the webhook's mark from an Operator once it is carried over to its Install, only if the Operator did not
/// change since it was read (a new source change would carry a new mark). A failure leaves the mark, which only
/// makes the next content change wait for a person too.
async fn clear_source_mark(client: &ControllerClient, operator: &Operator) {
    let body = json!({"metadata": {"annotations": {CONTENT_CHANGED_BY_ANNOTATION: null}}});
    if let Err(error) =
        client.all::<Operator>().merge_patch(&operator.name_any(), &body, operator.resource_version().as_deref()).await
    {
        tracing::info!(operator = %operator.name_any(), %error, "the source-change mark stays for now");
    }
}

/// The Operator an Install is made for: its name and uid (the owner reference), and its creator, on whose behalf
/// the Install is made.
struct Owner<'a> {
    name: &'a str,
    uid: &'a str,
    creator: Option<&'a str>,
}

/// Whether `install` is still the Subscription's that the Operator was made or chosen to adopt (both records are
/// the controller's alone).
fn being_adopted(operator: &Operator, install: &Install) -> bool {
    let origin = operator.annotations().get(ADOPTED_FROM_ANNOTATION);
    let subscription = install.annotations().get(SUBSCRIPTION_ANNOTATION);
    matches!((origin, subscription), (Some(origin), Some(key)) if origin.strip_prefix("Subscription ") == Some(key.as_str()))
}

/// Whether the Operator was created less than a minute ago.
fn recent(operator: &Operator) -> bool {
    let created = operator.metadata.creation_timestamp.as_ref().map(|time| time.0);
    created.is_some_and(|created| {
        k8s_openapi::jiff::Timestamp::now().duration_since(created) < k8s_openapi::jiff::SignedDuration::from_secs(60)
    })
}

/// The name of an Operator's own Install: the Operator's, or, for an Operator that adopted a Subscription's Install,
/// that Install's (the annotation only the controller writes).
pub fn own_install_name(operator: &Operator) -> String {
    operator.annotations().get(OPERATOR_INSTALL_ANNOTATION).cloned().unwrap_or_else(|| operator.name_any())
}

/// The Installs the Operator owns beside its own (`own`): its dependencies, found by its component label.
async fn owned_dependencies(
    installs: &Objects<Install>,
    name: &str,
    own: &str,
    uid: &str,
) -> Result<Vec<Install>, ReconcileError> {
    let labelled = installs
        .list_with(&ListParams::default().labels(&component_label_key(name)))
        .await
        .map_err(|source| ReconcileError::ReadInstall { name: format!("of Operator {name}"), source })?;
    Ok(labelled.into_iter().filter(|install| install.name_any() != own && owned_by(install, uid)).collect())
}

/// What bringing the dependencies did: whether anything was written, and whether a dependency kept its bundle
/// rather than move (still installing another one), so that a move marked for approval is still to come.
#[derive(Default)]
struct Brought {
    written: bool,
    held_back: bool,
}

/// Brings the Install of each dependency the source resolved to it, as the Operator's own Install is brought to its
/// target (same approval setting and mark, no deployment configuration: that is the Operator's own). A dependency
/// Install still installing, or waiting for approval, of another bundle keeps it (`holds_back`): upgrades go one at a
/// time. One the resolution no longer names is left as it is. `dependents` ends as the Installs are now.
async fn bring_dependencies(
    installs: &Objects<Install>,
    owner: &Owner<'_>,
    source: &SourceOutcome,
    target: &Target,
    dependents: &mut Vec<Install>,
) -> Result<Brought, ReconcileError> {
    let SourceOutcome::Resolved { dependencies, .. } = source else { return Ok(Brought::default()) };
    let mut brought = Brought::default();
    for dependency in dependencies {
        let position = dependents.iter().position(|install| install.name_any() == dependency.install);
        let current = match position {
            Some(index) => Some(dependents[index].clone()),
            // Its label removed by hand, it is still the Operator's: found by name, and labelled again by the patch.
            None => installs
                .get_opt(&dependency.install)
                .await
                .map_err(|source| ReconcileError::ReadInstall { name: dependency.install.clone(), source })?
                .filter(|install| owned_by(install, owner.uid)),
        };
        if holds_back(current.as_ref(), &dependency.bundle) {
            brought.held_back = true;
            continue;
        }
        let wanted = Target {
            image: dependency.image.clone(),
            bundle: Some(dependency.bundle.clone()),
            config: None,
            ..target.clone()
        };
        let before = current.as_ref().map(|install| install.metadata.resource_version.clone());
        let now = bring_install(installs, &dependency.install, owner, current, &wanted).await?;
        brought.written |= before.is_none_or(|version| version != now.metadata.resource_version);
        match position {
            Some(index) => dependents[index] = now,
            None => dependents.push(now),
        }
    }
    Ok(brought)
}

/// Creates the Install `name` for the Operator, or patches it to `target`; returns it as it is now.
async fn bring_install(
    installs: &Objects<Install>,
    name: &str,
    owner: &Owner<'_>,
    current: Option<Install>,
    target: &Target,
) -> Result<Install, ReconcileError> {
    let write_error = |source| ReconcileError::WriteInstall { name: name.to_owned(), source };
    match current {
        None => {
            let body: Install = serde_json::from_value(new_install(name, owner.name, owner.uid, owner.creator, target))
                .map_err(|error| write_error(ClientError::Encode(error)))?;
            let created = installs.create(&body).await.map_err(write_error)?;
            tracing::info!(operator = owner.name, install = name, image = %target.image, "created an Install of the Operator");
            Ok(created)
        }
        Some(install) => match install_patch(owner.name, &install, target) {
            None => Ok(install),
            Some(patch) => {
                let patched = installs.merge_patch(name, &patch, None).await.map_err(write_error)?;
                tracing::info!(operator = owner.name, install = name, image = %target.image, "moved an Install of the Operator to new content");
                Ok(patched)
            }
        },
    }
}

/// Labels what the legacy loops generated from this Operator's components. A target that is gone or refuses the
/// write is logged and tried again on the next reconcile; its labelling wakes this Operator through the index.
async fn project_labels(client: &ControllerClient, name: &str, components: &[Component]) {
    let label = component_label_key(name);
    let patch = json!({"metadata": {"labels": {label: ""}}});
    for target in components.iter().flat_map(|component| &component.projects_to) {
        let labelled = components.iter().any(|component| {
            let reference = &component.reference;
            reference.kind == target.kind.kind
                && reference.namespace == target.namespace
                && reference.name == target.name
        });
        if labelled {
            continue;
        }
        let objects = client.dynamic(&api_resource(&target.kind), target.namespace.as_deref());
        match objects.merge_patch(&target.name, &patch, None).await {
            Ok(_) => {
                tracing::info!(operator = name, kind = target.kind.kind, object = %target.name, "projected the component label")
            }
            Err(error) => {
                tracing::debug!(operator = name, kind = target.kind.kind, object = %target.name, %error, "label projection")
            }
        }
    }
}

async fn write_status(client: &ControllerClient, name: &str, status: &OperatorStatus) -> Result<(), ReconcileError> {
    client
        .all::<Operator>()
        .apply_status(name, status, None)
        .await
        .map_err(|source| ReconcileError::WriteStatus { name: name.to_owned(), source })?;
    Ok(())
}

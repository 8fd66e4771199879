//! OLM v0's InstallPlans: `plan` (a new plan's shape, as OLM's `createInstallPlan`), `execute` (how a plan runs
//! here: through Installs and their approval gate, pure), `steps` (the pass: observe, decide, write).

pub mod execute;
pub mod plan;
mod steps;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use crate::api::v1alpha1::{InstallPlan, InstallPlanPhase, Subscription};
use crate::api::v2alpha1::Install;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;
use crate::webhook::csv_author::recorded_author;
use crate::webhook::handlers::may_change_content;
use execute::{content_patch, Move, SUBSCRIPTION_ANNOTATION};

/// The field manager of InstallPlans and their status, whichever loop writes them.
pub const FIELD_MANAGER: &str = "olmv2-installplan";

pub struct Context {
    client: ControllerClient,
    /// The controller's namespace, where its own accounts for Installs live.
    controller_namespace: String,
    basics: Basics,
    /// OLM's `--install-plan-retry-timeout`.
    retry_timeout: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallPlanLoopError {
    #[error("failed to read the {what} of InstallPlan {namespace}/{name}")]
    Read {
        what: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to move an Install for InstallPlan {namespace}/{name}")]
    Move {
        namespace: String,
        name: String,
        #[source]
        source: MoveError,
    },
    #[error("failed to {action} for InstallPlan {namespace}/{name}")]
    Write {
        action: String,
        namespace: String,
        name: String,
        #[source]
        source: ClientError,
    },
}

/// Why a Subscription's Install could not be moved to new content.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error("failed to check what the author of Subscription {0} may do")]
    CheckAuthor(String, #[source] kube::Error),
    #[error("failed to move Install {0} to new content")]
    Write(String, #[source] ClientError),
}

impl MoveError {
    /// Whether the Install changed since it was read (the move is decided again at once).
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Write(_, source) if source.is_conflict())
    }
}

/// Moves a Subscription's Install to new content (a plan's bundle, or the Subscription's `spec.config`) at the
/// resourceVersion read: unmarked only when the Subscription's author could have made that change themselves (they
/// hold what its account was granted), otherwise marked and waiting for a person (`execute::content_patch`).
pub async fn move_install(client: &ControllerClient, controller_namespace: &str, step: &Move) -> Result<(), MoveError> {
    let name = step.install.name_any();
    let may_change = match recorded_author(step.subscription.annotations()) {
        Some(author) => may_change_content(client.kube(), controller_namespace, &author, &step.install)
            .await
            .map_err(|error| MoveError::CheckAuthor(step.subscription.name_any(), error))?,
        None => false,
    };
    let patch = content_patch(&step.subscription, &step.csv, &step.image, may_change);
    client
        .all::<Install>()
        .merge_patch(&name, &patch, step.install.metadata.resource_version.as_deref())
        .await
        .map_err(|source| MoveError::Write(name.clone(), source))?;
    Ok(())
}

impl Categorized for InstallPlanLoopError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "InstallPlanInputsUnreadable",
            Self::Write { source, .. } if source.is_conflict() => "ObjectChanged",
            Self::Move { source, .. } if source.is_conflict() => "ObjectChanged",
            Self::Move { .. } => "InstallMoveFailed",
            Self::Write { .. } => "InstallPlanWriteFailed",
        }
    }

    fn is_conflict(&self) -> bool {
        match self {
            Self::Write { source, .. } => source.is_conflict(),
            Self::Move { source, .. } => source.is_conflict(),
            Self::Read { .. } => false,
        }
    }
}

impl Reconciler for Context {
    type Object = InstallPlan;
    type Error = InstallPlanLoopError;
    const NAME: &'static str = "installplan";

    async fn reconcile(self: Arc<Self>, plan: Arc<InstallPlan>) -> Result<Action, InstallPlanLoopError> {
        steps::reconcile(&self, &plan).await
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// Starts the InstallPlan loop: every InstallPlan, woken also when an Install made for a Subscription, or a
/// Subscription, of its namespace changes.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        controller_namespace: process.options.namespace.clone(),
        basics: process.basics(),
        retry_timeout: process.options.install_plan_retry_timeout,
    });
    let controller = watches::controller(Api::<InstallPlan>::all(client.clone()), watcher::Config::default());
    let (by_install, by_subscription) = (controller.store(), controller.store());
    let installing = |store: &kube::runtime::reflector::Store<InstallPlan>, namespace: Option<String>| {
        store
            .state()
            .iter()
            .filter(|plan| plan.namespace() == namespace)
            .filter(|plan| plan.status.as_ref().is_some_and(|s| s.phase == InstallPlanPhase::Installing))
            .map(|plan| ObjectRef::from_obj(plan.as_ref()))
            .collect::<Vec<_>>()
    };
    let controller = controller
        .watches_stream(
            watches::metadata::<Install>(client.clone(), watcher::Config::default()).touched_objects(),
            move |install| {
                let namespace = install.annotations().get(SUBSCRIPTION_ANNOTATION).and_then(|s| s.split_once('/'));
                match namespace {
                    Some((namespace, _)) => installing(&by_install, Some(namespace.to_owned())),
                    None => Vec::new(),
                }
            },
        )
        .watches_stream(
            watches::metadata::<Subscription>(client, watcher::Config::default()).touched_objects(),
            move |subscription| installing(&by_subscription, subscription.namespace()),
        );
    runner::run(controller, context, process.shutdown()).boxed()
}

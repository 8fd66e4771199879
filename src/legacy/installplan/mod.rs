//! OLM v0's InstallPlans: `plan` (a new plan's shape, as OLM's `createInstallPlan`), `execute` (how a plan runs
//! here: through Installs and their approval gate).

pub mod execute;
pub mod plan;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use crate::api::v1alpha1::{ClusterServiceVersion, InstallPlan, InstallPlanPhase, Subscription};
use crate::api::v2alpha1::Install;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::runner::{self, Reconciler};
use crate::controller::watches;
use crate::legacy::membership::{is_copied, is_install_record, COPIED_FROM_LABEL};
use crate::metrics::Metrics;
use crate::runtime::Process;
use crate::webhook::csv_author::recorded_author;
use crate::webhook::handlers::may_change_content;
use execute::{content_patch, decide, install_name, Move, Observed, SUBSCRIPTION_ANNOTATION};

/// The field manager of InstallPlans and their status, whichever loop writes them.
pub const FIELD_MANAGER: &str = "olmv2-installplan";

pub struct Context {
    client: ControllerClient,
    /// The controller's namespace, where its own accounts for Installs live.
    controller_namespace: String,
    metrics: Arc<Metrics>,
    retry: Duration,
    resync: Duration,
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
        let (namespace, name) = (plan.namespace().unwrap_or_default(), plan.name_any());
        let Some(status) = plan.status.clone() else { return Ok(Action::await_change()) };
        let write = |action: &str| {
            let (namespace, name, action) = (namespace.clone(), name.clone(), action.to_owned());
            move |source| InstallPlanLoopError::Write { action, namespace, name, source }
        };
        let plans = self.client.namespaced::<InstallPlan>(&namespace);
        match status.phase {
            InstallPlanPhase::RequiresApproval if plan.spec.approved => {
                let next = crate::api::v1alpha1::InstallPlanStatus {
                    phase: InstallPlanPhase::Installing,
                    message: None,
                    ..status
                };
                plans.apply_status(&name, &next, None).await.map_err(write("write the status"))?;
                return Ok(Action::await_change());
            }
            InstallPlanPhase::Installing => {}
            _ => return Ok(Action::await_change()),
        }
        let read = |what| {
            let (namespace, name) = (namespace.clone(), name.clone());
            move |source| InstallPlanLoopError::Read { what, namespace, name, source }
        };
        let subscriptions: Vec<Subscription> = self
            .client
            .namespaced::<Subscription>(&namespace)
            .list_with(&ListParams::default())
            .await
            .map_err(read("Subscriptions"))?;
        // A plan no Subscription points at (superseded by a newer one, or not yet pointed at: the Subscription's
        // status write wakes it) moves nothing.
        if !subscriptions.iter().any(|s| execute::references(s, &plan)) {
            return Ok(Action::await_change());
        }
        let mut installs = BTreeMap::new();
        for subscription in &subscriptions {
            let install_name = install_name(&subscription.spec.name, &namespace);
            if let Some(install) =
                self.client.all::<Install>().get_opt(&install_name).await.map_err(read("Installs"))?
            {
                installs.insert(install_name, install);
            }
        }
        let originals = ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}"));
        let csvs = self
            .client
            .namespaced::<ClusterServiceVersion>(&namespace)
            .list_with(&originals)
            .await
            .map_err(read("CSVs"))?;
        let installed_by_olm: BTreeMap<String, String> = csvs
            .iter()
            .filter(|csv| !is_install_record(csv) && !is_copied(csv))
            .filter_map(|csv| Some((csv.name_any(), csv.uid()?)))
            .collect();
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let observed = Observed {
            plan: &plan,
            subscriptions: &subscriptions,
            installs: &installs,
            retry_timeout: self.retry_timeout,
            installed_by_olm: &installed_by_olm,
        };
        let decision = decide(&observed, &now);
        for subscription in &decision.create_subscriptions {
            let typed: Subscription = serde_json::from_value(subscription.clone())
                .map_err(|e| write("encode a generated Subscription")(ClientError::Encode(e)))?;
            match self.client.namespaced::<Subscription>(&namespace).create(&typed).await {
                Ok(_) => tracing::info!(subscription = %typed.name_any(), "Subscription generated for a dependency"),
                Err(error) if error.code() == Some(409) => {}
                Err(error) => return Err(write("create a Subscription")(error)),
            }
        }
        for install in &decision.create_installs {
            let typed: Install = serde_json::from_value(install.clone())
                .map_err(|e| write("encode an Install")(ClientError::Encode(e)))?;
            match self.client.all::<Install>().create(&typed).await {
                Ok(_) => tracing::info!(install = %typed.name_any(), "Install created"),
                Err(error) if error.code() == Some(409) => {}
                Err(error) => return Err(write("create an Install")(error)),
            }
        }
        for step in &decision.update_installs {
            move_install(&self.client, &self.controller_namespace, step).await.map_err(|source| {
                InstallPlanLoopError::Move { namespace: namespace.clone(), name: name.clone(), source }
            })?;
            tracing::info!(install = %step.install.name_any(), csv = %step.csv, "Install moved to a new bundle");
        }
        if Some(&decision.status) != plan.status.as_ref() {
            plans.apply_status(&name, &decision.status, None).await.map_err(write("write the status"))?;
        }
        // Its Installs' and Subscriptions' changes wake it; a look now and then covers a missed one.
        Ok(match decision.status.phase {
            InstallPlanPhase::Complete | InstallPlanPhase::Failed => Action::await_change(),
            _ if decision.retrying
                || !decision.create_installs.is_empty()
                || !decision.create_subscriptions.is_empty() =>
            {
                Action::requeue(self.retry)
            }
            _ => Action::requeue(self.resync),
        })
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> Duration {
        self.retry
    }
}

/// Starts the InstallPlan loop: every InstallPlan, woken also when an Install made for a Subscription, or a
/// Subscription, of its namespace changes.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        controller_namespace: process.options.namespace.clone(),
        metrics: process.metrics.clone(),
        retry: process.options.retry,
        resync: process.options.resync,
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

//! The Install controller: content applied as a controller-assigned ServiceAccount once a person holding the
//! permissions it lacks approved them. `account`, `content`, `crd_safety`, `follows`, `gate`, `plan`, `grants`,
//! `conditions`, `takeover` and `drift` decide; `resolve`, `objects` (the content's objects, as one identity) and
//! `cluster` (the controller's own reads and writes) reach the cluster; `reconcile` sequences one pass as named
//! steps, each in the module of what it reads or writes (`account`, `resolve`, `takeover`, `measure`; `steps`,
//! `grants`, `apply`, `report`); [`controller`] runs it for every Install.

pub mod account;
pub mod apply;
pub mod cluster;
pub mod conditions;
pub mod content;
pub mod crd_safety;
pub mod crd_schema;
pub mod drift;
pub mod follows;
pub mod gate;
pub mod grants;
pub mod measure;
pub mod objects;
pub mod plan;
pub mod reconcile;
pub mod report;
pub mod resolve;
pub mod steps;
pub mod takeover;

use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use crate::api::v2alpha1::{Install, InstallPolicy};
use crate::bundle::image::ImageClient;
use crate::bundle::unpack::UnpackLimits;
use crate::category::Categorized;
use crate::controller::conditions::Transition;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::metrics::Metrics;
use crate::runtime::Process;
use crate::webhook::configuration::WebhookService;
use cluster::Cluster;
use reconcile::{Context, InstallOptions, ReconcileError};
use resolve::Resolver;

/// Starts the Install controller: every Install, woken also by the Deployments it applied when they change, so
/// that rollouts and drift show without waiting for the resync, and all of them by any change of an InstallPolicy.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let options = &process.options;
    let context = Arc::new(Context {
        cluster: Cluster::new(process.client.clone(), process.config.clone(), process.rbac.clone()),
        resolver: Resolver {
            images: ImageClient::new(options.registry.clone()),
            cache: options.cache.clone(),
            limits: UnpackLimits::default(),
            metrics: process.metrics.clone(),
        },
        options: InstallOptions {
            controller_namespace: options.namespace.clone(),
            webhook: WebhookService {
                namespace: options.webhook.service_namespace.clone().unwrap_or_else(|| options.namespace.clone()),
                name: options.webhook.service_name.clone(),
                port: options.webhook.service_port,
            },
        },
        basics: process.basics(),
    });
    let client = process.client.clone();
    // A policy written, changed or deleted measures every Install again (a tightening must block the next update
    // of each, a relaxing let through what waits).
    let policies = watches::trimmed(Api::<InstallPolicy>::all(client.clone()), watcher::Config::default())
        .touched_objects()
        .filter_map(|event| std::future::ready(event.ok().map(|_| ())));
    let controller = watches::controller(Api::<Install>::all(client.clone()), watcher::Config::default())
        .reconcile_all_on(policies)
        // Every Deployment's metadata (its annotation names the Install; a status change still moves it): a
        // cluster's Deployments are not decoded whole for that.
        .watches_stream(
            watches::metadata::<Deployment>(client, watcher::Config::default()).touched_objects(),
            |deployment| {
                deployment.annotations().get(grants::INSTALL_ANNOTATION).map(|name| ObjectRef::<Install>::new(name))
            },
        );
    let counting = count_states(controller.store(), process.metrics.clone(), process.shutdown());
    let running = runner::run(controller, context, process.shutdown());
    async move {
        tokio::join!(running, counting);
    }
    .boxed()
}

/// How often the Installs are counted by state for `olmv2_installs`.
const COUNT_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Counts the Installs of the controller's store by state, every [`COUNT_EVERY`], until `stopped`.
async fn count_states(
    store: kube::runtime::reflector::Store<Install>,
    metrics: Arc<Metrics>,
    stopped: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stopped);
    loop {
        metrics.set_install_states(&states(&store.state()));
        tokio::select! {
            () = &mut stopped => return,
            () = tokio::time::sleep(COUNT_EVERY) => {}
        }
    }
}

/// The number of Installs in each state (`Resolving` for one not reconciled yet), every state listed.
fn states(installs: &[Arc<Install>]) -> Vec<(&'static str, i64)> {
    use crate::api::v2alpha1::InstallState as S;
    let all = [S::Resolving, S::PendingApproval, S::Applying, S::Installed, S::Failed, S::ExceedsPolicy];
    let name = |state: S| match state {
        S::Resolving => "Resolving",
        S::PendingApproval => "PendingApproval",
        S::Applying => "Applying",
        S::Installed => "Installed",
        S::Failed => "Failed",
        S::ExceedsPolicy => "ExceedsPolicy",
    };
    all.into_iter()
        .map(|state| {
            let count = installs
                .iter()
                .filter(|install| install.status.as_ref().and_then(|s| s.state).unwrap_or(S::Resolving) == state)
                .count();
            (name(state), i64::try_from(count).unwrap_or(i64::MAX))
        })
        .collect()
}

impl Reconciler for Context {
    type Object = Install;
    type Error = ReconcileError;
    const NAME: &'static str = "install";
    // An Install no pass can finish (too large to write, a bundle that never unpacks) must not cost a pass a retry
    // interval for ever; everything an Install waits for wakes it (its own changes, its Deployments, policies).
    const BACKS_OFF: bool = true;

    async fn reconcile(self: Arc<Self>, install: Arc<Install>) -> Result<Action, ReconcileError> {
        let answer = reconcile::reconcile(install.clone(), self.clone()).await;
        if let Some(error) = answer.as_ref().err().filter(|error| !error.is_conflict()) {
            // A pass that fails before it can say why in the status (the status write itself may be what fails: an
            // Install too large for the webhook to review) says it in an event; the runner backs off meanwhile.
            let why =
                Transition { warning: true, reason: error.category().to_owned(), note: crate::category::report(error) };
            self.cluster.events.publish(install.as_ref(), &[why]).await;
        }
        answer
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::{InstallSpec, InstallState, InstallStatus};

    #[test]
    fn installs_are_counted_by_state_and_every_state_is_listed() {
        let install = |state: Option<InstallState>| {
            let mut install =
                Install::new("i", InstallSpec { namespaces: vec![], approval: Default::default(), content: vec![] });
            install.status = state.map(|state| InstallStatus { state: Some(state), ..InstallStatus::default() });
            Arc::new(install)
        };
        let installs = [
            install(Some(InstallState::PendingApproval)),
            install(Some(InstallState::PendingApproval)),
            install(Some(InstallState::ExceedsPolicy)),
            install(None),
        ];
        let counts = states(&installs);
        assert_eq!(counts.len(), 6);
        assert!(counts.contains(&("PendingApproval", 2)));
        assert!(counts.contains(&("ExceedsPolicy", 1)));
        assert!(counts.contains(&("Resolving", 1)));
        assert!(counts.contains(&("Installed", 0)));
    }
}

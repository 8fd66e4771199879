//! The Install controller: content applied as a controller-assigned ServiceAccount once a person holding the
//! permissions it lacks approved them. `account`, `content`, `crd_safety`, `follows`, `gate`, `grants`, `conditions`,
//! `takeover` and `drift` decide; `resolve`, `apply` and `cluster` read and write; `reconcile` sequences one pass;
//! [`controller`] runs it for every Install.

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
pub mod reconcile;
pub mod resolve;
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
use crate::controller::runner::{self, Reconciler};
use crate::controller::watches;
use crate::controller::Process;
use crate::metrics::Metrics;
use crate::webhook::configuration::WebhookService;
use cluster::Cluster;
use reconcile::{Context, InstallOptions, ReconcileError};
use resolve::Resolver;

/// Starts the Install controller: every Install, woken also by the Deployments it applied when they change, so
/// that rollouts and drift show without waiting for the resync, and all of them by any change of an InstallPolicy.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let options = &process.options;
    let context = Arc::new(Context {
        cluster: Cluster::new(process.client.clone(), process.config.clone()),
        resolver: Resolver {
            images: ImageClient::new(options.registry.clone()),
            cache: options.cache.clone(),
            limits: UnpackLimits::default(),
        },
        options: InstallOptions {
            controller_namespace: options.namespace.clone(),
            resync: options.resync,
            retry: options.retry,
            webhook: WebhookService {
                namespace: options.webhook.service_namespace.clone().unwrap_or_else(|| options.namespace.clone()),
                name: options.webhook.service_name.clone(),
                port: options.webhook.service_port,
            },
        },
        metrics: process.metrics.clone(),
    });
    let client = process.client.clone();
    // A policy written, changed or deleted measures every Install again (a tightening must block the next update
    // of each, a relaxing let through what waits).
    let policies = watches::trimmed(Api::<InstallPolicy>::all(client.clone()), watcher::Config::default())
        .touched_objects()
        .filter_map(|event| std::future::ready(event.ok().map(|_| ())));
    let controller = watches::controller(Api::<Install>::all(client.clone()), watcher::Config::default())
        .reconcile_all_on(policies)
        .watches(Api::<Deployment>::all(client), watcher::Config::default(), |deployment| {
            deployment.annotations().get(grants::INSTALL_ANNOTATION).map(|name| ObjectRef::<Install>::new(name))
        });
    runner::run(controller, context, process.shutdown()).boxed()
}

impl Reconciler for Context {
    type Object = Install;
    type Error = ReconcileError;
    const NAME: &'static str = "install";

    async fn reconcile(self: Arc<Self>, install: Arc<Install>) -> Result<Action, ReconcileError> {
        reconcile::reconcile(install, self).await
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn retry(&self) -> std::time::Duration {
        self.options.retry
    }
}

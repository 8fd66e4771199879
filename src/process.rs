//! The controllers of one process: the list every controller is started from, and their start and stop. It stands
//! above the controllers it lists (`install`, `operator`, and the loops to come) and the pattern they follow
//! (`controller`). Adding a controller is its module plus one entry in [`CONTROLLERS`].
//!
//! [`start`] starts the approval webhook first (so no Install write goes unchecked), then the aggregated API server
//! of Installed objects (when the cluster's aggregation layer is configured), then every controller of
//! [`CONTROLLERS`]: at once, or, with leader election, during each term this replica holds the Lease. Tests start them in-process; the `run` command adds health and signals.

use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::controller::leader;
use crate::runtime::{ControllerOptions, Process};
use crate::server::Health;
use crate::webhook::server::RunningWebhook;
use crate::webhook::WebhookError;

/// Every controller of the process. A controller is a module whose `controller` function builds its context (a
/// `controller::runner::Reconciler`) and the kube-runtime `Controller` that wakes it, and returns
/// `controller::runner::run` of both.
pub const CONTROLLERS: &[fn(&Process) -> BoxFuture<'static, ()>] = &[
    crate::runtime::rbac_controller,
    crate::install::controller,
    crate::operator::controller,
    crate::legacy::operatorgroup::controller,
    crate::legacy::grouproles::controller,
    crate::legacy::namespaces::controller,
    crate::legacy::csv::controller,
    crate::legacy::olmconfig::controller,
    crate::legacy::catalogsource::controller,
    crate::legacy::subscription::controller,
    crate::legacy::installplan::controller,
    crate::migration::controller,
    crate::migration::reverting::controller,
];

/// Running controllers; dropping them aborts them where they are, as a killed process would, and
/// [`Controllers::stop`] stops them cleanly.
pub struct Controllers {
    pub webhook: RunningWebhook,
    /// The Installed API, unless disabled or the cluster has no aggregation layer to serve it through.
    pub api: Option<crate::installed::RunningApi>,
    /// What the controllers record (reconciles, failures, durations).
    pub metrics: Arc<crate::metrics::Metrics>,
    stop: Option<oneshot::Sender<()>>,
    running: JoinSet<()>,
}

impl Controllers {
    /// Stops reconciling (letting running reconciles finish) and the webhook.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        while self.running.join_next().await.is_some() {}
    }
}

/// Starts the webhook and every controller against the cluster `config` describes.
pub async fn start(
    mut config: kube::Config,
    mut options: ControllerOptions,
    health: Arc<Health>,
) -> Result<Controllers, WebhookError> {
    // One identity for the election and the requests: the API server's audit log names the replica that made each.
    let identity = leader::identity(&options.leader);
    options.leader.identity = Some(identity.clone());
    if let Some(agent) = user_agent(&identity) {
        config.headers.push((axum::http::header::USER_AGENT, agent));
    }
    let client = crate::controller::connect::client(config.clone()).map_err(WebhookError::Identify)?;
    let webhook = crate::webhook::server::start(
        client.clone(),
        &options.webhook,
        &options.namespace,
        options.certificates,
        health.metrics.clone(),
    )
    .await?;
    let (stop, stopped) = oneshot::channel::<()>();
    let process = Process::new(config, client, options, health.metrics.clone(), stopped);
    let api = if process.options.api.disabled {
        withdraw_api(&process).await;
        None
    } else {
        let options = &process.options;
        let started = crate::installed::server::start(
            process.client.clone(),
            &options.api,
            &options.namespace,
            process.catalogs.clone(),
            &options.global_catalog_namespace,
            options.certificates,
            process.metrics.clone(),
        )
        .await;
        match started {
            Ok(api) => Some(api),
            Err(error) => {
                // The controllers do not depend on it: they run, and the API is missing until the next start.
                use crate::category::Categorized as _;
                tracing::error!(
                    category = error.category(),
                    "{}; the Installed API is not served",
                    crate::category::report(&error)
                );
                None
            }
        }
    };
    let metrics = process.metrics.clone();
    let mut running = JoinSet::new();
    if process.options.leader.enabled {
        running.spawn(lead(process));
    } else {
        for controller in CONTROLLERS {
            running.spawn(controller(&process));
        }
        metrics.leader.set(1);
        tracing::info!(namespace = %process.options.namespace, count = CONTROLLERS.len(), "controllers started");
    }
    Ok(Controllers { webhook, api, metrics, stop: Some(stop), running })
}

/// Withdraws what an earlier run registered of the Installed API, for a controller told not to serve it. A failure
/// is logged: the controllers run on, and the next start tries again.
async fn withdraw_api(process: &Process) {
    let options = &process.options;
    match crate::installed::server::withdraw(&process.client, &options.api, &options.namespace).await {
        Ok(withdrawn) if withdrawn.is_empty() => {}
        Ok(withdrawn) => tracing::info!(?withdrawn, "the Installed API is disabled: its APIServices are withdrawn"),
        Err(error) => {
            use crate::category::Categorized as _;
            tracing::error!(category = error.category(), "{}", crate::category::report(&error));
        }
    }
}

/// The User-Agent of every request this replica makes, `olmv2/<version> (<identity>)`, as client-go names its
/// programs (kube-rs sends none): an audit log tells the replicas apart by it. None for an identity no header can carry.
pub fn user_agent(identity: &str) -> Option<axum::http::HeaderValue> {
    axum::http::HeaderValue::from_str(&format!("olmv2/{} ({identity})", env!("CARGO_PKG_VERSION"))).ok()
}

/// Runs the controllers during each term this replica holds the Lease (`controller::leader`), and keeps the
/// catalogs the Installed API shows loaded all along. A term ends at once when the election or the term's own
/// renew deadline says the Lease is not ours: the controllers are aborted where they are, as in a killed process.
/// Stopping the process lets them finish, then releases the Lease. An election that ends is joined again.
async fn lead(process: Process) {
    let stopped = process.shutdown();
    tokio::pin!(stopped);
    // Aborted with this task (a JoinSet aborts what it holds when dropped).
    let mut background = JoinSet::new();
    background.spawn(keep_catalogs_loaded(process.client.clone(), process.catalogs.clone()));
    'election: while let Some(mut election) = join_election(&process, &mut stopped).await {
        loop {
            match until_confirmed(&process, &mut election, &mut stopped).await {
                Wait::Confirmed => {}
                Wait::NotLeading => continue,
                Wait::ElectionEnded => continue 'election,
                Wait::Stopped => {
                    election.leave().await;
                    break 'election;
                }
            }
            match run_term(&process, election, &mut stopped).await {
                Some(kept) => election = kept,
                None => break 'election,
            }
        }
    }
    process.metrics.leader.set(0);
}

/// Joins the leader election, trying again after a delay that doubles (up to `leader::MAX_RETRY`) while it cannot
/// be joined; `None` when the process stops first.
async fn join_election(
    process: &Process,
    stopped: &mut (impl Future<Output = ()> + Unpin),
) -> Option<leader::Election> {
    let options = &process.options;
    let mut retry = leader::RETRY;
    loop {
        match leader::election_client(&process.config) {
            Ok(client) => return Some(leader::elect(client, &options.namespace, &options.leader)),
            Err(error) => {
                tracing::warn!(%error, retry_seconds = retry.as_secs(), "cannot join the leader election; trying again");
                tokio::select! {
                    () = &mut *stopped => return None,
                    () = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(leader::MAX_RETRY);
            }
        }
    }
}

/// How waiting for a term ended.
enum Wait {
    /// The election says this replica leads, and the Lease reads as its own: a term starts.
    Confirmed,
    /// The election said this replica no longer leads before the Lease read as its own: wait again.
    NotLeading,
    /// The election ended: it is joined again.
    ElectionEnded,
    /// The process stops: the election is to be left.
    Stopped,
}

/// Waits until `election` says this replica leads and the Lease reads as its own (`leader::confirmed`).
async fn until_confirmed(
    process: &Process,
    election: &mut leader::Election,
    stopped: &mut (impl Future<Output = ()> + Unpin),
) -> Wait {
    let options = &process.options;
    tokio::select! {
        () = &mut *stopped => return Wait::Stopped,
        led = leader::until(&mut election.leading, true) => if !led {
            tracing::warn!("the leader election ended; joining it again");
            return Wait::ElectionEnded;
        },
    }
    let confirmed = leader::confirmed(process.client.clone(), &options.namespace, &options.leader, &election.identity);
    tokio::select! {
        () = &mut *stopped => Wait::Stopped,
        _ = leader::until(&mut election.leading, false) => Wait::NotLeading,
        () = confirmed => Wait::Confirmed,
    }
}

/// Runs the controllers for one term, until the Lease is not ours (the controllers aborted; the election is given
/// back to be waited on again) or the process stops (the controllers finish while the Lease is still ours, then
/// the election is left; `None`).
async fn run_term(
    process: &Process,
    mut election: leader::Election,
    stopped: &mut (impl Future<Output = ()> + Unpin),
) -> Option<leader::Election> {
    let options = &process.options;
    tracing::info!(lease = %options.leader.lease_name, identity = %election.identity, "leading: the controllers start");
    let (end_term, term_ended) = oneshot::channel::<()>();
    let term = process.term(term_ended);
    let mut controllers = JoinSet::new();
    for controller in CONTROLLERS {
        controllers.spawn(controller(&term));
    }
    process.metrics.leader.set(1);
    let identity = election.identity.clone();
    let fence = leader::watch_term(process.client.clone(), &options.namespace, &options.leader, &identity);
    tokio::pin!(fence);
    tokio::select! {
        () = &mut *stopped => {
            let _ = end_term.send(());
            // The running reconciles finish only while the Lease is still this replica's.
            tokio::select! {
                () = async { while controllers.join_next().await.is_some() {} } => {},
                _ = leader::until(&mut election.leading, false) => {},
                () = &mut fence => {},
            }
            controllers.abort_all();
            while controllers.join_next().await.is_some() {}
            process.metrics.leader.set(0);
            // Released only if still ours (another may hold it now: `Election::leave`).
            election.leave().await;
            return None;
        }
        _ = leader::until(&mut election.leading, false) => {}
        () = &mut fence => {}
    }
    tracing::warn!(lease = %options.leader.lease_name, "lost the Lease: the controllers stop at once");
    controllers.abort_all();
    while controllers.join_next().await.is_some() {}
    process.metrics.leader.set(0);
    Some(election)
}

/// Keeps the catalogs loaded on a replica whether it leads or not: the CatalogSource loop, which loads them, runs on
/// the leader only, but the Installed API's PackageManifests answer from the loaded catalogs on every replica behind
/// the Service. Each CatalogSource's catalog is loaded when it appears or changes (the leader's status writes
/// included, so a polled catalog is reloaded when due); nothing is written.
async fn keep_catalogs_loaded(client: kube::Client, catalogs: Arc<crate::catalog::CatalogCache>) {
    use futures_util::StreamExt as _;
    use kube::runtime::WatchStreamExt as _;
    use kube::ResourceExt as _;
    let api = kube::Api::<crate::api::v1alpha1::CatalogSource>::all(client);
    let sources = crate::controller::watches::trimmed(api, kube::runtime::watcher::Config::default()).applied_objects();
    futures_util::pin_mut!(sources);
    while let Some(event) = sources.next().await {
        let Ok(source) = event else { continue };
        if let Err(error) = catalogs.catalog_of(&source).await {
            let name = format!("{}/{}", source.namespace().unwrap_or_default(), source.name_any());
            tracing::debug!(catalog_source = %name, %error, "catalog not loaded on this replica");
        }
    }
}

//! The one way every controller runs. A controller's context implements [`Reconciler`] (what it reconciles, one
//! pass, its name); its module builds a kube-runtime `Controller` with the watches that wake it and hands both to
//! [`run`], which adds what every controller shares: the reconcile counted and timed, failures counted by their
//! static category and retried (for a loop that asks it, backing off exponentially while an object keeps failing: an
//! error that will not heal by itself must not cost the API server a pass a second for ever), a log span naming the
//! controller, and a clean stop.
//!
//! kube-runtime already wraps each reconcile, and the error policy after it, in a span naming the object
//! (`reconciling object`, with `object.ref` and `object.reason`): the runner adds none of its own per reconcile.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use kube::runtime::controller::{Action, Controller};
use kube::Resource;
use serde::de::DeserializeOwned;
use tracing::instrument;

use crate::category::report;
use crate::category::Categorized;
use crate::metrics::Metrics;

/// How many objects one controller reconciles at once. kube-runtime's default is no limit: a hundred objects
/// changing together (a controller's start, a change every CSV watches) then run a hundred passes at once, each
/// holding what it read, and the process keeps the peak. A bound keeps memory flat in the number of objects while
/// leaving room for passes that wait on the network (a bundle pull, an access review).
const CONCURRENT_RECONCILES: u16 = 16;

/// How soon a reconcile that only lost a race with a change of its object runs again: the change is there to be
/// seen at once.
const CONFLICT_RETRY: Duration = Duration::from_millis(200);

/// The longest wait between two tries of an object that keeps failing: client-go's work queues back off to about 17
/// minutes; five keep a fixed cluster from waiting long for the next try.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// How soon an object that failed `failures` times in a row is tried again: the retry interval, doubled for each
/// failure after the first, at most [`MAX_BACKOFF`].
fn backoff(retry: Duration, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    retry.saturating_mul(1 << doublings).min(MAX_BACKOFF.max(retry))
}

/// What the runner and every loop's passes share, built once for all loops (`runtime::Process::basics`): where
/// reconciles are counted, how soon a failed pass is tried again, how often a settled object is looked at again.
#[derive(Clone)]
pub struct Basics {
    pub metrics: Arc<Metrics>,
    pub retry: Duration,
    pub resync: Duration,
}

/// A reconciler, with how many times in a row each object failed (forgotten at its first success).
struct Runner<R> {
    reconciler: Arc<R>,
    failures: Mutex<HashMap<String, u32>>,
}

impl<R> Runner<R> {
    fn failed(&self, key: String) -> u32 {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        let count = failures.entry(key).or_default();
        *count = count.saturating_add(1);
        *count
    }

    fn succeeded(&self, key: &str) {
        let mut failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        if !failures.is_empty() {
            failures.remove(key);
        }
    }
}

/// The key an object's failures are counted under.
fn key<K: Resource>(object: &K) -> String {
    let meta = object.meta();
    format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
}

/// One controller's reconciliation, implemented by its context.
pub trait Reconciler: Send + Sync + 'static {
    /// The kind reconciled.
    type Object: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static;
    /// Why a pass failed; its category labels the failure metric and the log line.
    type Error: Categorized + Send + Sync + 'static;

    /// The controller's name: the `controller` label of its metrics and field of its logs.
    const NAME: &'static str;

    /// Whether an object that keeps failing is tried ever less often (the retry interval doubled for each failure in
    /// a row). For a loop whose failures may be hopeless and costly (an Install too large to write, a bundle that
    /// never unpacks); a loop whose passes fail while it waits for something no watch of it announces (OLM v0's CSV
    /// loop waiting on RBAC it does not watch) keeps its steady retry, or it would learn of it minutes late.
    const BACKS_OFF: bool = false;

    /// One pass over `object`: read, decide (the pure functions of the controller's modules), write.
    fn reconcile(
        self: Arc<Self>,
        object: Arc<Self::Object>,
    ) -> impl Future<Output = Result<Action, Self::Error>> + Send;

    /// Where reconciles are counted and timed, and how soon a failed pass is tried again.
    fn basics(&self) -> &Basics;
}

/// Drives `controller` with `reconciler` until `shutdown` completes, letting running reconciles finish.
#[instrument(name = "controller", skip_all, fields(controller = R::NAME))]
pub async fn run<R: Reconciler>(
    controller: Controller<R::Object>,
    reconciler: Arc<R>,
    shutdown: impl Future<Output = ()> + Send + Sync + 'static,
) {
    tracing::info!("controller started");
    let shutdown = futures_util::FutureExt::shared(shutdown);
    let running = controller
        .with_config(kube::runtime::controller::Config::default().concurrency(CONCURRENT_RECONCILES))
        .graceful_shutdown_on(shutdown.clone())
        .run(reconcile, error_policy, Arc::new(Runner { reconciler, failures: Mutex::default() }))
        .for_each(|result| async move {
            if let Err(error) = result {
                tracing::debug!(%error, "controller event");
            }
        });
    // A graceful stop lets running reconciles finish, but no longer polls the watches: a reconcile waiting for a
    // store those watches fill would wait for ever. Past the grace, what still runs is dropped, as in a killed
    // process (every pass is idempotent; the next leader or start finishes it).
    let overdue = async {
        shutdown.await;
        tokio::time::sleep(STOP_GRACE).await;
    };
    tokio::select! {
        () = running => tracing::info!("controller stopped"),
        () = overdue => tracing::warn!(grace_seconds = STOP_GRACE.as_secs(), "controller stopped with reconciles still running"),
    }
}

/// How long a stopping controller lets its running reconciles finish.
const STOP_GRACE: Duration = Duration::from_secs(10);

async fn reconcile<R: Reconciler>(object: Arc<R::Object>, runner: Arc<Runner<R>>) -> Result<Action, R::Error> {
    let key = key(object.as_ref());
    let reconciler = &runner.reconciler;
    let timer = reconciler.basics().metrics.reconcile(R::NAME);
    let answer = reconciler.clone().reconcile(object).await;
    timer.finished(answer.is_ok());
    if answer.is_ok() {
        runner.succeeded(&key);
    }
    answer
}

/// Counts the failure and retries: at once when the object only changed under the pass, after the controller's
/// retry interval otherwise, doubled for each failure of the object in a row.
fn error_policy<R: Reconciler>(object: Arc<R::Object>, error: &R::Error, runner: Arc<Runner<R>>) -> Action {
    let category = error.category();
    runner.reconciler.basics().metrics.reconcile_failed(R::NAME, category);
    if error.is_conflict() {
        tracing::info!(category, "{error}");
        return Action::requeue(CONFLICT_RETRY);
    }
    let (failures, delay) = match R::BACKS_OFF {
        true => {
            let failures = runner.failed(key(object.as_ref()));
            (failures, backoff(runner.reconciler.basics().retry, failures))
        }
        false => (1, runner.reconciler.basics().retry),
    };
    tracing::warn!(category, failures, retry_seconds = delay.as_secs_f64(), "{}", report(error));
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[derive(Debug, thiserror::Error)]
    enum PassError {
        #[error("the object changed")]
        Changed,
        #[error("the write failed")]
        Failed,
    }

    impl Categorized for PassError {
        fn category(&self) -> &'static str {
            match self {
                Self::Changed => "ObjectChanged",
                Self::Failed => "WriteFailed",
            }
        }

        fn is_conflict(&self) -> bool {
            matches!(self, Self::Changed)
        }
    }

    struct Counting<const BACKS: bool> {
        basics: Basics,
    }

    impl<const BACKS: bool> Default for Counting<BACKS> {
        fn default() -> Self {
            let basics =
                Basics { metrics: Arc::default(), retry: Duration::from_secs(10), resync: Duration::from_secs(60) };
            Self { basics }
        }
    }

    impl<const BACKS: bool> Reconciler for Counting<BACKS> {
        type Object = ConfigMap;
        type Error = PassError;
        const NAME: &'static str = "counting";
        const BACKS_OFF: bool = BACKS;

        async fn reconcile(self: Arc<Self>, object: Arc<ConfigMap>) -> Result<Action, PassError> {
            match object.metadata.name.as_deref() {
                Some("changed") => Err(PassError::Changed),
                Some("failed") => Err(PassError::Failed),
                _ => Ok(Action::await_change()),
            }
        }

        fn basics(&self) -> &Basics {
            &self.basics
        }
    }

    fn named(name: &str) -> Arc<ConfigMap> {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.into());
        Arc::new(object)
    }

    fn runner<const BACKS: bool>() -> Arc<Runner<Counting<BACKS>>> {
        Arc::new(Runner { reconciler: Arc::new(Counting::default()), failures: Mutex::default() })
    }

    #[tokio::test]
    async fn every_pass_is_counted_and_timed_and_failures_are_counted_by_category() {
        let runner = runner::<true>();
        for name in ["fine", "changed", "failed"] {
            if let Err(error) = reconcile(named(name), runner.clone()).await {
                error_policy(named(name), &error, runner.clone());
            }
        }
        let text = runner.reconciler.basics.metrics.encode().expect("encode");
        assert!(text.contains("olmv2_reconciles_total{controller=\"counting\"} 3"), "{text}");
        for (result, count) in [("success", 1), ("error", 2)] {
            let line = format!(
                "olmv2_reconcile_duration_seconds_count{{controller=\"counting\",result=\"{result}\"}} {count}"
            );
            assert!(text.contains(&line), "{text}");
        }
        for category in ["ObjectChanged", "WriteFailed"] {
            let line = format!("olmv2_reconcile_failures_total{{controller=\"counting\",category=\"{category}\"}} 1");
            assert!(text.contains(&line), "{text}");
        }
    }

    #[test]
    fn a_conflict_is_retried_at_once_and_other_failures_after_the_retry_interval() {
        let runner = runner::<true>();
        let changed = error_policy(named("changed"), &PassError::Changed, runner.clone());
        assert_eq!(changed, Action::requeue(CONFLICT_RETRY));
        let failed = error_policy(named("failed"), &PassError::Failed, runner);
        assert_eq!(failed, Action::requeue(Duration::from_secs(10)));
    }

    #[tokio::test]
    async fn an_object_failing_again_and_again_is_tried_ever_less_often_until_it_succeeds() {
        let runner = runner::<true>();
        let delays: Vec<Action> =
            (0..8).map(|_| error_policy(named("failed"), &PassError::Failed, runner.clone())).collect();
        let seconds = [10, 20, 40, 80, 160, 300, 300, 300];
        assert_eq!(delays, seconds.map(|s| Action::requeue(Duration::from_secs(s))));
        // Another object's failures are its own; a conflict neither counts nor resets.
        assert_eq!(
            error_policy(named("other"), &PassError::Failed, runner.clone()),
            Action::requeue(Duration::from_secs(10))
        );
        error_policy(named("failed"), &PassError::Changed, runner.clone());
        assert_eq!(
            error_policy(named("failed"), &PassError::Failed, runner.clone()),
            Action::requeue(Duration::from_secs(300))
        );
        // A success of the object forgets its failures (the object here is one whose pass succeeds).
        error_policy(named("fine"), &PassError::Failed, runner.clone());
        error_policy(named("fine"), &PassError::Failed, runner.clone());
        assert!(reconcile(named("fine"), runner.clone()).await.is_ok());
        assert_eq!(error_policy(named("fine"), &PassError::Failed, runner), Action::requeue(Duration::from_secs(10)));
    }

    #[test]
    fn a_loop_that_does_not_back_off_keeps_its_retry_interval() {
        let runner = runner::<false>();
        for _ in 0..5 {
            let failed = error_policy(named("failed"), &PassError::Failed, runner.clone());
            assert_eq!(failed, Action::requeue(Duration::from_secs(10)));
        }
    }

    #[test]
    fn the_backoff_never_overflows_and_never_undercuts_the_retry() {
        assert_eq!(backoff(Duration::from_secs(1), 0), Duration::from_secs(1));
        assert_eq!(backoff(Duration::from_secs(1), u32::MAX), MAX_BACKOFF);
        assert_eq!(backoff(Duration::from_secs(600), 3), Duration::from_secs(600), "a retry longer than the cap");
    }
}

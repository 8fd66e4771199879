//! Publishing the events a controller's condition transitions make, as that controller (the reporter), on the
//! object they are about. Kubernetes records events of cluster-scoped objects in the `default` namespace.
//!
//! kube's recorder remembers every event it published for 6 minutes, so that a repeat within them counts in the
//! first one's series rather than making another Event; it forgets them only when it publishes again. After a busy
//! start (a few thousand events) that was megabytes held until the next event, however long that is. So the
//! recorder is let go once 6 minutes have passed without a publish, when everything it remembers has expired by its
//! own rule, and a fresh one is made for the next event.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Resource;
use tokio::time::Instant;

use super::conditions::Transition;

/// What the API server keeps of an event's note.
const NOTE_LIMIT: usize = 1000;

/// How long kube's recorder remembers a published event (its `CACHE_TTL`).
const REMEMBERED: Duration = Duration::from_secs(6 * 60);

/// The events of one controller.
pub struct Events {
    client: kube::Client,
    reporter: Reporter,
    recent: Arc<Mutex<Recent>>,
}

/// The recorder of the events published lately, if any were.
#[derive(Default)]
struct Recent {
    recorder: Option<Recorder>,
    /// When the last publish started, and again when it ended: kube's recorder dates what it remembers from each
    /// event's publish, within those.
    last: Option<Instant>,
    /// Whether a task waits to let the recorder go.
    forgetting: bool,
}

fn lock(recent: &Mutex<Recent>) -> std::sync::MutexGuard<'_, Recent> {
    recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Events {
    /// Events reported by `controller` (`olmv2-install-controller`).
    pub fn new(client: kube::Client, controller: &str) -> Self {
        let reporter = Reporter { controller: controller.into(), instance: None };
        Self { client, reporter, recent: Arc::default() }
    }

    /// Logs and records one event per transition; a failure to record one is logged, never fatal: the status says
    /// the same.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, transitions: &[Transition]) {
        if transitions.is_empty() {
            return;
        }
        let recorder = self.recorder();
        let reference = object.object_ref(&());
        for transition in transitions {
            tracing::info!(reason = %transition.reason, "{}", transition.note);
            let event = Event {
                type_: if transition.warning { EventType::Warning } else { EventType::Normal },
                reason: transition.reason.clone(),
                note: Some(transition.note.chars().take(NOTE_LIMIT).collect()),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(error) = recorder.publish(&event, &reference).await {
                tracing::warn!(%error, "failed to record an event");
            }
        }
        // kube dates each event it remembers from its own publish: the last of them counts from now.
        lock(&self.recent).last = Some(Instant::now());
    }

    /// The recorder of recent events (a fresh one after a quiet spell), the publish about to start noted.
    fn recorder(&self) -> Recorder {
        let mut recent = lock(&self.recent);
        recent.last = Some(Instant::now());
        if !recent.forgetting {
            recent.forgetting = true;
            tokio::spawn(forget_when_quiet(Arc::downgrade(&self.recent)));
        }
        recent.recorder.get_or_insert_with(|| Recorder::new(self.client.clone(), self.reporter.clone())).clone()
    }

    /// Whether a recorder is kept (events were published less than 6 minutes ago).
    #[cfg(test)]
    fn remembers(&self) -> bool {
        lock(&self.recent).recorder.is_some()
    }
}

/// Lets the recorder go once [`REMEMBERED`] has passed since the last publish started. A publish still running then
/// keeps its own handle: its event is remembered by a recorder no longer used, so a repeat of it makes a new Event.
async fn forget_when_quiet(recent: Weak<Mutex<Recent>>) {
    loop {
        let wait = {
            let Some(recent) = recent.upgrade() else { return };
            let mut recent = lock(&recent);
            let quiet = recent.last.map_or(REMEMBERED, |last| last.elapsed());
            if quiet >= REMEMBERED {
                recent.recorder = None;
                recent.forgetting = false;
                return;
            }
            REMEMBERED - quiet
        };
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::client::Body;

    /// A client whose API server answers each write with the object it was sent, and records each request's method.
    fn recording_client() -> (kube::Client, Arc<Mutex<Vec<String>>>) {
        let methods = Arc::new(Mutex::new(Vec::new()));
        let recorded = methods.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            recorded.lock().expect("lock").push(request.method().to_string());
            async move {
                let sent = request.into_body().collect().await.expect("body").to_bytes();
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::from(sent.to_vec())))
            }
        });
        (kube::Client::new(service, "default"), methods)
    }

    fn object() -> ConfigMap {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "ops", "uid": "u1"}}))
        .expect("config map")
    }

    fn failed() -> Vec<Transition> {
        vec![Transition { warning: true, reason: "Failed".into(), note: "it failed".into() }]
    }

    /// Lets the forgetting task run up to the paused clock's present.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeat_within_six_minutes_of_the_last_event_joins_its_series_and_later_ones_start_anew() {
        let (client, methods) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        events.publish(&object(), &failed()).await;
        tokio::time::advance(Duration::from_secs(5 * 60)).await;
        events.publish(&object(), &failed()).await;
        // Ten minutes after the first, five after the last: still remembered, a repeat.
        tokio::time::advance(Duration::from_secs(5 * 60)).await;
        settle().await;
        assert!(events.remembers());
        events.publish(&object(), &failed()).await;
        tokio::time::advance(REMEMBERED).await;
        settle().await;
        assert!(!events.remembers(), "six quiet minutes: the recorder is let go");
        events.publish(&object(), &failed()).await;
        assert_eq!(*methods.lock().expect("lock"), ["POST", "PATCH", "PATCH", "POST"]);
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_to_publish_keeps_no_recorder() {
        let (client, methods) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        events.publish(&object(), &[]).await;
        assert!(!events.remembers());
        assert!(methods.lock().expect("lock").is_empty());
    }
}

//! Publishing the events a controller's condition transitions make, as that controller (the reporter), on the
//! object they are about, as `events.k8s.io/v1` Events. Kubernetes records events of cluster-scoped objects in the
//! `default` namespace.
//!
//! A repeat of an event within 6 minutes of its last occurrence counts in the first one's series rather than making
//! another Event: the same type, action, reason, object (as `Resource::object_ref` names it: apiVersion, kind,
//! namespace, name and uid) and note, as client-go's events.k8s.io broadcaster decides it. (kube's recorder leaves
//! the note out, so an event whose message changed counted in the series of the old message, which stayed the only
//! one shown: a refusal naming what a pass saw at first never told what a later pass saw, found on real Kubernetes.) kube's recorder remembers each Event it
//! published whole until it publishes again: after a busy start (a few thousand events), a megabyte or more. This
//! one remembers only what a repeat needs: which Event it joins, how many it counts, and when it was last seen
//! (1.3 to 1.9 MiB less RSS at the scale bench). Entries expire 6 minutes after their last occurrence, at the next
//! publish, and all of them once 6 minutes pass without a publish.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::Resource;
use tokio::time::Instant;

use super::conditions::Transition;

/// The longest note the API server accepts, in bytes (events.k8s.io/v1's validation: a longer one is refused).
const NOTE_LIMIT: usize = 1024;

/// `note` cut to at most [`NOTE_LIMIT`] bytes, at a character's boundary (a message naming a long list of objects
/// would otherwise lose its event to a 422).
fn within_limit(note: &str) -> String {
    let mut end = note.len().min(NOTE_LIMIT);
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    note[..end].to_owned()
}

/// How long after its last occurrence a repeat still joins an event's series (kube's recorder's `CACHE_TTL`).
const REMEMBERED: Duration = Duration::from_secs(6 * 60);

/// Every event's action: a controller reports what its reconcile found.
const ACTION: &str = "Reconcile";

/// The events of one controller.
pub struct Events {
    client: kube::Client,
    /// The reporting controller (`olmv2-install-controller`), also the reporting instance, as kube's recorder
    /// names it without one.
    controller: String,
    recent: Arc<Mutex<Recent>>,
}

/// The events published lately.
#[derive(Default)]
struct Recent {
    series: HashMap<Key, Remembered>,
    /// When the last publish started, and again when it ended.
    last: Option<Instant>,
    /// Whether a task waits to forget everything after a quiet spell.
    forgetting: bool,
}

/// What makes two events one series: the object reference as `Resource::object_ref` gives it, the type, the reason
/// and the note as published (the action and the reporter are the same for every event of an [`Events`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    warning: bool,
    reason: String,
    note: String,
    regarding: [Option<String>; 5],
}

impl Key {
    fn new(transition: &Transition, reference: &ObjectReference) -> Self {
        let ObjectReference { api_version, kind, name, namespace, uid, .. } = reference.clone();
        Self {
            warning: transition.warning,
            reason: transition.reason.clone(),
            note: within_limit(&transition.note),
            regarding: [api_version, kind, namespace, name, uid],
        }
    }
}

/// An Event published, as far as a repeat needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Remembered {
    namespace: String,
    name: String,
    /// How many occurrences the Event counts (1 until its first repeat, which makes its series count 2).
    count: i32,
    seen: Instant,
}

/// What publishing an event takes: a new Event, or a repeat's series on one published before.
#[derive(Debug, PartialEq)]
enum Publish {
    Create,
    Repeat { namespace: String, name: String, count: i32 },
}

/// Whether an occurrence of `key` at `now` repeats a remembered event, after forgetting those whose last occurrence
/// is [`REMEMBERED`] ago or more.
fn decide(series: &mut HashMap<Key, Remembered>, key: &Key, now: Instant) -> Publish {
    series.retain(|_, remembered| now.saturating_duration_since(remembered.seen) < REMEMBERED);
    match series.get(key) {
        Some(Remembered { namespace, name, count, .. }) => {
            Publish::Repeat { namespace: namespace.clone(), name: name.clone(), count: count.saturating_add(1) }
        }
        None => Publish::Create,
    }
}

fn lock(recent: &Mutex<Recent>) -> std::sync::MutexGuard<'_, Recent> {
    recent.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The Event an occurrence makes, named as kube's recorder names it: the object's name and the time in hexadecimal
/// nanoseconds.
fn new_event(controller: &str, transition: &Transition, reference: &ObjectReference, now: Timestamp) -> Event {
    Event {
        metadata: ObjectMeta {
            namespace: reference.namespace.clone(),
            name: Some(format!("{}.{:x}", reference.name.as_deref().unwrap_or(controller), now.as_nanosecond())),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(ACTION.into()),
        reason: Some(transition.reason.clone()),
        note: Some(within_limit(&transition.note)),
        regarding: Some(reference.clone()),
        reporting_controller: Some(controller.into()),
        reporting_instance: Some(controller.into()),
        type_: Some(if transition.warning { "Warning" } else { "Normal" }.into()),
        ..Event::default()
    }
}

impl Events {
    /// Events reported by `controller` (`olmv2-install-controller`).
    pub fn new(client: kube::Client, controller: &str) -> Self {
        Self { client, controller: controller.into(), recent: Arc::default() }
    }

    /// Logs and records one event per transition; a failure to record one is logged, never fatal: the status says
    /// the same.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, transitions: &[Transition]) {
        if transitions.is_empty() {
            return;
        }
        self.note_publish();
        let reference = object.object_ref(&());
        for transition in transitions {
            tracing::info!(reason = %transition.reason, "{}", transition.note);
            if let Err(error) = self.publish_one(transition, &reference).await {
                tracing::warn!(%error, "failed to record an event");
            }
        }
        self.note_publish();
    }

    async fn publish_one(&self, transition: &Transition, reference: &ObjectReference) -> Result<(), kube::Error> {
        let key = Key::new(transition, reference);
        let decision = decide(&mut lock(&self.recent).series, &key, Instant::now());
        let remembered = match decision {
            Publish::Create => {
                let event = new_event(&self.controller, transition, reference, Timestamp::now());
                let namespace = reference.namespace.clone().unwrap_or_else(|| "default".into());
                let created = Api::<Event>::namespaced(self.client.clone(), &namespace)
                    .create(&PostParams::default(), &event)
                    .await?;
                let name = created.metadata.name.or(event.metadata.name).unwrap_or_default();
                Remembered { namespace, name, count: 1, seen: Instant::now() }
            }
            Publish::Repeat { namespace, name, count } => {
                let series = EventSeries { count, last_observed_time: MicroTime(Timestamp::now()) };
                let patch = serde_json::json!({ "series": series });
                Api::<Event>::namespaced(self.client.clone(), &namespace)
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                Remembered { namespace, name, count, seen: Instant::now() }
            }
        };
        lock(&self.recent).series.insert(key, remembered);
        Ok(())
    }

    /// Notes a publish now, and starts the wait to forget every event after a quiet spell if none runs.
    fn note_publish(&self) {
        let mut recent = lock(&self.recent);
        recent.last = Some(Instant::now());
        if !recent.forgetting {
            recent.forgetting = true;
            tokio::spawn(forget_when_quiet(Arc::downgrade(&self.recent)));
        }
    }

    /// How many events are remembered.
    #[cfg(test)]
    fn remembered(&self) -> usize {
        lock(&self.recent).series.len()
    }
}

/// Forgets every event once [`REMEMBERED`] has passed since the last publish: without another publish to expire
/// them, they would be held however long the cluster stays quiet.
async fn forget_when_quiet(recent: Weak<Mutex<Recent>>) {
    loop {
        let wait = {
            let Some(recent) = recent.upgrade() else { return };
            let mut recent = lock(&recent);
            let quiet = recent.last.map_or(REMEMBERED, |last| last.elapsed());
            if quiet >= REMEMBERED {
                recent.series = HashMap::new();
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

    /// A request as the API server saw it: method, path and body.
    type Request = (String, String, serde_json::Value);

    /// A client whose API server answers each write with the object it was sent, and records each request.
    #[test]
    fn a_note_is_cut_to_the_api_servers_limit_in_bytes_at_a_character_boundary() {
        assert_eq!(within_limit("short"), "short");
        assert_eq!(within_limit(&"a".repeat(2000)).len(), NOTE_LIMIT);
        // 'é' is two bytes: 512 of them fill the limit exactly.
        let accented = "é".repeat(600);
        let cut = within_limit(&accented);
        assert_eq!(cut.len(), NOTE_LIMIT);
        assert!(accented.starts_with(&cut));
        // After "ab", '€' (three bytes) puts the limit inside a character: the cut falls before that one.
        let mixed = format!("ab{}", "€".repeat(400));
        let cut = within_limit(&mixed);
        assert_eq!(cut.len(), 2 + 3 * 340);
        assert!(mixed.starts_with(&cut));
    }

    fn recording_client() -> (kube::Client, Arc<Mutex<Vec<Request>>>) {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let recorded = recorded.clone();
            async move {
                let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
                let sent = request.into_body().collect().await.expect("body").to_bytes();
                let body = serde_json::from_slice(&sent).unwrap_or(serde_json::Value::Null);
                recorded.lock().expect("lock").push((method, path, body));
                Ok::<_, std::convert::Infallible>(http::Response::new(Body::from(sent.to_vec())))
            }
        });
        (kube::Client::new(service, "default"), requests)
    }

    fn object(uid: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "ops", "uid": uid, "resourceVersion": "7"}}))
        .expect("config map")
    }

    fn failed() -> Vec<Transition> {
        vec![Transition { warning: true, reason: "Failed".into(), note: "it failed".into() }]
    }

    fn methods(requests: &Mutex<Vec<Request>>) -> Vec<String> {
        requests.lock().expect("lock").iter().map(|(method, _, _)| method.clone()).collect()
    }

    /// Lets the forgetting task run up to the paused clock's present.
    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeat_within_six_minutes_of_the_last_event_joins_its_series_and_later_ones_start_anew() {
        let (client, requests) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        events.publish(&object("1"), &failed()).await;
        tokio::time::advance(Duration::from_secs(5 * 60)).await;
        events.publish(&object("1"), &failed()).await;
        // Ten minutes after the first, five after the last: still remembered, a repeat.
        tokio::time::advance(Duration::from_secs(5 * 60)).await;
        settle().await;
        assert_eq!(events.remembered(), 1);
        events.publish(&object("1"), &failed()).await;
        tokio::time::advance(REMEMBERED).await;
        settle().await;
        assert_eq!(events.remembered(), 0, "six quiet minutes: everything is forgotten");
        events.publish(&object("1"), &failed()).await;
        assert_eq!(methods(&requests), ["POST", "PATCH", "PATCH", "POST"]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_whose_note_changed_is_a_new_event_not_a_repeat_of_the_old_note() {
        let (client, requests) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        let refused = |note: &str| vec![Transition { warning: true, reason: "Refused".into(), note: note.into() }];
        events.publish(&object("1"), &refused("saw the Role")).await;
        events.publish(&object("1"), &refused("saw the Role and its binding")).await;
        events.publish(&object("1"), &refused("saw the Role and its binding")).await;
        assert_eq!(methods(&requests), ["POST", "POST", "PATCH"]);
        let notes: Vec<serde_json::Value> =
            requests.lock().expect("lock").iter().map(|(_, _, body)| body["note"].clone()).collect();
        assert_eq!(notes[..2], [serde_json::json!("saw the Role"), serde_json::json!("saw the Role and its binding")]);
    }

    #[tokio::test]
    async fn an_event_is_created_whole_and_a_repeat_patches_only_its_series_count() {
        let (client, requests) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        for _ in 0..3 {
            events.publish(&object("1"), &failed()).await;
        }
        let requests = requests.lock().expect("lock").clone();
        let (method, path, created) = &requests[0];
        assert_eq!((method.as_str(), path.as_str()), ("POST", "/apis/events.k8s.io/v1/namespaces/ops/events"));
        let name = created["metadata"]["name"].as_str().expect("a name");
        assert!(name.starts_with("settings."), "{name}");
        assert_eq!(created["type"], "Warning");
        assert_eq!(created["reason"], "Failed");
        assert_eq!(created["note"], "it failed");
        assert_eq!(created["action"], "Reconcile");
        assert_eq!(created["reportingController"], "olmv2-test-controller");
        assert_eq!(created["reportingInstance"], "olmv2-test-controller");
        assert_eq!(created["regarding"]["uid"], "1");
        assert_eq!(created["regarding"]["name"], "settings");
        assert!(created["eventTime"].is_string() && created.get("series").is_none(), "{created}");
        for (request, count) in requests[1..].iter().zip([2, 3]) {
            let (method, path, patch) = request;
            assert_eq!(method, "PATCH");
            assert_eq!(path, &format!("/apis/events.k8s.io/v1/namespaces/ops/events/{name}"));
            assert_eq!(patch["series"]["count"], count, "{patch}");
            assert!(patch["series"]["lastObservedTime"].is_string(), "{patch}");
            assert_eq!(patch.as_object().map(|fields| fields.len()), Some(1), "only the series: {patch}");
        }
    }

    #[tokio::test]
    async fn another_reason_or_another_object_of_the_same_name_is_another_event() {
        let (client, requests) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        events.publish(&object("1"), &failed()).await;
        events.publish(&object("2"), &failed()).await;
        let other = Transition { warning: false, reason: "Installed".into(), note: "done".into() };
        events.publish(&object("2"), &[other]).await;
        events.publish(&object("2"), &failed()).await;
        assert_eq!(methods(&requests), ["POST", "POST", "POST", "PATCH"]);
        assert_eq!(events.remembered(), 3);
    }

    #[test]
    fn an_event_last_seen_six_minutes_ago_is_forgotten_with_every_other_as_old() {
        let start = Instant::now();
        let key = |reason: &str| Key {
            warning: false,
            reason: reason.into(),
            note: String::new(),
            regarding: std::array::from_fn(|_| Some("x".to_owned())),
        };
        let remembered = |seen| Remembered { namespace: "ops".into(), name: "x.1".into(), count: 2, seen };
        let mut series = HashMap::from([
            (key("Old"), remembered(start)),
            (key("Recent"), remembered(start + Duration::from_secs(60))),
        ]);
        let now = start + REMEMBERED;
        assert_eq!(decide(&mut series, &key("Old"), now), Publish::Create);
        assert_eq!(series.len(), 1, "the old one is forgotten");
        assert_eq!(
            decide(&mut series, &key("Recent"), now),
            Publish::Repeat { namespace: "ops".into(), name: "x.1".into(), count: 3 }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_to_publish_remembers_nothing() {
        let (client, requests) = recording_client();
        let events = Events::new(client, "olmv2-test-controller");
        events.publish(&object("1"), &[]).await;
        assert_eq!(events.remembered(), 0);
        assert!(requests.lock().expect("lock").is_empty());
    }
}

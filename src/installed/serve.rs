//! List, get and watch of Installed objects, from the cache: a list is the view's entries for the namespace (or
//! all) at the view's composite resourceVersion; a watch replays what the log holds after the version it was asked
//! from (ADDED events of everything when it was asked from none or `0`, `410 Expired` in the stream when the log no
//! longer reaches back) and then follows the broadcast, with bookmarks and `timeoutSeconds`. Objects are rendered
//! as kubectl asks: JSON, or a Table of seed 002's columns.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use kube::core::Selector;
use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::cache::Cache;
use super::http::{ok_json, status, streamed, ResourceRequest};
use super::selector::{self, FieldRequirement};
use super::synthesize::{GROUP, KIND, VERSION};
use super::table::{row_of, table, table_head, IncludeObject, INSTALLED_COLUMNS};
use super::view::{events, Entry, Event, Logged, ResumeError};

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// A watch's length when the client sets none (kube-apiserver's default range is 30 to 60 minutes).
const DEFAULT_WATCH: Duration = Duration::from_secs(1800);

const FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

/// The size a streamed list is written in.
const CHUNK: usize = 64 * 1024;

/// A read request's scope, selectors and rendering.
pub struct Asked {
    pub namespace: Option<String>,
    labels: Selector,
    fields: Vec<FieldRequirement>,
    /// `Some` when a Table was asked for.
    table: Option<IncludeObject>,
}

impl Asked {
    pub fn read(request: &ResourceRequest, query: &BTreeMap<String, String>, table: bool) -> Result<Self, String> {
        let labels = selector::labels(query.get("labelSelector").map(String::as_str)).map_err(|e| e.to_string())?;
        let fields = selector::fields(query.get("fieldSelector").map(String::as_str), Some(&FIELDS))
            .map_err(|e| e.to_string())?;
        let table = if table {
            let include = query.get("includeObject").map(String::as_str);
            Some(IncludeObject::parse(include).ok_or_else(|| format!("invalid includeObject: {include:?}"))?)
        } else {
            None
        };
        Ok(Self { namespace: request.namespace.clone(), labels, fields, table })
    }

    /// Only the object named `name` (a watch of one object's URL).
    pub fn named(mut self, name: &str) -> Self {
        self.fields.push(FieldRequirement { field: "metadata.name".into(), equal: true, value: name.to_owned() });
        self
    }

    fn selects(&self, namespace: &str, entry: &Entry) -> bool {
        selector::matches(&self.labels, entry.labels())
            && selector::fields_match(&self.fields, |field| match field {
                "metadata.name" => entry.name().to_owned(),
                _ => namespace.to_owned(),
            })
    }

    /// An entry's object in `namespace` as the response carries it: whole, or only its metadata for a Table that
    /// does not ask for objects (`kubectl get`), which spares copying each CSV.
    fn shown(&self, namespace: &str, entry: &Entry, version: &str) -> Value {
        match self.table {
            None | Some(IncludeObject::Object) => entry.object_in(namespace, version),
            Some(_) => entry.metadata_in(namespace, version),
        }
    }

    /// One list item (or Table row) of `(namespace, entry, version)`.
    fn item(&self, namespace: &str, entry: &Entry, version: &str) -> Value {
        let object = self.shown(namespace, entry, version);
        match self.table {
            Some(include) => row_of(json!(entry.cells), object, include),
            None => object,
        }
    }
}

/// A list (or Table) streamed in chunks: an `-A` list of every operator in every namespace it watches is written as
/// it is serialized, never held whole.
pub fn list(cache: &Cache, asked: Asked) -> Response {
    let view = cache.view();
    let selected: Vec<(String, Arc<Entry>)> = view
        .listed(asked.namespace.as_deref())
        .into_iter()
        .filter(|(namespace, entry)| asked.selects(namespace, entry))
        .collect();
    let version = view.version();
    drop(view);
    let head = match asked.table {
        Some(_) => table_head(INSTALLED_COLUMNS, &version),
        None => format!(
            r#"{{"kind":"{KIND}List","apiVersion":"{GROUP}/{VERSION}","metadata":{},"items":["#,
            json!({"resourceVersion": version})
        ),
    };
    // Written in chunks of about CHUNK bytes: one write per item would send a Table's small rows one packet each.
    let mut items = selected.into_iter();
    let mut text = head.into_bytes();
    let mut first = true;
    let mut done = false;
    let chunks = std::iter::from_fn(move || {
        if done {
            return None;
        }
        while text.len() < CHUNK {
            let Some((namespace, entry)) = items.next() else {
                text.extend_from_slice(b"]}");
                done = true;
                break;
            };
            if !std::mem::take(&mut first) {
                text.push(b',');
            }
            let item = asked.item(&namespace, &entry, &entry.version);
            text.extend(serde_json::to_vec(&item).unwrap_or_default());
        }
        Some(Ok::<Bytes, Infallible>(Bytes::from(std::mem::take(&mut text))))
    });
    streamed(Body::from_stream(futures_util::stream::iter(chunks)))
}

pub fn get(cache: &Cache, asked: &Asked, name: &str) -> Response {
    let view = cache.view();
    let found = view.listed(asked.namespace.as_deref()).into_iter().find(|(_, entry)| entry.name() == name);
    drop(view);
    match found {
        Some((namespace, entry)) => {
            let object = asked.shown(&namespace, &entry, &entry.version);
            match asked.table {
                Some(include) => ok_json(&table([(entry.cells.clone(), object)], include, &entry.version)),
                None => ok_json(&object),
            }
        }
        None => status(
            404,
            "NotFound",
            &format!("{}.{GROUP} \"{name}\" not found", super::discovery::INSTALLED),
            Some(json!({"name": name, "group": GROUP, "kind": super::discovery::INSTALLED})),
        ),
    }
}

fn line(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

fn expired(message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": "Expired", "code": 410})
}

/// What a watch still has to send: events (rendered when sent, not when queued), or a line ready.
enum Pending {
    Event(Event),
    Line(Bytes),
}

struct Watching {
    cache: Arc<Cache>,
    asked: Asked,
    changes: Option<broadcast::Receiver<Arc<Logged>>>,
    pending: VecDeque<Pending>,
    bookmarks: Option<tokio::time::Interval>,
    /// The version of the last update this watch has taken in: what a bookmark may say it has seen.
    seen: String,
    deadline: tokio::time::Instant,
}

impl Watching {
    fn render(&self, event: &Event) -> Option<Bytes> {
        if !self.asked.selects(&event.namespace, &event.entry) {
            return None;
        }
        let object = self.asked.shown(&event.namespace, &event.entry, &event.version);
        let object = match self.asked.table {
            Some(include) => table([(event.entry.cells.clone(), object)], include, &event.version),
            None => object,
        };
        Some(line(event.kind, &object))
    }

    fn take_in(&mut self, logged: &Logged, namespaces: &BTreeSet<String>) {
        self.pending
            .extend(events(logged, self.asked.namespace.as_deref(), namespaces).into_iter().map(Pending::Event));
        self.seen = logged.version.clone();
    }

    /// Where the watch starts, read under the view's lock (so that nothing changes between what is replayed and the
    /// broadcast subscribed to): everything there is now as ADDED events when asked `from` none or `0`, else the
    /// updates logged since `from`, to take in with the namespaces they are shown in. The broadcast is subscribed to
    /// only when the watch can start.
    fn replay(&mut self, cache: &Cache, from: Option<&str>) -> Result<Replay, ResumeError> {
        let view = cache.view();
        self.seen = view.version();
        let replay = match from {
            None | Some("") | Some("0") => {
                for (namespace, entry) in view.listed(self.asked.namespace.as_deref()) {
                    let version = entry.version.clone();
                    self.pending.push_back(Pending::Event(Event { kind: "ADDED", namespace, entry, version }));
                }
                Ok(Vec::new())
            }
            Some(version) => view.since(version),
        };
        if replay.is_ok() {
            self.changes = Some(cache.subscribe(&view));
        }
        replay.map(|logged| (logged, view.namespaces()))
    }
}

/// The updates to replay at a watch's start, and the namespaces they are shown in.
type Replay = (Vec<Arc<Logged>>, Arc<BTreeSet<String>>);

/// A watch from the `resourceVersion` asked (none or `0`: everything there is now, as ADDED events). Under the
/// view's lock only `Arc`s are gathered and the broadcast subscribed to; objects are rendered as they are sent.
pub fn watch(cache: Arc<Cache>, asked: Asked, query: &BTreeMap<String, String>) -> Response {
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .filter(|seconds| *seconds > 0)
        .map_or(DEFAULT_WATCH, Duration::from_secs);
    let bookmarks = bookmark_interval(query);
    let mut watching = Watching {
        cache: cache.clone(),
        asked,
        changes: None,
        pending: VecDeque::new(),
        bookmarks,
        seen: String::new(),
        deadline: tokio::time::Instant::now() + timeout,
    };
    let replay = watching.replay(&cache, query.get("resourceVersion").map(String::as_str));
    match replay {
        Ok((logged, namespaces)) => {
            for logged in logged {
                watching.take_in(&logged, &namespaces);
            }
        }
        Err(ResumeError::Invalid(version)) => {
            return status(400, "BadRequest", &format!("invalid resource version: {version}"), None);
        }
        Err(error) => watching.pending.push_back(Pending::Line(line("ERROR", &expired(&error.to_string())))),
    }
    let stream = futures_util::stream::unfold(watching, next_line);
    streamed(Body::from_stream(stream))
}

/// The bookmarks of a watch that asked for them (`allowWatchBookmarks`): the first one interval in, and ticks missed
/// while the stream was not read are not made up for in a burst.
fn bookmark_interval(query: &BTreeMap<String, String>) -> Option<tokio::time::Interval> {
    query.get("allowWatchBookmarks").is_some_and(|b| b == "true").then(|| {
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_INTERVAL, BOOKMARK_INTERVAL);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval
    })
}

/// The watch's next line, and the watch to go on with: what is pending first, then what the broadcast brings or a
/// bookmark when one is due. None ends the stream: the deadline passed, the broadcast closed, or the watch was ended
/// as too old and that was sent.
async fn next_line(mut watching: Watching) -> Option<(Result<Bytes, Infallible>, Watching)> {
    loop {
        match watching.pending.pop_front() {
            Some(Pending::Line(line)) => return Some((Ok::<Bytes, Infallible>(line), watching)),
            Some(Pending::Event(event)) => match watching.render(&event) {
                Some(line) => return Some((Ok(line), watching)),
                None => continue,
            },
            None => {}
        }
        let deadline = watching.deadline;
        let changes = watching.changes.as_mut()?;
        let bookmark = async {
            match watching.bookmarks.as_mut() {
                Some(interval) => {
                    interval.tick().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            change = changes.recv() => match change {
                Ok(logged) => {
                    let namespaces = watching.cache.view().namespaces();
                    watching.take_in(&logged, &namespaces);
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Fallen behind the broadcast: ended as too old, so that the client lists again.
                    watching.changes = None;
                    let current = watching.cache.view().version();
                    let message = format!("too old resource version: {} ({current})", watching.seen);
                    watching.pending.push_back(Pending::Line(line("ERROR", &expired(&message))));
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            () = bookmark => {
                let bookmark = json!({"kind": KIND, "apiVersion": format!("{GROUP}/{VERSION}"),
                                      "metadata": {"resourceVersion": watching.seen}});
                watching.pending.push_back(Pending::Line(line("BOOKMARK", &bookmark)));
            }
            () = tokio::time::sleep_until(deadline) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1alpha1::ClusterServiceVersion;
    use crate::installed::view::Update;
    use http_body_util::BodyExt;

    fn csv(namespace: &str, name: &str, rv: &str) -> ClusterServiceVersion {
        phased(namespace, name, rv, "Succeeded")
    }

    fn phased(namespace: &str, name: &str, rv: &str, phase: &str) -> ClusterServiceVersion {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv,
                         "annotations": {"olm.targetNamespaces": ""}},
            "spec": {"install": {"strategy": "deployment"}, "version": "1.0.0"}, "status": {"phase": phase}
        }))
        .unwrap()
    }

    /// Two global operators, `a.v1` and `b.v1` (their group in `ops` targets every namespace), watching namespace
    /// `team`.
    fn cache() -> Arc<Cache> {
        let cache = Arc::new(Cache::new(16));
        cache.apply(Update::NamespacesListed(vec![("team".into(), "1".into()), ("ops".into(), "1".into())]));
        let group = json!({"metadata": {"name": "og", "namespace": "ops", "resourceVersion": "2"}, "spec": {},
                           "status": {"namespaces": [""]}});
        cache.apply(Update::OperatorGroupsListed(vec![serde_json::from_value(group).unwrap()]));
        cache.apply(Update::CsvsListed(vec![csv("ops", "a.v1", "5"), csv("ops", "b.v1", "6")]));
        cache.apply(Update::SubscriptionsListed(Vec::new()));
        cache
    }

    fn asked(name: Option<&str>) -> Asked {
        let request = ResourceRequest {
            version: VERSION.into(),
            resource: "installed".into(),
            namespace: Some("team".into()),
            name: name.map(str::to_owned),
            subresource: None,
        };
        let asked = Asked::read(&request, &BTreeMap::new(), false).unwrap();
        match name {
            Some(name) => asked.named(name),
            None => asked,
        }
    }

    /// The events a watch sends within a short while.
    async fn events_sent(response: Response) -> Vec<Value> {
        let mut body = response.into_body();
        let mut lines = Vec::new();
        while let Ok(Some(Ok(frame))) = tokio::time::timeout(Duration::from_millis(200), body.frame()).await {
            if let Ok(data) = frame.into_data() {
                lines.extend(
                    data.split(|b| *b == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()),
                );
            }
        }
        lines
    }

    fn names(events: &[Value]) -> Vec<String> {
        events
            .iter()
            .map(|e| format!("{} {}", e["type"].as_str().unwrap(), e["object"]["metadata"]["name"].as_str().unwrap()))
            .collect()
    }

    #[tokio::test]
    async fn a_watch_of_one_objects_url_sees_that_object_only() {
        let all = events_sent(watch(cache(), asked(None), &BTreeMap::new())).await;
        assert_eq!(names(&all), ["ADDED a.v1", "ADDED b.v1"]);
        let one = events_sent(watch(cache(), asked(Some("b.v1")), &BTreeMap::new())).await;
        assert_eq!(names(&one), ["ADDED b.v1"]);
    }

    #[tokio::test]
    async fn a_watch_resumes_after_the_version_asked_and_refuses_one_too_old() {
        let cache = cache();
        let listed = cache.view().version();
        cache.apply(Update::Csv(phased("ops", "b.v1", "7", "Failed")));
        let query: BTreeMap<String, String> = [("resourceVersion".to_owned(), listed)].into();
        let resumed = events_sent(watch(cache.clone(), asked(None), &query)).await;
        assert_eq!(names(&resumed), ["MODIFIED b.v1"]);
        assert_eq!(resumed[0]["object"]["metadata"]["resourceVersion"], cache.view().version());
        let old: BTreeMap<String, String> = [("resourceVersion".to_owned(), cache.view().version())].into();
        // More updates than the log holds (16): the first ones are forgotten.
        for rv in 10..30 {
            let phase = if rv % 2 == 0 { "Installing" } else { "Succeeded" };
            cache.apply(Update::Csv(phased("ops", "a.v1", &rv.to_string(), phase)));
        }
        let expired = events_sent(watch(cache.clone(), asked(None), &old)).await;
        assert_eq!(expired[0]["type"], "ERROR");
        assert_eq!(expired[0]["object"]["code"], 410);
        let invalid: BTreeMap<String, String> = [("resourceVersion".to_owned(), "7".to_owned())].into();
        assert_eq!(watch(cache, asked(None), &invalid).status(), 400);
    }
}

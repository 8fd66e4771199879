//! List, get and watch of Installed objects, from the cache: a list is the view's entries for the namespace (or
//! all) at the view's composite resourceVersion; a watch replays what the log holds after the version it was asked
//! from (ADDED events of everything when it was asked from none or `0`, `410 Expired` in the stream when the log no
//! longer reaches back) and then follows the broadcast, with bookmarks and `timeoutSeconds`. Objects are rendered
//! as kubectl asks: JSON, or a Table of seed 002's columns.

use std::collections::{BTreeMap, VecDeque};
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
use super::view::{events, Entry, Event, Logged};

/// How often a watch that asked for bookmarks gets one.
const BOOKMARK_INTERVAL: Duration = Duration::from_secs(60);
/// A watch's length when the client sets none (kube-apiserver's default range is 30 to 60 minutes).
const DEFAULT_WATCH: Duration = Duration::from_secs(1800);

const FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

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

    fn selects(&self, namespace: &str, entry: &Entry) -> bool {
        selector::matches(&self.labels, &entry.object["metadata"]["labels"])
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

/// A list (or Table) streamed an item at a time: an `-A` list of every operator in every namespace it watches is
/// written as it is serialized, never held whole.
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
    let items = selected.into_iter().enumerate().map(move |(index, (namespace, entry))| {
        let mut text = if index == 0 { Vec::new() } else { vec![b','] };
        let item = asked.item(&namespace, &entry, &entry.version);
        text.extend(serde_json::to_vec(&item).unwrap_or_default());
        Ok::<Bytes, Infallible>(Bytes::from(text))
    });
    let body = futures_util::stream::iter(
        std::iter::once(Ok(Bytes::from(head))).chain(items).chain(std::iter::once(Ok(Bytes::from_static(b"]}")))),
    );
    streamed(Body::from_stream(body))
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

struct Watching {
    cache: Arc<Cache>,
    asked: Asked,
    changes: Option<broadcast::Receiver<Arc<Logged>>>,
    pending: VecDeque<Bytes>,
    bookmarks: bool,
    deadline: tokio::time::Instant,
}

impl Watching {
    fn event(&self, event: &Event) -> Option<Bytes> {
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

    fn queue(&mut self, logged: &Logged) {
        for event in events(logged, self.asked.namespace.as_deref()) {
            if let Some(bytes) = self.event(&event) {
                self.pending.push_back(bytes);
            }
        }
    }
}

/// A watch from the `resourceVersion` asked (none or `0`: everything there is now, as ADDED events).
pub fn watch(cache: Arc<Cache>, asked: Asked, query: &BTreeMap<String, String>) -> Response {
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|seconds| seconds.parse::<u64>().ok())
        .map_or(DEFAULT_WATCH, Duration::from_secs);
    let mut watching = Watching {
        cache: cache.clone(),
        asked,
        changes: None,
        pending: VecDeque::new(),
        bookmarks: query.get("allowWatchBookmarks").is_some_and(|b| b == "true"),
        deadline: tokio::time::Instant::now() + timeout,
    };
    {
        let view = cache.view();
        match query.get("resourceVersion").map(String::as_str) {
            None | Some("") | Some("0") => {
                for (namespace, entry) in view.listed(watching.asked.namespace.as_deref()) {
                    let version = entry.version.clone();
                    let event = Event { kind: "ADDED", namespace, entry, version };
                    if let Some(bytes) = watching.event(&event) {
                        watching.pending.push_back(bytes);
                    }
                }
                watching.changes = Some(cache.subscribe(&view));
            }
            Some(version) => match view.since(version) {
                Ok(changes) => {
                    for logged in changes {
                        watching.queue(&logged);
                    }
                    watching.changes = Some(cache.subscribe(&view));
                }
                Err(error) => watching.pending.push_back(line("ERROR", &expired(&error.to_string()))),
            },
        }
    }
    let stream = futures_util::stream::unfold(watching, |mut watching| async move {
        loop {
            if let Some(next) = watching.pending.pop_front() {
                return Some((Ok::<Bytes, Infallible>(next), watching));
            }
            let deadline = watching.deadline;
            let bookmarks = watching.bookmarks;
            let changes = watching.changes.as_mut()?;
            tokio::select! {
                change = changes.recv() => match change {
                    Ok(logged) => watching.queue(&logged),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // Fallen behind the broadcast: ended as too old, so that the client lists again.
                        watching.changes = None;
                        let current = watching.cache.view().version();
                        watching.pending.push_back(line("ERROR", &expired(&format!("too old resource version: watch fell behind ({current})"))));
                    }
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
                () = tokio::time::sleep(BOOKMARK_INTERVAL), if bookmarks => {
                    let version = watching.cache.view().version();
                    let bookmark = json!({"kind": KIND, "apiVersion": format!("{GROUP}/{VERSION}"),
                                          "metadata": {"resourceVersion": version}});
                    watching.pending.push_back(line("BOOKMARK", &bookmark));
                }
                () = tokio::time::sleep_until(deadline) => return None,
            }
        }
    });
    streamed(Body::from_stream(stream))
}

//! Watch responses: a stream of newline-delimited events from the store, rendered for the requested version (as
//! Tables for `kubectl get -w`, or as PartialObjectMetadata for metadata watchers), with bookmarks after quiet
//! intervals, the initial events of `sendInitialEvents` closed by the `k8s.io/initial-events-end` bookmark,
//! `timeoutSeconds`, and ERROR events (410 Expired) in-stream.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use serde_json::{json, Value};

use super::content::wants_table;
use super::metadata::{self, Metadata};
use super::query::{filter, Query};
use super::table::{self, Include};
use crate::request::api_server::ApiServer;
use crate::request::types::Target;
use crate::status::ApiError;
use crate::storage::store::EventType;

fn watch_event(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    Bytes::from(line)
}

struct WatchState {
    api: Arc<ApiServer>,
    watch: Option<crate::storage::store::Watch>,
    target: Target,
    table: Option<Include>,
    metadata: Option<Metadata>,
    bookmarks: bool,
    pending: std::collections::VecDeque<Bytes>,
    deadline: tokio::time::Instant,
    last_revision: u64,
    done: bool,
}

pub fn watch(api: &Arc<ApiServer>, target: Target, query: &Query, headers: &HeaderMap) -> Result<Response, ApiError> {
    let filter = filter(&target, query)?;
    let metadata = metadata::requested(headers)?;
    if let Some(metadata) = &metadata {
        metadata.check_watch()?;
    }
    let from = match query.get("resourceVersion").map(String::as_str) {
        None | Some("") | Some("0") => None,
        Some(rv) => {
            Some(rv.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?)
        }
    };
    let send_initial = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    if send_initial && query.get("resourceVersionMatch").map(String::as_str) != Some("NotOlderThan") {
        return Err(ApiError::new(422, "Invalid", "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    }
    let timeout = query.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).unwrap_or(1800);
    let mut pending = std::collections::VecDeque::new();
    let start_from = if send_initial { None } else { from };
    let revision_now = api.store.revision();
    let id = target.resource.id();
    let watch = match api.store.watch(&id, filter, start_from) {
        Ok(watch) => Some(watch),
        Err(error) => {
            pending.push_back(watch_event("ERROR", &ApiError::from_store(error, &id).to_status()));
            None
        }
    };
    let mut state = WatchState {
        api: api.clone(),
        done: watch.is_none(),
        watch,
        table: wants_table(headers).then(|| Include::parse(query.get("includeObject").map(String::as_str))),
        metadata,
        bookmarks,
        pending,
        deadline: tokio::time::Instant::now() + Duration::from_secs(timeout),
        last_revision: revision_now,
        target,
    };
    if send_initial && !state.done {
        // The initial ADDED events are in the watch's backlog; the bookmark that ends them follows them.
        state.pending.push_back(Bytes::new());
    }
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        if let Some(next) = state.pending.pop_front() {
            if next.is_empty() {
                // Marker: drain the backlog, then announce the end of the initial events.
                return Some((Ok::<Bytes, Infallible>(initial_events(&mut state).await), state));
            }
            return Some((Ok(next), state));
        }
        if state.done {
            return None;
        }
        let interval = state.api.bookmark_interval;
        let deadline = state.deadline;
        let bookmarks = state.bookmarks;
        let watch = state.watch.as_mut()?;
        // Biased: an event or the watch's end (a restart) comes before a bookmark that is due at the same time.
        let line = tokio::select! {
            biased;
            event = watch.next() => match event {
                Ok(Some(event)) => {
                    state.last_revision = event.revision;
                    let object = render(&state, event.object);
                    watch_event(event.kind.as_str(), &object)
                }
                Ok(None) => return None,
                Err(error) => {
                    state.done = true;
                    let id = state.target.resource.id();
                    watch_event("ERROR", &ApiError::from_store(error, &id).to_status())
                }
            },
            () = tokio::time::sleep(interval), if bookmarks => watch_event("BOOKMARK", &bookmark(&state, false)),
            () = tokio::time::sleep_until(deadline) => return None,
        };
        Some((Ok(line), state))
    });
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert("content-type", HeaderValue::from_static("application/json"));
    response.headers_mut().insert("cache-control", HeaderValue::from_static("no-cache, private"));
    Ok(response)
}

/// The initial ADDED events of a `sendInitialEvents` watch, then the bookmark that ends them.
async fn initial_events(state: &mut WatchState) -> Bytes {
    let mut out = Vec::new();
    let mut backlog = Vec::new();
    if let Some(watch) = state.watch.as_mut() {
        while let Some(event) = watch.take_backlog() {
            backlog.push(event);
        }
    }
    for event in backlog {
        state.last_revision = state.last_revision.max(event.revision);
        let object = render(state, event.object);
        out.extend_from_slice(&watch_event(EventType::Added.as_str(), &object));
    }
    state.last_revision = state.last_revision.max(state.api.store.revision());
    out.extend_from_slice(&watch_event("BOOKMARK", &bookmark(state, true)));
    Bytes::from(out)
}

fn render(state: &WatchState, object: Value) -> Value {
    let object = state.api.present(&state.target.resource, object);
    if let Some(metadata) = &state.metadata {
        return as_metadata(metadata, object);
    }
    match state.table {
        Some(include) => table::table(
            &state.target.resource,
            std::slice::from_ref(&object),
            json!({"resourceVersion": object["metadata"]["resourceVersion"]}),
            include,
        ),
        None => object,
    }
}

fn bookmark(state: &WatchState, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": state.last_revision.max(state.api.store.revision()).to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": state.target.resource.kind, "apiVersion": state.target.resource.group_version(), "metadata": metadata});
    match &state.metadata {
        Some(asked) => as_metadata(asked, object),
        None => object,
    }
}

/// An event's object in the metadata form (checked acceptable when the watch began).
fn as_metadata(metadata: &Metadata, object: Value) -> Value {
    metadata.object(&object).unwrap_or(object)
}

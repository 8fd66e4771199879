//! A fault-injecting proxy in front of kube-apiserver, so that the fault suite runs on real Kubernetes as on the test
//! control plane: the controller's kubeconfig names it (plain HTTP on loopback), and it forwards each request to
//! kube-apiserver over TLS as it was sent (the controller's token, its impersonation headers, its `User-Agent`), so
//! kube-apiserver authenticates, authorizes and audits the controller as ever. What it injects is decided and worded
//! as the emulator does (`kube_emulator::faults`, `kube_emulator::http::fault_response`): a fraction of one user's
//! writes failed before or after they are made, clients cut off by `User-Agent`, and a restart of the watches: every
//! watch through it ended, and one resumed from before then answered `410 Expired` in its stream, as kube-apiserver's
//! watch cache answers after a restart (it starts at the revision of the moment). Everything passing through is the
//! controller's, so a write's user is the controller's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Request, Uri};
use axum::response::Response;
use futures_util::StreamExt as _;
use http_body_util::BodyExt as _;
use kube_emulator::audit::Record;
use kube_emulator::faults::{Decision, Fault, Faults};
use kube_emulator::outbound::{self, Destination, Trust};
use serde_json::json;

/// How long a request may wait for kube-apiserver's answer to begin (a watch's stream then runs on).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// The headers of one hop only, never forwarded (RFC 9110, 7.6.1).
const HOP_BY_HOP: [&str; 6] = ["connection", "keep-alive", "transfer-encoding", "upgrade", "te", "host"];

#[derive(Debug, thiserror::Error)]
pub enum FaultProxyError {
    #[error("the fault proxy cannot listen on loopback: {0}")]
    Listen(std::io::Error),
    #[error("kube-apiserver's address {0:?} is not https://<ip>:<port>")]
    Upstream(String),
}

/// The proxy, serving until dropped.
pub struct FaultProxy {
    /// Where it listens (plain HTTP).
    pub address: SocketAddr,
    state: Arc<ProxyState>,
    task: tokio::task::JoinHandle<()>,
}

struct ProxyState {
    upstream: SocketAddr,
    server_name: String,
    ca_pem: Vec<u8>,
    /// The user every request through the proxy is authenticated as, for the write faults' choice.
    user: String,
    faults: Faults,
    /// Ended watches: bumped by each restart.
    restarts: tokio::sync::watch::Sender<u64>,
    /// The oldest resourceVersion a watch may resume from since the last restart.
    oldest_watchable: AtomicU64,
    /// Watches answered `410 Expired`.
    expired: AtomicU64,
}

impl FaultProxy {
    /// Starts a proxy to kube-apiserver at `url` (`https://<ip>:<port>`, its serving certificate signed by
    /// `ca_pem`), for requests authenticated as `user`.
    pub async fn start(url: &str, ca_pem: &[u8], user: &str) -> Result<Self, FaultProxyError> {
        let upstream: SocketAddr = url
            .strip_prefix("https://")
            .and_then(|address| address.trim_end_matches('/').parse().ok())
            .ok_or_else(|| FaultProxyError::Upstream(url.to_owned()))?;
        let (restarts, _) = tokio::sync::watch::channel(0);
        let state = Arc::new(ProxyState {
            upstream,
            server_name: upstream.ip().to_string(),
            ca_pem: ca_pem.to_vec(),
            user: user.to_owned(),
            faults: Faults::default(),
            restarts,
            oldest_watchable: AtomicU64::new(0),
            expired: AtomicU64::new(0),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(FaultProxyError::Listen)?;
        let address = listener.local_addr().map_err(FaultProxyError::Listen)?;
        let router = axum::Router::new().fallback(forward).with_state(state.clone());
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                eprintln!("the fault proxy stopped: {error}");
            }
        });
        Ok(Self { address, state, task })
    }

    /// The URL a client is given.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The switch: write faults and clients cut off, as on the test control plane.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Ends every watch through the proxy; a watch resumed from a resourceVersion before `revision` (kube-apiserver's
    /// revision now) is answered `410 Expired` from now on.
    pub fn restart_watches(&self, revision: u64) {
        self.state.oldest_watchable.store(revision, Ordering::SeqCst);
        self.state.restarts.send_modify(|count| *count += 1);
    }

    /// How many watches were answered `410 Expired` so far.
    pub fn expired_watches(&self) -> u64 {
        self.state.expired.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request: cut off, failed, expired, or forwarded (and its answer lost, when the fault says so).
async fn forward(State(state): State<Arc<ProxyState>>, request: Request<Body>) -> Response {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => return plain(400, &format!("the request's body could not be read: {error}")),
    };
    let agent = parts.headers.get(http::header::USER_AGENT).and_then(|a| a.to_str().ok()).unwrap_or_default();
    if state.faults.is_cut_off(agent) {
        return kube_emulator::http::fault_unavailable();
    }
    let query = parts.uri.query().unwrap_or_default();
    let parameter =
        |name: &str| query.split('&').find_map(|pair| pair.strip_prefix(name).and_then(|rest| rest.strip_prefix('=')));
    let watching = matches!(parameter("watch"), Some("true" | "1"));
    let segments = kube_emulator::http::segments(parts.uri.path());
    let attributes = kube_emulator::auth::front::attributes(&parts.method, &segments, watching);
    let record = Record {
        verb: attributes.verb.clone(),
        api_group: attributes.api_group.clone(),
        resource: attributes.resource.clone(),
        name: attributes.name.clone(),
        ..Record::default()
    };
    if watching {
        if let Some(answer) = expired(&state, parameter("resourceVersion")) {
            return answer;
        }
    }
    let preconditioned =
        record.verb == "update" || (record.verb == "patch" && kube_emulator::http::names_resource_version(&body));
    let decision = state.faults.decide(&state.user, &record.verb, &record.resource, preconditioned);
    if let Decision::Refuse(fault) = decision {
        return kube_emulator::http::fault_response(fault, &record);
    }
    let answer = match send(&state, &parts.method, &parts.uri, &parts.headers, body).await {
        Ok(answer) => answer,
        Err(why) => return plain(502, &format!("kube-apiserver did not answer: {why}")),
    };
    if decision == Decision::LoseAnswer && answer.status().is_success() {
        return kube_emulator::http::fault_response(Fault::InternalErrorAfterWrite, &record);
    }
    let (mut head, incoming) = answer.into_parts();
    for name in HOP_BY_HOP {
        head.headers.remove(name);
    }
    if !watching {
        return Response::from_parts(head, Body::new(incoming));
    }
    // The watch runs until kube-apiserver ends it, or the next restart.
    let mut restarts = state.restarts.subscribe();
    restarts.mark_unchanged();
    let restarted = async move {
        let _ = restarts.changed().await;
    };
    let stream = Body::new(incoming).into_data_stream().take_until(Box::pin(restarted));
    Response::from_parts(head, Body::from_stream(stream))
}

/// A watch resumed from before the last restart: kube-apiserver's watch cache answers it with one ERROR event,
/// `410 Expired`, in a stream it then ends.
fn expired(state: &ProxyState, resource_version: Option<&str>) -> Option<Response> {
    let oldest = state.oldest_watchable.load(Ordering::SeqCst);
    let from: u64 = resource_version.and_then(|v| v.parse().ok()).filter(|v| *v > 0)?;
    if from >= oldest {
        return None;
    }
    state.expired.fetch_add(1, Ordering::SeqCst);
    let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("too old resource version: {from} ({oldest})"), "reason": "Expired", "code": 410});
    let event = format!("{}\n", json!({"type": "ERROR", "object": status}));
    let mut answer = Response::new(Body::from(event));
    answer.headers_mut().insert("content-type", http::HeaderValue::from_static("application/json"));
    Some(answer)
}

/// Sends the request on to kube-apiserver as it came (but the headers of one hop).
async fn send(
    state: &ProxyState,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<http::Response<hyper::body::Incoming>, String> {
    let destination = Destination {
        address: state.upstream,
        server_name: state.server_name.clone(),
        path_and_query: uri.path_and_query().map(|p| p.as_str().to_owned()).unwrap_or_else(|| "/".to_owned()),
        display: format!("kube-apiserver at {}", state.upstream),
    };
    let trust = Trust { ca_bundle: Some(&state.ca_pem), client: None };
    let mut request = http::Request::builder().method(method.as_str());
    for (name, value) in headers {
        if !HOP_BY_HOP.contains(&name.as_str()) {
            request = request.header(name, value);
        }
    }
    outbound::send(&destination, &trust, request, body, ANSWER_TIMEOUT).await
}

/// A plain-text answer of the proxy itself.
fn plain(code: u16, text: &str) -> Response {
    let mut answer = Response::new(Body::from(format!("{text}\n")));
    *answer.status_mut() = http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::BAD_GATEWAY);
    answer
}

//! The controller's client of the API server: kube's own stack (TLS and credentials from the configuration, its
//! base URL, authentication, extra headers, retry of 429/503/504 and HTTP tracing), over a hyper client whose
//! HTTP/1.1 connections keep small read buffers; the retry only when the server says when (`Retry-After`).
//!
//! Why not `kube::Client::try_from`: it builds hyper's client with hyper's defaults, under which a connection's read
//! buffer grows to the largest read it has seen, up to about 400 KB, and keeps that size for the connection's life.
//! kube speaks HTTP/1.1, one connection per request in flight, and every watch holds one for good: the controller
//! keeps about 100 connections open (a watch per component kind for the Operator loop, the Install, CSV, RBAC and
//! Installed API watches). A read buffer capped at [`READ_BUFFER`] reads a large list or event in more pieces (the
//! body is streamed, never held whole by hyper) and holds at most that much per connection: 2.7 to 3.8 MiB less RSS
//! at the scale bench. The cap also bounds a response's head (status line and headers): kube-apiserver's are a few
//! KiB. kube has no setting for it, hence this builder. The cap is measured by the scale bench's RSS: on loopback
//! a unit test sees hyper read in small pieces with or without it.
//!
//! Why the retry waits for `Retry-After` ([`ServerAskedRetry`]), as client-go's does: kube's policy retries every 429,
//! 503 and 504, fifteen times with a doubling backoff (minutes in all). kube-apiserver asks a client to come back
//! (API Priority and Fairness's 429, a shutting-down server's) with `Retry-After`; its 503 for an aggregated API
//! whose server is unavailable has none, and is the answer itself: discovery of such an API (a CSV's health, the
//! requirements of a CSV, an Install's discovery of kinds) held its pass for minutes on real Kubernetes.
//!
//! What differs from kube's builder: its tracing spans carry the request's method and URL and its errors say
//! "failed with status"; tower-http's default spans and error lines here carry the same facts in their own words.
//! No gzip (kube's feature is off here). A proxy is refused, as kube refuses one without its proxy features. The
//! expiry of an exec plugin's client certificate is not recorded on the client (kube keeps it private, and nothing
//! reads it): the controller's identity is a token or a certificate file.

use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ConfigExt};
use tower::retry::Policy;
use tower::{BoxError, ServiceBuilder};

/// The most a connection reads at once (its buffer may hold a little of the last read besides): hyper's smallest
/// allowed is 8 KiB, its default about 400 KB.
pub const READ_BUFFER: usize = 16 * 1024;

/// The most connections kept open without a request, for the next ones (kube's builder keeps every one, for 90 s).
/// A burst of reconciles opens as many connections as it has requests in flight, and each one kept holds its buffers
/// and TLS state (about 45 KiB): the scale bench's cold start left 111 open, about 60 of them watches' by a count of
/// the watches in the code. Beyond these, a request that finds none free opens one (client-go's HTTP/1.1 transport
/// keeps 25; its HTTP/2 one, a single connection).
pub const IDLE_CONNECTIONS: usize = 8;

/// A client of the cluster `config` describes, its connections' read buffers at most [`READ_BUFFER`].
pub fn client(config: kube::Config) -> Result<kube::Client, kube::Error> {
    if let Some(proxy_url) = config.proxy_url {
        return Err(refused_proxy(proxy_url));
    }
    // As kube does: TLS with aws-lc-rs unless the process chose a provider already.
    if tokio_rustls::rustls::crypto::CryptoProvider::get_default().is_none() {
        // The only error is another thread installing one meanwhile: then that one is used.
        let _ = tokio_rustls::rustls::crypto::aws_lc_rs::default_provider().install_default();
    }
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = config.rustls_https_connector_with_connector(http)?;
    let mut connector = hyper_timeout::TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let hyper = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .http1_max_buf_size(READ_BUFFER)
        .pool_max_idle_per_host(IDLE_CONNECTIONS)
        .build(connector);
    let retry =
        config.default_retry.then(|| tower::retry::RetryLayer::new(ServerAskedRetry(RetryPolicy::server_retry())));
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(retry)
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .map_err(tower::BoxError::from)
        .service(hyper);
    Ok(kube::Client::new(service, config.default_namespace))
}

/// kube's retry policy, for the answers that carry `Retry-After` alone (429, 503 or 504, as kube's policy decides,
/// waiting as long as the server asks or its backoff says): the others are the caller's to handle at once.
#[derive(Clone)]
struct ServerAskedRetry(RetryPolicy);

impl<Answer> Policy<http::Request<Body>, http::Response<Answer>, BoxError> for ServerAskedRetry {
    type Future = <RetryPolicy as Policy<http::Request<Body>, http::Response<Answer>, BoxError>>::Future;

    fn retry(
        &mut self,
        request: &mut http::Request<Body>,
        result: &mut Result<http::Response<Answer>, BoxError>,
    ) -> Option<Self::Future> {
        match result {
            Ok(answer) if answer.headers().contains_key(http::header::RETRY_AFTER) => self.0.retry(request, result),
            _ => None,
        }
    }

    fn clone_request(&mut self, request: &http::Request<Body>) -> Option<http::Request<Body>> {
        <RetryPolicy as Policy<http::Request<Body>, http::Response<Answer>, BoxError>>::clone_request(
            &mut self.0,
            request,
        )
    }
}

/// The error kube's builder gives for `proxy_url` without its proxy features.
fn refused_proxy(proxy_url: http::Uri) -> kube::Error {
    let proxy_url = Box::new(proxy_url);
    match proxy_url.scheme_str() {
        Some("http" | "https") => kube::Error::ProxyProtocolDisabled { proxy_url, protocol_feature: "kube/http-proxy" },
        Some("socks5") => kube::Error::ProxyProtocolDisabled { proxy_url, protocol_feature: "kube/socks5" },
        _ => kube::Error::ProxyProtocolUnsupported { proxy_url },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::http::{HeaderMap, StatusCode};
    use axum::response::IntoResponse;
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;

    /// What a request carried: its credentials and its user agent.
    type Seen = Arc<Mutex<Vec<(Option<String>, Option<String>)>>>;

    /// An API server that answers its first request with a 503 (with `Retry-After: retry_after` if any) and later
    /// ones with a ConfigMap far larger than a read buffer, noting each request's headers.
    async fn server(seen: Seen, retry_after: Option<&'static str>) -> String {
        let data = "x".repeat(1024 * 1024);
        let answer = move |headers: HeaderMap| {
            let seen = seen.clone();
            let data = data.clone();
            async move {
                let header = |name| headers.get(name).and_then(|value| value.to_str().ok()).map(str::to_owned);
                let mut seen = seen.lock().expect("lock");
                seen.push((header("authorization"), header("user-agent")));
                if seen.len() == 1 {
                    let mut answer = StatusCode::SERVICE_UNAVAILABLE.into_response();
                    if let Some(seconds) = retry_after {
                        answer.headers_mut().insert(http::header::RETRY_AFTER, http::HeaderValue::from_static(seconds));
                    }
                    return answer;
                }
                axum::Json(serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "big", "namespace": "default"}, "data": {"blob": data}}))
                .into_response()
            }
        };
        let router = axum::Router::new().route("/api/v1/namespaces/default/configmaps/big", axum::routing::get(answer));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move { axum::serve(listener, router).await });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn the_client_sends_credentials_and_headers_retries_a_503_and_reads_a_body_larger_than_its_buffer() {
        let seen = Seen::default();
        let url = server(seen.clone(), Some("1")).await;
        let mut config = kube::Config::new(url.parse().expect("url"));
        config.auth_info = serde_json::from_value(serde_json::json!({"token": "t0ken"})).expect("auth info");
        config.headers.push((http::header::USER_AGENT, http::HeaderValue::from_static("olmv2/test")));
        let client = client(config).expect("client");
        let big = kube::Api::<ConfigMap>::default_namespaced(client).get("big").await.expect("read after a retry");
        let blob = big.data.and_then(|mut data| data.remove("blob")).unwrap_or_default();
        assert_eq!(blob.len(), 1024 * 1024);
        assert!(blob.len() > READ_BUFFER * 60);
        let expected = (Some("Bearer t0ken".to_owned()), Some("olmv2/test".to_owned()));
        assert_eq!(*seen.lock().expect("lock"), [expected.clone(), expected]);
    }

    /// An aggregated API whose server is unavailable: kube-apiserver's 503 without `Retry-After` is the answer.
    #[tokio::test]
    async fn a_503_without_retry_after_is_answered_at_once() {
        let seen = Seen::default();
        let url = server(seen.clone(), None).await;
        let client = client(kube::Config::new(url.parse().expect("url"))).expect("client");
        let started = std::time::Instant::now();
        let answer = kube::Api::<ConfigMap>::default_namespaced(client).get("big").await;
        assert!(matches!(answer, Err(kube::Error::Api(ref status)) if status.code == 503), "{answer:?}");
        assert_eq!(seen.lock().expect("lock").len(), 1, "asked once");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    /// An API server that answers `GET /` only once `together` requests are in flight at once (so each came on a
    /// connection of its own), counting the connections open.
    async fn counting_server(together: usize) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let open = Arc::new(AtomicUsize::new(0));
        let barrier = Arc::new(tokio::sync::Barrier::new(together));
        let router = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let barrier = barrier.clone();
                async move {
                    barrier.wait().await;
                    "ok"
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let counted = open.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (open, router) = (counted.clone(), router.clone());
                open.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let service = hyper_util::service::TowerToHyperService::new(router);
                    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                    let _ = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service).await;
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        (format!("http://{address}"), open)
    }

    #[tokio::test]
    async fn connections_beyond_the_idle_few_are_closed_once_their_requests_are_answered() {
        use std::sync::atomic::Ordering;
        let together = IDLE_CONNECTIONS * 3;
        let (url, open) = counting_server(together).await;
        let client = client(kube::Config::new(url.parse().expect("url"))).expect("client");
        let requests = (0..together).map(|_| {
            let client = client.clone();
            async move {
                let request = http::Request::get("/").body(Vec::new()).expect("request");
                client.request_text(request).await.expect("answered")
            }
        });
        let answers = futures_util::future::join_all(requests).await;
        assert_eq!(answers.len(), together);
        let mut waited = 0;
        while open.load(Ordering::SeqCst) > IDLE_CONNECTIONS && waited < 100 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            waited += 1;
        }
        assert_eq!(open.load(Ordering::SeqCst), IDLE_CONNECTIONS, "the idle connections kept");
    }

    #[test]
    fn a_proxy_is_refused_as_kube_refuses_it_without_its_proxy_features() {
        let refused = |proxy: &str| {
            let mut config = kube::Config::new("https://cluster.example:6443".parse().expect("url"));
            config.proxy_url = Some(proxy.parse().expect("proxy"));
            client(config).err().map(|error| error.to_string()).unwrap_or_default()
        };
        assert!(refused("http://proxy.example:3128").contains("kube/http-proxy"));
        assert!(refused("socks5://proxy.example:1080").contains("kube/socks5"));
        assert!(refused("ftp://proxy.example").contains("unsupported protocol"));
    }
}

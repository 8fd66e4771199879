//! The process's HTTP endpoint: `/healthz` (the process is alive), `/readyz` (connected and serving) and `/metrics`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::metrics::Metrics;

/// What the endpoint reports on.
#[derive(Default)]
pub struct Health {
    ready: AtomicBool,
    /// Shared with the controllers, which record into it.
    pub metrics: Arc<Metrics>,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// The routes of the health and metrics endpoint.
pub fn router(health: Arc<Health>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .with_state(health)
}

async fn readyz(State(health): State<Arc<Health>>) -> Response {
    if health.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready").into_response()
    }
}

async fn metrics(State(health): State<Arc<Health>>) -> Response {
    match health.metrics.encode() {
        Ok(text) => ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], text)
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "failed to encode metrics");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get_path(health: Arc<Health>, path: &str) -> (StatusCode, String) {
        let response =
            router(health).oneshot(Request::get(path).body(Body::empty()).expect("request")).await.expect("response");
        let status = response.status();
        let body = response.into_body().collect().await.expect("body").to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn readyz_follows_the_ready_flag() {
        let health = Arc::new(Health::default());
        assert_eq!(get_path(health.clone(), "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        health.set_ready(true);
        assert_eq!(get_path(health.clone(), "/readyz").await.0, StatusCode::OK);
        assert_eq!(get_path(health, "/healthz").await, (StatusCode::OK, "ok".into()));
    }

    #[tokio::test]
    async fn metrics_are_exposed_as_openmetrics() {
        let (status, body) = get_path(Arc::new(Health::default()), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("olmv2_build_info"), "{body}");
    }
}

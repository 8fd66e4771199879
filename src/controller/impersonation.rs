//! Clients that act as another user (an Install's ServiceAccount) by sending every request, with that user's
//! impersonation header, through one client of the controller's own identity: one connection pool for them all.
//!
//! Why: kube builds a client per configuration, each with its own connection pool; a client per Install's account
//! held a hundred pools (their connections' buffers and TLS state, 5 to 7 MB at the scale bench). Kubernetes'
//! impersonation is a header of each request (`Impersonate-User`), checked per request by the API server, so one
//! pool can carry many users. The header is the whole of the identity, so it is set on every request, after every
//! `Impersonate-*` header already on it is taken away: no request goes out as the controller itself, or with a
//! group, uid or extra nobody chose, or as another account.

use std::task::{Context, Poll};

use futures_util::future::BoxFuture;
use http::header::{HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response};
use kube::client::Body;

/// What a header named with it carries: the identity to act as (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`).
const IMPERSONATE: &str = "impersonate-";

/// The header naming the user a request acts as.
const IMPERSONATE_USER: HeaderName = HeaderName::from_static("impersonate-user");

/// The controller's configuration without any impersonation of its own, for the client that carries others':
/// whatever the controller's kubeconfig impersonates would otherwise ride along with an account's requests.
pub fn carrier_config(mut config: kube::Config) -> kube::Config {
    config.auth_info.impersonate = None;
    config.auth_info.impersonate_groups = None;
    config.auth_info.impersonate_uid = None;
    config.auth_info.impersonate_user_extra = None;
    config.headers.retain(|(name, _)| !name.as_str().starts_with(IMPERSONATE));
    config
}

/// Whether `config` impersonates anyone of its own: if not, a client of it may carry others' requests as it is.
pub fn impersonates(config: &kube::Config) -> bool {
    let info = &config.auth_info;
    info.impersonate.is_some()
        || info.impersonate_groups.is_some()
        || info.impersonate_uid.is_some()
        || info.impersonate_user_extra.is_some()
        || config.headers.iter().any(|(name, _)| name.as_str().starts_with(IMPERSONATE))
}

/// A client acting as `user`, its requests sent by `carrier` (a client of [`carrier_config`]).
pub fn impersonating(carrier: &kube::Client, user: &str) -> Result<kube::Client, http::header::InvalidHeaderValue> {
    let service = Impersonate { carrier: carrier.clone(), user: HeaderValue::from_str(user)? };
    Ok(kube::Client::new(service, carrier.default_namespace()))
}

/// Sets `user` as the only identity `headers` ask to act as.
fn act_as(headers: &mut HeaderMap, user: &HeaderValue) {
    let asked: Vec<HeaderName> =
        headers.keys().filter(|name| name.as_str().starts_with(IMPERSONATE)).cloned().collect();
    for name in asked {
        headers.remove(name);
    }
    headers.insert(IMPERSONATE_USER, user.clone());
}

#[derive(Clone)]
struct Impersonate {
    carrier: kube::Client,
    user: HeaderValue,
}

impl tower::Service<Request<Body>> for Impersonate {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = BoxFuture<'static, Result<Response<Body>, kube::Error>>;

    /// Always ready: the carrier waits for its own readiness in `send`.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        act_as(request.headers_mut(), &self.user);
        let carrier = self.carrier.clone();
        Box::pin(async move { carrier.send(request).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A carrier that answers every request with an empty list and records the headers it was sent.
    fn recording_carrier() -> (kube::Client, Arc<Mutex<Vec<HeaderMap>>>) {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let recorded = sent.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            recorded.lock().expect("lock").push(request.headers().clone());
            let list = r#"{"apiVersion":"v1","kind":"ConfigMapList","metadata":{},"items":[]}"#;
            async move { Ok::<_, std::convert::Infallible>(Response::new(Body::from(list.as_bytes().to_vec()))) }
        });
        (kube::Client::new(service, "default"), sent)
    }

    fn impersonated(headers: &HeaderMap) -> Vec<(String, String)> {
        let mut found: Vec<(String, String)> = headers
            .iter()
            .filter(|(name, _)| name.as_str().starts_with(IMPERSONATE))
            .map(|(name, value)| (name.to_string(), value.to_str().unwrap_or_default().to_owned()))
            .collect();
        found.sort();
        found
    }

    #[tokio::test]
    async fn each_client_acts_as_its_own_user_through_one_carrier() {
        let (carrier, sent) = recording_carrier();
        let robot = impersonating(&carrier, "system:serviceaccount:ops:robot").expect("client");
        let other = impersonating(&carrier, "system:serviceaccount:team:other").expect("client");
        let configmaps = |client: &kube::Client| {
            kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(client.clone(), "ops")
        };
        configmaps(&robot).list(&Default::default()).await.expect("listed");
        configmaps(&other).list(&Default::default()).await.expect("listed");
        configmaps(&robot).list(&Default::default()).await.expect("listed");
        let sent = sent.lock().expect("lock").clone();
        let users: Vec<Vec<(String, String)>> = sent.iter().map(impersonated).collect();
        let user = |name: &str| vec![("impersonate-user".to_owned(), name.to_owned())];
        assert_eq!(
            users,
            [
                user("system:serviceaccount:ops:robot"),
                user("system:serviceaccount:team:other"),
                user("system:serviceaccount:ops:robot")
            ]
        );
    }

    #[test]
    fn a_request_asking_for_another_identity_acts_as_the_user_alone() {
        let mut headers = HeaderMap::new();
        headers.append("impersonate-user", HeaderValue::from_static("system:admin"));
        headers.append("impersonate-user", HeaderValue::from_static("mallory"));
        headers.append("impersonate-group", HeaderValue::from_static("system:masters"));
        headers.append("impersonate-uid", HeaderValue::from_static("1"));
        headers.append("impersonate-extra-scopes", HeaderValue::from_static("all"));
        headers.append("accept", HeaderValue::from_static("application/json"));
        act_as(&mut headers, &HeaderValue::from_static("system:serviceaccount:ops:robot"));
        assert_eq!(
            impersonated(&headers),
            [("impersonate-user".to_owned(), "system:serviceaccount:ops:robot".to_owned())]
        );
        assert_eq!(headers.get("accept").map(HeaderValue::as_bytes), Some(&b"application/json"[..]), "others kept");
    }

    #[test]
    fn the_carrier_impersonates_nobody_of_its_own() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().expect("url"));
        config.auth_info.impersonate = Some("system:admin".into());
        config.auth_info.impersonate_groups = Some(vec!["system:masters".into()]);
        config.auth_info.impersonate_uid = Some("1".into());
        config.auth_info.impersonate_user_extra = Some([("scopes".to_owned(), vec!["all".to_owned()])].into());
        config.headers = vec![
            (HeaderName::from_static("impersonate-group"), HeaderValue::from_static("system:masters")),
            (HeaderName::from_static("x-trace"), HeaderValue::from_static("1")),
        ];
        let mut by_header_only = carrier_config(config.clone());
        by_header_only.headers.push((HeaderName::from_static("impersonate-uid"), HeaderValue::from_static("1")));
        assert!(impersonates(&by_header_only), "a header alone impersonates");
        assert!(impersonates(&config));
        let carrier = carrier_config(config);
        assert!(!impersonates(&carrier));
        assert_eq!(carrier.auth_info.impersonate, None);
        assert_eq!(carrier.auth_info.impersonate_groups, None);
        assert_eq!(carrier.auth_info.impersonate_uid, None);
        assert_eq!(carrier.auth_info.impersonate_user_extra, None);
        let names: Vec<&str> = carrier.headers.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, ["x-trace"]);
    }
}

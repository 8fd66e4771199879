//! Who a request to the aggregated API server comes from. Only the aggregation layer calls it: a request is
//! authenticated when its TLS client certificate was verified against the request-header CA (the TLS server checks
//! the chain; see `tls::server`) and names one of the allowed front-proxy names; then, and only then, the user,
//! groups and extra attributes are read from the headers the API server publishes (`X-Remote-User`,
//! `X-Remote-Group`, `X-Remote-Extra-*`). Everything comes from the `kube-system/extension-apiserver-authentication`
//! ConfigMap kube-apiserver writes, as Kubernetes' delegated authentication reads it. Headers on any other
//! connection are ignored and the request refused: no one reaches the API around the aggregation layer's
//! authentication and authorization.

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::Client;

use crate::api::v2alpha1::Requester;
use crate::tls::PeerCertificate;

pub const CONFIGMAP_NAMESPACE: &str = "kube-system";
pub const CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

/// The request-header authentication settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeader {
    /// The CA of front-proxy client certificates (PEM).
    pub client_ca_pem: String,
    /// Common names a front-proxy certificate may carry; empty allows any the CA signed.
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_prefixes: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadRequestHeaderError {
    #[error("failed to read ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME}")]
    Get(#[source] kube::Error),
    #[error("ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} has no requestheader-client-ca-file")]
    NoClientCa,
    #[error("ConfigMap {CONFIGMAP_NAMESPACE}/{CONFIGMAP_NAME} key {key} is not a JSON list of strings")]
    Malformed { key: String },
}

fn list(data: &BTreeMap<String, String>, key: &str) -> Result<Vec<String>, ReadRequestHeaderError> {
    match data.get(key) {
        None => Ok(Vec::new()),
        Some(text) if text.trim().is_empty() => Ok(Vec::new()),
        Some(text) => serde_json::from_str(text).map_err(|_| ReadRequestHeaderError::Malformed { key: key.to_owned() }),
    }
}

impl RequestHeader {
    /// The settings the ConfigMap's data holds.
    pub fn from_data(data: &BTreeMap<String, String>) -> Result<Self, ReadRequestHeaderError> {
        let client_ca_pem = data
            .get("requestheader-client-ca-file")
            .filter(|pem| !pem.trim().is_empty())
            .cloned()
            .ok_or(ReadRequestHeaderError::NoClientCa)?;
        Ok(Self {
            client_ca_pem,
            allowed_names: list(data, "requestheader-allowed-names")?,
            username_headers: list(data, "requestheader-username-headers")?,
            uid_headers: list(data, "requestheader-uid-headers")?,
            group_headers: list(data, "requestheader-group-headers")?,
            extra_prefixes: list(data, "requestheader-extra-headers-prefix")?,
        })
    }

    /// Reads the ConfigMap.
    pub async fn read(client: &Client) -> Result<Self, ReadRequestHeaderError> {
        let map = Api::<ConfigMap>::namespaced(client.clone(), CONFIGMAP_NAMESPACE)
            .get(CONFIGMAP_NAME)
            .await
            .map_err(ReadRequestHeaderError::Get)?;
        Self::from_data(&map.data.unwrap_or_default())
    }
}

/// Why a request is not authenticated.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unauthenticated {
    #[error("no front-proxy client certificate")]
    NoCertificate,
    #[error("client certificate common name {0:?} is not an allowed front-proxy name")]
    NameNotAllowed(String),
    #[error("no user in the request headers")]
    NoUser,
}

fn common_name(der: &[u8]) -> Option<String> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let name = certificate.subject().iter_common_name().next()?.as_str().ok()?.to_owned();
    Some(name)
}

fn header_values<'a>(headers: &'a HeaderMap, name: &str) -> impl Iterator<Item = &'a str> {
    headers.get_all(name).iter().filter_map(|value| value.to_str().ok())
}

/// Percent-decoding of an extra key, as Kubernetes unescapes `X-Remote-Extra-` header names.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' && index + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
            if let Some(byte) = hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                out.push(byte);
                index += 3;
                continue;
            }
        }
        out.push(bytes[index]);
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The user a request acts for.
pub fn authenticate(
    settings: &RequestHeader,
    peer: &PeerCertificate,
    headers: &HeaderMap,
) -> Result<Requester, Unauthenticated> {
    let der = peer.0.as_deref().ok_or(Unauthenticated::NoCertificate)?;
    if !settings.allowed_names.is_empty() {
        let name = common_name(der).unwrap_or_default();
        if !settings.allowed_names.contains(&name) {
            return Err(Unauthenticated::NameNotAllowed(name));
        }
    }
    let first = |names: &[String]| {
        names.iter().find_map(|name| header_values(headers, name).find(|v| !v.is_empty()).map(str::to_owned))
    };
    let username = first(&settings.username_headers).ok_or(Unauthenticated::NoUser)?;
    let uid = first(&settings.uid_headers);
    let groups =
        settings.group_headers.iter().flat_map(|name| header_values(headers, name)).map(str::to_owned).collect();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for prefix in &settings.extra_prefixes {
        let prefix = prefix.to_ascii_lowercase();
        for (name, value) in headers {
            if let (Some(key), Ok(value)) = (name.as_str().strip_prefix(&prefix), value.to_str()) {
                extra.entry(unescape(key)).or_default().push(value.to_owned());
            }
        }
    }
    Ok(Requester { username, uid, groups, extra })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RequestHeader {
        let data: BTreeMap<String, String> = [
            ("requestheader-client-ca-file", "-----BEGIN CERTIFICATE-----\n..."),
            ("requestheader-allowed-names", r#"["front-proxy-client"]"#),
            ("requestheader-username-headers", r#"["X-Remote-User"]"#),
            ("requestheader-group-headers", r#"["X-Remote-Group"]"#),
            ("requestheader-extra-headers-prefix", r#"["X-Remote-Extra-"]"#),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        RequestHeader::from_data(&data).unwrap()
    }

    /// A certificate with the common name `name` (its chain is the TLS server's to check, not this module's).
    fn client_certificate(name: &str) -> PeerCertificate {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        PeerCertificate(Some(params.self_signed(&key).unwrap().der().to_vec()))
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                axum::http::HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn the_configmap_is_read_as_kubernetes_writes_it() {
        let settings = settings();
        assert_eq!(settings.allowed_names, ["front-proxy-client"]);
        assert_eq!(settings.username_headers, ["X-Remote-User"]);
        assert!(settings.uid_headers.is_empty());
        assert!(matches!(RequestHeader::from_data(&BTreeMap::new()), Err(ReadRequestHeaderError::NoClientCa)));
        let mut data: BTreeMap<String, String> = [("requestheader-client-ca-file".to_owned(), "pem".to_owned())].into();
        data.insert("requestheader-allowed-names".into(), "front-proxy-client".into());
        assert!(matches!(RequestHeader::from_data(&data), Err(ReadRequestHeaderError::Malformed { .. })));
    }

    #[test]
    fn the_user_comes_from_the_headers_of_a_front_proxy_connection_only() {
        let request = headers(&[
            ("x-remote-user", "alice"),
            ("x-remote-group", "team-a"),
            ("x-remote-group", "system:authenticated"),
            ("x-remote-extra-scopes", "a"),
            ("x-remote-extra-acme.com%2fproject", "p"),
        ]);
        let user = authenticate(&settings(), &client_certificate("front-proxy-client"), &request).unwrap();
        assert_eq!(user.username, "alice");
        assert_eq!(user.groups, ["team-a", "system:authenticated"]);
        assert_eq!(user.extra["scopes"], ["a"]);
        assert_eq!(user.extra["acme.com/project"], ["p"]);

        assert_eq!(
            authenticate(&settings(), &PeerCertificate(None), &request).unwrap_err(),
            Unauthenticated::NoCertificate,
            "headers without a front-proxy certificate are nobody's"
        );
        assert_eq!(
            authenticate(&settings(), &client_certificate("alice"), &request).unwrap_err(),
            Unauthenticated::NameNotAllowed("alice".into())
        );
        assert_eq!(
            authenticate(&settings(), &client_certificate("front-proxy-client"), &headers(&[])).unwrap_err(),
            Unauthenticated::NoUser
        );
    }
}

//! kube-apiserver's cluster authentication trust controller: the `kube-system/extension-apiserver-authentication`
//! ConfigMap, where aggregated API servers read which CA client certificates are verified against
//! (`client-ca-file`) and how to trust the front proxy (its CA, the names its certificate may have, its identity
//! headers). As kube-apiserver does, what this server requires is merged into what the ConfigMap holds (lists
//! united in order, CA bundles united without duplicates or certificates expired more than five minutes ago, written
//! as Go's `pem.Encode` writes them), and the ConfigMap is written only when that changes: created when missing,
//! put back when deleted, and left as it is (the controller retrying) when what it holds cannot be read.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::writes::{resource_type, target_of};
use crate::request::api_server::ApiServer;
use crate::request::types::{Target, WriteOptions};
use crate::storage::store::ResourceId;

pub const NAMESPACE: &str = "kube-system";
pub const NAME: &str = "extension-apiserver-authentication";

/// How this server authenticates, as kube-apiserver's `ClusterAuthenticationInfo`: PEM bundles (empty for none)
/// and the request-header settings, which are published only with a front-proxy CA.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterAuthenticationInfo {
    pub client_ca: String,
    pub request_header_ca: String,
    pub request_header_username_headers: Vec<String>,
    pub request_header_uid_headers: Vec<String>,
    pub request_header_group_headers: Vec<String>,
    pub request_header_extra_header_prefixes: Vec<String>,
    pub request_header_allowed_names: Vec<String>,
}

/// A string list as the ConfigMap holds it: Go's `json.Marshal` of a `[]string`.
fn list_value(list: &[String]) -> String {
    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
}

/// A string list read from the ConfigMap (`jsonDeserializeStringSlice`): an empty or missing value is no list.
fn read_list(data: &Value, key: &str) -> Result<Vec<String>, String> {
    match data[key].as_str().unwrap_or_default() {
        "" => Ok(Vec::new()),
        text => serde_json::from_str(text).map_err(|e| format!("{key}: {e}")),
    }
}

/// `lhs` then what `rhs` adds, each value once (`combineUniqueStringSlices`).
fn unite(lhs: &[String], rhs: &[String]) -> Vec<String> {
    let mut united: Vec<String> = Vec::new();
    for value in lhs.iter().chain(rhs) {
        if !united.contains(value) {
            united.push(value.clone());
        }
    }
    united
}

/// The certificates of a PEM bundle, as `cert.ParseCertsPEM` reads them: other blocks are skipped, a bundle
/// without certificates is an error.
fn certificates(pem: &str) -> Result<Vec<Vec<u8>>, String> {
    use tokio_rustls::rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut found = Vec::new();
    for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let der = certificate.map_err(|e| format!("invalid PEM: {e}"))?;
        x509_parser::parse_x509_certificate(&der).map_err(|e| format!("invalid certificate: {e}"))?;
        found.push(der.to_vec());
    }
    if found.is_empty() {
        return Err("data does not contain any valid RSA or ECDSA certificates".to_owned());
    }
    Ok(found)
}

/// Whether a certificate is still valid, with kube-apiserver's five minutes of slack.
fn unexpired(der: &[u8], now: i64) -> bool {
    x509_parser::parse_x509_certificate(der)
        .is_ok_and(|(_, certificate)| certificate.validity().not_after.timestamp() > now - 5 * 60)
}

/// A certificate as Go's `pem.Encode` writes it: base64 in lines of 64 characters.
fn encode(der: &[u8]) -> String {
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END CERTIFICATE-----\n");
    pem
}

/// The certificates of `lhs` then those `rhs` adds, without expired ones or duplicates (`combineCertLists`);
/// empty when none is left.
fn unite_bundles(lhs: &str, rhs: &str, now: i64) -> Result<String, String> {
    let mut all = Vec::new();
    for bundle in [lhs, rhs] {
        if !bundle.is_empty() {
            all.extend(certificates(bundle)?);
        }
    }
    let mut united: Vec<Vec<u8>> = Vec::new();
    for der in all.into_iter().filter(|der| unexpired(der, now)) {
        if !united.contains(&der) {
            united.push(der);
        }
    }
    Ok(united.iter().map(|der| encode(der)).collect())
}

/// What the ConfigMap's data says (`getClusterAuthenticationInfoFor`).
fn read_info(data: &Value) -> Result<ClusterAuthenticationInfo, String> {
    let bundle = |key: &str| -> Result<String, String> {
        let text = data[key].as_str().unwrap_or_default();
        if !text.is_empty() {
            certificates(text).map_err(|e| format!("{key}: {e}"))?;
        }
        Ok(text.to_owned())
    };
    Ok(ClusterAuthenticationInfo {
        client_ca: bundle("client-ca-file")?,
        request_header_ca: bundle("requestheader-client-ca-file")?,
        request_header_username_headers: read_list(data, "requestheader-username-headers")?,
        request_header_uid_headers: read_list(data, "requestheader-uid-headers")?,
        request_header_group_headers: read_list(data, "requestheader-group-headers")?,
        request_header_extra_header_prefixes: read_list(data, "requestheader-extra-headers-prefix")?,
        request_header_allowed_names: read_list(data, "requestheader-allowed-names")?,
    })
}

/// `existing` and `required` together (`combinedClusterAuthenticationInfo`).
fn combine(
    existing: &ClusterAuthenticationInfo,
    required: &ClusterAuthenticationInfo,
    now: i64,
) -> Result<ClusterAuthenticationInfo, String> {
    Ok(ClusterAuthenticationInfo {
        client_ca: unite_bundles(&existing.client_ca, &required.client_ca, now)?,
        request_header_ca: unite_bundles(&existing.request_header_ca, &required.request_header_ca, now)?,
        request_header_username_headers: unite(
            &existing.request_header_username_headers,
            &required.request_header_username_headers,
        ),
        request_header_uid_headers: unite(&existing.request_header_uid_headers, &required.request_header_uid_headers),
        request_header_group_headers: unite(
            &existing.request_header_group_headers,
            &required.request_header_group_headers,
        ),
        request_header_extra_header_prefixes: unite(
            &existing.request_header_extra_header_prefixes,
            &required.request_header_extra_header_prefixes,
        ),
        request_header_allowed_names: unite(
            &existing.request_header_allowed_names,
            &required.request_header_allowed_names,
        ),
    })
}

/// The ConfigMap's data for `info` (`getConfigMapDataFor`): the request-header keys only with a front-proxy CA.
pub fn data_for(info: &ClusterAuthenticationInfo) -> BTreeMap<String, String> {
    let mut data = BTreeMap::new();
    if !info.client_ca.is_empty() {
        data.insert("client-ca-file".to_owned(), info.client_ca.clone());
    }
    if info.request_header_ca.is_empty() {
        return data;
    }
    let lists = [
        ("requestheader-username-headers", &info.request_header_username_headers),
        ("requestheader-uid-headers", &info.request_header_uid_headers),
        ("requestheader-group-headers", &info.request_header_group_headers),
        ("requestheader-extra-headers-prefix", &info.request_header_extra_header_prefixes),
        ("requestheader-allowed-names", &info.request_header_allowed_names),
    ];
    for (key, list) in lists {
        data.insert(key.to_owned(), list_value(list));
    }
    data.insert("requestheader-client-ca-file".to_owned(), info.request_header_ca.clone());
    data
}

/// The data the ConfigMap should hold, given what it holds (`existing`, its `data` or null).
fn wanted_data(existing: &Value, required: &ClusterAuthenticationInfo, now: i64) -> Result<Value, String> {
    let combined = combine(&read_info(existing)?, required, now)?;
    let data: Map<String, Value> = data_for(&combined).into_iter().map(|(k, v)| (k, Value::String(v))).collect();
    Ok(Value::Object(data))
}

/// One sync of the ConfigMap (`syncConfigMap`), written as kube-apiserver.
pub(super) async fn publish(api: &ApiServer, required: &ClusterAuthenticationInfo) {
    let config_maps = ResourceId::new("", "configmaps");
    let Some(config_map_type) = resource_type(api, &config_maps) else { return };
    let existing = api.store.get(&config_maps, NAMESPACE, NAME).ok();
    let existing_data = existing.as_ref().map_or(Value::Null, |e| e["data"].clone());
    let now = jiff::Timestamp::now().as_second();
    let data = match wanted_data(&existing_data, required, now) {
        Ok(data) => data,
        Err(error) => {
            tracing::debug!(%error, "extension-apiserver-authentication unreadable; retried on the next pass");
            return;
        }
    };
    let options = WriteOptions::internal("kube-apiserver");
    let written = match existing {
        None => {
            let target =
                Target { resource: config_map_type, namespace: NAMESPACE.to_owned(), name: None, subresource: None };
            let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": NAME, "namespace": NAMESPACE}, "data": data});
            api.create(&target, object, &options).await.map(|_| ())
        }
        Some(_) if existing_data == data => return,
        Some(mut updated) => {
            updated["data"] = data;
            api.update(&target_of(&config_map_type, &updated), updated, &options).await.map(|_| ())
        }
    };
    if let Err(error) = written {
        tracing::debug!(%error, "extension-apiserver-authentication not written; retried on the next pass");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(name: &str, expired: bool) -> String {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::new()).expect("params");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.distinguished_name.push(rcgen::DnType::CommonName, name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        params.self_signed(&key).expect("certificate").pem()
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    fn required(client_ca: &str, front_proxy_ca: &str) -> ClusterAuthenticationInfo {
        ClusterAuthenticationInfo {
            client_ca: client_ca.to_owned(),
            request_header_ca: front_proxy_ca.to_owned(),
            request_header_username_headers: strings(&["X-Remote-User"]),
            request_header_uid_headers: Vec::new(),
            request_header_group_headers: strings(&["X-Remote-Group"]),
            request_header_extra_header_prefixes: strings(&["X-Remote-Extra-"]),
            request_header_allowed_names: strings(&["front-proxy-client"]),
        }
    }

    fn now() -> i64 {
        jiff::Timestamp::now().as_second()
    }

    #[test]
    fn the_data_has_kube_apiservers_keys_and_json_lists() {
        let (client_ca, front_proxy_ca) = (ca("client", false), ca("front-proxy", false));
        let data = wanted_data(&Value::Null, &required(&client_ca, &front_proxy_ca), now()).expect("data");
        assert_eq!(
            data,
            json!({
                "client-ca-file": client_ca,
                "requestheader-client-ca-file": front_proxy_ca,
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-uid-headers": "[]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            }),
            "rcgen's PEM is Go's: the bundles read back as they were given"
        );
        let without_front_proxy = wanted_data(&Value::Null, &required(&client_ca, ""), now()).expect("data");
        assert_eq!(without_front_proxy, json!({"client-ca-file": client_ca}), "no request-header keys without a CA");
        assert_eq!(wanted_data(&data, &required(&client_ca, &front_proxy_ca), now()).expect("data"), data, "stable");
    }

    #[test]
    fn what_the_config_map_holds_is_kept_and_united_with_what_is_required() {
        let (client_ca, front_proxy_ca, other_ca) = (ca("client", false), ca("front-proxy", false), ca("other", false));
        let existing = json!({
            "client-ca-file": format!("{other_ca}{client_ca}"),
            "requestheader-client-ca-file": ca("expired", true),
            "requestheader-allowed-names": "[\"aggregator\",\"front-proxy-client\"]",
            "requestheader-username-headers": "[\"X-Remote-User\"]",
            "requestheader-group-headers": "",
        });
        let data = wanted_data(&existing, &required(&client_ca, &front_proxy_ca), now()).expect("data");
        assert_eq!(data["client-ca-file"], format!("{other_ca}{client_ca}"), "held first, no duplicate");
        assert_eq!(data["requestheader-client-ca-file"], front_proxy_ca, "expired certificates dropped");
        assert_eq!(data["requestheader-allowed-names"], "[\"aggregator\",\"front-proxy-client\"]");
        assert_eq!(data["requestheader-group-headers"], "[\"X-Remote-Group\"]");
        assert_eq!(data["requestheader-uid-headers"], "[]");

        let unreadable = json!({"requestheader-allowed-names": "front-proxy-client"});
        assert!(wanted_data(&unreadable, &required(&client_ca, &front_proxy_ca), now()).is_err());
        let not_a_certificate =
            json!({"client-ca-file": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"});
        assert!(wanted_data(&not_a_certificate, &required(&client_ca, &front_proxy_ca), now()).is_err());
        assert!(wanted_data(&json!({"client-ca-file": "no PEM"}), &required(&client_ca, ""), now()).is_err());
    }
}

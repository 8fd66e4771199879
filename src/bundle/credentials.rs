//! Registry credentials in the docker config format, read from a file (`~/.docker/config.json`) or from
//! Kubernetes pull secrets (`kubernetes.io/dockerconfigjson`, `kubernetes.io/dockercfg`).

use std::collections::BTreeMap;

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;

type ParseFn = fn(&[u8]) -> Result<DockerCredentials, CredentialsError>;

/// Credentials by registry host.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DockerCredentials {
    by_registry: BTreeMap<String, (String, String)>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CredentialsError {
    #[error("the docker config is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("the credentials of {registry} are not valid: {reason}")]
    InvalidEntry { registry: String, reason: String },
    #[error("pull secret {name} has type {secret_type:?}, not a docker config type")]
    NotADockerSecret { name: String, secret_type: String },
    #[error("pull secret {name} has no {key} entry")]
    MissingKey { name: String, key: &'static str },
}

#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// The host (and port) a docker config key names: keys may be URLs such as `https://index.docker.io/v1/`.
pub fn registry_host(key: &str) -> String {
    let without_scheme = key.split_once("://").map_or(key, |(_, rest)| rest);
    without_scheme.split('/').next().unwrap_or_default().to_owned()
}

impl DockerCredentials {
    /// Parses `{"auths": {...}}` (config.json, `.dockerconfigjson`).
    pub fn from_config_json(bytes: &[u8]) -> Result<Self, CredentialsError> {
        let file: ConfigFile =
            serde_json::from_slice(bytes).map_err(|e| CredentialsError::InvalidJson(e.to_string()))?;
        Self::from_entries(file.auths)
    }

    /// Parses the legacy `.dockercfg` format: the `auths` map without its wrapper.
    pub fn from_dockercfg(bytes: &[u8]) -> Result<Self, CredentialsError> {
        let entries: BTreeMap<String, Entry> =
            serde_json::from_slice(bytes).map_err(|e| CredentialsError::InvalidJson(e.to_string()))?;
        Self::from_entries(entries)
    }

    fn from_entries(entries: BTreeMap<String, Entry>) -> Result<Self, CredentialsError> {
        let mut by_registry = BTreeMap::new();
        for (key, entry) in entries {
            let registry = registry_host(&key);
            let invalid =
                |reason: &str| CredentialsError::InvalidEntry { registry: registry.clone(), reason: reason.to_owned() };
            let pair = match (entry.username, entry.password, entry.auth) {
                (Some(user), Some(password), _) => (user, password),
                (_, _, Some(auth)) => {
                    let decoded = STANDARD.decode(auth.trim()).map_err(|_| invalid("auth is not base64"))?;
                    let text = String::from_utf8(decoded).map_err(|_| invalid("auth is not UTF-8"))?;
                    let (user, password) = text.split_once(':').ok_or_else(|| invalid("auth is not user:password"))?;
                    (user.to_owned(), password.to_owned())
                }
                _ => continue,
            };
            by_registry.insert(registry, pair);
        }
        Ok(Self { by_registry })
    }

    /// Reads the credentials of a pull secret.
    pub fn from_pull_secret(secret: &k8s_openapi::api::core::v1::Secret) -> Result<Self, CredentialsError> {
        let name = secret.metadata.name.clone().unwrap_or_default();
        let secret_type = secret.type_.clone().unwrap_or_default();
        let (key, parse): (&'static str, ParseFn) = match secret_type.as_str() {
            "kubernetes.io/dockerconfigjson" => (".dockerconfigjson", Self::from_config_json),
            "kubernetes.io/dockercfg" => (".dockercfg", Self::from_dockercfg),
            _ => return Err(CredentialsError::NotADockerSecret { name, secret_type }),
        };
        let data =
            secret.data.as_ref().and_then(|data| data.get(key)).ok_or(CredentialsError::MissingKey { name, key })?;
        parse(&data.0)
    }

    /// Adds `other`'s credentials; `other` wins for a registry both name.
    pub fn merge(&mut self, other: DockerCredentials) {
        self.by_registry.extend(other.by_registry);
    }

    /// The credentials to present to `registry`, anonymous when none are known.
    pub fn auth_for(&self, registry: &str) -> RegistryAuth {
        match self.by_registry.get(registry) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::ByteString;

    fn basic(auth: RegistryAuth) -> Option<(String, String)> {
        match auth {
            RegistryAuth::Basic(user, password) => Some((user, password)),
            _ => None,
        }
    }

    #[test]
    fn config_json_entries_resolve_by_host() {
        let json = br#"{"auths": {"https://registry.example:5000/v1/": {"auth": "YWxpY2U6czNjcmV0"}, "other.example": {"username": "bob", "password": "pw"}}}"#;
        let credentials = DockerCredentials::from_config_json(json).expect("parses");
        assert_eq!(basic(credentials.auth_for("registry.example:5000")), Some(("alice".into(), "s3cret".into())));
        assert_eq!(basic(credentials.auth_for("other.example")), Some(("bob".into(), "pw".into())));
        assert_eq!(basic(credentials.auth_for("unknown.example")), None);
    }

    #[test]
    fn pull_secrets_of_both_types_are_read() {
        let secret = |secret_type: &str, key: &str, value: &[u8]| Secret {
            metadata: kube::api::ObjectMeta { name: Some("pull".into()), ..Default::default() },
            type_: Some(secret_type.into()),
            data: Some([(key.to_owned(), ByteString(value.to_vec()))].into()),
            ..Default::default()
        };
        let json = secret(
            "kubernetes.io/dockerconfigjson",
            ".dockerconfigjson",
            br#"{"auths": {"r.example": {"auth": "dTpw"}}}"#,
        );
        assert_eq!(
            basic(DockerCredentials::from_pull_secret(&json).expect("json").auth_for("r.example")),
            Some(("u".into(), "p".into()))
        );
        let cfg = secret("kubernetes.io/dockercfg", ".dockercfg", br#"{"r.example": {"auth": "dTpw"}}"#);
        assert_eq!(
            basic(DockerCredentials::from_pull_secret(&cfg).expect("cfg").auth_for("r.example")),
            Some(("u".into(), "p".into()))
        );
        let opaque = secret("Opaque", "x", b"");
        assert_eq!(
            DockerCredentials::from_pull_secret(&opaque),
            Err(CredentialsError::NotADockerSecret { name: "pull".into(), secret_type: "Opaque".into() })
        );
    }

    #[test]
    fn malformed_entries_are_errors() {
        let json = br#"{"auths": {"r.example": {"auth": "not base64!"}}}"#;
        assert!(matches!(DockerCredentials::from_config_json(json), Err(CredentialsError::InvalidEntry { .. })));
        assert!(matches!(DockerCredentials::from_config_json(b"{"), Err(CredentialsError::InvalidJson(_))));
    }
}

//! Authentication as kube-apiserver does it: client certificates signed by the cluster CA (CN is the user, O the
//! groups), static bearer tokens, and ServiceAccount tokens from TokenRequest (bound to the account's uid, with an
//! expiry) that authenticate as `system:serviceaccount:<ns>:<name>`. Every authenticated user is also in
//! `system:authenticated`; a request without credentials is `system:anonymous`.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde_json::{json, Value};

use crate::status::ApiError;
use crate::storage::store::{ResourceId, Store};

pub const AUTHENTICATED: &str = "system:authenticated";
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
pub const MASTERS: &str = "system:masters";
pub const ANONYMOUS: &str = "system:anonymous";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Who a request is from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    pub fn new(username: &str, groups: &[&str]) -> Self {
        let mut groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        if !groups.iter().any(|g| g == AUTHENTICATED) {
            groups.push(AUTHENTICATED.to_owned());
        }
        Self { username: username.to_owned(), groups, ..Self::default() }
    }

    pub fn anonymous() -> Self {
        Self { username: ANONYMOUS.into(), groups: vec![UNAUTHENTICATED.into()], ..Self::default() }
    }

    pub fn service_account(namespace: &str, name: &str, uid: &str) -> Self {
        Self {
            username: format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"),
            uid: uid.to_owned(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
            extra: BTreeMap::new(),
        }
    }

    /// The namespace and name of a ServiceAccount user.
    pub fn service_account_of(username: &str) -> Option<(&str, &str)> {
        username.strip_prefix(SERVICE_ACCOUNT_PREFIX)?.split_once(':')
    }

    pub fn is_superuser(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// `userInfo` as AdmissionReview and the review kinds write it.
    pub fn to_json(&self) -> Value {
        let mut info = json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            info["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            info["extra"] = json!(self.extra);
        }
        info
    }
}

/// What a request carried to prove who it is from.
#[derive(Clone, Debug, Default)]
pub enum Credentials {
    /// A verified client certificate's subject.
    Certificate {
        common_name: String,
        organizations: Vec<String>,
    },
    Bearer(String),
    #[default]
    None,
}

/// The subject of a client certificate the TLS layer verified against the cluster CA.
pub fn certificate_subject(der: &[u8]) -> Option<Credentials> {
    let (_, certificate) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = certificate.subject();
    let common_name = subject.iter_common_name().next()?.as_str().ok()?.to_owned();
    let organizations = subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_owned)).collect();
    Some(Credentials::Certificate { common_name, organizations })
}

struct BoundToken {
    namespace: String,
    name: String,
    uid: String,
    expires: jiff::Timestamp,
}

/// The token authenticators.
#[derive(Default)]
pub struct Authenticator {
    static_tokens: RwLock<BTreeMap<String, UserInfo>>,
    service_account_tokens: RwLock<BTreeMap<String, BoundToken>>,
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

impl Authenticator {
    pub fn add_static_token(&self, token: &str, user: UserInfo) {
        self.static_tokens.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(token.to_owned(), user);
    }

    /// Issues a token for a ServiceAccount (TokenRequest), valid for `seconds` while the account exists.
    pub fn issue_service_account_token(&self, account: &Value, seconds: i64) -> (String, jiff::Timestamp) {
        let token = format!("sa.{}.{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let expires = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_secs(seconds))
            .unwrap_or(jiff::Timestamp::MAX);
        let bound = BoundToken {
            namespace: account["metadata"]["namespace"].as_str().unwrap_or_default().to_owned(),
            name: account["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            uid: account["metadata"]["uid"].as_str().unwrap_or_default().to_owned(),
            expires,
        };
        self.service_account_tokens
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(token.clone(), bound);
        (token, expires)
    }

    /// The user behind `credentials`: 401 for a token nobody issued, one that expired, or one whose ServiceAccount is
    /// gone or was recreated.
    pub fn authenticate(&self, store: &Store, credentials: &Credentials) -> Result<UserInfo, ApiError> {
        match credentials {
            Credentials::None => Ok(UserInfo::anonymous()),
            Credentials::Certificate { common_name, organizations } => {
                let groups: Vec<&str> = organizations.iter().map(String::as_str).collect();
                Ok(UserInfo::new(common_name, &groups))
            }
            Credentials::Bearer(token) => {
                if let Some(user) =
                    self.static_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(token)
                {
                    return Ok(user.clone());
                }
                let tokens = self.service_account_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                let bound = tokens.get(token).ok_or_else(unauthorized)?;
                if bound.expires < jiff::Timestamp::now() {
                    return Err(unauthorized());
                }
                let account = store
                    .get(&ResourceId::new("", "serviceaccounts"), &bound.namespace, &bound.name)
                    .map_err(|_| unauthorized())?;
                if account["metadata"]["uid"].as_str() != Some(bound.uid.as_str())
                    || !account["metadata"]["deletionTimestamp"].is_null()
                {
                    return Err(unauthorized());
                }
                Ok(UserInfo::service_account(&bound.namespace, &bound.name, &bound.uid))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_account_users_and_groups() {
        let user = UserInfo::service_account("olm", "installer", "u-1");
        assert_eq!(user.username, "system:serviceaccount:olm:installer");
        assert_eq!(user.groups, ["system:serviceaccounts", "system:serviceaccounts:olm", "system:authenticated"]);
        assert_eq!(UserInfo::service_account_of(&user.username), Some(("olm", "installer")));
        assert_eq!(UserInfo::service_account_of("alice"), None);
        assert_eq!(UserInfo::new("alice", &["team"]).groups, ["team", "system:authenticated"]);
    }

    #[test]
    fn tokens_authenticate_while_their_account_lives() {
        let store = Store::new(100);
        let accounts = ResourceId::new("", "serviceaccounts");
        let account = store.create(&accounts, json!({"metadata": {"name": "sa", "namespace": "ns"}})).expect("created");
        let authenticator = Authenticator::default();
        let (token, _) = authenticator.issue_service_account_token(&account, 3600);
        let user = authenticator.authenticate(&store, &Credentials::Bearer(token.clone())).expect("valid");
        assert_eq!(user.username, "system:serviceaccount:ns:sa");
        assert_eq!(user.uid, account["metadata"]["uid"].as_str().expect("uid"));
        let (expired, _) = authenticator.issue_service_account_token(&account, -1);
        assert_eq!(authenticator.authenticate(&store, &Credentials::Bearer(expired)).map_err(|e| e.code), Err(401));
        store.delete(&accounts, "ns", "sa", None).expect("deleted");
        store.create(&accounts, json!({"metadata": {"name": "sa", "namespace": "ns"}})).expect("recreated");
        assert_eq!(
            authenticator.authenticate(&store, &Credentials::Bearer(token)).map_err(|e| e.code),
            Err(401),
            "bound to the old uid"
        );
        assert_eq!(
            authenticator.authenticate(&store, &Credentials::Bearer("nobody".into())).map_err(|e| e.reason),
            Err("Unauthorized")
        );
        assert_eq!(
            authenticator.authenticate(&store, &Credentials::None).map(|u| u.username),
            Ok("system:anonymous".to_owned())
        );
    }
}

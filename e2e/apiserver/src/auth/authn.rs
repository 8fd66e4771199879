//! Authentication as kube-apiserver does it: client certificates signed by the cluster CA (CN is the user, O the
//! groups), static bearer tokens, and ServiceAccount tokens from TokenRequest (signed JWTs, `tokens`, bound to the
//! account's uid and to the object named, with an expiry and audiences) that authenticate as
//! `system:serviceaccount:<ns>:<name>`. Every authenticated user is also in
//! `system:authenticated`; a request without credentials is `system:anonymous`.

use std::collections::BTreeMap;
use std::sync::RwLock;

use serde_json::{json, Value};

use super::tokens::{Claims, KubernetesClaim, Reference, TokenError, TokenIssuer, ISSUER};
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

/// The object a token is bound to (TokenRequest's `boundObjectRef`): it authenticates only while that object lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Bound {
    Pod { name: String, uid: String, node: Option<(String, String)> },
    Secret { name: String, uid: String },
    Node { name: String, uid: String },
}

/// The token authenticators.
#[derive(Default)]
pub struct Authenticator {
    static_tokens: RwLock<BTreeMap<String, UserInfo>>,
    tokens: TokenIssuer,
}

fn unauthorized() -> ApiError {
    ApiError::new(401, "Unauthorized", "Unauthorized")
}

/// Whether the object `id`/`namespace`/`name` is stored with `uid` and not being deleted.
fn lives(store: &Store, id: &ResourceId, namespace: &str, name: &str, uid: &str) -> bool {
    store.get(id, namespace, name).is_ok_and(|object| {
        object["metadata"]["uid"].as_str() == Some(uid) && object["metadata"]["deletionTimestamp"].is_null()
    })
}

impl Authenticator {
    pub fn add_static_token(&self, token: &str, user: UserInfo) {
        self.static_tokens.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(token.to_owned(), user);
    }

    /// Issues a token for a ServiceAccount (TokenRequest): valid for `seconds` from now for `audiences`, while the
    /// account (and the object it is `bound` to) exists.
    pub fn issue_service_account_token(
        &self,
        account: &Value,
        audiences: &[String],
        bound: Option<&Bound>,
        seconds: i64,
    ) -> Result<(String, jiff::Timestamp), TokenError> {
        let now = jiff::Timestamp::now();
        let expires = now.checked_add(jiff::SignedDuration::from_secs(seconds)).unwrap_or(jiff::Timestamp::MAX);
        let text = |key: &str| account["metadata"][key].as_str().unwrap_or_default().to_owned();
        let reference = |name: &str, uid: &str| Some(Reference { name: name.to_owned(), uid: uid.to_owned() });
        let mut kubernetes = KubernetesClaim {
            namespace: text("namespace"),
            serviceaccount: Reference { name: text("name"), uid: text("uid") },
            ..KubernetesClaim::default()
        };
        match bound {
            Some(Bound::Pod { name, uid, node }) => {
                kubernetes.pod = reference(name, uid);
                kubernetes.node = node.as_ref().and_then(|(name, uid)| reference(name, uid));
            }
            Some(Bound::Secret { name, uid }) => kubernetes.secret = reference(name, uid),
            Some(Bound::Node { name, uid }) => kubernetes.node = reference(name, uid),
            None => {}
        }
        let claims = Claims {
            aud: audiences.to_vec(),
            exp: expires.as_second(),
            iat: now.as_second(),
            iss: ISSUER.to_owned(),
            jti: uuid::Uuid::new_v4().to_string(),
            sub: format!("{SERVICE_ACCOUNT_PREFIX}{}:{}", kubernetes.namespace, kubernetes.serviceaccount.name),
            kubernetes,
            nbf: now.as_second(),
        };
        Ok((self.tokens.issue(&claims)?, expires))
    }

    /// The issuer's JWK set (`/openid/v1/jwks`).
    pub fn jwks(&self) -> Result<Value, TokenError> {
        self.tokens.jwks()
    }

    /// The user a ServiceAccount token proves, as kube-apiserver's validator checks it: signed here for the API's
    /// audience and in date, its account (and the pod, secret or node it is bound to) still there with the uid it
    /// was issued for and not being deleted.
    fn service_account(
        &self,
        store: &Store,
        token: &str,
        audiences: &[&str],
    ) -> Result<(UserInfo, Vec<String>), ApiError> {
        let claims =
            self.tokens.verify(token, audiences, jiff::Timestamp::now().as_second()).map_err(|_| unauthorized())?;
        let kubernetes = &claims.kubernetes;
        let namespace = kubernetes.namespace.as_str();
        let account = &kubernetes.serviceaccount;
        let core = |resource: &str| ResourceId::new("", resource);
        let mut alive = lives(store, &core("serviceaccounts"), namespace, &account.name, &account.uid);
        if let Some(pod) = &kubernetes.pod {
            alive &= lives(store, &core("pods"), namespace, &pod.name, &pod.uid);
        } else if let Some(node) = &kubernetes.node {
            alive &= lives(store, &core("nodes"), "", &node.name, &node.uid);
        }
        if let Some(secret) = &kubernetes.secret {
            alive &= lives(store, &core("secrets"), namespace, &secret.name, &secret.uid);
        }
        if !alive {
            return Err(unauthorized());
        }
        let mut user = UserInfo::service_account(namespace, &account.name, &account.uid);
        let mut extra = |key: &str, value: &str| {
            user.extra.insert(format!("authentication.kubernetes.io/{key}"), vec![value.to_owned()]);
        };
        extra("credential-id", &format!("JTI={}", claims.jti));
        if let Some(pod) = &kubernetes.pod {
            extra("pod-name", &pod.name);
            extra("pod-uid", &pod.uid);
        }
        if let Some(node) = &kubernetes.node {
            extra("node-name", &node.name);
            extra("node-uid", &node.uid);
        }
        let valid_for = claims.aud.iter().filter(|a| audiences.contains(&a.as_str())).cloned().collect();
        Ok((user, valid_for))
    }

    /// A TokenReview's answer: the user behind `token` if it is valid for one of `audiences` (the API's when none
    /// is asked for), and the audiences it is valid for (all those asked, for a static token, which has none).
    pub fn review(
        &self,
        store: &Store,
        token: &str,
        audiences: &[String],
    ) -> Result<(UserInfo, Vec<String>), ApiError> {
        let asked: Vec<&str> =
            if audiences.is_empty() { vec![ISSUER] } else { audiences.iter().map(String::as_str).collect() };
        if let Some(user) = self.static_tokens.read().unwrap_or_else(std::sync::PoisonError::into_inner).get(token) {
            return Ok((user.clone(), asked.iter().map(|a| (*a).to_owned()).collect()));
        }
        self.service_account(store, token, &asked)
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
                self.service_account(store, token, &[ISSUER]).map(|(user, _)| user)
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
        let api = [ISSUER.to_owned()];
        let (token, _) = authenticator.issue_service_account_token(&account, &api, None, 3600).expect("issued");
        let user = authenticator.authenticate(&store, &Credentials::Bearer(token.clone())).expect("valid");
        assert_eq!(user.username, "system:serviceaccount:ns:sa");
        assert_eq!(user.uid, account["metadata"]["uid"].as_str().expect("uid"));
        assert!(user.extra["authentication.kubernetes.io/credential-id"][0].starts_with("JTI="));
        let (elsewhere, _) =
            authenticator.issue_service_account_token(&account, &["vault".into()], None, 3600).expect("issued");
        assert_eq!(
            authenticator.authenticate(&store, &Credentials::Bearer(elsewhere)).map_err(|e| e.code),
            Err(401),
            "a token for another audience"
        );
        let secrets = ResourceId::new("", "secrets");
        let secret = store.create(&secrets, json!({"metadata": {"name": "s", "namespace": "ns"}})).expect("created");
        let bound = Bound::Secret { name: "s".into(), uid: secret["metadata"]["uid"].as_str().expect("uid").into() };
        let (bound, _) = authenticator.issue_service_account_token(&account, &api, Some(&bound), 3600).expect("issued");
        assert!(authenticator.authenticate(&store, &Credentials::Bearer(bound.clone())).is_ok());
        store.delete(&secrets, "ns", "s", None).expect("deleted");
        assert_eq!(
            authenticator.authenticate(&store, &Credentials::Bearer(bound)).map_err(|e| e.code),
            Err(401),
            "its secret gone"
        );
        let (expired, _) = authenticator.issue_service_account_token(&account, &api, None, -1).expect("issued");
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

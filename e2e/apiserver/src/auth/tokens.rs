//! ServiceAccount tokens as kube-apiserver issues them (`pkg/serviceaccount`): RS256 JWTs signed by one RSA key whose
//! id is the unpadded base64url SHA-256 of its public key (PKIX DER), carrying `aud`, `exp`, `iat`, `iss`, `jti`,
//! `nbf`, `sub` (`system:serviceaccount:<ns>:<name>`) and the `kubernetes.io` claim (namespace, ServiceAccount name
//! and uid, and the object the token is bound to); the key is published as a JWK set and OpenID discovery document.
//! The key is made on first use: a cluster that issues no token pays nothing for it. Verification refuses a token
//! signed by another key, for another issuer or audience, not yet valid or expired (without go-jose's minute of
//! leeway: never more lenient than Kubernetes).

use std::sync::OnceLock;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The issuer kube-apiserver is started with here (`--service-account-issuer`); also the API's audience.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// A `{name, uid}` reference of the `kubernetes.io` claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    pub uid: String,
}

/// The `kubernetes.io` private claim; keys in the order Go's encoder writes them (sorted, through go-jose's map).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesClaim {
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Reference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<Reference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<Reference>,
    pub serviceaccount: Reference,
}

/// A token's claims, sorted as kube-apiserver writes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    pub aud: Vec<String>,
    pub exp: i64,
    pub iat: i64,
    pub iss: String,
    pub jti: String,
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaim,
    pub nbf: i64,
    pub sub: String,
}

/// Why a token was refused (the client only ever sees `401 Unauthorized`).
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("failed to generate the service-account signing key: {0}")]
    GenerateKey(String),
    #[error("failed to sign the token: {0}")]
    Sign(String),
    #[error("the token is invalid: {0}")]
    Invalid(String),
}

struct SigningKey {
    kid: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
    jwk: Value,
}

/// The issuer of ServiceAccount tokens.
#[derive(Default)]
pub struct TokenIssuer {
    key: OnceLock<Result<SigningKey, String>>,
}

fn generate() -> Result<SigningKey, String> {
    let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256).map_err(|e| e.to_string())?;
    let kid = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(Sha256::digest(rcgen::PublicKeyData::subject_public_key_info(&pair)));
    let encoding = EncodingKey::from_rsa_pem(pair.serialize_pem().as_bytes()).map_err(|e| e.to_string())?;
    let public = jsonwebtoken::jwk::Jwk::from_encoding_key(&encoding, Algorithm::RS256).map_err(|e| e.to_string())?;
    let decoding = DecodingKey::from_jwk(&public).map_err(|e| e.to_string())?;
    let jsonwebtoken::jwk::AlgorithmParameters::RSA(rsa) = &public.algorithm else {
        return Err("not an RSA key".to_owned());
    };
    let jwk = json!({"use": "sig", "kty": "RSA", "kid": kid, "alg": "RS256", "n": rsa.n, "e": rsa.e});
    Ok(SigningKey { kid, encoding, decoding, jwk })
}

impl TokenIssuer {
    fn key(&self) -> Result<&SigningKey, TokenError> {
        self.key.get_or_init(generate).as_ref().map_err(|reason| TokenError::GenerateKey(reason.clone()))
    }

    /// A signed token of `claims`.
    pub fn issue(&self, claims: &Claims) -> Result<String, TokenError> {
        let key = self.key()?;
        let mut header = Header::new(Algorithm::RS256);
        header.typ = None;
        header.kid = Some(key.kid.clone());
        jsonwebtoken::encode(&header, claims, &key.encoding).map_err(|e| TokenError::Sign(e.to_string()))
    }

    /// The claims of `token` if this issuer signed it with its key, for [`ISSUER`], for one of `audiences`, and
    /// valid at `now` (seconds).
    pub fn verify(&self, token: &str, audiences: &[&str], now: i64) -> Result<Claims, TokenError> {
        let key = self.key()?;
        let invalid = |e: jsonwebtoken::errors::Error| TokenError::Invalid(e.to_string());
        let header = jsonwebtoken::decode_header(token).map_err(invalid)?;
        if header.kid.as_deref() != Some(key.kid.as_str()) {
            return Err(TokenError::Invalid("signed by an unknown key".to_owned()));
        }
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(audiences);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub", "nbf"]);
        // Checked below against the clock given, without leeway.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.leeway = 0;
        let claims = jsonwebtoken::decode::<Claims>(token, &key.decoding, &validation).map_err(invalid)?.claims;
        if claims.exp <= now {
            return Err(TokenError::Invalid("expired".to_owned()));
        }
        if claims.nbf > now {
            return Err(TokenError::Invalid("not valid yet".to_owned()));
        }
        Ok(claims)
    }

    /// The JWK set of `/openid/v1/jwks`.
    pub fn jwks(&self) -> Result<Value, TokenError> {
        Ok(json!({"keys": [self.key()?.jwk.clone()]}))
    }
}

/// The OpenID discovery document of `/.well-known/openid-configuration`, its key set served at `host`.
pub fn discovery(host: &str) -> Value {
    json!({
        "issuer": ISSUER,
        "jwks_uri": format!("https://{host}/openid/v1/jwks"),
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(now: i64, seconds: i64) -> Claims {
        Claims {
            aud: vec![ISSUER.to_owned()],
            exp: now + seconds,
            iat: now,
            iss: ISSUER.to_owned(),
            jti: "j".into(),
            kubernetes: KubernetesClaim {
                namespace: "ns".into(),
                serviceaccount: Reference { name: "sa".into(), uid: "u".into() },
                ..KubernetesClaim::default()
            },
            nbf: now,
            sub: "system:serviceaccount:ns:sa".into(),
        }
    }

    fn decoded(part: &str) -> Value {
        serde_json::from_slice(&base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(part).expect("base64url"))
            .expect("JSON")
    }

    #[test]
    fn a_token_is_an_rs256_jwt_with_kubernetes_claims_verified_only_as_issued() {
        let issuer = TokenIssuer::default();
        let now = 1_800_000_000;
        let token = issuer.issue(&claims(now, 600)).expect("issued");
        let parts: Vec<&str> = token.split('.').collect();
        assert_eq!(parts.len(), 3);
        let kid = issuer.jwks().expect("jwks")["keys"][0]["kid"].clone();
        assert_eq!(decoded(parts[0]), json!({"alg": "RS256", "kid": kid}));
        let payload = decoded(parts[1]);
        assert_eq!(payload["kubernetes.io"], json!({"namespace": "ns", "serviceaccount": {"name": "sa", "uid": "u"}}));
        assert_eq!(payload["sub"], "system:serviceaccount:ns:sa");

        assert_eq!(issuer.verify(&token, &[ISSUER], now + 1).expect("valid"), claims(now, 600));
        assert!(issuer.verify(&token, &["elsewhere"], now + 1).is_err(), "another audience");
        assert!(issuer.verify(&token, &[ISSUER], now + 600).is_err(), "expired");
        assert!(issuer.verify(&token, &[ISSUER], now - 1).is_err(), "not valid yet");
        let forged = format!("{}.{}.{}", parts[0], parts[1].replace('s', "t"), parts[2]);
        assert!(issuer.verify(&forged, &[ISSUER], now + 1).is_err(), "a changed payload");
        let other = TokenIssuer::default().issue(&claims(now, 600)).expect("issued elsewhere");
        assert!(issuer.verify(&other, &[ISSUER], now + 1).is_err(), "another key");
        let mut foreign = claims(now, 600);
        foreign.iss = "https://elsewhere".into();
        let foreign = issuer.issue(&foreign).expect("issued");
        assert!(issuer.verify(&foreign, &[ISSUER], now + 1).is_err(), "another issuer");
    }

    #[test]
    fn the_key_set_and_discovery_document_are_kubes() {
        let issuer = TokenIssuer::default();
        let jwks = issuer.jwks().expect("jwks");
        let key = &jwks["keys"][0];
        assert_eq!(
            (key["kty"].as_str(), key["alg"].as_str(), key["use"].as_str()),
            (Some("RSA"), Some("RS256"), Some("sig"))
        );
        assert_eq!(key["e"], "AQAB");
        assert_eq!(key["kid"].as_str().map(str::len), Some(43), "base64url of a SHA-256, unpadded");
        let document = discovery("127.0.0.1:6443");
        assert_eq!(document["jwks_uri"], "https://127.0.0.1:6443/openid/v1/jwks");
        assert_eq!(document["issuer"], ISSUER);
    }
}

//! The names of the objects a conversion generates, as OLM gives them, so that a user moving from OLM finds the same
//! objects: RBAC named by OLM v0's hash of the CSV and the permission, webhook Services and certificate Secrets
//! named after their Deployment within a DNS label's 63 characters (OLM v1), webhook configurations after their
//! `generateName`. Pure functions.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::gohash;
use crate::api::v1alpha1::StrategyDeploymentPermissions;

/// The longest object name OLM generates, a DNS label's (Services must be DNS-1035 labels).
pub const MAX_NAME_LENGTH: usize = 63;

/// `base` cut at a character boundary to at most `length` bytes, as Go slices a name (ASCII in practice).
fn cut(base: &str, length: usize) -> &str {
    let mut end = length.min(base.len());
    while !base.is_char_boundary(end) {
        end -= 1;
    }
    &base[..end]
}

/// The Role, RoleBinding, ClusterRole and ClusterRoleBinding name of a CSV permission, as OLM v0 names them
/// (`generateName` in `pkg/controller/registry/resolver/rbac.go`): `<csv>-<serviceaccount>-<hash>`, the prefix
/// cut so that the name fits 63 characters, the hash covering the CSV's name, the account and the rules. Unique per
/// (CSV, service account, rules) and stable. OLM v1 has the same shape but hashes the permission alone, so two CSVs
/// whose names share the prefix that survives the cut would collide; v0's hash does not let them.
///
/// Like v0, a prefix exactly as long as 63 less the hash keeps its full length, one character over 63: RBAC names
/// may be up to 253 characters long, and the name stays OLM v0's.
pub fn rbac_name(csv: &str, permission: &StrategyDeploymentPermissions) -> String {
    let base = format!("{csv}-{}", permission.service_account_name);
    let hashed = if csv.is_empty() {
        format!("{{\"permission\":{}}}", gohash::permission(permission))
    } else {
        format!("{{\"name\":{},\"permission\":{}}}", gohash::string(csv), gohash::permission(permission))
    };
    let hash = gohash::deep_hash(&hashed);
    let prefix =
        if base.len() + hash.len() > MAX_NAME_LENGTH { cut(&base, MAX_NAME_LENGTH - hash.len() - 1) } else { &base };
    format!("{prefix}-{hash}")
}

/// `<base>-<suffix>` within 63 characters, the base cut when needed (OLM v1's `ObjectNameForBaseAndSuffix`, whose
/// bound lets one name of 64 characters through; this one does not).
pub fn with_suffix(base: &str, suffix: &str) -> String {
    let base = cut(base, MAX_NAME_LENGTH.saturating_sub(suffix.len() + 1));
    format!("{base}-{suffix}")
}

/// The Service in front of a Deployment serving webhooks: `<deployment>-service` as OLM names it, dots replaced
/// (a Service name is a DNS-1035 label) and cut to 63 characters as OLM v1 does.
pub fn webhook_service_name(deployment: &str) -> String {
    with_suffix(&deployment.replace('.', "-"), "service")
}

/// The TLS Secret of a webhook Service: `<service>-cert`, within 63 characters.
pub fn webhook_secret_name(service: &str) -> String {
    with_suffix(service, "cert")
}

/// The name of a webhook configuration and of its one webhook, from the CSV's `generateName`: without the trailing
/// `-` or `.` that would make it an invalid name (OLM v1 trims one `-`).
pub fn webhook_name(generate_name: &str) -> String {
    generate_name.trim_end_matches(['-', '.']).to_owned()
}

/// A name `<base>-<hash of content>` of at most 63 characters, stable for the same content: the names of the
/// grants an Install's approval creates.
pub fn generated_name(base: &str, content: &Value) -> String {
    let digest = Sha256::digest(content.to_string().as_bytes());
    let hash: String = digest.iter().take(5).map(|byte| format!("{byte:02x}")).collect();
    let mut prefix: String = base.chars().take(MAX_NAME_LENGTH - 1 - hash.len()).collect();
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    format!("{prefix}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn permission(account: &str, verbs: &[&str]) -> StrategyDeploymentPermissions {
        serde_json::from_value(json!({"serviceAccountName": account,
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": verbs}]}))
        .expect("permission")
    }

    #[test]
    fn rbac_names_are_olm_v0s() {
        // sha224 of {"name":"plumbus.v2.0.0-alpha","permission":{...}} plus a newline, in base 62.
        assert_eq!(
            rbac_name("plumbus.v2.0.0-alpha", &permission("plumbus-operator", &["get"])),
            "plumbus.v2.0.0-alpha-plu-8eGZTvtQ3aIobDG4hMLvZDmqBygoODvgCy6DDL"
        );
    }

    #[test]
    fn two_accounts_of_one_csv_with_the_same_rules_get_different_names() {
        // The accounts differ only after the part of the prefix that survives the cut.
        let csv = "an-operator-with-a-rather-long-name.v1.22.333";
        let first = rbac_name(csv, &permission("operator-controller-manager", &["get"]));
        let second = rbac_name(csv, &permission("operator-webhook-server", &["get"]));
        assert_eq!(first[..24], second[..24]);
        assert_ne!(first, second);
        assert!(first.len() <= MAX_NAME_LENGTH + 1 && second.len() <= MAX_NAME_LENGTH + 1);
    }

    #[test]
    fn csvs_sharing_the_kept_prefix_get_different_names() {
        let account = permission("manager", &["get"]);
        let a = rbac_name("an-operator-whose-name-is-long.v1.0.0", &account);
        let b = rbac_name("an-operator-whose-name-is-long.v1.0.1", &account);
        assert_ne!(a, b);
        assert_eq!(a[..24], b[..24], "the same prefix: only the hash tells them apart");
    }

    #[test]
    fn rbac_names_are_stable_and_follow_the_rules() {
        let csv = "plumbus.v2.0.0-alpha";
        assert_eq!(rbac_name(csv, &permission("p", &["get"])), rbac_name(csv, &permission("p", &["get"])));
        assert_ne!(rbac_name(csv, &permission("p", &["get"])), rbac_name(csv, &permission("p", &["list"])));
        let short = rbac_name("a", &permission("b", &["get"]));
        assert!(short.starts_with("a-b-"), "{short}");
    }

    #[test]
    fn webhook_service_and_secret_names_are_dns_labels() {
        assert_eq!(webhook_service_name("plumbus-operator"), "plumbus-operator-service");
        assert_eq!(webhook_secret_name("plumbus-operator-service"), "plumbus-operator-service-cert");
        let dotted = "operator.controller-manager.with.a.very-long.name-that-goes.on.and.on";
        let service = webhook_service_name(dotted);
        assert_eq!(service, "operator-controller-manager-with-a-very-long-name-that--service");
        assert_eq!(service.len(), MAX_NAME_LENGTH);
        let secret = webhook_secret_name(&service);
        assert_eq!(secret, "operator-controller-manager-with-a-very-long-name-that--se-cert");
        assert_eq!(secret.len(), MAX_NAME_LENGTH);
        // 56 characters: OLM v1's bound would give a 64-character Service name.
        let edge = "a".repeat(56);
        assert_eq!(webhook_service_name(&edge).len(), MAX_NAME_LENGTH);
    }

    #[test]
    fn webhook_names_lose_a_trailing_separator() {
        assert_eq!(webhook_name("vplumbus.kb.io"), "vplumbus.kb.io");
        assert_eq!(webhook_name("vplumbus.kb.io-"), "vplumbus.kb.io");
        assert_eq!(webhook_name("vplumbus.kb.io.-"), "vplumbus.kb.io");
    }

    #[test]
    fn generated_names_fit_63_characters() {
        let name = generated_name(&"x".repeat(100), &json!({"a": 1}));
        assert_eq!(name.len(), MAX_NAME_LENGTH);
        assert_eq!(name, generated_name(&"x".repeat(100), &json!({"a": 1})));
        assert!(generated_name("ends-with-.", &json!(1)).starts_with("ends-with-"));
    }
}

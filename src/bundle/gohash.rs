//! OLM v0's content hash, reproduced byte for byte so that the RBAC objects a bundle brings get the names OLM v0
//! gives them: Go's `encoding/json` text of the hashed value (struct fields in declaration order, `omitempty`
//! fields left out, HTML-safe string escaping, the encoder's trailing newline), SHA-224, and `big.Int`'s base-62
//! text (`pkg/lib/kubernetes/pkg/util/hash`).

use k8s_openapi::api::rbac::v1::PolicyRule;
use sha2::{Digest, Sha224};

use crate::api::v1alpha1::StrategyDeploymentPermissions;

/// The digits of Go's `big.Int.Text` above base 36.
const BASE62_DIGITS: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// `DeepHashObject` of OLM v0: base-62 SHA-224 of the JSON text the Go encoder writes (which ends with a newline).
pub fn deep_hash(go_json: &str) -> String {
    let mut text = go_json.to_owned();
    text.push('\n');
    base62(&Sha224::digest(text.as_bytes()))
}

/// A big-endian unsigned number in base 62, as `big.Int.Text(62)` writes it: no leading zeros, `0` for zero.
pub fn base62(bytes: &[u8]) -> String {
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|byte| *byte == 0).collect();
    let mut digits = Vec::new();
    while !number.is_empty() {
        let mut remainder: u32 = 0;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let value = remainder * 256 + u32::from(*byte);
            let digit = value / 62;
            remainder = value % 62;
            if !(quotient.is_empty() && digit == 0) {
                quotient.push(digit as u8);
            }
        }
        digits.push(BASE62_DIGITS[remainder as usize]);
        number = quotient;
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.iter().rev().map(|digit| char::from(*digit)).collect()
}

/// A string as `encoding/json` writes it with HTML escaping on (the encoder's default).
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A JSON value as `encoding/json` writes one decoded into `interface{}` (or a `json.RawMessage` of YAML converted
/// to JSON): object keys sorted, strings HTML-escaped, no spaces.
pub fn value(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => string(text),
        Value::Array(items) => format!("[{}]", items.iter().map(self::value).collect::<Vec<_>>().join(",")),
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let fields: Vec<String> =
                keys.into_iter().map(|key| format!("{}:{}", string(key), self::value(&fields[key]))).collect();
            format!("{{{}}}", fields.join(","))
        }
    }
}

/// A `[]string` field: `null` for a nil slice. Rust cannot tell nil from empty once read, so empty counts as nil.
fn strings(list: &[String]) -> String {
    if list.is_empty() {
        return "null".to_owned();
    }
    format!("[{}]", list.iter().map(|item| string(item)).collect::<Vec<_>>().join(","))
}

/// `rbacv1.PolicyRule`: `verbs` always, the other lists only when not empty (`omitempty`). Also how OLM v0 writes a
/// rule into a CSV's requirement status (`legacy::csv::requirements`).
pub fn policy_rule(rule: &PolicyRule) -> String {
    let mut fields = vec![format!("\"verbs\":{}", strings(&rule.verbs))];
    let optional = [
        ("apiGroups", &rule.api_groups),
        ("resources", &rule.resources),
        ("resourceNames", &rule.resource_names),
        ("nonResourceURLs", &rule.non_resource_urls),
    ];
    for (name, list) in optional {
        if let Some(list) = list.as_ref().filter(|list| !list.is_empty()) {
            fields.push(format!("\"{name}\":{}", strings(list)));
        }
    }
    format!("{{{}}}", fields.join(","))
}

/// `v1alpha1.StrategyDeploymentPermissions`: both fields always; no rules is a nil slice.
pub fn permission(permission: &StrategyDeploymentPermissions) -> String {
    let rules = if permission.rules.is_empty() {
        "null".to_owned()
    } else {
        format!("[{}]", permission.rules.iter().map(policy_rule).collect::<Vec<_>>().join(","))
    };
    format!("{{\"serviceAccountName\":{},\"rules\":{rules}}}", string(&permission.service_account_name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_those_of_olm_v0s_own_tests() {
        // pkg/controller/registry/resolver/rbac_test.go, TestGenerateName: the hash of []string{"something"}.
        assert_eq!(deep_hash(r#"["something"]"#), "5L9sNXi3Y6mcOevFzYY3WOLIukKOeZwz1pfUlT");
        assert_eq!(deep_hash(r#"["something","else"]"#), "6XtefCelEzfYlFOD1fARIK5vhWVfWfGHja7H3q");
    }

    #[test]
    fn base62_has_no_leading_zeros() {
        assert_eq!(base62(&[]), "0");
        assert_eq!(base62(&[0, 0]), "0");
        assert_eq!(base62(&[61]), "Z");
        assert_eq!(base62(&[62]), "10");
        assert_eq!(base62(&[0, 1, 0]), "48");
        assert_eq!(base62(&[255, 255]), "h31");
    }

    #[test]
    fn values_are_written_with_sorted_keys_and_html_escaping() {
        let written = value(&serde_json::json!({"versionRange": ">=1 <2", "packageName": "a", "n": [1, true, null]}));
        assert_eq!(written, r#"{"n":[1,true,null],"packageName":"a","versionRange":"\u003e=1 \u003c2"}"#);
    }

    #[test]
    fn strings_escape_as_gos_encoder_does() {
        assert_eq!(string("plain-name.v1"), r#""plain-name.v1""#);
        assert_eq!(string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(string("<&>"), r#""\u003c\u0026\u003e""#);
        assert_eq!(string("\n\r\t\u{8}\u{c}\u{1}"), r#""\n\r\t\b\f\u0001""#);
        assert_eq!(string("\u{2028}é\u{7f}"), "\"\\u2028é\u{7f}\"");
    }

    #[test]
    fn a_permission_is_written_in_go_field_order_with_omitempty() {
        let permission: StrategyDeploymentPermissions = serde_json::from_value(serde_json::json!({
            "serviceAccountName": "plumbus-operator",
            "rules": [
                {"resources": ["secrets"], "apiGroups": [""], "verbs": ["get", "list"], "resourceNames": []},
                {"nonResourceURLs": ["/metrics"], "verbs": ["get"]},
            ],
        }))
        .expect("permission");
        assert_eq!(
            super::permission(&permission),
            r#"{"serviceAccountName":"plumbus-operator","rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["secrets"]},{"verbs":["get"],"nonResourceURLs":["/metrics"]}]}"#
        );
        let empty = StrategyDeploymentPermissions::default();
        assert_eq!(super::permission(&empty), r#"{"serviceAccountName":"","rules":null}"#);
    }
}

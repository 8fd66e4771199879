//! Label and field selectors in the query-string syntax kube-apiserver accepts (`labelSelector=a=b,c in (x,y),!d`,
//! `fieldSelector=metadata.name=x`), parsed as `k8s.io/apimachinery/pkg/labels.Parse` and `fields.ParseSelector` do.

use std::collections::BTreeMap;

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed label selector: all requirements must hold. Empty selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(pub Vec<LabelRequirement>);

/// A parsed field selector: `field=value` or `field!=value` terms, all of which must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(pub Vec<(String, bool, String)>);

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(pub String);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            requirements.push(parse_requirement(term)?);
        }
        Ok(Self(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|requirement| match requirement {
            LabelRequirement::Equals(key, value) => labels.get(key) == Some(value),
            LabelRequirement::NotEquals(key, value) => labels.get(key) != Some(value),
            LabelRequirement::In(key, values) => labels.get(key).is_some_and(|v| values.contains(v)),
            LabelRequirement::NotIn(key, values) => labels.get(key).is_none_or(|v| !values.contains(v)),
            LabelRequirement::Exists(key) => labels.contains_key(key),
            LabelRequirement::DoesNotExist(key) => !labels.contains_key(key),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (index, character) in text.char_indices() {
        match character {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn parse_requirement(term: &str) -> Result<LabelRequirement, SelectorError> {
    let invalid = || SelectorError(term.to_owned());
    if let Some(key) = term.strip_prefix('!') {
        return valid_key(key.trim()).map(|key| LabelRequirement::DoesNotExist(key.to_owned())).ok_or_else(invalid);
    }
    for (operator, set_in) in [(" notin ", false), (" in ", true)] {
        if let Some((key, rest)) = term.split_once(operator) {
            let key = valid_key(key.trim()).ok_or_else(invalid)?.to_owned();
            let rest = rest.trim();
            let inner = rest.strip_prefix('(').and_then(|r| r.strip_suffix(')')).ok_or_else(invalid)?;
            let values: Vec<String> = inner.split(',').map(|v| v.trim().to_owned()).collect();
            if values.iter().any(|v| !valid_value(v)) {
                return Err(invalid());
            }
            return Ok(if set_in { LabelRequirement::In(key, values) } else { LabelRequirement::NotIn(key, values) });
        }
    }
    for (operator, equal) in [("!=", false), ("==", true), ("=", true)] {
        if let Some((key, value)) = term.split_once(operator) {
            let key = valid_key(key.trim()).ok_or_else(invalid)?.to_owned();
            let value = value.trim();
            if !valid_value(value) {
                return Err(invalid());
            }
            return Ok(if equal {
                LabelRequirement::Equals(key, value.to_owned())
            } else {
                LabelRequirement::NotEquals(key, value.to_owned())
            });
        }
    }
    valid_key(term).map(|key| LabelRequirement::Exists(key.to_owned())).ok_or_else(invalid)
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters.
fn valid_key(key: &str) -> Option<&str> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let prefix_ok = prefix.is_none_or(|p| !p.is_empty() && p.len() <= 253 && p.split('.').all(is_dns_label));
    (prefix_ok && !name.is_empty() && valid_value(name)).then_some(key)
}

fn is_dns_label(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= 63
        && part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !part.starts_with('-')
        && !part.ends_with('-')
}

/// A label value: empty, or at most 63 alphanumerics, `-`, `_`, `.`, starting and ending with an alphanumeric.
pub fn valid_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && value.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
            && value.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric))
}

/// Whether a `metav1.LabelSelector` (`matchLabels`, `matchExpressions`) selects these labels; an absent or empty
/// selector selects everything, and an operator Kubernetes does not know selects nothing.
pub fn label_selector_matches(selector: &Value, labels: &Value) -> bool {
    if selector.is_null() || selector.as_object().is_some_and(serde_json::Map::is_empty) {
        return true;
    }
    let labels: BTreeMap<String, String> = serde_json::from_value(labels.clone()).unwrap_or_default();
    let mut requirements = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        requirements.push(LabelRequirement::Equals(key.clone(), value.as_str().unwrap_or_default().to_owned()));
    }
    for expression in selector["matchExpressions"].as_array().into_iter().flatten() {
        let key = expression["key"].as_str().unwrap_or_default().to_owned();
        let values: Vec<String> = expression["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect();
        requirements.push(match expression["operator"].as_str() {
            Some("In") => LabelRequirement::In(key, values),
            Some("NotIn") => LabelRequirement::NotIn(key, values),
            Some("Exists") => LabelRequirement::Exists(key),
            Some("DoesNotExist") => LabelRequirement::DoesNotExist(key),
            _ => return false,
        });
    }
    LabelSelector(requirements).matches(&labels)
}

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let parsed = if let Some((field, value)) = term.split_once("!=") {
                (field.trim().to_owned(), false, value.trim().to_owned())
            } else if let Some((field, value)) = term.split_once("==") {
                (field.trim().to_owned(), true, value.trim().to_owned())
            } else if let Some((field, value)) = term.split_once('=') {
                (field.trim().to_owned(), true, value.trim().to_owned())
            } else {
                return Err(SelectorError(term.to_owned()));
            };
            terms.push(parsed);
        }
        Ok(Self(terms))
    }

    /// The selector with each field named as stored, by `stored_field` (None for a field the resource cannot be
    /// selected by, which is answered as the error).
    pub fn stored_fields(self, stored_field: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        self.0
            .into_iter()
            .map(|(field, equal, value)| match stored_field(&field) {
                Some(stored) => Ok((stored, equal, value)),
                None => Err(field),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(field, equal, value)| (field_value(object, field) == value) == *equal)
    }
}

/// The fields every resource can be selected by (`metadata.name`, `metadata.namespace`), as stored; None for any
/// other. Resources selectable by more (Events) say so in `ResourceType::selectable_field`.
pub fn metadata_field(field: &str) -> Option<String> {
    matches!(field, "metadata.name" | "metadata.namespace").then(|| field.to_owned())
}

/// The value of a selectable field of a stored object: the string at its path, but for `source`, which only core
/// Events are selected by (their source component, or else their reporting controller, as kube-apiserver reads it).
pub fn field_value<'a>(object: &'a Value, field: &str) -> &'a str {
    if field == "source" {
        let component = object["source"]["component"].as_str().unwrap_or_default();
        return if component.is_empty() {
            object["reportingComponent"].as_str().unwrap_or_default()
        } else {
            component
        };
    }
    field.split('.').fold(object, |value, key| &value[key]).as_str().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn every_operator_parses_and_matches() {
        let selector = LabelSelector::parse("app=web, tier!=db,env in (prod, staging),zone notin (a),team,!legacy")
            .expect("parses");
        assert_eq!(selector.0.len(), 6);
        assert!(selector.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "x")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "x"), ("legacy", "")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("env", "dev"), ("team", "x")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("env", "prod"), ("team", "x"), ("zone", "a")])));
        assert!(!selector.matches(&labels(&[("app", "web"), ("tier", "db"), ("env", "prod"), ("team", "x")])));
        assert_eq!(
            LabelSelector::parse("a==b").expect("=="),
            LabelSelector(vec![LabelRequirement::Equals("a".into(), "b".into())])
        );
        assert!(LabelSelector::parse("").expect("empty").matches(&labels(&[])));
    }

    #[test]
    fn prefixed_keys_such_as_the_component_label_work() {
        let selector = LabelSelector::parse("v2alpha1.operators.coreos.com/plumbus").expect("parses");
        assert!(selector.matches(&labels(&[("v2alpha1.operators.coreos.com/plumbus", "")])));
        assert!(!selector.matches(&labels(&[("v2alpha1.operators.coreos.com/grumbo", "")])));
    }

    #[test]
    fn malformed_selectors_are_errors() {
        for bad in
            ["a in b", "a in (x", "=b", "a=b=c!", "A_/b", "operators.coreos.com/operator:v2alpha1/plumbus", "a=-x"]
        {
            assert!(LabelSelector::parse(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn field_selectors_on_name_and_namespace() {
        let selector = FieldSelector::parse("metadata.name=a,metadata.namespace!=b").expect("parses");
        assert!(selector.matches(&serde_json::json!({"metadata": {"name": "a", "namespace": "c"}})));
        assert!(!selector.matches(&serde_json::json!({"metadata": {"name": "a", "namespace": "b"}})));
        assert_eq!(
            FieldSelector::parse("metadata.name=a,status.phase=Running").expect("parses").stored_fields(metadata_field),
            Err("status.phase".to_owned())
        );
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}

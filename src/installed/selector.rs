//! The `labelSelector` and `fieldSelector` query parameters of the aggregated API server, read as kube-apiserver
//! reads them (apimachinery's `labels.Parse` and `fields.ParseSelector`): label requirements `k=v`, `k==v`, `k!=v`,
//! `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, comma-separated; field requirements `f=v`, `f==v`, `f!=v` on the fields a
//! resource supports. Pure: matched with kube-core's `Selector`.

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{Expression, Selector, SelectorExt};

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0:?}")]
    Label(String),
    #[error("invalid selector: '{0}'; can't understand '{1}'")]
    Field(String, String),
    /// kube-apiserver's words for a field the resource does not select on.
    #[error("field label not supported: {0}")]
    UnknownField(String),
}

/// Splits at commas outside parentheses.
fn requirements(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (index, character) in text.char_indices() {
        match character {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(text[start..index].trim());
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(text[start..].trim());
    parts.into_iter().filter(|part| !part.is_empty()).collect()
}

fn values(list: &str) -> Option<BTreeSet<String>> {
    let inner = list.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(inner.split(',').map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect())
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !key.starts_with(['-', '_', '.', '/'])
}

fn expression(requirement: &str) -> Result<Expression, SelectorError> {
    let invalid = || SelectorError::Label(requirement.to_owned());
    if let Some(key) = requirement.strip_prefix('!') {
        let key = key.trim();
        return if valid_key(key) { Ok(Expression::DoesNotExist(key.to_owned())) } else { Err(invalid()) };
    }
    for (operator, make) in [
        ("!=", Expression::NotEqual as fn(String, String) -> Expression),
        ("==", Expression::Equal),
        ("=", Expression::Equal),
    ] {
        if let Some((key, value)) = requirement.split_once(operator) {
            let (key, value) = (key.trim(), value.trim());
            if !valid_key(key) || value.contains(['=', '!', ' ']) {
                return Err(invalid());
            }
            return Ok(make(key.to_owned(), value.to_owned()));
        }
    }
    let words: Vec<&str> = requirement.splitn(2, char::is_whitespace).collect();
    match words.as_slice() {
        [key] if valid_key(key) => Ok(Expression::Exists((*key).to_owned())),
        [key, rest] if valid_key(key) => {
            let rest = rest.trim();
            if let Some(list) = rest.strip_prefix("notin") {
                return values(list).map(|set| Expression::NotIn((*key).to_owned(), set)).ok_or_else(invalid);
            }
            if let Some(list) = rest.strip_prefix("in") {
                return values(list).map(|set| Expression::In((*key).to_owned(), set)).ok_or_else(invalid);
            }
            Err(invalid())
        }
        _ => Err(invalid()),
    }
}

/// A `labelSelector` parameter; empty or absent selects everything.
pub fn labels(text: Option<&str>) -> Result<Selector, SelectorError> {
    requirements(text.unwrap_or_default()).into_iter().map(expression).collect()
}

/// Whether `labels` (an object's `metadata.labels`) match.
pub fn matches(selector: &Selector, labels: &serde_json::Value) -> bool {
    let labels: BTreeMap<String, String> = labels
        .as_object()
        .map(|map| map.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect())
        .unwrap_or_default();
    selector.matches(&labels)
}

/// A field requirement: a field path, whether it must equal (or differ from) the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldRequirement {
    pub field: String,
    pub equal: bool,
    pub value: String,
}

/// A `fieldSelector` parameter over the fields in `supported` (any field when `None`: the resource judges them).
pub fn fields(text: Option<&str>, supported: Option<&[&str]>) -> Result<Vec<FieldRequirement>, SelectorError> {
    let text = text.unwrap_or_default();
    let mut parsed = Vec::new();
    for requirement in requirements(text) {
        let (field, equal, value) = if let Some((field, value)) = requirement.split_once("!=") {
            (field, false, value)
        } else if let Some((field, value)) = requirement.split_once("==") {
            (field, true, value)
        } else if let Some((field, value)) = requirement.split_once('=') {
            (field, true, value)
        } else {
            return Err(SelectorError::Field(text.to_owned(), requirement.to_owned()));
        };
        let field = field.trim();
        if supported.is_some_and(|supported| !supported.contains(&field)) {
            return Err(SelectorError::UnknownField(field.to_owned()));
        }
        parsed.push(FieldRequirement { field: field.to_owned(), equal, value: value.trim().to_owned() });
    }
    Ok(parsed)
}

/// Whether an object's fields (`field` → its value) meet every requirement.
pub fn fields_match(requirements: &[FieldRequirement], value_of: impl Fn(&str) -> String) -> bool {
    requirements.iter().all(|r| (value_of(&r.field) == r.value) == r.equal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_requirements_of_every_form_are_read_and_matched() {
        let object_labels = json!({"operators.coreos.com/csv": "etcd.v1", "tier": "db"});
        for (selector, expected) in [
            ("", true),
            ("operators.coreos.com/csv=etcd.v1", true),
            ("operators.coreos.com/csv==etcd.v1", true),
            ("operators.coreos.com/csv!=etcd.v1", false),
            ("operators.coreos.com/sub", false),
            ("!operators.coreos.com/sub", true),
            ("tier in (db, web)", true),
            ("tier notin (db,web)", false),
            ("tier=db,operators.coreos.com/csv=other", false),
            ("tier in (web),!x", false),
        ] {
            let parsed = labels(Some(selector)).unwrap_or_else(|e| panic!("{selector}: {e}"));
            assert_eq!(matches(&parsed, &object_labels), expected, "{selector}");
        }
    }

    #[test]
    fn malformed_label_selectors_are_refused() {
        for selector in ["a=b=c", "tier in db", "=x", "a b c", "!"] {
            assert!(labels(Some(selector)).is_err(), "{selector}");
        }
    }

    #[test]
    fn field_selectors_take_only_the_supported_fields() {
        let supported = ["metadata.name", "metadata.namespace"];
        let parsed = fields(Some("metadata.name=etcd.v1,metadata.namespace!=kube-system"), Some(&supported)).unwrap();
        let value_of = |field: &str| match field {
            "metadata.name" => "etcd.v1".to_owned(),
            _ => "team-a".to_owned(),
        };
        assert!(fields_match(&parsed, value_of));
        let other = fields(Some("metadata.name==other"), Some(&supported)).unwrap();
        assert!(!fields_match(&other, value_of));
        assert!(matches!(fields(Some("status.phase=Failed"), Some(&supported)), Err(SelectorError::UnknownField(..))));
        assert!(fields(Some("status.phase=Failed"), None).is_ok(), "left to the resource");
        assert!(matches!(fields(Some("metadata.name"), None), Err(SelectorError::Field(..))));
    }
}

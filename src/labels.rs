//! Label selectors evaluated as Kubernetes evaluates them (`metav1.LabelSelectorAsSelector`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

/// Whether `labels` satisfy `selector`. An empty selector selects everything.
pub fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let labels_match = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(key, value)| labels.get(key).is_some_and(|actual| actual == value));
    let expressions_match = selector.match_expressions.iter().flatten().all(|requirement| {
        let values = requirement.values.as_deref().unwrap_or_default();
        let actual = labels.get(&requirement.key);
        match requirement.operator.as_str() {
            "In" => actual.is_some_and(|value| values.contains(value)),
            "NotIn" => actual.is_none_or(|value| !values.contains(value)),
            "Exists" => actual.is_some(),
            "DoesNotExist" => actual.is_none(),
            // An unknown operator is invalid; Kubernetes refuses such a selector, so it selects nothing.
            _ => false,
        }
    });
    labels_match && expressions_match
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelector {
        LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: key.into(),
                operator: operator.into(),
                values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn empty_selector_selects_everything() {
        assert!(selector_matches(&LabelSelector::default(), &labels(&[])));
        assert!(selector_matches(&LabelSelector::default(), &labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_need_every_pair() {
        let selector = LabelSelector { match_labels: Some(labels(&[("a", "1"), ("b", "2")])), ..Default::default() };
        assert!(selector_matches(&selector, &labels(&[("a", "1"), ("b", "2"), ("c", "3")])));
        assert!(!selector_matches(&selector, &labels(&[("a", "1")])));
        assert!(!selector_matches(&selector, &labels(&[("a", "1"), ("b", "3")])));
    }

    #[test]
    fn expressions_follow_kubernetes_operators() {
        assert!(selector_matches(&expression("a", "In", &["1", "2"]), &labels(&[("a", "2")])));
        assert!(!selector_matches(&expression("a", "In", &["1"]), &labels(&[])));
        assert!(selector_matches(&expression("a", "NotIn", &["1"]), &labels(&[])));
        assert!(!selector_matches(&expression("a", "NotIn", &["1"]), &labels(&[("a", "1")])));
        assert!(selector_matches(&expression("a", "Exists", &[]), &labels(&[("a", "")])));
        assert!(selector_matches(&expression("a", "DoesNotExist", &[]), &labels(&[("b", "")])));
        assert!(!selector_matches(&expression("a", "Gt", &["1"]), &labels(&[("a", "2")])));
    }
}

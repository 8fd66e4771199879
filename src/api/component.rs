//! The label that ties a component to its Operator (docs/design.md, 'The component label').

/// Prefix of the component label key; the Operator's name follows it.
pub const COMPONENT_LABEL_PREFIX: &str = "v2alpha1.operators.coreos.com/";

/// The label key that marks an object as a component of the named Operator. Its value is always `""`.
pub fn component_label_key(operator_name: &str) -> String {
    format!("{COMPONENT_LABEL_PREFIX}{operator_name}")
}

/// The Operator name a component label key refers to, if the key is one.
pub fn operator_of_label_key(key: &str) -> Option<&str> {
    key.strip_prefix(COMPONENT_LABEL_PREFIX).filter(|name| !name.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_key_round_trips_operator_name() {
        let key = component_label_key("plumbus");
        assert_eq!(key, "v2alpha1.operators.coreos.com/plumbus");
        assert_eq!(operator_of_label_key(&key), Some("plumbus"));
    }

    #[test]
    fn foreign_and_empty_keys_name_no_operator() {
        assert_eq!(operator_of_label_key("operators.coreos.com/plumbus.ns"), None);
        assert_eq!(operator_of_label_key(COMPONENT_LABEL_PREFIX), None);
    }
}

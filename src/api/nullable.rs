//! Kubernetes treats a JSON `null` like an absent field. serde's `default` covers absence only; this covers both,
//! for the list and map fields of resources written by hand (CSVs in bundles carry `resources: null`).

use serde::{Deserialize, Deserializer};

/// Deserializes `null` as the type's default.
pub fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Lists {
        #[serde(default, deserialize_with = "super::null_as_default")]
        items: Vec<String>,
    }

    #[test]
    fn null_absent_and_present_lists() {
        let null: Lists = serde_json::from_str(r#"{"items": null}"#).expect("null");
        let absent: Lists = serde_json::from_str("{}").expect("absent");
        let present: Lists = serde_json::from_str(r#"{"items": ["a"]}"#).expect("present");
        assert!(null.items.is_empty() && absent.items.is_empty());
        assert_eq!(present.items, vec!["a"]);
    }
}

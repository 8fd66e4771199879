//! What several printers share: reading fields of a stored object as Go reads its typed fields (a missing field is
//! its zero value), label sets and selectors as apimachinery writes them, a pod template's containers, and the
//! `<list> + N more...` cut of long lists.

use serde_json::Value;

use crate::model::validation;

/// A string field; absent is `""`.
pub fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

/// An integer field; absent is `0`.
pub fn int(value: &Value) -> i64 {
    value.as_i64().unwrap_or(0)
}

/// A list field; absent is empty.
pub fn items(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// How many entries a list or map holds.
pub fn count(value: &Value) -> i64 {
    let entries = match value {
        Value::Array(list) => list.len(),
        Value::Object(map) => map.len(),
        _ => 0,
    };
    i64::try_from(entries).unwrap_or(i64::MAX)
}

/// The object's name.
pub fn name(object: &Value) -> Value {
    Value::from(text(&object["metadata"]["name"]))
}

/// `labels.FormatLabels`: `key=value` pairs sorted as whole strings, `<none>` when there are none.
pub fn labels(map: &Value) -> String {
    let mut pairs: Vec<String> =
        map.as_object().into_iter().flatten().map(|(key, value)| format!("{key}={}", text(value))).collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".to_owned()
    } else {
        pairs.join(",")
    }
}

/// `metav1.LabelSelectorAsSelector(...).String()`: requirements sorted by key (`a=b`, `a in (x,y)`, `a notin (x)`,
/// `a`, `!a`); `""` for no selector or an empty one; `Err` where Go refuses the selector (an unknown operator,
/// values where none belong or none where some do, an invalid key or value).
pub fn selector(selector: &Value) -> Result<String, ()> {
    let mut requirements: Vec<(String, String)> = Vec::new();
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        let value = value.as_str().ok_or(())?;
        check(key, &[value])?;
        requirements.push((key.clone(), format!("{key}={value}")));
    }
    for expression in items(&selector["matchExpressions"]) {
        let key = text(&expression["key"]);
        let mut values: Vec<&str> = items(&expression["values"]).iter().map(text).collect();
        check(key, &values)?;
        values.sort_unstable();
        let written = match (text(&expression["operator"]), values.is_empty()) {
            ("In", false) => format!("{key} in ({})", values.join(",")),
            ("NotIn", false) => format!("{key} notin ({})", values.join(",")),
            ("Exists", true) => key.to_owned(),
            ("DoesNotExist", true) => format!("!{key}"),
            _ => return Err(()),
        };
        requirements.push((key.to_owned(), written));
    }
    requirements.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(requirements.into_iter().map(|(_, written)| written).collect::<Vec<_>>().join(","))
}

fn check(key: &str, values: &[&str]) -> Result<(), ()> {
    let valid = validation::qualified_name(key).is_empty()
        && values.iter().all(|value| validation::label_value(value).is_empty());
    if valid {
        Ok(())
    } else {
        Err(())
    }
}

/// `metav1.FormatLabelSelector`: the selector, `<none>` when empty or absent, `<error>` when invalid.
pub fn format_selector(value: &Value) -> String {
    match selector(value) {
        Ok(written) if written.is_empty() => "<none>".to_owned(),
        Ok(written) => written,
        Err(()) => "<error>".to_owned(),
    }
}

/// The `Containers` and `Images` cells of a pod spec: names and images, comma-separated.
pub fn containers(pod_spec: &Value) -> (Value, Value) {
    let containers = items(&pod_spec["containers"]);
    let names: Vec<&str> = containers.iter().map(|c| text(&c["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| text(&c["image"])).collect();
    (Value::from(names.join(",")), Value::from(images.join(",")))
}

/// The first `shown` of `total` entries, comma-separated, then ` + N more...` for the rest.
pub fn with_more(list: &[String], total: usize, shown: usize) -> String {
    let joined = list.join(",");
    if total > shown {
        format!("{joined} + {} more...", total - shown)
    } else {
        joined
    }
}

/// A `*bool` cell: `True`, `False` or `<unset>`.
pub fn bool_pointer(value: &Value) -> String {
    match value.as_bool() {
        Some(true) => "True".to_owned(),
        Some(false) => "False".to_owned(),
        None => "<unset>".to_owned(),
    }
}

/// The first non-empty of two strings.
pub fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() {
        b
    } else {
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_sets_sort_as_strings() {
        // `a.b=1` sorts before `a=2`: '.' comes before '='.
        assert_eq!(labels(&json!({"a": "2", "a.b": "1", "app": "web"})), "a.b=1,a=2,app=web");
        assert_eq!(labels(&json!({})), "<none>");
        assert_eq!(labels(&Value::Null), "<none>");
    }

    #[test]
    fn selectors_as_apimachinery_writes_them() {
        let full = json!({"matchLabels": {"tier": "web", "app": "shop"}, "matchExpressions": [
            {"key": "env", "operator": "In", "values": ["prod", "dev"]},
            {"key": "zone", "operator": "NotIn", "values": ["b"]},
            {"key": "canary", "operator": "DoesNotExist"},
            {"key": "managed", "operator": "Exists"}]});
        assert_eq!(selector(&full), Ok("app=shop,!canary,env in (dev,prod),managed,tier=web,zone notin (b)".into()));
        assert_eq!(format_selector(&json!({})), "<none>");
        assert_eq!(format_selector(&Value::Null), "<none>");
        assert_eq!(selector(&Value::Null), Ok(String::new()));
        for invalid in [
            json!({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}),
            json!({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}),
            json!({"matchLabels": {"bad key": "x"}}),
            json!({"matchLabels": {"a": "not valid"}}),
        ] {
            assert_eq!(format_selector(&invalid), "<error>", "{invalid}");
        }
    }

    #[test]
    fn lists_are_cut_after_some_entries() {
        let list: Vec<String> = ["a", "b", "c"].map(str::to_owned).to_vec();
        assert_eq!(with_more(&list, 3, 3), "a,b,c");
        assert_eq!(with_more(&list, 5, 3), "a,b,c + 2 more...");
        assert_eq!(bool_pointer(&json!(false)), "False");
        assert_eq!(bool_pointer(&Value::Null), "<unset>");
    }
}

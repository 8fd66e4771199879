//! Use of CatalogSources (docs/design.md, 'Catalogs'): naming a CatalogSource in an Operator's `spec.updates` needs the
//! custom verb `install` on it. Pure: decides which access check a create or update of an Operator needs.

use serde_json::Value;

use crate::access::AccessCheck;

/// The check an Operator write needs: `install` on the CatalogSource its new spec names, unless the write leaves
/// `spec.updates` as it was (a label or a finalizer added by a controller names nothing new).
pub fn catalog_use_check(old: Option<&Value>, new: Option<&Value>) -> Option<AccessCheck> {
    let new = new?;
    let updates = &new["spec"]["updates"];
    if old.is_some_and(|old| old["spec"]["updates"] == *updates) {
        return None;
    }
    let reference = updates.get("catalogSource")?.get("ref")?;
    Some(AccessCheck {
        namespace: Some(reference["namespace"].as_str().unwrap_or_default().to_owned()),
        verb: "install".into(),
        group: "operators.coreos.com".into(),
        resource: "catalogsources".into(),
        subresource: String::new(),
        name: reference["name"].as_str().unwrap_or_default().to_owned(),
        path: None,
    })
}

/// The denial of a user lacking `install` on the CatalogSource.
pub fn catalog_use_denial(user: &str, check: &AccessCheck) -> String {
    format!(
        "user {user:?} may not install from CatalogSource {}/{}: it needs the verb \"install\" on catalogsources \
         (operators.coreos.com) for that CatalogSource",
        check.namespace.as_deref().unwrap_or_default(),
        check.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn operator(updates: Value) -> Value {
        json!({"metadata": {"name": "plumbus"}, "spec": {"updates": updates}})
    }

    fn catalog(name: &str, channel: &str) -> Value {
        json!({"type": "CatalogSource", "catalogSource": {"package": "plumbus", "channel": channel,
               "ref": {"name": name, "namespace": "catalogs"}}})
    }

    #[test]
    fn naming_a_catalog_source_needs_install_on_it() {
        let check = catalog_use_check(None, Some(&operator(catalog("community", "stable")))).expect("check");
        assert_eq!(check.verb, "install");
        assert_eq!((check.group.as_str(), check.resource.as_str()), ("operators.coreos.com", "catalogsources"));
        assert_eq!((check.namespace.as_deref(), check.name.as_str()), (Some("catalogs"), "community"));
        assert!(catalog_use_denial("bob", &check).contains("catalogs/community"));
    }

    #[test]
    fn a_changed_channel_or_catalog_is_checked_again() {
        let old = operator(catalog("community", "stable"));
        assert!(catalog_use_check(Some(&old), Some(&operator(catalog("community", "beta")))).is_some());
        assert!(catalog_use_check(Some(&old), Some(&operator(catalog("private", "stable")))).is_some());
    }

    #[test]
    fn unchanged_updates_images_and_deletes_need_nothing() {
        let old = operator(catalog("community", "stable"));
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"] = json!({"team": "a"});
        assert_eq!(catalog_use_check(Some(&old), Some(&relabelled)), None);
        let image = operator(json!({"type": "ManifestImage", "manifestImage": "registry.example/plumbus:1"}));
        assert_eq!(catalog_use_check(None, Some(&image)), None);
        assert_eq!(catalog_use_check(Some(&old), None), None);
        assert_eq!(catalog_use_check(None, Some(&json!({"metadata": {"name": "bare"}, "spec": {}}))), None);
    }
}

//! The Installs an Operator owns: its own, named after it, holding the one bundle image its source resolved to, and
//! one per dependency that bundle brings (`dependencies`). Upgrades change that Install's content, so the Install's
//! approval gate decides whether an update needs a person again (docs/design.md, 'Approval'), and a Manual Operator
//! resets the approval in the same write.

use serde_json::{json, Value};

use crate::api::component::component_label_key;
use crate::api::v2alpha1::{
    DeploymentConfig, Install, InstallState, CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION,
    MANUAL_APPROVAL_ANNOTATION,
};

/// The catalog bundle an Operator's Install holds.
pub const BUNDLE_ANNOTATION: &str = "v2alpha1.operators.coreos.com/bundle";

/// The content an Operator wants installed.
#[derive(Clone, Debug, PartialEq)]
pub struct Target {
    pub image: String,
    /// The catalog bundle name, when the image came from a catalog.
    pub bundle: Option<String>,
    /// Updates wait for a person (`approval: Manual`).
    pub manual: bool,
    /// Where namespace-less bundle content goes.
    pub namespace: String,
    /// Who changed the Operator's source without holding what its Install was granted (the webhook's mark on the
    /// Operator): new content it brings is marked on the Install the same way, and waits for a person.
    pub changed_by: Option<String>,
    /// The Operator's deployment configuration, given to the Install with the image.
    pub config: Option<DeploymentConfig>,
}

/// The bundle an Install holds, from its annotation.
pub fn installed_bundle(install: &Install) -> Option<&str> {
    install.metadata.annotations.as_ref()?.get(BUNDLE_ANNOTATION).map(String::as_str)
}

/// Whether the Install finished installing the content of its current spec, so that the next upgrade may start.
pub fn settled(install: &Install) -> bool {
    install.status.as_ref().is_some_and(|status| {
        status.state == Some(InstallState::Installed)
            && status.observed_generation.is_some()
            && status.observed_generation == install.metadata.generation
    })
}

/// Whether `install` keeps its bundle rather than move to `bundle` now: it is still installing another one (or
/// waiting for a person), and upgrades go one at a time. A bundle over an InstallPolicy never installs as it is: a
/// newer one that fits may take its place.
pub fn holds_back(install: Option<&Install>, bundle: &str) -> bool {
    install.is_some_and(|install| {
        !settled(install) && !waits_on_policy(install) && installed_bundle(install) != Some(bundle)
    })
}

/// Whether the content of the Install's current spec waits on an InstallPolicy (`docs/policy.md`): it will not install
/// as it is, so its bundle is not held on to.
pub fn waits_on_policy(install: &Install) -> bool {
    install.status.as_ref().is_some_and(|status| {
        status.state == Some(InstallState::ExceedsPolicy)
            && status.observed_generation.is_some()
            && status.observed_generation == install.metadata.generation
    })
}

/// The bundle an Operator's Install keeps while it installs it (or waits for a person): upgrades go one at a time.
/// None once it is installed, or when it waits on a policy (a newer bundle that fits may take its place).
pub fn holding_bundle(install: Option<&Install>) -> Option<&str> {
    install.filter(|install| !settled(install) && !waits_on_policy(install)).and_then(installed_bundle)
}

/// The image an Install's content holds now.
pub fn installed_image(install: &Install) -> Option<&str> {
    install.spec.content.first()?.manifest_image.as_deref()
}

/// The deployment configuration an Install's content holds now.
pub fn installed_config(install: &Install) -> Option<&DeploymentConfig> {
    install.spec.content.first()?.config.as_ref()
}

fn annotations(target: &Target) -> Value {
    json!({
        BUNDLE_ANNOTATION: target.bundle,
        MANUAL_APPROVAL_ANNOTATION: if target.manual { Some("true") } else { None },
    })
}

fn spec_content(target: &Target) -> Value {
    let mut content = json!({"type": "ManifestImage", "manifestImage": target.image});
    // Left out rather than null when there is none: the content list is replaced whole, nulls and all.
    if let Some(config) = &target.config {
        content["config"] = json!(config);
    }
    json!({
        "namespaces": [{"from": "default", "to": target.namespace}],
        "content": [content],
    })
}

/// The Install `name` to create for an Operator (its own, named after it, or one of its dependencies): owned by it
/// (so it goes when the Operator goes) and labelled as its component. Its approval starts Unapproved. It carries the
/// Operator's creator as its own (`creator`, the Operator's annotation as the webhook recorded it): the Install is
/// made on that person's behalf, and an OperatorGroup's account lends its rights only where they may use it.
pub fn new_install(name: &str, operator: &str, operator_uid: &str, creator: Option<&str>, target: &Target) -> Value {
    let mut annotations = annotations(target);
    if let Some(map) = annotations.as_object_mut() {
        map.retain(|_, value| !value.is_null());
        if let Some(creator) = creator {
            map.insert(CREATOR_ANNOTATION.to_owned(), json!(creator));
        }
        // A source set by someone who may not use the creator's standing: the first content waits for a person.
        if let Some(changed_by) = &target.changed_by {
            map.insert(CONTENT_CHANGED_BY_ANNOTATION.to_owned(), json!(changed_by));
        }
    }
    let mut spec = spec_content(target);
    spec["approval"] = json!("Unapproved");
    json!({
        "apiVersion": "operators.coreos.com/v2alpha1",
        "kind": "Install",
        "metadata": {
            "name": name,
            "labels": {component_label_key(operator): ""},
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": "operators.coreos.com/v2alpha1",
                "kind": "Operator",
                "name": operator,
                "uid": operator_uid,
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// The merge patch that brings an existing Install to `target`, or None when it is there. The patch carries the
/// Install's resourceVersion, so a person's approval given in between is never overwritten unseen; a Manual
/// Operator's new content resets the approval in the same write, so no approval covers content nobody saw.
pub fn install_patch(operator: &str, install: &Install, target: &Target) -> Option<Value> {
    let label = component_label_key(operator);
    let labelled = install.metadata.labels.as_ref().is_some_and(|labels| labels.contains_key(&label));
    let wanted_annotations = annotations(target);
    let current = install.metadata.annotations.clone().unwrap_or_default();
    let annotations_match = wanted_annotations.as_object().is_some_and(|wanted| {
        wanted.iter().all(|(key, value)| match value.as_str() {
            Some(value) => current.get(key).map(String::as_str) == Some(value),
            None => !current.contains_key(key),
        })
    });
    let same_image = installed_image(install) == Some(target.image.as_str());
    // The configuration is content too: a new one is applied, and waits, as a new image does.
    let same_content = same_image && installed_config(install) == target.config.as_ref();
    let namespaces_match = install.spec.namespaces.len() == 1
        && install.spec.namespaces[0].from == "default"
        && install.spec.namespaces[0].to == target.namespace;
    if labelled && annotations_match && same_content && namespaces_match && install.spec.content.len() == 1 {
        return None;
    }
    let mut spec = spec_content(target);
    let mut annotations = wanted_annotations;
    if target.manual && !same_content {
        spec["approval"] = json!("Unapproved");
    }
    // Whatever the marked source changes (the image, or the approval setting: a lifted Manual lets a moved tag in),
    // the change is the updater's, not the controller's.
    if let Some(changed_by) = &target.changed_by {
        spec["approval"] = json!("Unapproved");
        annotations[CONTENT_CHANGED_BY_ANNOTATION] = json!(changed_by);
    }
    Some(json!({
        "metadata": {
            "resourceVersion": install.metadata.resource_version,
            "labels": {label: ""},
            "annotations": annotations,
        },
        "spec": spec,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::{Approval, InstallStatus};

    fn target(image: &str, manual: bool) -> Target {
        Target {
            image: image.into(),
            bundle: Some("plumbus.v2.0.0".into()),
            manual,
            namespace: "operators".into(),
            changed_by: None,
            config: None,
        }
    }

    fn with_env(target: Target, value: &str) -> Target {
        let config = serde_json::from_value(json!({"env": [{"name": "HTTP_PROXY", "value": value}]})).expect("config");
        Target { config: Some(config), ..target }
    }

    #[test]
    fn the_operators_configuration_goes_with_the_image_and_a_change_of_it_is_a_change_of_content() {
        let configured = with_env(target("i", false), "http://proxy:3128");
        let install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &configured));
        assert_eq!(install.spec.content[0].config, configured.config);
        assert_eq!(install_patch("plumbus", &install, &configured), None);
        let changed = with_env(target("i", false), "http://other:3128");
        let patch = install_patch("plumbus", &install, &changed).expect("a new configuration is new content");
        assert_eq!(patch["spec"]["content"][0]["config"]["env"][0]["value"], "http://other:3128");
        // Removing it is a change too, and leaves no null behind in the content list.
        let removed = install_patch("plumbus", &install, &target("i", false)).expect("patch");
        assert!(removed["spec"]["content"][0].get("config").is_none());
        let bare = new_install("plumbus", "plumbus", "uid-1", None, &target("i", false));
        assert!(bare["spec"]["content"][0].get("config").is_none());
    }

    #[test]
    fn a_manual_operators_new_configuration_resets_the_approval_as_an_update_does() {
        let mut install =
            install_from(new_install("plumbus", "plumbus", "uid-1", None, &with_env(target("i", true), "a")));
        install.spec.approval = Approval::Approved;
        let patch = install_patch("plumbus", &install, &with_env(target("i", true), "b")).expect("patch");
        assert_eq!(patch["spec"]["approval"], "Unapproved");
    }

    #[test]
    fn a_configuration_changed_by_someone_not_holding_the_grants_is_marked() {
        let install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("i", false)));
        let marked = Target { changed_by: Some("bob".into()), ..with_env(target("i", false), "http://evil:3128") };
        let patch = install_patch("plumbus", &install, &marked).expect("patch");
        assert_eq!(patch["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "bob");
        assert_eq!(patch["spec"]["approval"], "Unapproved");
    }

    fn install_from(value: Value) -> Install {
        let mut install: Install = serde_json::from_value(value).expect("install");
        install.metadata.resource_version = Some("5".into());
        install.metadata.generation = Some(1);
        install
    }

    #[test]
    fn a_source_changed_by_someone_not_holding_the_grants_marks_the_new_content() {
        let install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("old", false)));
        let marked = Target { changed_by: Some("bob".into()), ..target("new", false) };
        let patch = install_patch("plumbus", &install, &marked).expect("patch");
        assert_eq!(patch["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "bob");
        assert_eq!(patch["spec"]["approval"], "Unapproved");
        // The same content again carries no mark: nothing new is applied.
        let same = Target { changed_by: Some("bob".into()), ..target("old", false) };
        assert_eq!(install_patch("plumbus", &install, &same), None);
        // Lifting Manual is a change too: marked, so a moved tag does not slip in.
        let manual = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("old", true)));
        let lifted = Target { changed_by: Some("bob".into()), ..target("old", false) };
        let patch = install_patch("plumbus", &manual, &lifted).expect("patch");
        assert_eq!(patch["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "bob");
        // A new Install of a marked source is marked from the start.
        let fresh = new_install("plumbus", "plumbus", "uid-1", None, &marked);
        assert_eq!(fresh["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "bob");
    }

    #[test]
    fn a_new_install_carries_the_operators_creator() {
        let install = new_install("plumbus", "plumbus", "uid-1", Some("{\"username\":\"alice\"}"), &target("i", false));
        assert_eq!(install["metadata"]["annotations"][CREATOR_ANNOTATION], "{\"username\":\"alice\"}");
        let unknown = new_install("plumbus", "plumbus", "uid-1", None, &target("i", false));
        assert!(unknown["metadata"]["annotations"].get(CREATOR_ANNOTATION).is_none());
    }

    #[test]
    fn a_new_install_is_owned_labelled_and_unapproved() {
        let install =
            new_install("plumbus", "plumbus", "uid-1", None, &target("registry.example/plumbus@sha256:1", true));
        assert_eq!(install["metadata"]["ownerReferences"][0]["uid"], "uid-1");
        assert_eq!(install["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(install["metadata"]["labels"]["v2alpha1.operators.coreos.com/plumbus"], "");
        assert_eq!(install["metadata"]["annotations"][MANUAL_APPROVAL_ANNOTATION], "true");
        assert_eq!(install["spec"]["approval"], "Unapproved");
        assert_eq!(install["spec"]["namespaces"][0]["to"], "operators");
        let parsed = install_from(install);
        assert_eq!(installed_bundle(&parsed), Some("plumbus.v2.0.0"));
        assert_eq!(installed_image(&parsed), Some("registry.example/plumbus@sha256:1"));
        let automatic = new_install("plumbus", "plumbus", "uid-1", None, &target("i", false));
        assert!(automatic["metadata"]["annotations"].get(MANUAL_APPROVAL_ANNOTATION).is_none());
    }

    #[test]
    fn an_install_at_its_target_needs_no_patch() {
        let wanted = target("registry.example/plumbus@sha256:1", false);
        let install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &wanted));
        assert_eq!(install_patch("plumbus", &install, &wanted), None);
    }

    #[test]
    fn an_automatic_upgrade_changes_the_content_and_keeps_the_approval() {
        let install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("old", false)));
        let patch = install_patch("plumbus", &install, &target("new", false)).expect("patch");
        assert_eq!(patch["spec"]["content"][0]["manifestImage"], "new");
        assert!(patch["spec"].get("approval").is_none());
        assert_eq!(patch["metadata"]["resourceVersion"], "5");
    }

    #[test]
    fn a_manual_upgrade_resets_the_approval_in_the_same_write() {
        let mut install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("old", true)));
        install.spec.approval = Approval::Approved;
        let patch = install_patch("plumbus", &install, &target("new", true)).expect("patch");
        assert_eq!(patch["spec"]["approval"], "Unapproved");
        let switched = install_patch("plumbus", &install, &target("old", false)).expect("annotation goes");
        assert!(switched["spec"].get("approval").is_none(), "same content keeps its approval");
        assert!(switched["metadata"]["annotations"][MANUAL_APPROVAL_ANNOTATION].is_null(), "null removes it");
    }

    #[test]
    fn an_install_still_installing_another_bundle_holds_back_a_move() {
        let mut install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("i", false)));
        assert!(!holds_back(None, "plumbus.v2.0.0"), "nothing to hold");
        assert!(!holds_back(Some(&install), "plumbus.v2.0.0"), "the same bundle: nothing moves");
        assert!(holds_back(Some(&install), "plumbus.v3.0.0"), "installing: the next waits");
        install.status = Some(InstallStatus {
            state: Some(InstallState::Installed),
            observed_generation: Some(1),
            ..InstallStatus::default()
        });
        assert!(!holds_back(Some(&install), "plumbus.v3.0.0"), "installed: it may move");
        install.metadata.generation = Some(2);
        install.status = Some(InstallStatus {
            state: Some(InstallState::ExceedsPolicy),
            observed_generation: Some(2),
            ..InstallStatus::default()
        });
        assert!(!holds_back(Some(&install), "plumbus.v3.0.0"), "over a policy: a newer bundle may replace it");
        assert_eq!(holding_bundle(Some(&install)), None);
        install.metadata.generation = Some(3);
        assert!(holds_back(Some(&install), "plumbus.v3.0.0"), "a stale verdict holds nothing open");
        assert!(holding_bundle(Some(&install)).is_some());
    }

    #[test]
    fn an_install_settles_once_its_current_generation_is_installed() {
        let mut install = install_from(new_install("plumbus", "plumbus", "uid-1", None, &target("i", false)));
        assert!(!settled(&install));
        install.status = Some(InstallStatus {
            state: Some(InstallState::Installed),
            observed_generation: Some(1),
            ..InstallStatus::default()
        });
        assert!(settled(&install));
        install.metadata.generation = Some(2);
        assert!(!settled(&install), "a newer spec is not installed yet");
    }
}

//! What a namespace's resolution asks to install (OLM's `ResolveSteps` after the solver): each bundle not installed
//! yet, with the image, channel and catalog it comes from and the CSV it replaces, and the Subscriptions whose
//! `currentCSV` moves to it ("updated"; only then is an InstallPlan made, as in OLM).

use std::collections::BTreeMap;

use kube::ResourceExt;

use super::resolution::Resolved;
use crate::api::v1alpha1::Subscription;
use crate::catalog::dependencies::Source;
use crate::catalog::fbc::Package;
use crate::legacy::installplan::plan::PlannedBundle;

/// The bundles to install and the Subscriptions moved to them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NamespacePlan {
    pub bundles: Vec<PlannedBundle>,
    /// `(Subscription, CSV)`: Subscriptions whose `currentCSV` becomes that CSV.
    pub updated: Vec<(String, String)>,
}

/// The channel a bundle is installed from: the one asked for if it holds the bundle, else the default channel,
/// else the first by name that holds it.
fn channel_of(package: &Package, asked: Option<&str>, bundle: &str) -> String {
    let holds = |channel: &str| {
        package.channels.get(channel).is_some_and(|c| c.entries.iter().any(|entry| entry.name == bundle))
    };
    asked
        .filter(|channel| holds(channel))
        .or(package.default_channel.as_deref().filter(|channel| holds(channel)))
        .or(package.channels.keys().map(String::as_str).find(|channel| holds(channel)))
        .unwrap_or_default()
        .to_owned()
}

fn planned(resolved: &Resolved, sources: &[Source<'_>], subscription: Option<&Subscription>) -> Option<PlannedBundle> {
    let source = sources.get(resolved.source?)?;
    let package = source.catalog.packages.get(&resolved.package)?;
    let bundle = package.bundles.get(&resolved.bundle)?;
    Some(PlannedBundle {
        csv: resolved.bundle.clone(),
        package: resolved.package.clone(),
        channel: channel_of(package, subscription.and_then(|s| s.spec.channel.as_deref()), &resolved.bundle),
        image: bundle.image.clone(),
        catalog: source.name.clone(),
        catalog_namespace: source.namespace.clone(),
        replaces: subscription.and_then(|s| s.status.as_ref()?.installed_csv.clone()),
        subscription: subscription.map(ResourceExt::name_any),
    })
}

/// The plan of a resolved namespace.
pub fn plan_namespace(
    resolved: &BTreeMap<String, Resolved>,
    dependencies: &[Resolved],
    subscriptions: &[Subscription],
    sources: &[Source<'_>],
) -> NamespacePlan {
    let mut plan = NamespacePlan::default();
    for subscription in subscriptions {
        let Some(chosen) = resolved.get(&subscription.name_any()) else { continue };
        let Some(bundle) = planned(chosen, sources, Some(subscription)) else { continue };
        let current = subscription.status.as_ref().and_then(|s| s.current_csv.as_deref());
        if current != Some(chosen.bundle.as_str()) {
            plan.updated.push((subscription.name_any(), chosen.bundle.clone()));
        }
        if !plan.bundles.iter().any(|b| b.csv == bundle.csv) {
            plan.bundles.push(bundle);
        }
    }
    for dependency in dependencies {
        if let Some(bundle) = planned(dependency, sources, None) {
            if !plan.bundles.iter().any(|b| b.csv == bundle.csv) {
                plan.bundles.push(bundle);
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use serde_json::json;
    use std::path::PathBuf;

    fn catalog() -> Catalog {
        let bundle = |package: &str, name: &str, version: &str| {
            json!({"schema": "olm.bundle", "name": name, "package": package, "image": format!("r/{name}"),
                   "properties": [{"type": "olm.package", "value": {"packageName": package, "version": version}}]})
        };
        let blobs = vec![
            json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "name": "stable", "package": "plumbus", "entries": [{"name": "plumbus.v1"}, {"name": "plumbus.v2", "replaces": "plumbus.v1"}]}),
            json!({"schema": "olm.channel", "name": "fast", "package": "plumbus", "entries": [{"name": "plumbus.v2"}]}),
            bundle("plumbus", "plumbus.v1", "1.0.0"),
            bundle("plumbus", "plumbus.v2", "2.0.0"),
            json!({"schema": "olm.package", "name": "grumbo"}),
            json!({"schema": "olm.channel", "name": "beta", "package": "grumbo", "entries": [{"name": "grumbo.v1"}]}),
            bundle("grumbo", "grumbo.v1", "1.0.0"),
        ];
        Catalog::from_blobs(blobs.into_iter().map(|b| (PathBuf::from("c"), b)).collect()).unwrap()
    }

    fn subscription(channel: Option<&str>, current: Option<&str>, installed: Option<&str>) -> Subscription {
        let mut object = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": "plumbus", "namespace": "ops"},
            "spec": {"source": "community", "sourceNamespace": "olm", "name": "plumbus", "channel": channel}});
        object["status"] = json!({"currentCSV": current, "installedCSV": installed});
        serde_json::from_value(object).unwrap()
    }

    fn resolved(bundle: &str, package: &str, source: Option<usize>) -> Resolved {
        Resolved { bundle: bundle.into(), package: package.into(), source }
    }

    #[test]
    fn an_upgrade_and_its_dependency_are_planned_with_their_images_channels_and_what_they_replace() {
        let catalog = catalog();
        let sources =
            vec![Source { name: "community".into(), namespace: "olm".into(), priority: 0, catalog: &catalog }];
        let subs = [subscription(Some("fast"), Some("plumbus.v1"), Some("plumbus.v1"))];
        let chosen: BTreeMap<String, Resolved> =
            [("plumbus".to_owned(), resolved("plumbus.v2", "plumbus", Some(0)))].into();
        let plan = plan_namespace(&chosen, &[resolved("grumbo.v1", "grumbo", Some(0))], &subs, &sources);
        assert_eq!(plan.updated, [("plumbus".to_owned(), "plumbus.v2".to_owned())]);
        assert_eq!(plan.bundles.len(), 2);
        let upgrade = &plan.bundles[0];
        assert_eq!(
            (upgrade.image.as_str(), upgrade.channel.as_str()),
            ("r/plumbus.v2", "fast"),
            "the channel asked for"
        );
        assert_eq!(upgrade.replaces.as_deref(), Some("plumbus.v1"));
        assert_eq!(upgrade.subscription.as_deref(), Some("plumbus"));
        let dependency = &plan.bundles[1];
        assert_eq!(
            (dependency.channel.as_str(), dependency.subscription.as_deref()),
            ("beta", None),
            "no default: the first that holds it"
        );
        assert_eq!((dependency.catalog.as_str(), dependency.catalog_namespace.as_str()), ("community", "olm"));
    }

    #[test]
    fn what_is_installed_or_already_current_moves_no_subscription() {
        let catalog = catalog();
        let sources =
            vec![Source { name: "community".into(), namespace: "olm".into(), priority: 0, catalog: &catalog }];
        let installed: BTreeMap<String, Resolved> =
            [("plumbus".to_owned(), resolved("plumbus.v2", "plumbus", None))].into();
        let subs = [subscription(None, Some("plumbus.v2"), Some("plumbus.v2"))];
        assert_eq!(plan_namespace(&installed, &[], &subs, &sources), NamespacePlan::default());
        let waiting: BTreeMap<String, Resolved> =
            [("plumbus".to_owned(), resolved("plumbus.v2", "plumbus", Some(0)))].into();
        let subs = [subscription(None, Some("plumbus.v2"), Some("plumbus.v1"))];
        let plan = plan_namespace(&waiting, &[], &subs, &sources);
        assert!(plan.updated.is_empty(), "already current: no new plan");
        assert_eq!(plan.bundles[0].channel, "stable", "no channel asked: the default");
    }
}

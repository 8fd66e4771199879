//! A Subscription's deprecation conditions, as OLM v0's `updateDeprecatedStatus` writes them from the catalog's
//! `olm.deprecations`: `PackageDeprecated`, `ChannelDeprecated` and `BundleDeprecated` (True, OLM's messages
//! `olm.package/<package>: ...`, `olm.channel/<channel>: ...`, `olm.bundle/<bundle>: ...`) for the bundle installed
//! (`installedCSV`), and their roll-up `Deprecated` joining the messages with `; `. Informational: a deprecated
//! bundle is still installed and upgraded. Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::v1alpha1::{SubscriptionCondition, SubscriptionStatus};
use crate::catalog::fbc::Package;

pub const DEPRECATED: &str = "Deprecated";
pub const PACKAGE_DEPRECATED: &str = "PackageDeprecated";
pub const CHANNEL_DEPRECATED: &str = "ChannelDeprecated";
pub const BUNDLE_DEPRECATED: &str = "BundleDeprecated";

/// Brings the deprecation conditions to what `package` (the Subscription's package in its catalog, when served)
/// says of the installed bundle in `channel` (the Subscription's; empty for any channel, and then no channel
/// deprecation, as OLM). Nothing changes while the installed bundle is not an entry there. Answers whether the
/// conditions changed.
pub fn with_deprecations(
    status: &mut SubscriptionStatus,
    channel: &str,
    package: Option<&Package>,
    now: &Time,
) -> bool {
    let (Some(package), Some(installed)) = (package, status.installed_csv.clone()) else { return false };
    let listed = package
        .channels
        .values()
        .filter(|c| channel.is_empty() || c.name == channel)
        .any(|c| c.entries.iter().any(|entry| entry.name == installed));
    if !listed {
        return false;
    }
    let deprecations = &package.deprecations;
    let wanted = [
        (PACKAGE_DEPRECATED, deprecations.package.as_ref().map(|m| format!("olm.package/{}: {m}", package.name))),
        (
            CHANNEL_DEPRECATED,
            deprecations
                .channels
                .get(channel)
                .filter(|_| !channel.is_empty())
                .map(|m| format!("olm.channel/{channel}: {m}")),
        ),
        (BUNDLE_DEPRECATED, deprecations.bundles.get(&installed).map(|m| format!("olm.bundle/{installed}: {m}"))),
    ];
    let mut changed = false;
    let mut messages = Vec::new();
    for (type_, message) in wanted {
        let existing = status.conditions.iter().position(|c| c.type_ == type_);
        match (message, existing) {
            (Some(message), existing) => {
                messages.push(message.clone());
                let same = existing.is_some_and(|i| status.conditions[i].message.as_deref() == Some(message.as_str()));
                if !same {
                    set(status, type_, message, now);
                    changed = true;
                }
            }
            (None, Some(index)) => {
                status.conditions.remove(index);
                changed = true;
            }
            (None, None) => {}
        }
    }
    if !changed {
        return false;
    }
    if messages.is_empty() {
        status.conditions.retain(|c| c.type_ != DEPRECATED);
    } else {
        set(status, DEPRECATED, messages.join("; "), now);
    }
    status.last_updated = Some(now.clone());
    true
}

fn set(status: &mut SubscriptionStatus, type_: &str, message: String, now: &Time) {
    let condition = SubscriptionCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: None,
        message: Some(message),
        last_heartbeat_time: None,
        last_transition_time: Some(now.clone()),
    };
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(existing) => *existing = condition,
        None => status.conditions.push(condition),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::catalog::dependencies::tests::bundle;
    use crate::catalog::Catalog;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("a time"))
    }

    /// Plumbus 1.0.0 in channel `stable`, with these deprecation entries.
    fn deprecated(entries: serde_json::Value) -> Catalog {
        let blobs = vec![
            json!({"schema": "olm.package", "name": "plumbus", "defaultChannel": "stable"}),
            json!({"schema": "olm.channel", "package": "plumbus", "name": "stable", "entries": [{"name": "plumbus.v1.0.0"}]}),
            bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![]),
            json!({"schema": "olm.deprecations", "package": "plumbus", "entries": entries}),
        ];
        Catalog::from_blobs(blobs.into_iter().map(|blob| (std::path::PathBuf::from("catalog.json"), blob)).collect())
            .expect("catalog")
    }

    fn installed(csv: &str) -> SubscriptionStatus {
        SubscriptionStatus { installed_csv: Some(csv.into()), ..SubscriptionStatus::default() }
    }

    fn conditions(status: &SubscriptionStatus) -> Vec<(String, String)> {
        status.conditions.iter().map(|c| (c.type_.clone(), c.message.clone().unwrap_or_default())).collect()
    }

    fn pair(type_: &str, message: &str) -> (String, String) {
        (type_.to_owned(), message.to_owned())
    }

    #[test]
    fn every_deprecation_of_the_installed_bundle_is_a_condition_and_the_roll_up_joins_them() {
        let catalog = deprecated(json!([
            {"reference": {"schema": "olm.package"}, "message": "use fleeb"},
            {"reference": {"schema": "olm.channel", "name": "stable"}, "message": "stable is over"},
            {"reference": {"schema": "olm.bundle", "name": "plumbus.v1.0.0"}, "message": "it leaks"}]));
        let package = catalog.packages.get("plumbus");
        let mut status = installed("plumbus.v1.0.0");
        assert!(with_deprecations(&mut status, "stable", package, &at(1)));
        assert_eq!(
            conditions(&status),
            [
                pair(PACKAGE_DEPRECATED, "olm.package/plumbus: use fleeb"),
                pair(CHANNEL_DEPRECATED, "olm.channel/stable: stable is over"),
                pair(BUNDLE_DEPRECATED, "olm.bundle/plumbus.v1.0.0: it leaks"),
                pair(
                    DEPRECATED,
                    "olm.package/plumbus: use fleeb; olm.channel/stable: stable is over; olm.bundle/plumbus.v1.0.0: it leaks"
                ),
            ]
        );
        assert!(status.conditions.iter().all(|c| c.status == "True" && c.reason.is_none()));
        let settled = status.clone();
        assert!(!with_deprecations(&mut status, "stable", package, &at(2)), "nothing new: nothing written");
        assert_eq!(status, settled);
        // Without a channel, no channel deprecation (OLM's special case).
        let mut any = installed("plumbus.v1.0.0");
        with_deprecations(&mut any, "", package, &at(1));
        assert!(!any.conditions.iter().any(|c| c.type_ == CHANNEL_DEPRECATED));
    }

    #[test]
    fn deprecations_lifted_are_removed_and_the_roll_up_with_them() {
        let catalog = deprecated(json!([{"reference": {"schema": "olm.package"}, "message": "use fleeb"}]));
        let mut status = installed("plumbus.v1.0.0");
        with_deprecations(&mut status, "stable", catalog.packages.get("plumbus"), &at(1));
        assert_eq!(status.conditions.len(), 2);
        let lifted = deprecated(json!([]));
        assert!(with_deprecations(&mut status, "stable", lifted.packages.get("plumbus"), &at(2)));
        assert!(status.conditions.is_empty(), "{:?}", status.conditions);
    }

    #[test]
    fn nothing_changes_for_a_bundle_the_channel_does_not_list_or_a_catalog_not_served() {
        let catalog = deprecated(json!([{"reference": {"schema": "olm.package"}, "message": "use fleeb"}]));
        let mut other = installed("plumbus.v0.9.0");
        assert!(!with_deprecations(&mut other, "stable", catalog.packages.get("plumbus"), &at(1)));
        let mut elsewhere = installed("plumbus.v1.0.0");
        assert!(!with_deprecations(&mut elsewhere, "fast", catalog.packages.get("plumbus"), &at(1)));
        assert!(!with_deprecations(&mut elsewhere, "stable", None, &at(1)));
        let mut nothing = SubscriptionStatus::default();
        assert!(!with_deprecations(&mut nothing, "stable", catalog.packages.get("plumbus"), &at(1)));
    }
}

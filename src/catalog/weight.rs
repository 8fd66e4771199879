//! The estimated size in memory of a catalog's model, part by part: what a loaded catalog costs, counted against
//! its limit as it loads and against the budget of all catalogs once loaded (`limits`). Each part is its struct's
//! own size, an allowance for the map entry or element holding it, and the bytes of its strings and collections,
//! and a third more for what the allocator rounds up (its size classes) and keeps around them: counted without that
//! third, `e2e/benches/catalogs.rs`'s catalogs were estimated at 9.3 MiB each and took 12.5 MiB more of the
//! controller's heap each.

use std::mem::size_of;

use super::description::{BundleDescription, Icon};
use super::fbc::{CatalogBundle, Channel, ChannelEntry, Package};
use super::properties::{Constraint, Dependency, Gvk, Rule};

/// What holding a part costs beyond its struct: a map node's keys and links, or a vector's spare room.
const HOLDING: u64 = 64;

fn text(text: &str) -> u64 {
    text.len() as u64
}

/// What the allocator holds for `counted` bytes of a part (above).
fn held(counted: u64) -> u64 {
    counted.saturating_add(counted / 3)
}

fn texts<'a>(texts: impl IntoIterator<Item = &'a String>) -> u64 {
    texts.into_iter().map(|item| size_of::<String>() as u64 + text(item)).sum()
}

/// A package as its `olm.package` blob gives it, without its channels, bundles and descriptions.
pub fn package(name: &str, description: Option<&str>, icon: Option<&Icon>) -> u64 {
    held(
        size_of::<Package>() as u64
            + HOLDING
            + 2 * text(name)
            + description.map_or(0, text)
            + icon.map_or(0, |icon| icon.data.len() as u64 + text(&icon.media_type)),
    )
}

/// A package and all it holds.
pub fn package_all(whole: &Package) -> u64 {
    let deprecations = &whole.deprecations;
    package(&whole.name, whole.description.as_deref(), whole.icon.as_ref())
        + whole.channels.values().map(channel).sum::<u64>()
        + whole.bundles.values().map(bundle).sum::<u64>()
        + whole.descriptions.values().map(description).sum::<u64>()
        + held(deprecations.package.as_deref().map_or(0, text))
        + deprecations
            .channels
            .iter()
            .chain(&deprecations.bundles)
            .map(|(name, message)| deprecation(name, message))
            .sum::<u64>()
}

pub fn channel(channel: &Channel) -> u64 {
    held(
        size_of::<Channel>() as u64
            + HOLDING
            + 2 * text(&channel.name)
            + channel.entries.iter().map(entry).sum::<u64>(),
    )
}

fn entry(entry: &ChannelEntry) -> u64 {
    size_of::<ChannelEntry>() as u64
        + text(&entry.name)
        + entry.replaces.as_deref().map_or(0, text)
        + texts(&entry.skips)
        + entry.skip_range.as_deref().map_or(0, text)
}

pub fn bundle(bundle: &CatalogBundle) -> u64 {
    held(bundle_counted(bundle))
}

fn bundle_counted(bundle: &CatalogBundle) -> u64 {
    size_of::<CatalogBundle>() as u64
        + HOLDING
        + 2 * text(&bundle.name)
        + text(&bundle.package)
        + text(&bundle.image)
        + text(bundle.version.pre.as_str())
        + text(bundle.version.build.as_str())
        + bundle.provides.iter().map(gvk).sum::<u64>()
        + bundle.requires.iter().map(dependency).sum::<u64>()
        + texts(&bundle.labels)
        + bundle.unreadable.as_deref().map_or(0, text)
}

fn gvk(gvk: &Gvk) -> u64 {
    size_of::<Gvk>() as u64 + text(&gvk.group) + text(&gvk.version) + text(&gvk.kind)
}

fn dependency(dependency: &Dependency) -> u64 {
    size_of::<Dependency>() as u64
        + match dependency {
            Dependency::Api(api) => gvk(api),
            Dependency::Package { package, range } => text(package) + range_weight(&range.to_string()),
            Dependency::Constraint(inner) => constraint(inner),
            Dependency::Label(label) => text(label),
        }
}

/// A version range keeps its text and its parsed comparisons (a version each).
fn range_weight(range: &str) -> u64 {
    4 * text(range)
}

fn constraint(constraint: &Constraint) -> u64 {
    size_of::<Constraint>() as u64
        + constraint.failure_message.as_deref().map_or(0, text)
        + match &constraint.rule {
            Rule::Api(api) => gvk(api),
            Rule::Package { package, range } => text(package) + range_weight(&range.to_string()),
            Rule::All(all) | Rule::Any(all) | Rule::Not(all) => all.iter().map(self::constraint).sum(),
            Rule::Cel(rule) => text(rule),
        }
}

/// A channel head's description: what the PackageManifest API shows, counted as the JSON it is shown as.
pub fn description(description: &BundleDescription) -> u64 {
    held(description_counted(description))
}

fn description_counted(description: &BundleDescription) -> u64 {
    size_of::<BundleDescription>() as u64
        + HOLDING
        + text(&description.csv_name)
        + description.labels.iter().map(|(key, value)| HOLDING + text(key) + text(value)).sum::<u64>()
        + description.icon.as_ref().map_or(0, |icon| icon.data.len() as u64 + text(&icon.media_type))
        + serde_json::to_vec(&description.shown).map_or(0, |json| json.len() as u64)
}

/// A deprecation message, by the name it is about.
pub fn deprecation(name: &str, message: &str) -> u64 {
    held(HOLDING + text(name) + text(message))
}

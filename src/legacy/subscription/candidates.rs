//! A Subscription's candidate bundles, as OLM v0's resolver lists them (`getSubscriptionVariables`): from its catalog
//! (or every catalog when it names none), its package, its channel (every channel when it names none: the default
//! channel first, then by name), its `startingCSV` when nothing is installed yet; each channel ordered newest first
//! along its replacement chain (OLM's `sortChannel`, with OLM's errors); with a CSV installed, only the bundles that
//! replace, skip or skipRange it, and the installed one last (an upgrade is preferred to staying).

use std::collections::{BTreeMap, BTreeSet};

use crate::api::v1alpha1::Subscription;
use crate::catalog::dependencies::{Origin, Pick, Source, Want};
use crate::catalog::fbc::{ChannelEntry, Package};
use crate::catalog::properties::VersionRange;
use kube::ResourceExt;

/// The installed CSV a Subscription follows (its `status.installedCSV`), as far as candidates are concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Current {
    pub name: String,
    pub version: Option<semver::Version>,
}

/// Why a Subscription has no candidates: OLM's message, or an error in a channel's replacement chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoCandidates {
    /// An invalid Subscription (OLM's `NewInvalidSubscriptionVariable`): the message of its Prohibited constraint.
    Invalid(String),
    /// A channel whose order cannot be decided (OLM's `sortChannel` errors): a resolution error, not a constraint.
    Channel(String),
}

/// The entries of `entries` (one channel of `package`), newest first along the single replacement chain; entries
/// some other entry skips are left out but walked through. OLM's `sortChannel`.
pub fn sort_channel<'a>(
    package: &str,
    channel: &str,
    entries: &[&'a ChannelEntry],
) -> Result<Vec<&'a ChannelEntry>, String> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let by_name: BTreeMap<&str, usize> = entries.iter().enumerate().map(|(i, e)| (e.name.as_str(), i)).collect();
    let mut replaced = vec![false; entries.len()];
    let mut replaces: Vec<Option<usize>> = vec![None; entries.len()];
    let mut skipped = BTreeSet::new();
    for (index, entry) in entries.iter().enumerate() {
        if let Some(&target) = entry.replaces.as_deref().and_then(|name| by_name.get(name)) {
            replaced[target] = true;
            replaces[index] = Some(target);
        }
        for skip in &entry.skips {
            if let Some(&target) = by_name.get(skip.as_str()) {
                replaced[target] = true;
                skipped.insert(skip.as_str());
            }
        }
    }
    let heads: Vec<usize> = (0..entries.len()).filter(|index| !replaced[*index]).collect();
    if heads.is_empty() {
        return Err(format!(
            "no channel heads (entries not replaced by another entry) found in channel {channel:?} of package {package:?}"
        ));
    }
    let mut chains: Vec<Vec<&ChannelEntry>> = Vec::new();
    for head in heads {
        let mut chain = Vec::new();
        let mut visited = BTreeSet::new();
        let mut current = head;
        loop {
            visited.insert(current);
            if !skipped.contains(entries[current].name.as_str()) {
                chain.push(entries[current]);
            }
            let Some(next) = replaces[current] else { break };
            if visited.contains(&next) {
                return Err(format!(
                    "a cycle exists in the chain of replacement beginning with {:?} in channel {channel:?} of package \
                     {package:?}",
                    entries[head].name
                ));
            }
            current = next;
        }
        chains.push(chain);
    }
    if chains.len() > 1 {
        let named: Vec<String> = chains
            .iter()
            .map(|chain| match chain.as_slice() {
                [] => "[]".to_owned(),
                [only] => only.name.clone(),
                [first, .., last] => format!("{}...{}", first.name, last.name),
            })
            .collect();
        return Err(format!(
            "a unique replacement chain within a channel is required to determine the relative order between channel \
             entries, but {} replacement chains were found in channel {channel:?} of package {package:?}: {}",
            named.len(),
            named.join(", ")
        ));
    }
    Ok(chains.pop().unwrap_or_default())
}

/// Whether `entry` upgrades from `current`: it replaces or skips it, or its skipRange holds its version
/// (OLM's `ReplacesPredicate`, `SkipRangeIncludesPredicate`).
pub fn upgrades_from(entry: &ChannelEntry, current: &Current) -> bool {
    entry.replaces.as_deref() == Some(current.name.as_str())
        || entry.skips.contains(&current.name)
        || entry
            .skip_range
            .as_deref()
            .and_then(|range| VersionRange::parse(range).ok())
            .is_some_and(|range| current.version.as_ref().is_some_and(|version| range.contains(version)))
}

/// The channels of `package` a Subscription on `channel` takes bundles from, in OLM's order: only that channel, or
/// every channel with the default first, then by name.
fn channels_in_order<'a>(package: &'a Package, channel: &str) -> Vec<&'a str> {
    let mut names: Vec<&str> =
        package.channels.keys().map(String::as_str).filter(|c| channel.is_empty() || *c == channel).collect();
    let default = package.default_channel.as_deref();
    names.sort_by_key(|name| (Some(*name) != default, *name));
    names
}

/// The want of `subscription`: its candidates among `sources` in the order OLM prefers them, then `current` (an
/// installed CSV it follows) last.
pub fn subscription_want(
    subscription: &Subscription,
    sources: &[Source<'_>],
    current: Option<&Current>,
) -> Result<Want, NoCandidates> {
    let name = subscription.name_any();
    let spec = &subscription.spec;
    let channel = spec.channel.as_deref().unwrap_or_default();
    let any_catalog = spec.source.is_empty() && spec.source_namespace.is_empty();
    let catalogs: Vec<(usize, &Source<'_>)> = sources
        .iter()
        .enumerate()
        .filter(|(_, s)| any_catalog || (s.name == spec.source && s.namespace == spec.source_namespace))
        .collect();
    let invalid = |message: String| Err(NoCandidates::Invalid(message));
    if catalogs.iter().all(|(_, s)| s.catalog.packages.is_empty()) {
        return invalid(format!(
            "no operators found from catalog {} in namespace {} referenced by subscription {name}",
            spec.source, spec.source_namespace
        ));
    }
    let packages: Vec<(usize, &Package)> =
        catalogs.iter().filter_map(|(i, s)| s.catalog.packages.get(&spec.name).map(|p| (*i, p))).collect();
    if packages.iter().all(|(_, p)| p.bundles.is_empty()) {
        return invalid(format!(
            "no operators found in package {} in the catalog referenced by subscription {name}",
            spec.name
        ));
    }
    let starting = spec.starting_csv.as_deref().filter(|s| !s.is_empty() && current.is_none());
    let mut picks = Vec::new();
    let mut in_channel = false;
    let mut starting_found = false;
    for (index, package) in &packages {
        for channel_name in channels_in_order(package, channel) {
            let entries: Vec<&ChannelEntry> = package.channels[channel_name]
                .entries
                .iter()
                .filter(|entry| package.bundles.contains_key(&entry.name))
                .collect();
            in_channel |= !entries.is_empty();
            let entries: Vec<&ChannelEntry> =
                entries.into_iter().filter(|entry| starting.is_none_or(|s| entry.name == s)).collect();
            starting_found |= !entries.is_empty();
            let sorted = sort_channel(&spec.name, channel_name, &entries).map_err(NoCandidates::Channel)?;
            for entry in sorted {
                if current.is_none_or(|current| upgrades_from(entry, current)) {
                    picks.push(Pick { origin: Origin::Source(*index), bundle: entry.name.clone() });
                }
            }
        }
    }
    if !in_channel {
        return invalid(format!(
            "no operators found in channel {channel} of package {} in the catalog referenced by subscription {name}",
            spec.name
        ));
    }
    if let Some(starting) = starting.filter(|_| !starting_found) {
        return invalid(format!(
            "no operators found with name {starting} in channel {channel} of package {} in the catalog referenced by \
             subscription {name}",
            spec.name
        ));
    }
    if let Some(current) = current {
        picks.push(Pick { origin: Origin::Installed, bundle: current.name.clone() });
    }
    let mut seen = BTreeSet::new();
    picks.retain(|pick| seen.insert(pick.clone()));
    Ok(Want { by: format!("subscription {name}"), package: spec.name.clone(), candidates: picks })
}

#[cfg(test)]
#[path = "candidates_tests.rs"]
mod tests;

//! Resolution in a File-Based Catalog: which bundle an Operator installs first (its entrypoint or the channel head),
//! which bundle it upgrades to from the one installed (along `replaces`, `skips` and `skipRange`), and which other
//! channels hold newer versions.

use semver::Version;

use super::fbc::{Catalog, CatalogBundle, Channel, ChannelEntry, Package};
use crate::api::v2alpha1::AvailableUpdate;

/// What to install from a catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Selection<'a> {
    pub package: Option<&'a str>,
    pub channel: Option<&'a str>,
    pub entrypoint: Option<&'a str>,
}

/// Why a selection resolves to nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    #[error("package {0:?} is not in the catalog")]
    UnknownPackage(String),
    #[error("package {package:?} has no channel {channel:?}")]
    UnknownChannel { package: String, channel: String },
    #[error("package {0:?} names no channel and has no default channel")]
    NoChannel(String),
    #[error("bundle {name:?} is not in {place}")]
    UnknownBundle { name: String, place: String },
    #[error("channel {channel:?} of package {package:?} has no head: every entry is replaced or skipped by another")]
    NoHead { package: String, channel: String },
    #[error("neither a package nor an entrypoint is given")]
    NothingSelected,
    #[error("skipRange {range:?} of {entry:?} is not a version range: {reason}")]
    InvalidSkipRange { entry: String, range: String, reason: String },
}

/// The bundle to run now, and whether the Operator follows a channel for updates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub bundle: CatalogBundle,
    /// The package and channel followed; None when only an entrypoint was asked for.
    pub followed: Option<(String, String)>,
}

/// Resolves a selection. Without `installed`, the entrypoint (or the channel head) is the answer; with it, the next
/// upgrade from it along the channel, or the installed bundle itself when none is found.
pub fn resolve(
    catalog: &Catalog,
    selection: Selection<'_>,
    installed: Option<&str>,
) -> Result<Resolution, ResolveError> {
    let Some(package_name) = selection.package else {
        let entrypoint = selection.entrypoint.ok_or(ResolveError::NothingSelected)?;
        let bundle = catalog
            .packages
            .values()
            .find_map(|package| package.bundles.get(entrypoint))
            .ok_or_else(|| ResolveError::UnknownBundle { name: entrypoint.into(), place: "the catalog".into() })?;
        return Ok(Resolution { bundle: bundle.clone(), followed: None });
    };
    let package =
        catalog.packages.get(package_name).ok_or_else(|| ResolveError::UnknownPackage(package_name.into()))?;
    let channel = channel_of(package, selection.channel)?;
    let followed = Some((package.name.clone(), channel.name.clone()));
    let current = match installed {
        Some(installed) => find_in(package, channel, installed)?,
        None => match selection.entrypoint {
            Some(entrypoint) => find_in(package, channel, entrypoint)?,
            None => bundle_of(package, channel, head(package, channel)?)?,
        },
    };
    let bundle = match installed {
        Some(_) => next_upgrade(package, channel, current)?.unwrap_or(current),
        None => current,
    };
    Ok(Resolution { bundle: bundle.clone(), followed })
}

/// The named channel, or the package's default one.
fn channel_of<'a>(package: &'a Package, channel: Option<&str>) -> Result<&'a Channel, ResolveError> {
    let name =
        channel.or(package.default_channel.as_deref()).ok_or_else(|| ResolveError::NoChannel(package.name.clone()))?;
    package
        .channels
        .get(name)
        .ok_or_else(|| ResolveError::UnknownChannel { package: package.name.clone(), channel: name.into() })
}

fn find_in<'a>(package: &'a Package, channel: &Channel, name: &str) -> Result<&'a CatalogBundle, ResolveError> {
    let entry = channel.entries.iter().find(|entry| entry.name == name).ok_or_else(|| ResolveError::UnknownBundle {
        name: name.into(),
        place: format!("channel {:?} of package {:?}", channel.name, package.name),
    })?;
    bundle_of(package, channel, entry)
}

fn bundle_of<'a>(
    package: &'a Package,
    channel: &Channel,
    entry: &ChannelEntry,
) -> Result<&'a CatalogBundle, ResolveError> {
    package.bundles.get(&entry.name).ok_or_else(|| ResolveError::UnknownBundle {
        name: entry.name.clone(),
        place: format!("the olm.bundle blobs of package {:?} (channel {:?} lists it)", package.name, channel.name),
    })
}

/// The channel head: the entry no other entry replaces or skips. When a malformed channel has several, the highest
/// version wins, so resolution never depends on blob order.
pub fn head<'a>(package: &Package, channel: &'a Channel) -> Result<&'a ChannelEntry, ResolveError> {
    let superseded = |name: &str| {
        channel.entries.iter().any(|other| {
            other.name != name && (other.replaces.as_deref() == Some(name) || other.skips.iter().any(|s| s == name))
        })
    };
    channel
        .entries
        .iter()
        .filter(|entry| !superseded(&entry.name))
        .max_by(|a, b| version_of(package, a).cmp(&version_of(package, b)))
        .ok_or_else(|| ResolveError::NoHead { package: package.name.clone(), channel: channel.name.clone() })
}

fn version_of(package: &Package, entry: &ChannelEntry) -> Option<Version> {
    package.bundles.get(&entry.name).map(|bundle| bundle.version.clone())
}

/// The best upgrade from `current`: among the entries that replace it, skip it, or whose skipRange holds its
/// version, the one with the highest version.
pub fn next_upgrade<'a>(
    package: &'a Package,
    channel: &Channel,
    current: &CatalogBundle,
) -> Result<Option<&'a CatalogBundle>, ResolveError> {
    let mut best: Option<&CatalogBundle> = None;
    for entry in &channel.entries {
        if entry.name == current.name {
            continue;
        }
        let in_range = match &entry.skip_range {
            Some(range) => range_contains(range, &current.version).map_err(|reason| {
                ResolveError::InvalidSkipRange { entry: entry.name.clone(), range: range.clone(), reason }
            })?,
            None => false,
        };
        let upgrades = entry.replaces.as_deref() == Some(current.name.as_str())
            || entry.skips.iter().any(|skipped| skipped == &current.name)
            || in_range;
        if !upgrades {
            continue;
        }
        let Some(candidate) = package.bundles.get(&entry.name) else { continue };
        if best.is_none_or(|best| candidate.version > best.version) {
            best = Some(candidate);
        }
    }
    Ok(best)
}

/// Channels of the package other than `followed` whose head is newer than `installed`.
pub fn newer_in_other_channels(package: &Package, followed: &str, installed: &Version) -> Vec<AvailableUpdate> {
    let mut available: Vec<AvailableUpdate> = package
        .channels
        .values()
        .filter(|channel| channel.name != followed)
        .filter_map(|channel| {
            let head = head(package, channel).ok()?;
            let version = version_of(package, head)?;
            (version > *installed).then(|| AvailableUpdate {
                package: package.name.clone(),
                channel: channel.name.clone(),
                version: Some(version.to_string()),
            })
        })
        .collect();
    available.sort();
    available
}

/// Whether a version range in the syntax OLM's skipRange uses (space-separated comparators that all must hold,
/// alternatives joined by `||`) holds `version`. Pre-releases compare by semver precedence, as OLM does.
pub fn range_contains(range: &str, version: &Version) -> Result<bool, String> {
    let mut any = false;
    for alternative in range.split("||") {
        let comparators: Vec<&str> = alternative.split_whitespace().collect();
        if comparators.is_empty() {
            return Err("an empty alternative".into());
        }
        let mut all = true;
        for comparator in comparators {
            all &= comparator_holds(comparator, version)?;
        }
        any |= all;
    }
    Ok(any)
}

fn comparator_holds(comparator: &str, version: &Version) -> Result<bool, String> {
    let operators = [">=", "<=", "!=", "==", ">", "<", "="];
    let (operator, bound) = operators
        .iter()
        .find_map(|operator| comparator.strip_prefix(operator).map(|rest| (*operator, rest)))
        .unwrap_or(("=", comparator));
    let bound = Version::parse(bound.trim_start_matches('v')).map_err(|error| format!("{comparator:?}: {error}"))?;
    Ok(match operator {
        ">=" => *version >= bound,
        "<=" => *version <= bound,
        ">" => *version > bound,
        "<" => *version < bound,
        "!=" => *version != bound,
        _ => *version == bound,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn entry(name: &str, replaces: Option<&str>, skips: &[&str], skip_range: Option<&str>) -> ChannelEntry {
        ChannelEntry {
            name: name.into(),
            replaces: replaces.map(Into::into),
            skips: skips.iter().map(|s| (*s).into()).collect(),
            skip_range: skip_range.map(Into::into),
        }
    }

    fn package(channels: Vec<(&str, Vec<ChannelEntry>)>, versions: &[(&str, &str)]) -> Package {
        Package {
            name: "plumbus".into(),
            default_channel: Some("stable".into()),
            channels: channels
                .into_iter()
                .map(|(name, entries)| (name.to_owned(), Channel { name: name.into(), entries }))
                .collect(),
            bundles: versions
                .iter()
                .map(|(name, version)| {
                    let bundle = CatalogBundle {
                        name: (*name).into(),
                        package: "plumbus".into(),
                        image: format!("registry.example/{name}"),
                        version: Version::parse(version).expect("version"),
                        provides: Vec::new(),
                        requires: Vec::new(),
                        unreadable: None,
                        labels: Vec::new(),
                        deprecated: false,
                    };
                    ((*name).to_owned(), bundle)
                })
                .collect(),
            ..Default::default()
        }
    }

    fn catalog(package: Package) -> Catalog {
        Catalog { packages: BTreeMap::from([(package.name.clone(), package)]) }
    }

    const VERSIONS: &[(&str, &str)] =
        &[("p.v1", "1.0.0"), ("p.v2", "2.0.0"), ("p.v3", "3.0.0"), ("p.v4", "4.0.0-beta.1")];

    fn stable_chain() -> Package {
        package(
            vec![
                (
                    "stable",
                    vec![
                        entry("p.v1", None, &[], None),
                        entry("p.v2", Some("p.v1"), &[], None),
                        entry("p.v3", Some("p.v2"), &[], None),
                    ],
                ),
                ("beta", vec![entry("p.v4", None, &[], Some(">=1.0.0 <4.0.0-beta.1"))]),
            ],
            VERSIONS,
        )
    }

    fn select<'a>(package: Option<&'a str>, channel: Option<&'a str>, entrypoint: Option<&'a str>) -> Selection<'a> {
        Selection { package, channel, entrypoint }
    }

    #[test]
    fn a_fresh_install_takes_the_channel_head_or_the_entrypoint() {
        let catalog = catalog(stable_chain());
        let head = resolve(&catalog, select(Some("plumbus"), Some("stable"), None), None).expect("head");
        assert_eq!(head.bundle.name, "p.v3");
        assert_eq!(head.followed, Some(("plumbus".into(), "stable".into())));
        let entry = resolve(&catalog, select(Some("plumbus"), None, Some("p.v1")), None).expect("entrypoint");
        assert_eq!(entry.bundle.name, "p.v1", "the default channel holds the entrypoint");
    }

    #[test]
    fn an_entrypoint_alone_installs_that_bundle_without_following_a_channel() {
        let catalog = catalog(stable_chain());
        let only = resolve(&catalog, select(None, None, Some("p.v4")), None).expect("entrypoint");
        assert_eq!((only.bundle.name.as_str(), only.followed), ("p.v4", None));
        assert_eq!(resolve(&catalog, select(None, None, None), None), Err(ResolveError::NothingSelected));
    }

    #[test]
    fn upgrades_follow_replaces_one_edge_at_a_time() {
        let catalog = catalog(stable_chain());
        let next = resolve(&catalog, select(Some("plumbus"), Some("stable"), None), Some("p.v1")).expect("next");
        assert_eq!(next.bundle.name, "p.v2");
        let latest = resolve(&catalog, select(Some("plumbus"), Some("stable"), None), Some("p.v3")).expect("same");
        assert_eq!(latest.bundle.name, "p.v3", "the head upgrades to nothing");
    }

    #[test]
    fn skips_and_skip_ranges_jump_and_the_highest_candidate_wins() {
        let package = package(
            vec![(
                "stable",
                vec![
                    entry("p.v1", None, &[], None),
                    entry("p.v2", Some("p.v1"), &[], None),
                    entry("p.v3", Some("p.v2"), &["p.v1"], None),
                ],
            )],
            VERSIONS,
        );
        let channel = &package.channels["stable"];
        let v1 = &package.bundles["p.v1"];
        assert_eq!(next_upgrade(&package, channel, v1).expect("ok").map(|b| b.name.as_str()), Some("p.v3"));
        let beta = stable_chain();
        let beta_channel = &beta.channels["beta"];
        let v2 = &beta.bundles["p.v2"];
        assert_eq!(next_upgrade(&beta, beta_channel, v2).expect("ok").map(|b| b.name.as_str()), Some("p.v4"));
    }

    #[test]
    fn resolution_errors_name_what_is_missing() {
        let catalog = catalog(stable_chain());
        assert_eq!(
            resolve(&catalog, select(Some("ghost"), None, None), None),
            Err(ResolveError::UnknownPackage("ghost".into()))
        );
        assert!(matches!(
            resolve(&catalog, select(Some("plumbus"), Some("nightly"), None), None),
            Err(ResolveError::UnknownChannel { .. })
        ));
        assert!(matches!(
            resolve(&catalog, select(Some("plumbus"), Some("stable"), Some("p.v4")), None),
            Err(ResolveError::UnknownBundle { .. })
        ));
        let circular = package(
            vec![("stable", vec![entry("p.v1", Some("p.v2"), &[], None), entry("p.v2", Some("p.v1"), &[], None)])],
            VERSIONS,
        );
        assert!(matches!(head(&circular, &circular.channels["stable"]), Err(ResolveError::NoHead { .. })));
    }

    #[test]
    fn other_channels_with_newer_heads_are_available() {
        let package = stable_chain();
        let from_v2 = newer_in_other_channels(&package, "stable", &Version::new(2, 0, 0));
        assert_eq!(
            from_v2,
            vec![AvailableUpdate {
                package: "plumbus".into(),
                channel: "beta".into(),
                version: Some("4.0.0-beta.1".into())
            }]
        );
        assert!(newer_in_other_channels(&package, "stable", &Version::new(5, 0, 0)).is_empty());
        let beta_version = Version::parse("4.0.0-beta.1").expect("version");
        assert!(newer_in_other_channels(&package, "beta", &beta_version).is_empty(), "stable's head, 3.0.0, is older");
    }

    #[test]
    fn ranges_hold_as_olm_reads_them() {
        let version = |v: &str| Version::parse(v).expect("version");
        assert_eq!(range_contains(">=1.0.0 <2.0.0", &version("1.5.0")), Ok(true));
        assert_eq!(range_contains(">=1.0.0 <2.0.0", &version("2.0.0")), Ok(false));
        assert_eq!(range_contains("<1.0.0 || >=3.0.0", &version("3.1.0")), Ok(true));
        assert_eq!(range_contains("<2.0.0", &version("2.0.0-alpha")), Ok(true), "pre-releases precede their release");
        assert_eq!(range_contains("1.2.3", &version("1.2.3")), Ok(true));
        assert_eq!(range_contains("!=1.2.3", &version("1.2.3")), Ok(false));
        assert!(range_contains(">=banana", &version("1.0.0")).is_err());
        assert!(range_contains("<1.0.0 ||", &version("1.0.0")).is_err());
    }
}

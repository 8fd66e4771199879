//! What one catalog may cost, and what the loaded catalogs may cost together. A CatalogSource is a namespace user's
//! object, and every replica loads every CatalogSource's catalog into its own memory: without bounds, a few large
//! catalog images in one namespace take the controller past its memory limit, and a crash loop follows (every
//! replica loads them again at start).
//!
//! One catalog: its image unpacks within [`CatalogLimits::unpack`] (compressed and inflated bytes, files, entries);
//! it is read one blob (a JSON value or a YAML document) at a time, none larger than `max_blob_bytes`, so that a load
//! holds one blob's text and value beside the model it builds; and the model, counted as it grows ([`Tally`]), holds
//! at most `max_packages`, `max_bundles`, `max_channel_entries` and `max_model_bytes` (its estimated size). All
//! catalogs: their models together fit a budget ([`admit`]), and one catalog is parsed at a time (`source`), so that
//! the peak is the loaded models plus one load, whatever the number of CatalogSources.
//!
//! Pure: the loader counts, the cache admits; both act on the answers.

use std::time::Duration;

use crate::bundle::unpack::UnpackLimits;

/// Bounds on one catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CatalogLimits {
    /// What the image may unpack to. Its compressed layers are bounded by the same total (`unpack`).
    pub unpack: UnpackLimits,
    /// Bytes of one blob, as read from its file: the most text a load parses at once.
    pub max_blob_bytes: u64,
    pub max_packages: u64,
    pub max_bundles: u64,
    /// Entries of all channels together.
    pub max_channel_entries: u64,
    /// The model's estimated size once loaded (packages, channels, bundles, the channel heads' descriptions).
    pub max_model_bytes: u64,
}

/// The defaults, and why:
/// - 1 GiB unpacked, a file as large as that (a catalog may be one `index.json`), 20,000 entries and the bundles'
///   ratio of 200: a load reads blob by blob, so the unpacked size costs disk and parse time, not memory; public
///   catalogs are a few hundred MB at most, a fraction of this.
/// - 16 MiB per blob: a bundle blob carries its CSV and CRDs as `olm.bundle.object` properties (base64), and the
///   largest bundles' CRDs are a few MB. Parsing one costs a few times its size while it is read.
/// - 10,000 packages, 100,000 bundles, 200,000 channel entries: an order of magnitude above the largest public
///   catalogs (hundreds of packages, thousands of bundles); each count is also in the model's size.
/// - 64 MiB of model: what stays in memory once loaded. A public catalog's model is a few MiB (its bundles' names,
///   versions and dependencies, and one description per channel head).
impl Default for CatalogLimits {
    fn default() -> Self {
        Self {
            unpack: UnpackLimits {
                max_total_bytes: 1 << 30,
                max_entries: 20_000,
                max_file_bytes: 1 << 30,
                max_compression_ratio: 200,
            },
            max_blob_bytes: 16 << 20,
            max_packages: 10_000,
            max_bundles: 100_000,
            max_channel_entries: 200_000,
            max_model_bytes: 64 << 20,
        }
    }
}

/// What the models of all loaded catalogs may hold together (estimated, as `max_model_bytes`): with the
/// controller's own 60 MiB or so and one load in progress, well within `deploy/`'s 512 MiB limit.
pub const DEFAULT_BUDGET_BYTES: u64 = 192 << 20;

/// A loaded catalog nobody asked for in this long may be dropped to make room for another (it is loaded again when
/// asked for). Every CatalogSource's catalog is asked for at each of its passes (every `--resync-seconds`, 300 by
/// default), so a catalog idle this long is most likely one whose CatalogSource is gone or names another image.
pub const EVICTABLE_AFTER: Duration = Duration::from_secs(10 * 60);

/// Which bound a catalog went over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    Blob,
    Packages,
    Bundles,
    ChannelEntries,
    ModelBytes,
}

/// A catalog over one of its limits: which, and the limit's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OverLimit {
    #[error("a blob (one JSON value or YAML document) is over {} bytes ({}), the limit for one blob", .0, mib(*.0))]
    Blob(u64),
    #[error("the catalog holds more than {0} packages, the limit for one catalog")]
    Packages(u64),
    #[error("the catalog holds more than {0} bundles, the limit for one catalog")]
    Bundles(u64),
    #[error("the catalog's channels hold more than {0} entries, the limit for one catalog")]
    ChannelEntries(u64),
    #[error(
        "the catalog would hold more than {} once loaded (its packages, channels, bundles and channel heads' \
         descriptions, estimated), the limit for one catalog", mib(*.0)
    )]
    ModelBytes(u64),
}

impl OverLimit {
    pub fn limit(&self) -> Limit {
        match self {
            Self::Blob(_) => Limit::Blob,
            Self::Packages(_) => Limit::Packages,
            Self::Bundles(_) => Limit::Bundles,
            Self::ChannelEntries(_) => Limit::ChannelEntries,
            Self::ModelBytes(_) => Limit::ModelBytes,
        }
    }
}

/// `bytes` in MiB, as messages say sizes.
pub fn mib(bytes: u64) -> String {
    let mib = bytes as f64 / f64::from(1 << 20);
    if bytes.is_multiple_of(1 << 20) {
        format!("{mib:.0} MiB")
    } else {
        format!("{mib:.1} MiB")
    }
}

/// What a catalog being loaded holds so far: blobs of each kind read (a repeated blob counts again: it cost a
/// parse) and the estimated bytes kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub packages: u64,
    pub bundles: u64,
    pub channel_entries: u64,
    pub bytes: u64,
}

impl Tally {
    /// Adds `more`, or says which limit the sum would pass (the tally is then unchanged).
    pub fn add(&mut self, limits: &CatalogLimits, more: Tally) -> Result<(), OverLimit> {
        let sum = Tally {
            packages: self.packages.saturating_add(more.packages),
            bundles: self.bundles.saturating_add(more.bundles),
            channel_entries: self.channel_entries.saturating_add(more.channel_entries),
            bytes: self.bytes.saturating_add(more.bytes),
        };
        if sum.packages > limits.max_packages {
            return Err(OverLimit::Packages(limits.max_packages));
        }
        if sum.bundles > limits.max_bundles {
            return Err(OverLimit::Bundles(limits.max_bundles));
        }
        if sum.channel_entries > limits.max_channel_entries {
            return Err(OverLimit::ChannelEntries(limits.max_channel_entries));
        }
        if sum.bytes > limits.max_model_bytes {
            return Err(OverLimit::ModelBytes(limits.max_model_bytes));
        }
        *self = sum;
        Ok(())
    }
}

/// A loaded catalog as the budget sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub key: String,
    /// Its model's estimated bytes.
    pub bytes: u64,
    /// How long since it was last asked for.
    pub idle: Duration,
}

/// Whether a catalog of `needed` bytes may join those `held` within `budget`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// It fits, once the catalogs named are dropped (none when it fits as things are).
    Admit { evict: Vec<String> },
    /// It does not fit, even with every idle catalog dropped: `held` is what the others hold.
    Refuse { held: u64 },
}

/// Admits a catalog of `needed` bytes beside those `held` (not counting the one it replaces) within `budget`,
/// dropping catalogs idle for at least `evictable_after`, the longest idle first, until it fits; a catalog in use
/// is never dropped for another. Nothing is dropped when dropping everything idle would still not make room.
pub fn admit(budget: u64, needed: u64, held: &[Held], evictable_after: Duration) -> Admission {
    let total: u64 = held.iter().map(|catalog| catalog.bytes).sum();
    if total.saturating_add(needed) <= budget {
        return Admission::Admit { evict: Vec::new() };
    }
    let mut idle: Vec<&Held> = held.iter().filter(|catalog| catalog.idle >= evictable_after).collect();
    idle.sort_by(|a, b| b.idle.cmp(&a.idle).then_with(|| a.key.cmp(&b.key)));
    let mut remaining = total;
    let mut evict = Vec::new();
    for catalog in idle {
        if remaining.saturating_add(needed) <= budget {
            break;
        }
        remaining -= catalog.bytes;
        evict.push(catalog.key.clone());
    }
    if remaining.saturating_add(needed) <= budget {
        Admission::Admit { evict }
    } else {
        Admission::Refuse { held: total }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> CatalogLimits {
        CatalogLimits {
            max_packages: 2,
            max_bundles: 3,
            max_channel_entries: 4,
            max_model_bytes: 100,
            ..CatalogLimits::default()
        }
    }

    #[test]
    fn a_tally_grows_until_a_limit_and_names_it() {
        let limits = small();
        let mut tally = Tally::default();
        tally.add(&limits, Tally { packages: 2, bundles: 3, channel_entries: 4, bytes: 100 }).expect("at the limits");
        let before = tally;
        assert_eq!(tally.add(&limits, Tally { packages: 1, ..Tally::default() }), Err(OverLimit::Packages(2)));
        assert_eq!(tally.add(&limits, Tally { bundles: 1, ..Tally::default() }), Err(OverLimit::Bundles(3)));
        assert_eq!(
            tally.add(&limits, Tally { channel_entries: 1, ..Tally::default() }),
            Err(OverLimit::ChannelEntries(4))
        );
        assert_eq!(tally.add(&limits, Tally { bytes: 1, ..Tally::default() }), Err(OverLimit::ModelBytes(100)));
        assert_eq!(tally, before, "a refused addition leaves the tally as it was");
        assert_eq!(
            Tally::default().add(&limits, Tally { bytes: u64::MAX, ..Tally::default() }),
            Err(OverLimit::ModelBytes(100)),
            "no overflow"
        );
    }

    #[test]
    fn each_limit_says_what_it_bounds_and_its_value() {
        assert_eq!(
            OverLimit::Blob(16 << 20).to_string(),
            "a blob (one JSON value or YAML document) is over 16777216 bytes (16 MiB), the limit for one blob"
        );
        assert_eq!(
            OverLimit::Packages(10).to_string(),
            "the catalog holds more than 10 packages, the limit for one catalog"
        );
        assert!(OverLimit::ModelBytes(64 << 20).to_string().contains("more than 64 MiB once loaded"));
        assert_eq!(OverLimit::ChannelEntries(1).limit(), Limit::ChannelEntries);
        assert_eq!(mib(3 << 19), "1.5 MiB");
    }

    fn held(key: &str, bytes: u64, idle_seconds: u64) -> Held {
        Held { key: key.into(), bytes, idle: Duration::from_secs(idle_seconds) }
    }

    #[test]
    fn a_catalog_that_fits_is_admitted_as_things_are() {
        let others = [held("a", 40, 0), held("b", 40, 9999)];
        assert_eq!(admit(100, 20, &others, EVICTABLE_AFTER), Admission::Admit { evict: vec![] });
        assert_eq!(admit(100, 0, &[], EVICTABLE_AFTER), Admission::Admit { evict: vec![] });
    }

    #[test]
    fn room_is_made_by_dropping_the_longest_idle_catalogs_first_and_only_as_many_as_needed() {
        let others = [held("busy", 30, 1), held("idle", 30, 700), held("idler", 30, 900), held("idlest", 5, 1000)];
        assert_eq!(
            admit(100, 40, &others, EVICTABLE_AFTER),
            Admission::Admit { evict: vec!["idlest".into(), "idler".into()] }
        );
    }

    #[test]
    fn a_catalog_that_cannot_fit_drops_nothing_and_is_refused_with_what_the_others_hold() {
        let others = [held("busy", 60, 1), held("idle", 30, 700)];
        assert_eq!(admit(100, 50, &others, EVICTABLE_AFTER), Admission::Refuse { held: 90 });
        assert_eq!(admit(100, 101, &[], EVICTABLE_AFTER), Admission::Refuse { held: 0 }, "alone over the budget");
    }
}

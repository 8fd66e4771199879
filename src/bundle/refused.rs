//! Images refused for what they are (a decompression bomb, a path leaving the root, an unsupported layer), by
//! digest: content behind a digest never changes, so pulling it again on every retry of an Install or a catalog
//! would only inflate the same bomb again (hundreds of megabytes of cache churn, a core kept busy). A refused
//! digest is answered from here until the reference resolves to another digest. Bounded: the oldest refusals are
//! forgotten first, so that a registry serving endless bad digests costs a fixed amount of memory.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

use super::unpack::UnpackLimits;

/// How many refusals are remembered.
const REMEMBERED: usize = 256;

/// Why a digest was refused: the error's category and text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub category: &'static str,
    pub reason: String,
}

type Key = (String, u64, u64, u64, u64);

/// The refusals remembered, by digest and the limits they were judged with (a larger limit may accept the image).
#[derive(Debug, Default)]
pub struct Refusals {
    inner: Mutex<Remembered>,
}

#[derive(Debug, Default)]
struct Remembered {
    by_key: HashMap<Key, Refusal>,
    order: VecDeque<Key>,
}

fn key(digest: &str, limits: UnpackLimits) -> Key {
    (digest.to_owned(), limits.max_total_bytes, limits.max_entries, limits.max_file_bytes, limits.max_compression_ratio)
}

impl Refusals {
    /// The refusal of `digest` under `limits`, if it was refused.
    pub fn get(&self, digest: &str, limits: UnpackLimits) -> Option<Refusal> {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.by_key.get(&key(digest, limits)).cloned()
    }

    /// Remembers that `digest` was refused under `limits`.
    pub fn remember(&self, digest: &str, limits: UnpackLimits, refusal: Refusal) {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let key = key(digest, limits);
        if inner.by_key.insert(key.clone(), refusal).is_none() {
            inner.order.push_back(key);
        }
        while inner.order.len() > REMEMBERED {
            if let Some(oldest) = inner.order.pop_front() {
                inner.by_key.remove(&oldest);
            }
        }
    }

    /// How many refusals are remembered.
    pub fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).by_key.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(reason: &str) -> Refusal {
        Refusal { category: "ImageTooLarge", reason: reason.into() }
    }

    #[test]
    fn a_refused_digest_is_remembered_under_the_limits_it_was_judged_with() {
        let refusals = Refusals::default();
        let limits = UnpackLimits::default();
        assert_eq!(refusals.get("sha256:a", limits), None);
        refusals.remember("sha256:a", limits, refusal("bomb"));
        assert_eq!(refusals.get("sha256:a", limits), Some(refusal("bomb")));
        assert_eq!(refusals.get("sha256:b", limits), None, "another digest");
        let larger = UnpackLimits { max_total_bytes: limits.max_total_bytes * 2, ..limits };
        assert_eq!(refusals.get("sha256:a", larger), None, "judged again under other limits");
    }

    #[test]
    fn the_oldest_refusals_are_forgotten_past_the_bound() {
        let refusals = Refusals::default();
        let limits = UnpackLimits::default();
        for n in 0..REMEMBERED + 10 {
            refusals.remember(&format!("sha256:{n}"), limits, refusal("bomb"));
        }
        // The same digest again takes no second place.
        refusals.remember(&format!("sha256:{}", REMEMBERED + 9), limits, refusal("bomb"));
        assert_eq!(refusals.len(), REMEMBERED);
        assert_eq!(refusals.get("sha256:0", limits), None, "the oldest went first");
        assert!(refusals.get(&format!("sha256:{}", REMEMBERED + 9), limits).is_some());
    }
}

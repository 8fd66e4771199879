//! When a generated serving certificate and its CA are renewed, decided from their dates alone (pure). Each has a
//! finite life (`Lifetimes`: by default a CA of two years, as OLM v0 gives its CAs, and serving certificates of 90
//! days) and is renewed once less than a third of it is left. A CA is never replaced at once: the new one is added to
//! the trust bundle beside the old (clients reload their `caBundle` from it), and serving certificates are signed by
//! it only once it has been there for a grace period, long enough for every replica to have written the new bundle;
//! until then they are signed by the previous CA, whose key is kept for that. Older CAs leave the bundle once the
//! serving certificate every replica presents is the newest CA's (or once they expire). Certificates made to live
//! longer than the lifetimes allow (an earlier version's, valid to the year 4096) are renewed as if due.

use std::time::Duration;

/// How long generated certificates live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    pub ca: Duration,
    pub serving: Duration,
}

impl Default for Lifetimes {
    fn default() -> Self {
        Self { ca: Duration::from_secs(730 * 24 * 3600), serving: Duration::from_secs(90 * 24 * 3600) }
    }
}

impl Lifetimes {
    /// How often each replica looks at the certificate again: a tenth of a serving certificate's life, at most an
    /// hour, at least a second.
    pub fn check_interval(&self) -> Duration {
        (self.serving / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600))
    }

    /// How long a new CA is in the bundle before it signs: two looks of every replica.
    pub fn grace(&self) -> Duration {
        self.check_interval() * 2
    }
}

/// The dates (Unix seconds, `(not_before, not_after)`) of what a certificate's Secret holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// The serving certificate's.
    pub serving: (i64, i64),
    /// The bundle's CAs, newest first.
    pub cas: Vec<(i64, i64)>,
    /// Whether the key of the newest CA is held, and of the one before it.
    pub newest_key: bool,
    pub previous_key: bool,
    /// Whether the serving certificate was signed by the newest CA.
    pub serving_by_newest: bool,
}

/// What to do with the certificate now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Keep,
    /// Make a new CA and put it first in the bundle; the serving certificate stays.
    AddCa,
    /// Issue a new serving certificate, by the newest CA or (while the newest is in its grace period) the one before.
    RenewServing {
        by_newest: bool,
    },
    /// Drop from the bundle the CAs no served certificate needs: every one but the newest once the serving
    /// certificate is the newest's and every replica presents it, else the expired ones.
    Prune,
}

fn seconds(duration: Duration) -> i64 {
    i64::try_from(duration.as_secs()).unwrap_or(i64::MAX)
}

/// The step `held` needs at `now`.
pub fn plan(held: &Held, now: i64, lifetimes: &Lifetimes) -> Step {
    let (ca, serving, grace) = (seconds(lifetimes.ca), seconds(lifetimes.serving), seconds(lifetimes.grace()));
    let Some(&(newest_start, newest_end)) = held.cas.first() else { return Step::AddCa };
    let newest_too_long = newest_end - newest_start > ca;
    if !held.newest_key || newest_end - now < ca / 3 || newest_too_long {
        return Step::AddCa;
    }
    let (serving_start, serving_end) = held.serving;
    if serving_end - now < serving / 3 || serving_end - serving_start > serving {
        let settled = now - newest_start >= grace;
        let previous_usable = held.previous_key && held.cas.get(1).is_some_and(|&(_, end)| end > now);
        return match (settled, previous_usable) {
            (true, _) => Step::RenewServing { by_newest: true },
            (false, true) => Step::RenewServing { by_newest: false },
            // Nothing else may sign: wait for the new CA to be trusted, unless the certificate would expire first.
            (false, false) if serving_end - now > grace => Step::Keep,
            (false, false) => Step::RenewServing { by_newest: true },
        };
    }
    let others = held.cas.iter().skip(1);
    let served_everywhere = held.serving_by_newest && now - serving_start >= grace;
    if held.cas.len() > 1 && served_everywhere || others.clone().any(|&(_, end)| end <= now) {
        return Step::Prune;
    }
    Step::Keep
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * 3600;

    fn held(serving: (i64, i64), cas: &[(i64, i64)]) -> Held {
        Held {
            serving,
            cas: cas.to_vec(),
            newest_key: true,
            previous_key: cas.len() > 1,
            serving_by_newest: cas.len() < 2,
        }
    }

    #[test]
    fn defaults_are_two_years_for_the_ca_and_ninety_days_for_serving_looked_at_hourly() {
        let lifetimes = Lifetimes::default();
        assert_eq!(lifetimes.ca.as_secs(), 730 * 86_400);
        assert_eq!(lifetimes.serving.as_secs(), 90 * 86_400);
        assert_eq!(lifetimes.check_interval(), Duration::from_secs(3600));
        assert_eq!(lifetimes.grace(), Duration::from_secs(7200));
        let short = Lifetimes { ca: Duration::from_secs(60), serving: Duration::from_secs(20) };
        assert_eq!(short.check_interval(), Duration::from_secs(2));
    }

    #[test]
    fn a_fresh_certificate_is_kept_and_renewed_once_a_third_of_its_life_is_left() {
        let lifetimes = Lifetimes::default();
        let fresh = held((0, 90 * DAY), &[(0, 730 * DAY)]);
        assert_eq!(plan(&fresh, DAY, &lifetimes), Step::Keep);
        assert_eq!(plan(&fresh, 60 * DAY, &lifetimes), Step::Keep, "exactly a third left");
        assert_eq!(plan(&fresh, 60 * DAY + 1, &lifetimes), Step::RenewServing { by_newest: true });
        assert_eq!(plan(&fresh, 91 * DAY, &lifetimes), Step::RenewServing { by_newest: true }, "expired");
    }

    #[test]
    fn a_ca_is_added_before_it_is_needed_and_signs_only_after_its_grace() {
        let lifetimes = Lifetimes::default();
        let aging = held((500 * DAY, 590 * DAY), &[(0, 730 * DAY)]);
        assert_eq!(plan(&aging, 400 * DAY, &lifetimes), Step::Keep);
        assert_eq!(plan(&aging, 486 * DAY, &lifetimes), Step::Keep);
        assert_eq!(plan(&aging, 487 * DAY, &lifetimes), Step::AddCa, "under a third of the CA's life left");
        // The new CA first, the old kept; the serving certificate due while the new CA is in its grace period is
        // signed by the old one, then by the new.
        let both = held((500 * DAY, 560 * DAY), &[(540 * DAY, 1270 * DAY), (0, 730 * DAY)]);
        let due = 540 * DAY + 1;
        assert_eq!(plan(&both, due, &lifetimes), Step::RenewServing { by_newest: false });
        assert_eq!(plan(&both, 540 * DAY + 7200, &lifetimes), Step::RenewServing { by_newest: true });
        // Without the old CA's key, the new one is waited for while the certificate has time left.
        let without_old_key = Held { previous_key: false, ..both.clone() };
        assert_eq!(plan(&without_old_key, due, &lifetimes), Step::Keep);
        assert_eq!(plan(&without_old_key, 560 * DAY - 3600, &lifetimes), Step::RenewServing { by_newest: true });
        // Served by the new CA's certificate for its grace period: the old CA leaves the bundle.
        let renewed = Held {
            serving_by_newest: true,
            ..held((700 * DAY, 790 * DAY), &[(540 * DAY, 1270 * DAY), (0, 730 * DAY)])
        };
        assert_eq!(plan(&renewed, 700 * DAY + 3600, &lifetimes), Step::Keep, "not every replica presents it yet");
        assert_eq!(plan(&renewed, 700 * DAY + 7200, &lifetimes), Step::Prune);
        // Still the old CA's certificate: the old CA stays until it expires.
        let old_served = Held { serving_by_newest: false, ..renewed.clone() };
        assert_eq!(plan(&old_served, 700 * DAY + 7200, &lifetimes), Step::Keep);
        assert_eq!(plan(&old_served, 730 * DAY, &lifetimes), Step::Prune);
    }

    #[test]
    fn certificates_made_to_live_longer_than_allowed_are_replaced() {
        let lifetimes = Lifetimes::default();
        let forever = 80_000 * 365 * DAY;
        // An earlier version's CA and certificate, valid to the year 4096: a new CA first, then its certificate.
        let earlier = held((0, forever), &[(0, forever)]);
        assert_eq!(plan(&earlier, DAY, &lifetimes), Step::AddCa);
        let added = Held { serving_by_newest: false, ..held((0, forever), &[(DAY, 731 * DAY), (0, forever)]) };
        assert_eq!(plan(&added, DAY + 100, &lifetimes), Step::RenewServing { by_newest: false });
        assert_eq!(plan(&added, DAY + 7200, &lifetimes), Step::RenewServing { by_newest: true });
    }

    #[test]
    fn a_secret_without_a_ca_or_its_key_gets_a_new_ca_first() {
        let lifetimes = Lifetimes::default();
        assert_eq!(plan(&held((0, DAY), &[]), 0, &lifetimes), Step::AddCa);
        let keyless = Held { newest_key: false, ..held((0, 90 * DAY), &[(0, 730 * DAY)]) };
        assert_eq!(plan(&keyless, DAY, &lifetimes), Step::AddCa);
    }
}

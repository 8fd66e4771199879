//! Fault injection, for testing clients under failure: a switch that makes the server answer a fraction of one
//! user's writes as an overloaded or failing kube-apiserver does, and one that drops every open watch as a restarted
//! kube-apiserver does (the watches resumed from a resourceVersion seen before it are answered `410 Expired`, so
//! clients list again). Off unless a test turns it on; every fault injected is counted.
//!
//! Reviews (SubjectAccessReview, TokenReview...) are created but not stored, so they never fail. The faults of a
//! write, drawn from a seeded generator so that a failing run can be repeated:
//! - `429 TooManyRequests` before the write, as API Priority and Fairness rejects a request it cannot queue;
//! - `409 Conflict` before the write, only for a write that names the resourceVersion it was made against (an
//!   update, or a patch carrying `metadata.resourceVersion`: kube-apiserver retries other patches' conflicts
//!   itself), as a write whose object changed since it was read;
//! - `500 InternalError` before the write, as a storage error;
//! - `500 InternalError` after the write was stored, as an answer lost after etcd committed it: the client cannot
//!   tell it from the one before, and a retry finds its change already made.
//!
//! And one that cuts a client off (a partition between one replica of a controller and the API server): every
//! request whose `User-Agent` contains a given text is answered `503 Service Unavailable`, as a load balancer in
//! front of the API server answers when it reaches no backend, until the client is let through again. Its open
//! watches are not ended by the switch (a test ends them with the store's `restart_watches`).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// A fault one write may be answered with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    TooManyRequests,
    Conflict,
    InternalError,
    InternalErrorAfterWrite,
}

const ALL: [Fault; 4] = [Fault::TooManyRequests, Fault::Conflict, Fault::InternalError, Fault::InternalErrorAfterWrite];

/// Which writes fail: a `fraction` of those authenticated as `user` (impersonating or not), drawn from `seed` (a
/// repeatable sequence of draws; which requests they fall on follows the order requests come in), on `resources`
/// (every resource when empty), with the faults of `kinds` that apply (every one when empty).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WriteFaults {
    pub user: String,
    pub fraction: f64,
    pub seed: u64,
    pub resources: Vec<String>,
    pub kinds: Vec<Fault>,
}

/// What a request's fault decides: nothing, an answer instead of the write, or an answer in place of the write's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Proceed,
    Refuse(Fault),
    LoseAnswer,
}

#[derive(Default)]
struct State {
    writes: Option<(WriteFaults, u64)>,
    injected: BTreeMap<Fault, u64>,
    /// The `User-Agent` texts of the clients cut off.
    cut_off: Vec<String>,
    /// How many requests were refused because their client was cut off.
    refused_cut_off: u64,
}

/// The switch, held by the API server.
#[derive(Default)]
pub struct Faults {
    state: Mutex<State>,
}

/// The verbs that change storage.
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// Created but never stored: a review is a question, not a write.
const REVIEWS: [&str; 5] = [
    "subjectaccessreviews",
    "selfsubjectaccessreviews",
    "localsubjectaccessreviews",
    "selfsubjectrulesreviews",
    "tokenreviews",
];

/// splitmix64: a small, well-mixed generator; its only job is a repeatable sequence per seed.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Faults {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Fails a fraction of `faults.user`'s writes from now on (replacing any earlier plan).
    pub fn fail_writes(&self, faults: WriteFaults) {
        let seed = faults.seed;
        self.lock().writes = Some((faults, seed));
    }

    /// Lets every write through again.
    pub fn stop_failing_writes(&self) {
        self.lock().writes = None;
    }

    /// Answers every request whose `User-Agent` contains `agent` with `503` from now on.
    pub fn cut_off(&self, agent: &str) {
        self.lock().cut_off.push(agent.to_owned());
    }

    /// Lets every client through again.
    pub fn reconnect_all(&self) {
        self.lock().cut_off.clear();
    }

    /// Whether a request from `user_agent` is refused (counted when it is).
    pub fn is_cut_off(&self, user_agent: &str) -> bool {
        let mut state = self.lock();
        let refused = state.cut_off.iter().any(|agent| user_agent.contains(agent.as_str()));
        if refused {
            state.refused_cut_off += 1;
        }
        refused
    }

    /// How many requests were refused because their client was cut off.
    pub fn refused_cut_off(&self) -> u64 {
        self.lock().refused_cut_off
    }

    /// How many of each fault were injected so far.
    pub fn injected(&self) -> BTreeMap<Fault, u64> {
        self.lock().injected.clone()
    }

    /// The fault, if any, for a request of `verb` on `resource` authenticated as `user`; `preconditioned` when it
    /// names the resourceVersion it was made against (so it may conflict).
    pub fn decide(&self, user: &str, verb: &str, resource: &str, preconditioned: bool) -> Decision {
        let mut state = self.lock();
        let Some((faults, generator)) = state.writes.as_mut() else { return Decision::Proceed };
        let named = faults.resources.is_empty() || faults.resources.iter().any(|r| r == resource);
        if faults.user != user || !WRITE_VERBS.contains(&verb) || REVIEWS.contains(&resource) || !named {
            return Decision::Proceed;
        }
        // Only a write against a resourceVersion answers the optimistic-lock conflict (see the module's comment).
        let kinds: Vec<Fault> = ALL
            .into_iter()
            .filter(|kind| faults.kinds.is_empty() || faults.kinds.contains(kind))
            .filter(|kind| *kind != Fault::Conflict || preconditioned)
            .collect();
        let draw = (next(generator) >> 11) as f64 / (1u64 << 53) as f64;
        if draw >= faults.fraction || kinds.is_empty() {
            return Decision::Proceed;
        }
        let fault = kinds[(next(generator) % kinds.len() as u64) as usize];
        *state.injected.entry(fault).or_default() += 1;
        match fault {
            Fault::InternalErrorAfterWrite => Decision::LoseAnswer,
            refused => Decision::Refuse(refused),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn plan(fraction: f64) -> WriteFaults {
        WriteFaults { user: "controller".into(), fraction, seed: 7, ..WriteFaults::default() }
    }

    #[test]
    fn a_cut_off_client_is_refused_by_its_user_agent_until_reconnected() {
        let faults = Faults::default();
        assert!(!faults.is_cut_off("olmv2/0.1.0 (replica-a)"));
        faults.cut_off("(replica-a)");
        assert!(faults.is_cut_off("olmv2/0.1.0 (replica-a)"));
        assert!(!faults.is_cut_off("olmv2/0.1.0 (replica-b)"));
        assert!(!faults.is_cut_off(""));
        faults.reconnect_all();
        assert!(!faults.is_cut_off("olmv2/0.1.0 (replica-a)"));
        assert_eq!(faults.refused_cut_off(), 1);
    }

    #[test]
    fn off_until_switched_on_and_after_switched_off() {
        let faults = Faults::default();
        assert_eq!(faults.decide("controller", "create", "configmaps", false), Decision::Proceed);
        faults.fail_writes(plan(1.0));
        assert_ne!(faults.decide("controller", "create", "configmaps", false), Decision::Proceed);
        faults.stop_failing_writes();
        assert_eq!(faults.decide("controller", "create", "configmaps", false), Decision::Proceed);
    }

    #[test]
    fn only_the_named_users_writes_fail() {
        let faults = Faults::default();
        faults.fail_writes(plan(1.0));
        for verb in ["get", "list", "watch"] {
            assert_eq!(faults.decide("controller", verb, "configmaps", verb == "update"), Decision::Proceed, "{verb}");
        }
        assert_eq!(faults.decide("admin", "patch", "configmaps", false), Decision::Proceed);
        for verb in WRITE_VERBS {
            assert_ne!(faults.decide("controller", verb, "configmaps", verb == "update"), Decision::Proceed, "{verb}");
        }
        assert_eq!(faults.decide("controller", "create", "subjectaccessreviews", false), Decision::Proceed);
    }

    #[test]
    fn a_fraction_fails_with_every_kind_and_only_updates_conflict() {
        let faults = Faults::default();
        faults.fail_writes(plan(0.25));
        let mut failed = 0;
        for round in 0..4000 {
            let verb = ["create", "update", "patch", "delete"][round % 4];
            match faults.decide("controller", verb, "configmaps", verb == "update") {
                Decision::Proceed => {}
                Decision::Refuse(Fault::Conflict) => {
                    assert_eq!(verb, "update", "a {verb} answered Conflict");
                    failed += 1;
                }
                _ => failed += 1,
            }
        }
        assert!((800..1200).contains(&failed), "{failed} of 4000 failed at 0.25");
        let injected = faults.injected();
        assert_eq!(injected.values().sum::<u64>(), failed);
        for fault in [Fault::TooManyRequests, Fault::Conflict, Fault::InternalError, Fault::InternalErrorAfterWrite] {
            assert!(injected.get(&fault).copied().unwrap_or(0) > 50, "{fault:?}: {injected:?}");
        }
    }

    #[test]
    fn a_plan_can_name_the_resources_and_the_faults() {
        let faults = Faults::default();
        let only = vec![Fault::InternalErrorAfterWrite];
        faults.fail_writes(WriteFaults { resources: vec!["installplans".into()], kinds: only, ..plan(1.0) });
        assert_eq!(faults.decide("controller", "create", "configmaps", false), Decision::Proceed);
        for _ in 0..10 {
            assert_eq!(faults.decide("controller", "create", "installplans", false), Decision::LoseAnswer);
        }
        faults.fail_writes(WriteFaults { kinds: vec![Fault::Conflict], ..plan(1.0) });
        assert_eq!(
            faults.decide("controller", "create", "configmaps", false),
            Decision::Proceed,
            "nothing that applies"
        );
        assert_eq!(faults.decide("controller", "update", "configmaps", true), Decision::Refuse(Fault::Conflict));
        assert_eq!(faults.decide("controller", "patch", "configmaps", true), Decision::Refuse(Fault::Conflict));
        assert_eq!(faults.decide("controller", "patch", "configmaps", false), Decision::Proceed, "no precondition");
    }

    #[test]
    fn the_same_seed_fails_the_same_writes() {
        let run = || {
            let faults = Faults::default();
            faults.fail_writes(plan(0.5));
            (0..64).map(|_| faults.decide("controller", "patch", "configmaps", false)).collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
    }
}

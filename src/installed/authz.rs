//! The aggregated API server's authorization decisions, remembered briefly: Kubernetes' delegating authorizer (what
//! every aggregated server built on k8s.io/apiserver uses) caches each SubjectAccessReview answer for 10 seconds,
//! allowed or denied, so that `kubectl get -w` and a console polling do not cost one review per request. A
//! revoked permission therefore holds for at most 10 seconds more, as with those servers. Bounded: when full, the
//! expired decisions go, and if none had, all of them.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::access::AccessCheck;
use crate::api::v2alpha1::Requester;

/// How long a decision is reused (k8s.io/apiserver's `DelegatingAuthorizerConfig` defaults, allowed and denied).
pub const DECISION_TTL: Duration = Duration::from_secs(10);
const CAPACITY: usize = 10_000;

type Key = (String, Option<String>, Vec<String>, Vec<(String, Vec<String>)>, AccessCheck);

/// Decisions by user and check.
#[derive(Default)]
pub struct Decisions {
    remembered: Mutex<BTreeMap<Key, (bool, Instant)>>,
}

fn key(user: &Requester, check: &AccessCheck) -> Key {
    let extra = user.extra.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    (user.username.clone(), user.uid.clone(), user.groups.clone(), extra, check.clone())
}

impl Decisions {
    /// The decision made for `user` and `check` within the last [`DECISION_TTL`] before `now`.
    pub fn recall(&self, user: &Requester, check: &AccessCheck, now: Instant) -> Option<bool> {
        let remembered = self.remembered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (allowed, at) = remembered.get(&key(user, check))?;
        (now.duration_since(*at) < DECISION_TTL).then_some(*allowed)
    }

    pub fn remember(&self, user: &Requester, check: &AccessCheck, allowed: bool, now: Instant) {
        let mut remembered = self.remembered.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if remembered.len() >= CAPACITY {
            remembered.retain(|_, (_, at)| now.duration_since(*at) < DECISION_TTL);
            if remembered.len() >= CAPACITY {
                remembered.clear();
            }
        }
        remembered.insert(key(user, check), (allowed, now));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> Requester {
        Requester {
            username: name.into(),
            uid: None,
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            extra: Default::default(),
        }
    }

    #[test]
    fn a_decision_is_reused_for_the_same_user_and_check_for_ten_seconds_only() {
        let decisions = Decisions::default();
        let check = AccessCheck::resource(Some("team-a"), "list", "packages.operators.coreos.com", "installed", "");
        let now = Instant::now();
        decisions.remember(&user("alice", &["dev"]), &check, true, now);
        assert_eq!(decisions.recall(&user("alice", &["dev"]), &check, now + Duration::from_secs(9)), Some(true));
        assert_eq!(decisions.recall(&user("alice", &["dev"]), &check, now + DECISION_TTL), None, "expired");
        assert_eq!(decisions.recall(&user("alice", &["ops"]), &check, now), None, "other groups, other decision");
        assert_eq!(decisions.recall(&user("bob", &["dev"]), &check, now), None);
        let elsewhere = AccessCheck::resource(Some("team-b"), "list", "packages.operators.coreos.com", "installed", "");
        assert_eq!(decisions.recall(&user("alice", &["dev"]), &elsewhere, now), None, "other namespace");
        decisions.remember(&user("bob", &[]), &check, false, now);
        assert_eq!(decisions.recall(&user("bob", &[]), &check, now), Some(false), "denials too");
    }

    #[test]
    fn a_full_memory_forgets_before_it_grows() {
        let decisions = Decisions::default();
        let now = Instant::now();
        for index in 0..CAPACITY + 5 {
            let check = AccessCheck::resource(Some(&format!("ns-{index}")), "get", "g", "r", "");
            decisions.remember(&user("alice", &[]), &check, true, now);
        }
        assert!(decisions.remembered.lock().unwrap().len() <= CAPACITY);
    }
}

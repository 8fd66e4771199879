//! The Lease protocol of the leader election, as client-go's leader election runs it: a replica reads the Lease,
//! decides ([`decide`], pure) whether to create it, take it (free or expired), renew it (its own) or wait (another's,
//! still current), and writes on the `resourceVersion` it read, so that a write racing another replica's fails with
//! `409 Conflict` and is decided again from a fresh read. No write is blind: a renewal made from a cached view of
//! the Lease (kube-lease-manager's, which this replaced) moved the renew time and duration of a Lease another
//! replica had taken meanwhile, shortened it to the renewing replica's duration, and let that replica take a Lease
//! that was not expired.
//!
//! Writes are merge patches and a create: the controller's role may get, create and patch its Lease, not update it.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::watch;

/// The field manager of the election's writes.
const FIELD_MANAGER: &str = "olmv2-leader-election";

/// What a replica does with the Lease it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// There is no Lease: create it, held by this replica.
    Create,
    /// Free or expired: take it (holder, acquire and renew times, duration, one more transition).
    Take,
    /// This replica's: renew it.
    Renew,
    /// Another replica's and current: read it again later.
    Wait,
}

/// Whether a Lease's holder still holds it at `now`: renewed within its duration.
pub fn current(spec: Option<&LeaseSpec>, now: Timestamp) -> bool {
    let Some(spec) = spec else { return false };
    let duration = spec.lease_duration_seconds.map_or(0, i64::from);
    spec.renew_time
        .as_ref()
        .and_then(|renewed| renewed.0.checked_add(SignedDuration::from_secs(duration)).ok())
        .is_some_and(|expiry| expiry > now)
}

/// What `identity` does with the Lease it read at `now`.
pub fn decide(lease: Option<&Lease>, identity: &str, now: Timestamp) -> Step {
    let Some(lease) = lease else { return Step::Create };
    let spec = lease.spec.as_ref();
    match spec.and_then(|spec| spec.holder_identity.as_deref()).filter(|holder| !holder.is_empty()) {
        Some(holder) if holder == identity => Step::Renew,
        Some(_) if current(spec, now) => Step::Wait,
        _ => Step::Take,
    }
}

/// The merge patch that takes or renews the Lease read, naming its `resourceVersion` (a `409 Conflict` if another
/// replica wrote it since); `None` for the steps that patch nothing, or a Lease without a version.
pub fn write_patch(
    lease: &Lease,
    step: Step,
    identity: &str,
    now: Timestamp,
    seconds: i32,
) -> Option<serde_json::Value> {
    let version = lease.metadata.resource_version.as_deref()?;
    let now = MicroTime(now);
    let spec = match step {
        Step::Renew => {
            serde_json::json!({"holderIdentity": identity, "renewTime": now, "leaseDurationSeconds": seconds})
        }
        Step::Take => {
            let transitions = lease.spec.as_ref().and_then(|spec| spec.lease_transitions).unwrap_or(0);
            serde_json::json!({"holderIdentity": identity, "acquireTime": now, "renewTime": now,
                "leaseDurationSeconds": seconds, "leaseTransitions": transitions.saturating_add(1)})
        }
        Step::Create | Step::Wait => return None,
    };
    Some(serde_json::json!({"metadata": {"resourceVersion": version}, "spec": spec}))
}

/// The Lease a replica creates when there is none, held by it.
pub fn created(name: &str, identity: &str, now: Timestamp, seconds: i32) -> Lease {
    Lease {
        metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
        spec: Some(LeaseSpec {
            holder_identity: Some(identity.to_owned()),
            acquire_time: Some(MicroTime(now)),
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(seconds),
            lease_transitions: Some(0),
            ..LeaseSpec::default()
        }),
    }
}

/// How one attempt ended.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// The Lease is this replica's: created, taken or renewed now.
    Held,
    /// Another replica holds it.
    HeldByAnother,
    /// Another replica wrote it between the read and the write: read it again.
    Raced,
}

/// Why an attempt failed.
#[derive(Debug, thiserror::Error)]
pub enum ElectionError {
    #[error("reading the Lease: {0}")]
    Read(#[source] kube::Error),
    #[error("writing the Lease: {0}")]
    Write(#[source] kube::Error),
    #[error("the API server did not answer within {0:?}")]
    TimedOut(Duration),
}

/// The election's timing, from the lease duration and the renew grace (seconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// `spec.leaseDurationSeconds` of this replica's writes.
    pub seconds: i32,
    /// How long a leader leads without a renewal that succeeded: the lease duration less the grace, so that it
    /// stops before another replica may take the Lease.
    pub renew_deadline: Duration,
    /// How often the leader renews: twice within the deadline, so one failed renewal is tried again in time.
    pub renew_every: Duration,
    /// How often a replica that does not lead reads the Lease, and how soon a failed attempt is made again.
    pub retry: Duration,
}

impl Timing {
    pub fn new(duration: u64, grace: u64) -> Self {
        let deadline = Duration::from_secs(duration.saturating_sub(grace).max(1));
        Timing {
            seconds: i32::try_from(duration).unwrap_or(i32::MAX),
            renew_deadline: deadline,
            renew_every: deadline / 2,
            retry: Duration::from_secs(grace.clamp(1, 2)),
        }
    }
}

/// One read, decision and write, each request bounded by the renew deadline.
async fn attempt(leases: &Api<Lease>, name: &str, identity: &str, timing: Timing) -> Result<Attempt, ElectionError> {
    let bound = timing.renew_deadline;
    let read = tokio::time::timeout(bound, leases.get_opt(name)).await.map_err(|_| ElectionError::TimedOut(bound))?;
    let lease = read.map_err(ElectionError::Read)?;
    let now = Timestamp::now();
    let written = match (decide(lease.as_ref(), identity, now), lease) {
        (Step::Wait, _) => return Ok(Attempt::HeldByAnother),
        (_, None) => {
            let params = PostParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PostParams::default() };
            let lease = created(name, identity, now, timing.seconds);
            tokio::time::timeout(bound, leases.create(&params, &lease)).await.map(|done| done.map(drop))
        }
        (step, Some(lease)) => {
            let Some(patch) = write_patch(&lease, step, identity, now, timing.seconds) else {
                return Ok(Attempt::Raced);
            };
            let params = PatchParams { field_manager: Some(FIELD_MANAGER.to_owned()), ..PatchParams::default() };
            tokio::time::timeout(bound, leases.patch(name, &params, &Patch::Merge(&patch)))
                .await
                .map(|done| done.map(drop))
        }
    };
    match written.map_err(|_| ElectionError::TimedOut(bound))? {
        Ok(()) => Ok(Attempt::Held),
        // Conflict on the version read, or AlreadyExists on a create another replica made first.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(Attempt::Raced),
        Err(error) => Err(ElectionError::Write(error)),
    }
}

/// Runs the election for `identity` until aborted. `leading` is true from a write that made the Lease this
/// replica's until a read shows another holder, or until the renew deadline passes without a renewal that
/// succeeded.
pub async fn run(leases: Api<Lease>, name: String, identity: String, timing: Timing, leading: watch::Sender<bool>) {
    let mut renewed: Option<Instant> = None;
    loop {
        let pause = match attempt(&leases, &name, &identity, timing).await {
            Ok(Attempt::Held) => {
                renewed = Some(Instant::now());
                timing.renew_every
            }
            Ok(Attempt::HeldByAnother) => {
                renewed = None;
                timing.retry
            }
            Ok(Attempt::Raced) => Duration::from_millis(100),
            Err(error) => {
                tracing::warn!(%identity, %error, "the leader election could not read or write its Lease; trying again");
                timing.retry
            }
        };
        let holds = renewed.is_some_and(|at| at.elapsed() <= timing.renew_deadline);
        leading.send_if_modified(|now| std::mem::replace(now, holds) != holds);
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn lease(holder: Option<&str>, renewed: &str, seconds: i32, version: &str) -> Lease {
        Lease {
            metadata: ObjectMeta { resource_version: Some(version.into()), ..ObjectMeta::default() },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(str::to_owned),
                lease_duration_seconds: Some(seconds),
                renew_time: Some(MicroTime(at(renewed))),
                lease_transitions: Some(4),
                ..LeaseSpec::default()
            }),
        }
    }

    #[test]
    fn a_replica_creates_a_missing_lease_takes_a_free_or_expired_one_renews_its_own_and_waits_for_anothers() {
        let now = at("2026-12-03T10:00:10Z");
        assert_eq!(decide(None, "a", now), Step::Create);
        assert_eq!(decide(Some(&lease(Some("a"), "2026-12-03T10:00:05Z", 15, "1")), "a", now), Step::Renew);
        assert_eq!(decide(Some(&lease(Some("b"), "2026-12-03T10:00:05Z", 15, "1")), "a", now), Step::Wait);
        assert_eq!(
            decide(Some(&lease(Some("b"), "2026-12-03T10:00:05Z", 30, "1")), "a", now),
            Step::Wait,
            "another's duration counts, not ours"
        );
        assert_eq!(decide(Some(&lease(Some("b"), "2026-12-03T09:59:50Z", 15, "1")), "a", now), Step::Take, "expired");
        assert_eq!(
            decide(Some(&lease(Some("b"), "2026-12-03T09:59:55Z", 15, "1")), "a", now),
            Step::Take,
            "just expired"
        );
        assert_eq!(decide(Some(&lease(None, "2026-12-03T10:00:05Z", 15, "1")), "a", now), Step::Take, "released");
        assert_eq!(decide(Some(&lease(Some(""), "2026-12-03T10:00:05Z", 15, "1")), "a", now), Step::Take, "no holder");
        assert_eq!(decide(Some(&Lease::default()), "a", now), Step::Take, "an empty Lease");
        assert_eq!(
            decide(Some(&lease(Some("a"), "2026-12-03T09:00:00Z", 15, "1")), "a", now),
            Step::Renew,
            "our own, even late: the write on the version read fails if another took it"
        );
    }

    #[test]
    fn every_write_names_the_version_read_and_only_a_take_counts_a_transition() {
        let now = at("2026-12-03T10:00:10Z");
        let expired = lease(Some("b"), "2026-12-03T09:00:00Z", 30, "42");
        assert_eq!(
            write_patch(&expired, Step::Take, "a", now, 15),
            Some(serde_json::json!({
                "metadata": {"resourceVersion": "42"},
                "spec": {"holderIdentity": "a", "acquireTime": "2026-12-03T10:00:10.000000Z",
                    "renewTime": "2026-12-03T10:00:10.000000Z", "leaseDurationSeconds": 15, "leaseTransitions": 5},
            }))
        );
        let ours = lease(Some("a"), "2026-12-03T10:00:05Z", 15, "43");
        assert_eq!(
            write_patch(&ours, Step::Renew, "a", now, 15),
            Some(serde_json::json!({
                "metadata": {"resourceVersion": "43"},
                "spec": {"holderIdentity": "a", "renewTime": "2026-12-03T10:00:10.000000Z", "leaseDurationSeconds": 15},
            }))
        );
        assert_eq!(write_patch(&ours, Step::Wait, "a", now, 15), None);
        let mut unversioned = ours.clone();
        unversioned.metadata.resource_version = None;
        assert_eq!(write_patch(&unversioned, Step::Renew, "a", now, 15), None, "never a blind write");
    }

    #[test]
    fn a_created_lease_is_held_by_its_creator_from_now() {
        let now = at("2026-12-03T10:00:10Z");
        let lease = created("olmv2-controller", "a", now, 15);
        assert_eq!(lease.metadata.name.as_deref(), Some("olmv2-controller"));
        assert_eq!(decide(Some(&lease), "a", now), Step::Renew);
        assert_eq!(decide(Some(&lease), "b", now), Step::Wait);
        assert!(current(lease.spec.as_ref(), now));
        assert!(!current(lease.spec.as_ref(), at("2026-12-03T10:00:25Z")), "expired after its 15 seconds");
    }

    #[test]
    fn the_leader_renews_twice_within_its_deadline_and_the_deadline_ends_before_the_lease() {
        let defaults = Timing::new(15, 5);
        assert_eq!(defaults.seconds, 15);
        assert_eq!(defaults.renew_deadline, Duration::from_secs(10));
        assert_eq!(defaults.renew_every, Duration::from_secs(5));
        assert_eq!(defaults.retry, Duration::from_secs(2));
        let short = Timing::new(3, 1);
        assert_eq!(
            (short.renew_deadline, short.renew_every, short.retry),
            (Duration::from_secs(2), Duration::from_secs(1), Duration::from_secs(1))
        );
    }
}

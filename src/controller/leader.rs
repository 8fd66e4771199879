//! Leader election (`--leader-elect`): several replicas serve the approval webhook and the aggregated API, and only
//! the one holding a `coordination.k8s.io/v1` Lease in the controller's namespace reconciles. The protocol is
//! kube-lease-manager's (server-side apply of the Lease, renewal before it expires, tolerated clock skew); this
//! module turns its "am I the leader" channel into terms during which the controllers run, and fences each term
//! with a renew deadline of its own ([`watch_term`]): the crate's channel stays true while the API cannot be
//! reached, and a leader that cannot confirm its Lease must stop before another may take it, as client-go's
//! leader election does. Leaving releases the Lease with a write of its own, conditioned on the version read
//! ([`Election::leave`]): the crate's release is not conditioned.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How replicas elect the one that reconciles.
#[derive(Clone, Debug, clap::Args)]
pub struct LeaderOptions {
    /// Reconcile only while this process holds the Lease; without it, the process always reconciles (run one
    /// replica then).
    #[arg(id = "leader_elect", long = "leader-elect", env = "OLMV2_LEADER_ELECT")]
    pub enabled: bool,
    /// Name of the Lease, in the controller's namespace.
    #[arg(
        id = "leader_elect_lease_name",
        long = "leader-elect-lease-name",
        value_name = "NAME",
        env = "OLMV2_LEADER_ELECT_LEASE_NAME",
        default_value = "olmv2-controller"
    )]
    pub lease_name: String,
    /// This replica's name in the Lease (`spec.holderIdentity`); default: the host name (a Pod's name) and a random
    /// suffix.
    #[arg(
        id = "leader_elect_identity",
        long = "leader-elect-identity",
        value_name = "IDENTITY",
        env = "OLMV2_LEADER_ELECT_IDENTITY"
    )]
    pub identity: Option<String>,
    /// How long a leader that stopped renewing holds the Lease (`spec.leaseDurationSeconds`): the longest a new
    /// leader waits after a replica dies without releasing it.
    #[arg(
        id = "leader_elect_lease_seconds",
        long = "leader-elect-lease-seconds",
        value_name = "SECONDS",
        env = "OLMV2_LEADER_ELECT_LEASE_SECONDS",
        default_value_t = 15
    )]
    pub lease_seconds: u64,
    /// How long before the Lease expires the leader renews it.
    #[arg(
        id = "leader_elect_grace_seconds",
        long = "leader-elect-grace-seconds",
        value_name = "SECONDS",
        env = "OLMV2_LEADER_ELECT_GRACE_SECONDS",
        default_value_t = 5
    )]
    pub grace_seconds: u64,
}

impl Default for LeaderOptions {
    fn default() -> Self {
        Self {
            enabled: false,
            lease_name: "olmv2-controller".into(),
            identity: None,
            lease_seconds: 15,
            grace_seconds: 5,
        }
    }
}

/// The identity of this replica: the given one, or the host name with a random suffix (two processes on one host
/// must not share it).
pub fn identity(options: &LeaderOptions) -> String {
    if let Some(identity) = options.identity.clone().filter(|identity| !identity.is_empty()) {
        return identity;
    }
    let host = std::env::var("HOSTNAME").ok().filter(|host| !host.is_empty()).unwrap_or_else(|| "olmv2".to_owned());
    // The standard library's hasher keys are random per process: a random suffix without another dependency.
    let suffix = std::hash::BuildHasher::hash_one(&std::collections::hash_map::RandomState::new(), std::process::id());
    format!("{host}-{suffix:016x}")
}

/// This replica's part in the election.
pub struct Election {
    /// Whether this replica holds the Lease, as the lease manager last saw it.
    pub leading: watch::Receiver<bool>,
    pub identity: String,
    /// The lease manager's task; `None` once left.
    task: Option<JoinHandle<Result<LeaseManager, LeaseManagerError>>>,
    leases: Api<Lease>,
    lease_name: String,
}

impl Election {
    /// Leaves the election: the lease manager stops, and the Lease is released if it is still this replica's,
    /// before this returns or within a few seconds (the Lease otherwise expires as a killed replica's would).
    ///
    /// The lease manager's own release (when its channel closes) patches the Lease it last saw as its own without a
    /// precondition, so a replica that left just after another took the Lease would clear the new holder's: the
    /// manager is stopped without releasing, and the release is a write on the version read ([`release_patch`]).
    pub async fn leave(mut self) {
        let Some(task) = self.task.take() else { return };
        task.abort();
        let _ = task.await;
        let identity = self.identity.clone();
        match tokio::time::timeout(LEAVE_TIMEOUT, release(&self.leases, &self.lease_name, &identity)).await {
            Ok(Ok(Released::Released)) => tracing::info!(%identity, "left the leader election; the Lease released"),
            Ok(Ok(Released::NotOurs)) => {
                tracing::info!(%identity, "left the leader election; the Lease is not ours, left as it is");
            }
            Ok(Err(error)) => tracing::warn!(%identity, %error, "the Lease could not be released; it expires"),
            Err(_) => tracing::warn!(%identity, "the Lease was not released in time; it expires"),
        }
    }
}

impl Drop for Election {
    /// Dropped without leaving (the replica's task aborted where it was, as in a killed process): the lease manager
    /// stops too, without releasing the Lease, which expires. (The abort is asked before the manager's channel
    /// closes, so it never runs its release.)
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What leaving did to the Lease.
#[derive(Debug, PartialEq, Eq)]
enum Released {
    Released,
    /// Held by another replica (or by none, or gone): nothing written.
    NotOurs,
}

/// The merge patch that releases the Lease `identity` holds, as the lease manager releases it (holder, times and
/// duration cleared: the other replicas' managers, which read it again when they expect it to expire, find it free
/// and take it without forcing it), naming the `resourceVersion` read so that it fails if another replica took the
/// Lease since; `None` when it is not `identity`'s.
pub fn release_patch(lease: &Lease, identity: &str) -> Option<serde_json::Value> {
    let spec = lease.spec.as_ref()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    let version = lease.metadata.resource_version.as_deref()?;
    Some(serde_json::json!({
        "metadata": {"resourceVersion": version},
        "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null, "leaseDurationSeconds": null},
    }))
}

/// Releases the Lease if it is `identity`'s, on the version read (a `409 Conflict` when it changed meanwhile). A
/// patch, as the lease manager's writes: the controller's role may patch its Lease, not update it.
async fn release(leases: &Api<Lease>, name: &str, identity: &str) -> Result<Released, kube::Error> {
    let Some(lease) = leases.get_opt(name).await? else { return Ok(Released::NotOurs) };
    let Some(patch) = release_patch(&lease, identity) else { return Ok(Released::NotOurs) };
    leases.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    Ok(Released::Released)
}

/// How long leaving waits for the Lease to be released.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The lease duration and the renew grace, as the lease manager takes them (at least 2 s, grace below duration).
fn timing(options: &LeaderOptions) -> (u64, u64) {
    let duration = options.lease_seconds.max(2);
    (duration, options.grace_seconds.clamp(1, duration - 1))
}

/// The client the election writes the Lease with: the process's configuration without kube's retry of `429`, `503`
/// and `504`. The lease manager's writes are blind patches carrying the renew time it read the clock for; retried
/// with backoff across a partition, a renewal lands seconds late, after another replica took the Lease, and moves
/// that replica's renew time back, so that every replica takes its Lease for expired and releases it (seen in the
/// fault suite's cut-off leader). A renewal that fails is simply made again, fresh, on the lease manager's next beat.
pub fn election_client(config: &kube::Config) -> Result<kube::Client, kube::Error> {
    let mut config = config.clone();
    config.default_retry = false;
    super::connect::client(config)
}

/// Joins the election. Each replica applies the Lease with a field manager of its own, so that taking it is a
/// server-side apply conflict between replicas.
pub async fn elect(
    client: kube::Client,
    namespace: &str,
    options: &LeaderOptions,
) -> Result<Election, LeaseManagerError> {
    let identity = identity(options);
    let (duration, grace) = timing(options);
    let leases = Api::<Lease>::namespaced(client.clone(), namespace);
    let manager = LeaseManagerBuilder::new(client, options.lease_name.clone())
        .with_namespace(namespace)
        .with_identity(identity.clone())
        .with_duration(duration)
        .with_grace(grace)
        .build()
        .await?;
    let (leading, task) = manager.watch().await;
    Ok(Election { leading, identity, task: Some(task), leases, lease_name: options.lease_name.clone() })
}

/// What one read of the Lease says about this replica's term.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observed {
    /// Held by this replica and renewed within its duration.
    Ours,
    /// Held by another replica, expired, or gone: the term is over.
    NotOurs,
    /// The Lease could not be read.
    Unreadable,
}

/// Reads what the Lease says of `identity` at `now`.
pub fn observe(lease: Option<&Lease>, identity: &str, now: Timestamp) -> Observed {
    let Some(spec) = lease.and_then(|lease| lease.spec.as_ref()) else { return Observed::NotOurs };
    let ours = spec.holder_identity.as_deref() == Some(identity);
    let duration = spec.lease_duration_seconds.map_or(0, i64::from);
    let current = spec
        .renew_time
        .as_ref()
        .and_then(|renewed| renewed.0.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(duration)).ok())
        .is_some_and(|expiry| expiry > now);
    if ours && current {
        Observed::Ours
    } else {
        Observed::NotOurs
    }
}

/// Whether a term goes on: confirmed by reading the Lease as ours, over when it is not, and over too when it could
/// not be confirmed for longer than `deadline` (the lease duration less the renew grace: before another replica
/// may take it).
pub fn term_goes_on(observed: Observed, since_confirmed: Duration, deadline: Duration) -> bool {
    match observed {
        Observed::Ours => true,
        Observed::NotOurs => false,
        Observed::Unreadable => since_confirmed <= deadline,
    }
}

/// How often a term reads its Lease, and how long one read may take.
const CHECK: Duration = Duration::from_secs(1);

/// Reads the Lease once, bounded in time.
async fn read(leases: &Api<Lease>, name: &str, identity: &str) -> Observed {
    match tokio::time::timeout(CHECK, leases.get_opt(name)).await {
        Ok(Ok(lease)) => observe(lease.as_ref(), identity, Timestamp::now()),
        Ok(Err(_)) | Err(_) => Observed::Unreadable,
    }
}

/// Completes once the Lease reads as this replica's: a term starts only then (after a term its fence ended, the
/// lease manager may still say it leads).
pub async fn confirmed(client: kube::Client, namespace: &str, options: &LeaderOptions, identity: &str) {
    let leases = Api::<Lease>::namespaced(client, namespace);
    while read(&leases, &options.lease_name, identity).await != Observed::Ours {
        tokio::time::sleep(CHECK).await;
    }
}

/// Completes when this replica's term must end: the Lease read as not its own, or not confirmed within the renew
/// deadline (the API unreachable, or answering too slowly).
pub async fn watch_term(client: kube::Client, namespace: &str, options: &LeaderOptions, identity: &str) {
    let leases = Api::<Lease>::namespaced(client, namespace);
    let (duration, grace) = timing(options);
    let deadline = Duration::from_secs(duration - grace);
    let mut confirmed = Instant::now();
    loop {
        tokio::time::sleep(CHECK).await;
        let observed = read(&leases, &options.lease_name, identity).await;
        if observed == Observed::Ours {
            confirmed = Instant::now();
        }
        if !term_goes_on(observed, confirmed.elapsed(), deadline) {
            tracing::warn!(%identity, ?observed, "the Lease is not confirmed ours: the term ends");
            return;
        }
    }
}

/// Waits until `leading` says this replica leads (true) or stops leading (false), as `wanted`; `false` when the
/// election ended.
pub async fn until(leading: &mut watch::Receiver<bool>, wanted: bool) -> bool {
    leading.wait_for(|now| *now == wanted).await.is_ok()
}

/// The first back-off between attempts to join the election (the Lease API unreachable); it doubles up to
/// [`MAX_RETRY`].
pub const RETRY: Duration = Duration::from_secs(2);
pub const MAX_RETRY: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_identity_is_kept_and_a_default_one_is_unique_per_process() {
        let given = LeaderOptions { identity: Some("olmv2-controller-7d9f".into()), ..LeaderOptions::default() };
        assert_eq!(identity(&given), "olmv2-controller-7d9f");
        let default = identity(&LeaderOptions::default());
        assert!(default.len() > 16, "{default}");
        let again = identity(&LeaderOptions { identity: Some(String::new()), ..LeaderOptions::default() });
        assert_ne!(default, again, "two processes on one host must not share an identity");
    }

    #[tokio::test]
    async fn terms_follow_the_channel() {
        let (sender, mut leading) = watch::channel(false);
        sender.send_replace(true);
        assert!(until(&mut leading, true).await);
        sender.send_replace(false);
        assert!(until(&mut leading, false).await);
        drop(sender);
        assert!(!until(&mut leading, true).await, "the election ended");
    }

    fn lease(holder: &str, renewed: Timestamp, seconds: i32) -> Lease {
        Lease {
            spec: Some(k8s_openapi::api::coordination::v1::LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(seconds),
                renew_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(renewed)),
                ..Default::default()
            }),
            ..Lease::default()
        }
    }

    #[test]
    fn the_lease_is_ours_only_while_held_by_us_and_unexpired() {
        let now: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let before = |seconds: i64| now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(seconds)).unwrap();
        assert_eq!(observe(Some(&lease("a", before(3), 15)), "a", now), Observed::Ours);
        assert_eq!(observe(Some(&lease("b", before(3), 15)), "a", now), Observed::NotOurs, "another holder");
        assert_eq!(observe(Some(&lease("a", before(20), 15)), "a", now), Observed::NotOurs, "expired");
        assert_eq!(observe(None, "a", now), Observed::NotOurs, "deleted");
        assert_eq!(observe(Some(&Lease::default()), "a", now), Observed::NotOurs);
    }

    #[test]
    fn a_term_ends_when_the_lease_is_not_ours_or_unconfirmed_past_the_deadline() {
        let deadline = Duration::from_secs(10);
        assert!(term_goes_on(Observed::Ours, Duration::from_secs(60), deadline));
        assert!(!term_goes_on(Observed::NotOurs, Duration::ZERO, deadline));
        assert!(term_goes_on(Observed::Unreadable, Duration::from_secs(9), deadline));
        assert!(!term_goes_on(Observed::Unreadable, Duration::from_secs(11), deadline), "before another may take it");
    }

    #[test]
    fn only_our_own_lease_is_released_and_on_the_version_read() {
        let now: Timestamp = "2026-11-26T10:00:00Z".parse().unwrap();
        let mut ours = lease("a", now, 15);
        ours.metadata.resource_version = Some("42".into());
        let patch = release_patch(&ours, "a").expect("ours");
        assert_eq!(
            patch,
            serde_json::json!({
                "metadata": {"resourceVersion": "42"},
                "spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null, "leaseDurationSeconds": null},
            }),
            "cleared as the lease manager clears it (its transitions kept), and only on the version read"
        );
        let mut theirs = lease("b", now, 15);
        theirs.metadata.resource_version = Some("43".into());
        assert!(release_patch(&theirs, "a").is_none(), "another's is left alone");
        assert!(release_patch(&Lease::default(), "a").is_none(), "a free Lease is left alone");
    }
}

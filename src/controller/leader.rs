//! Leader election (`--leader-elect`): several replicas serve the approval webhook and the aggregated API, and only
//! the one holding a `coordination.k8s.io/v1` Lease in the controller's namespace reconciles. The protocol (read,
//! decide, write on the version read) is in [`super::lease`]; this module turns its "am I the leader" channel into
//! terms during which the controllers run, and fences each term with reads of its own ([`watch_term`]): a leader
//! that cannot confirm its Lease must stop before another may take it, as client-go's leader election does.
//! Leaving releases the Lease with a write conditioned on the version read ([`Election::leave`]).

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use tokio::sync::watch;

use super::lease::{self, Timing};
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
    /// Whether this replica holds the Lease, as the election's last read and write say.
    pub leading: watch::Receiver<bool>,
    pub identity: String,
    /// The election's task; `None` once left.
    task: Option<JoinHandle<()>>,
    leases: Api<Lease>,
    lease_name: String,
}

impl Election {
    /// Leaves the election: its task stops, and the Lease is released if it is still this replica's, before this
    /// returns or within a few seconds (the Lease otherwise expires as a killed replica's would). The release is a
    /// write on the version read ([`release_patch`]), so that a Lease another replica took meanwhile is left alone.
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
    /// Dropped without leaving (the replica's task aborted where it was, as in a killed process): the election stops
    /// too, without releasing the Lease, which expires.
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

/// The merge patch that releases the Lease `identity` holds (holder, times and duration cleared, its transitions
/// kept: the other replicas find it free on their next read and take it), naming the `resourceVersion` read so that it fails if another replica took the
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
/// patch, as the election's writes: the controller's role may patch its Lease, not update it.
async fn release(leases: &Api<Lease>, name: &str, identity: &str) -> Result<Released, kube::Error> {
    let Some(lease) = leases.get_opt(name).await? else { return Ok(Released::NotOurs) };
    let Some(patch) = release_patch(&lease, identity) else { return Ok(Released::NotOurs) };
    leases.patch(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&patch)).await?;
    Ok(Released::Released)
}

/// How long leaving waits for the Lease to be released.
const LEAVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The election's timing from the options (a lease of at least 2 s, a grace below it).
fn timing(options: &LeaderOptions) -> Timing {
    let duration = options.lease_seconds.max(2);
    Timing::new(duration, options.grace_seconds.clamp(1, duration - 1))
}

/// The client the election reads and writes the Lease with: the process's configuration without kube's retry of
/// `429`, `503` and `504`. Each attempt is bounded by the renew deadline and made again from a fresh read; a
/// retry with backoff would only hold the election past the point where its answer still matters.
pub fn election_client(config: &kube::Config) -> Result<kube::Client, kube::Error> {
    let mut config = config.clone();
    config.default_retry = false;
    super::connect::client(config)
}

/// Joins the election: its task runs until the [`Election`] is left or dropped.
pub fn elect(client: kube::Client, namespace: &str, options: &LeaderOptions) -> Election {
    let identity = identity(options);
    let leases = Api::<Lease>::namespaced(client, namespace);
    let (leader, leading) = watch::channel(false);
    let task =
        tokio::spawn(lease::run(leases.clone(), options.lease_name.clone(), identity.clone(), timing(options), leader));
    Election { leading, identity, task: Some(task), leases, lease_name: options.lease_name.clone() }
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
    let spec = lease.and_then(|lease| lease.spec.as_ref());
    let ours = spec.is_some_and(|spec| spec.holder_identity.as_deref() == Some(identity));
    if ours && lease::current(spec, now) {
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
/// election may still say it leads until its next read).
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
    let deadline = timing(options).renew_deadline;
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
            "cleared, its transitions kept, and only on the version read"
        );
        let mut theirs = lease("b", now, 15);
        theirs.metadata.resource_version = Some("43".into());
        assert!(release_patch(&theirs, "a").is_none(), "another's is left alone");
        assert!(release_patch(&Lease::default(), "a").is_none(), "a free Lease is left alone");
    }
}

//! Leader election (`--leader-elect`): several replicas serve the approval webhook and the aggregated API, and only
//! the one holding a `coordination.k8s.io/v1` Lease in the controller's namespace reconciles. The protocol is
//! kube-lease-manager's (server-side apply of the Lease, renewal before it expires, tolerated clock skew); this
//! module only turns its "am I the leader" channel into terms during which the controllers run.

use std::time::Duration;

use kube_lease_manager::{LeaseManagerBuilder, LeaseManagerError};
use tokio::sync::watch;

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
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let suffix: u32 = std::process::id().rotate_left(16) ^ now;
    format!("{host}-{suffix:08x}")
}

/// Starts electing; the channel says whether this replica leads. Dropping every receiver releases the Lease (a
/// clean stop hands over at once; a killed replica's Lease expires after `lease_seconds`).
pub async fn elect(
    client: kube::Client,
    namespace: &str,
    options: &LeaderOptions,
) -> Result<watch::Receiver<bool>, LeaseManagerError> {
    let identity = identity(options);
    let manager = LeaseManagerBuilder::new(client, options.lease_name.clone())
        .with_namespace(namespace)
        .with_identity(identity.clone())
        .with_duration(options.lease_seconds.max(2))
        .with_grace(options.grace_seconds.clamp(1, options.lease_seconds.max(2) - 1))
        .with_field_manager("olmv2-leader-election")
        .build()
        .await?;
    let (leading, task) = manager.watch().await;
    tokio::spawn(async move {
        match task.await {
            Ok(Ok(_)) => tracing::info!(%identity, "left the leader election"),
            Ok(Err(error)) => tracing::warn!(%identity, %error, "the leader election stopped"),
            Err(error) => tracing::warn!(%identity, %error, "the leader election task failed"),
        }
    });
    Ok(leading)
}

/// Waits until `leading` says this replica leads (true) or stops leading (false), as `wanted`; `false` when the
/// election ended.
pub async fn until(leading: &mut watch::Receiver<bool>, wanted: bool) -> bool {
    leading.wait_for(|now| *now == wanted).await.is_ok()
}

/// The back-off between attempts to start electing (the Lease API unreachable).
pub const RETRY: Duration = Duration::from_secs(2);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_identity_is_kept_and_a_default_one_is_unique_per_process() {
        let given = LeaderOptions { identity: Some("olmv2-controller-7d9f".into()), ..LeaderOptions::default() };
        assert_eq!(identity(&given), "olmv2-controller-7d9f");
        let default = identity(&LeaderOptions::default());
        assert!(default.len() > 9, "{default}");
        assert_eq!(
            identity(&LeaderOptions { identity: Some(String::new()), ..LeaderOptions::default() }).len(),
            default.len()
        );
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
}

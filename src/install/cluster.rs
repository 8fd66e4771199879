//! The Install controller's view of the cluster, on top of the shared client (`controller::client`). With its own
//! identity: discovery (cached), the cluster's RBAC objects, OperatorGroups, access reviews of an Install's creator,
//! the approval guard (the webhook's configurations, and a dry-run write it must answer); and the writes that are its
//! own: eponymous ServiceAccounts (created, never adopted), Install status, approval revocation and the
//! content-change mark, CSV record status, events. And the clients that impersonate an Install's account, with which
//! everything the content brings is read and written (`apply`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::{Api, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::{json, Value};

use super::objects::{service_account_user, ObjectClient, FIELD_MANAGER};
use crate::api::v1alpha1::{ClusterServiceVersion, ClusterServiceVersionStatus};
use crate::api::v2alpha1::{
    Install, InstallStatus, Requester, ServiceAccountReference, CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION,
};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::events::Events;
use crate::controller::impersonation;
use crate::controller::rbac_cache::{CacheError, RbacCache};
use crate::rbac::{KindIndex, RbacObjects, RbacSnapshot};
use crate::webhook::configuration::{guard_problems, WebhookService, CONFIGURATION_NAME, IDENTITY_CONFIGURATION_NAME};

/// How long discovery answers are reused; an unknown kind refreshes them at once.
const DISCOVERY_TTL: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("failed to discover the cluster's API resources")]
    Discover(#[source] kube::Error),
    #[error("failed to build a client impersonating {user}")]
    Impersonate {
        user: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to build the client that carries the Install accounts' requests")]
    Carrier(#[source] kube::Error),
    #[error("failed to list {what}")]
    List {
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("failed to create ServiceAccount {namespace}/{name}")]
    EnsureServiceAccount {
        namespace: String,
        name: String,
        #[source]
        source: ClientError,
    },
    /// An account of the name meant for this Install exists and was not created for it: it is never adopted.
    #[error("ServiceAccount {namespace}/{name} exists and was not created for this Install; it is never adopted")]
    ServiceAccountTaken { namespace: String, name: String },
    #[error("failed to review whether the creator of Install {install} may use ServiceAccount {account}")]
    ReviewCreator {
        install: String,
        account: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to review whether whoever named ServiceAccount {account} in OperatorGroup {group} may use it")]
    ReviewAccountNamer {
        group: String,
        account: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to clear the content-change mark of Install {name}")]
    ClearContentChange {
        name: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to read the approval webhook's configuration")]
    ReadWebhookConfiguration(#[source] ClientError),
    #[error("failed to probe the approval webhook with a dry-run write of Install {name}")]
    ProbeWebhook {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to write the status of {what}")]
    WriteStatus {
        what: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to reset the approval of Install {name}")]
    RevokeApproval {
        name: String,
        #[source]
        source: ClientError,
    },
    /// The Install changed after it was read (an approval, a spec edit): what was decided is decided again.
    #[error("Install {name} changed while it was reconciled; it is reconciled again")]
    InstallChanged { name: String },
    /// The watch of the cluster's RBAC objects stopped, has not listed them yet, or lags behind the controller's
    /// own writes.
    #[error("failed to read the cluster's RBAC objects")]
    ReadRbac(#[source] CacheError),
}

impl Categorized for ClusterError {
    fn category(&self) -> &'static str {
        match self {
            Self::Discover(_) => "DiscoveryFailed",
            Self::Impersonate { .. } | Self::Carrier(_) => "ImpersonationFailed",
            Self::List { .. } => "ListFailed",
            Self::EnsureServiceAccount { .. } => "ServiceAccountCreateFailed",
            Self::ServiceAccountTaken { .. } => "ServiceAccountNameTaken",
            Self::ReviewCreator { .. } => "CreatorReviewFailed",
            Self::ReviewAccountNamer { .. } => "AccountNamerReviewFailed",
            Self::ClearContentChange { .. } => "ContentChangeClearFailed",
            Self::ReadWebhookConfiguration(_) => "WebhookConfigurationReadFailed",
            Self::ProbeWebhook { .. } => "WebhookProbeFailed",
            Self::WriteStatus { .. } => "StatusWriteFailed",
            Self::RevokeApproval { .. } => "ApprovalRevokeFailed",
            Self::InstallChanged { .. } => "InstallChanged",
            Self::ReadRbac(_) => "RbacReadFailed",
        }
    }

    /// Only the Install moving on under the reconcile, which is expected and retried.
    fn is_conflict(&self) -> bool {
        matches!(self, Self::InstallChanged { .. })
    }
}

/// The Install controller's view of the cluster.
pub struct Cluster {
    /// The controller's own identity.
    pub client: ControllerClient,
    pub events: Events,
    discovery: tokio::sync::Mutex<Option<(Instant, KindIndex)>>,
    impersonation: Impersonation,
    /// The cluster's RBAC objects as the process watches them.
    rbac: Arc<RbacCache>,
}

pub(super) fn list_error(what: &'static str) -> impl FnOnce(ClientError) -> ClusterError {
    move |source| ClusterError::List { what, source }
}

/// An error of a write made only while the Install is at the resourceVersion it was read at: a failed precondition
/// is the Install having moved on, anything else the write's own failure.
fn install_write_error<'a>(
    install: &'a Install,
    failed: impl FnOnce(ClientError) -> ClusterError + 'a,
) -> impl FnOnce(ClientError) -> ClusterError + 'a {
    move |error| match error {
        ClientError::Changed(_) => ClusterError::InstallChanged { name: install.name_any() },
        error => failed(error),
    }
}

impl Cluster {
    /// The view of the cluster `config` describes, as the identity it names.
    pub fn new(client: kube::Client, config: kube::Config, rbac: Arc<RbacCache>) -> Self {
        Self {
            events: Events::new(client.clone(), "olmv2-install-controller"),
            impersonation: Impersonation::new(&client, config),
            client: ControllerClient::new(client, FIELD_MANAGER),
            discovery: tokio::sync::Mutex::new(None),
            rbac,
        }
    }

    /// Records an RBAC object this process applied (as itself or an account): passes wait until the watch holds it.
    pub fn wrote(&self, live: &Value) {
        let group = live["apiVersion"].as_str().unwrap_or_default().split('/').next().unwrap_or_default();
        if group == "rbac.authorization.k8s.io" {
            self.rbac.wrote(live["kind"].as_str().unwrap_or_default(), live["metadata"]["resourceVersion"].as_str());
        }
    }

    /// Objects of every kind in `kinds`, read and written as the controller (its grants; reads whatever the
    /// account holds).
    pub fn objects<'a>(&'a self, kinds: &'a KindIndex) -> ObjectClient<'a> {
        ObjectClient::new(&self.client, "the controller", kinds)
    }

    /// A client acting as `account`, for everything the content of an Install brings.
    pub fn as_account(&self, account: &ServiceAccountReference) -> Result<ControllerClient, ClusterError> {
        self.impersonation.client_for(account)
    }

    /// Every kind the cluster serves, from discovery, cached for a while unless `refresh`. One discovery at a time:
    /// passes asking meanwhile wait for it and share it (sixteen passes finding the cache expired at once made
    /// sixteen discoveries of some forty requests each), a refresh included when one began after it was asked for.
    pub async fn kinds(&self, refresh: bool) -> Result<KindIndex, ClusterError> {
        let asked = Instant::now();
        let mut cached = self.discovery.lock().await;
        if let Some((at, kinds)) = cached.as_ref() {
            let fresh = if refresh { *at >= asked } else { at.elapsed() < DISCOVERY_TTL };
            if fresh {
                return Ok(kinds.clone());
            }
        }
        let started = Instant::now();
        let client = self.client.kube();
        let mut lists: Vec<APIResourceList> = Vec::new();
        for version in client.list_core_api_versions().await.map_err(ClusterError::Discover)?.versions {
            lists.push(client.list_core_api_resources(&version).await.map_err(ClusterError::Discover)?);
        }
        for group in client.list_api_groups().await.map_err(ClusterError::Discover)?.groups {
            for version in &group.versions {
                match client.list_api_group_resources(&version.group_version).await {
                    Ok(list) => lists.push(list),
                    // An aggregated API that is down must not stop every Install.
                    Err(error) => tracing::debug!(group_version = %version.group_version, %error, "discovery skipped"),
                }
            }
        }
        let kinds = KindIndex::from_discovery(&lists);
        *cached = Some((started, kinds.clone()));
        Ok(kinds)
    }

    /// Every Role, ClusterRole and binding of the cluster, and their snapshot (aggregation resolved), from the
    /// process's watch of them once it has listed them all and holds what this process wrote
    /// (`controller::rbac_cache`: why a watch, and what it decides).
    pub async fn rbac_objects(&self) -> Result<(RbacObjects, Arc<RbacSnapshot>), ClusterError> {
        self.rbac.current().await.map_err(ClusterError::ReadRbac)?;
        Ok((self.rbac.objects(), self.rbac.snapshot()))
    }

    /// Whether the webhooks guarding approvals still guard: their configurations are as the controller wrote them,
    /// and the webhook answers (a dry-run write of the Install goes through both). Answers what is wrong, if
    /// anything: then nothing may be granted or applied, since an approval on record may not have been checked.
    pub async fn approval_guard(
        &self,
        install: &Install,
        service: &WebhookService,
    ) -> Result<Vec<String>, ClusterError> {
        let read = ClusterError::ReadWebhookConfiguration;
        let validating =
            self.client.all::<ValidatingWebhookConfiguration>().get_opt(CONFIGURATION_NAME).await.map_err(read)?;
        let mutating = self
            .client
            .all::<MutatingWebhookConfiguration>()
            .get_opt(IDENTITY_CONFIGURATION_NAME)
            .await
            .map_err(read)?;
        let validating = validating.and_then(|c| serde_json::to_value(c).ok());
        let mutating = mutating.and_then(|c| serde_json::to_value(c).ok());
        let mut problems = guard_problems(service, validating.as_ref(), mutating.as_ref());
        if problems.is_empty() {
            // A dry run: it goes through admission, so the webhook must answer, and writes nothing.
            let params = PatchParams { dry_run: true, ..PatchParams::default() };
            let probe = json!({"metadata": {"resourceVersion": install.resource_version()}});
            match Api::<Install>::all(self.client.kube().clone())
                .patch(&install.name_any(), &params, &Patch::Merge(&probe))
                .await
            {
                Ok(_) => {}
                // The Install moved on: the next pass probes again.
                Err(kube::Error::Api(response)) if response.code == 409 => {
                    return Err(ClusterError::InstallChanged { name: install.name_any() })
                }
                // The API server says a webhook failed or refused: the webhook does not guard.
                Err(kube::Error::Api(response)) if mentions_webhook(&response.message) => problems
                    .push(format!("the webhook did not answer a dry-run write of the Install: {}", response.message)),
                // Any other failure (throttled, an API server error, the connection) says nothing of the webhook,
                // whose configurations were just read intact: the pass fails and is retried, nothing let through.
                Err(source) => return Err(ClusterError::ProbeWebhook { name: install.name_any(), source }),
            }
        }
        Ok(problems)
    }

    /// Removes the content-change mark once the content it marked was approved and applied, only if the Install did
    /// not change since it was read (a new change would carry a new mark).
    pub async fn clear_content_change(&self, install: &Install) -> Result<(), ClusterError> {
        let body = json!({"metadata": {"annotations": {CONTENT_CHANGED_BY_ANNOTATION: null}}});
        let failed = |source| ClusterError::ClearContentChange { name: install.name_any(), source };
        self.client
            .all::<Install>()
            .merge_patch(&install.name_any(), &body, install.resource_version().as_deref())
            .await
            .map_err(install_write_error(install, failed))?;
        Ok(())
    }

    /// Writes the whole status of an Install with server-side apply; answers the Install as written.
    /// With `precondition`, only if the Install is still at that resourceVersion.
    pub async fn write_status(
        &self,
        install: &Install,
        status: &InstallStatus,
        precondition: Option<&str>,
    ) -> Result<Install, ClusterError> {
        let failed = |source| ClusterError::WriteStatus { what: format!("Install {}", install.name_any()), source };
        self.client
            .all::<Install>()
            .apply_status(&install.name_any(), status, precondition)
            .await
            .map_err(install_write_error(install, failed))
    }

    /// Sets `spec.approval` back to Unapproved, only if the Install did not change since it was read: an approval
    /// given meanwhile was given for what the status showed then, and is judged again on the next reconcile.
    /// Answers the Install as revoked.
    pub async fn revoke_approval(&self, install: &Install) -> Result<Install, ClusterError> {
        let body = json!({"spec": {"approval": "Unapproved"}});
        let failed = |source| ClusterError::RevokeApproval { name: install.name_any(), source };
        self.client
            .all::<Install>()
            .merge_patch(&install.name_any(), &body, install.resource_version().as_deref())
            .await
            .map_err(install_write_error(install, failed))
    }

    /// Writes the phase of a CSV record from the health of what the Install applied, unless the record says it
    /// already: its `lastUpdateTime` moves only with a change, as OLM's does with a new phase, reason or message.
    /// (Written on every pass, each record changed at every start and every rollout, and with it every Operator
    /// whose status lists it as a component.)
    pub async fn write_csv_phase(
        &self,
        namespace: &str,
        name: &str,
        phase: &str,
        reason: &str,
        message: &str,
    ) -> Result<(), ClusterError> {
        let failed =
            |source| ClusterError::WriteStatus { what: format!("ClusterServiceVersion {namespace}/{name}"), source };
        let records = self.client.namespaced::<ClusterServiceVersion>(namespace);
        let current = records.get_opt(name).await.map_err(failed)?.and_then(|record| record.status);
        if current.is_some_and(|status| csv_phase_is(&status, phase, reason, message)) {
            return Ok(());
        }
        let status = json!({"phase": phase, "reason": reason, "message": message, "lastUpdateTime": jiff_now()});
        records.apply_status(name, &status, None).await.map_err(failed)?;
        Ok(())
    }
}

/// Whether a CSV record's status already says `phase` for `reason` with `message`.
fn csv_phase_is(status: &ClusterServiceVersionStatus, phase: &str, reason: &str, message: &str) -> bool {
    serde_json::to_value(status.phase).ok().as_ref().and_then(Value::as_str) == Some(phase)
        && status.reason.as_deref() == Some(reason)
        && status.message.as_deref() == Some(message)
}

/// Whether an API error is about an admission webhook: kube-apiserver's words for one it failed calling ("failed
/// calling webhook") or one that refused ("admission webhook ... denied the request").
fn mentions_webhook(message: &str) -> bool {
    message.contains("webhook")
}

/// Clients impersonating ServiceAccounts, all sending through one client of the controller's configuration
/// (`controller::impersonation`: one connection pool rather than one per account). No groups are named: the API
/// server then gives the account its own groups, as it would to a token of the account. A client is made for each
/// pass and dropped with it rather than kept per account: making one costs a small task, and each kept one held its
/// request queue (about 20 KiB; 2 MiB for the scale bench's hundred Installs).
struct Impersonation {
    config: kube::Config,
    carrier: Mutex<Option<kube::Client>>,
}

impl Impersonation {
    /// The controller's own client carries the accounts' requests too, one pool for all, unless its configuration
    /// impersonates someone of its own (then a carrier without that is built on first use).
    fn new(client: &kube::Client, config: kube::Config) -> Self {
        let carrier = (!impersonation::impersonates(&config)).then(|| client.clone());
        Self { config: impersonation::carrier_config(config), carrier: Mutex::new(carrier) }
    }

    fn client_for(&self, account: &ServiceAccountReference) -> Result<ControllerClient, ClusterError> {
        let user = service_account_user(account);
        let carrier = self.carrier()?;
        let client = impersonation::impersonating(&carrier, &user).map_err(|source| ClusterError::Impersonate {
            user: user.clone(),
            source: kube::Error::HttpError(source.into()),
        })?;
        Ok(ControllerClient::new(client, FIELD_MANAGER))
    }

    /// The client that carries every account's requests, built on first use (it needs the async runtime).
    fn carrier(&self) -> Result<kube::Client, ClusterError> {
        let mut carrier = self.carrier.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(client) = carrier.as_ref() {
            return Ok(client.clone());
        }
        let client = crate::controller::connect::client(self.config.clone()).map_err(ClusterError::Carrier)?;
        *carrier = Some(client.clone());
        Ok(client)
    }
}

/// The person who created an Install, as the webhook recorded them.
pub fn creator_of(install: &Install) -> Option<Requester> {
    let text = install.annotations().get(CREATOR_ANNOTATION)?;
    serde_json::from_str::<Requester>(text).ok().filter(|creator| !creator.username.is_empty())
}

/// The owner reference every object made for an Install carries.
pub fn owner_reference(install: &Install) -> Value {
    json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": install.name_any(),
        "uid": install.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true})
}

fn jiff_now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::mentions_webhook;

    #[test]
    fn only_answers_about_a_webhook_void_an_approval() {
        // kube-apiserver's words for a webhook it could not call, and for one that refused.
        assert!(mentions_webhook(
            "Internal error occurred: failed calling webhook \"approval.installs.operators.coreos.com\": failed to call webhook: Post \"https://olmv2-webhook.olmv2-system.svc:443/validate-install?timeout=10s\": connection refused"
        ));
        assert!(mentions_webhook(
            "admission webhook \"approval.installs.operators.coreos.com\" denied the request: no"
        ));
        // Throttling and storage errors say nothing of the webhook.
        assert!(!mentions_webhook("Too many requests, please try again later."));
        assert!(!mentions_webhook("Internal error occurred: etcdserver: request timed out"));
    }
}

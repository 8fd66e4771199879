//! What the Install controller reads and writes with its own identity: discovery (cached), the cluster's RBAC
//! objects, OperatorGroups, earlier serving-certificate Secrets; and the writes that are its own: eponymous
//! ServiceAccounts, the approved grants, Install status and approval revocation, CSV record status, events.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource, ResourceExt};
use serde_json::{json, Value};

use super::apply::FIELD_MANAGER;
use super::conditions::Transition;
use super::grants::INSTALL_ANNOTATION;
use crate::api::v1::OperatorGroup;
use crate::api::v2alpha1::{Install, InstallStatus, ServiceAccountReference};
use crate::rbac::{KindIndex, RbacSnapshot};

/// How long discovery answers are reused; an unknown kind refreshes them at once.
const DISCOVERY_TTL: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("failed to discover the cluster's API resources")]
    Discover(#[source] kube::Error),
    #[error("failed to list {what}")]
    List {
        what: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("failed to create ServiceAccount {namespace}/{name}")]
    EnsureServiceAccount {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to write the status of {what}")]
    WriteStatus {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to reset the approval of Install {name}")]
    RevokeApproval {
        name: String,
        #[source]
        source: kube::Error,
    },
    /// The Install changed after it was read (an approval, a spec edit): what was decided is decided again.
    #[error("Install {name} changed while it was reconciled; it is reconciled again")]
    InstallChanged { name: String },
}

impl ClusterError {
    pub fn category(&self) -> &'static str {
        match self {
            Self::Discover(_) => "DiscoveryFailed",
            Self::List { .. } => "ListFailed",
            Self::EnsureServiceAccount { .. } => "ServiceAccountCreateFailed",
            Self::WriteStatus { .. } => "StatusWriteFailed",
            Self::RevokeApproval { .. } => "ApprovalRevokeFailed",
            Self::InstallChanged { .. } => "InstallChanged",
        }
    }

    /// Whether the error is only the Install moving on under the reconcile, which is expected and retried.
    pub fn is_install_changed(&self) -> bool {
        matches!(self, Self::InstallChanged { .. })
    }
}

/// The controller's own view of the cluster.
pub struct Cluster {
    pub client: Client,
    recorder: Recorder,
    discovery: Mutex<Option<(Instant, KindIndex)>>,
}

fn list_error(what: &'static str) -> impl FnOnce(kube::Error) -> ClusterError {
    move |source| ClusterError::List { what, source }
}

impl Cluster {
    pub fn new(client: Client) -> Self {
        let reporter =
            kube::runtime::events::Reporter { controller: "olmv2-install-controller".into(), instance: None };
        Self { recorder: Recorder::new(client.clone(), reporter), client, discovery: Mutex::new(None) }
    }

    /// Every kind the cluster serves, from discovery, cached for a while unless `refresh`.
    pub async fn kinds(&self, refresh: bool) -> Result<KindIndex, ClusterError> {
        if !refresh {
            if let Some((at, kinds)) = self.discovery.lock().ok().and_then(|cached| cached.clone()) {
                if at.elapsed() < DISCOVERY_TTL {
                    return Ok(kinds);
                }
            }
        }
        let mut lists: Vec<APIResourceList> = Vec::new();
        for version in self.client.list_core_api_versions().await.map_err(ClusterError::Discover)?.versions {
            lists.push(self.client.list_core_api_resources(&version).await.map_err(ClusterError::Discover)?);
        }
        for group in self.client.list_api_groups().await.map_err(ClusterError::Discover)?.groups {
            for version in &group.versions {
                match self.client.list_api_group_resources(&version.group_version).await {
                    Ok(list) => lists.push(list),
                    // An aggregated API that is down must not stop every Install.
                    Err(error) => tracing::debug!(group_version = %version.group_version, %error, "discovery skipped"),
                }
            }
        }
        let kinds = KindIndex::from_discovery(&lists);
        if let Ok(mut cached) = self.discovery.lock() {
            *cached = Some((Instant::now(), kinds.clone()));
        }
        Ok(kinds)
    }

    /// Every Role, ClusterRole and binding of the cluster.
    pub async fn rbac_snapshot(&self) -> Result<RbacSnapshot, ClusterError> {
        let params = ListParams::default();
        let roles = Api::<Role>::all(self.client.clone()).list(&params).await.map_err(list_error("Roles"))?;
        let cluster_roles =
            Api::<ClusterRole>::all(self.client.clone()).list(&params).await.map_err(list_error("ClusterRoles"))?;
        let bindings =
            Api::<RoleBinding>::all(self.client.clone()).list(&params).await.map_err(list_error("RoleBindings"))?;
        let cluster_bindings = Api::<ClusterRoleBinding>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(list_error("ClusterRoleBindings"))?;
        Ok(RbacSnapshot::new(&roles.items, &cluster_roles.items, bindings.items, cluster_bindings.items))
    }

    pub async fn operator_groups(&self, namespace: &str) -> Result<Vec<OperatorGroup>, ClusterError> {
        let api = Api::<OperatorGroup>::namespaced(self.client.clone(), namespace);
        Ok(api.list(&ListParams::default()).await.map_err(list_error("OperatorGroups"))?.items)
    }

    /// The TLS Secrets an Install applied in `namespace`, whose certificates rendering reuses.
    pub async fn install_secrets(&self, namespace: &str, install: &str) -> Result<Vec<Secret>, ClusterError> {
        let api = Api::<Secret>::namespaced(self.client.clone(), namespace);
        let secrets = api.list(&ListParams::default().fields("type=kubernetes.io/tls")).await;
        let secrets = match secrets {
            Ok(list) => list.items,
            // Field selectors on Secrets are standard, but a list that fails here only costs a certificate rotation.
            Err(error) => {
                tracing::debug!(%error, namespace, "serving certificates not read");
                Vec::new()
            }
        };
        Ok(secrets
            .into_iter()
            .filter(|secret| secret.annotations().get(INSTALL_ANNOTATION).map(String::as_str) == Some(install))
            .collect())
    }

    /// Creates (or keeps) the eponymous ServiceAccount an Install runs as, owned by the Install.
    pub async fn ensure_service_account(
        &self,
        install: &Install,
        account: &ServiceAccountReference,
        component_label: Option<&str>,
    ) -> Result<(), ClusterError> {
        let api = Api::<ServiceAccount>::namespaced(self.client.clone(), &account.namespace);
        let mut body = json!({
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account.name, "namespace": account.namespace,
                "annotations": {INSTALL_ANNOTATION: install.name_any()},
                "ownerReferences": [owner_reference(install)]},
        });
        if let Some(label) = component_label {
            body["metadata"]["labels"] = json!({label: ""});
        }
        api.patch(&account.name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await.map_err(
            |source| ClusterError::EnsureServiceAccount {
                namespace: account.namespace.clone(),
                name: account.name.clone(),
                source,
            },
        )?;
        Ok(())
    }

    /// Writes the whole status of an Install with server-side apply.
    /// With `precondition`, only if the Install is still at that resourceVersion.
    pub async fn write_status(
        &self,
        install: &Install,
        status: &InstallStatus,
        precondition: Option<&str>,
    ) -> Result<(), ClusterError> {
        let api = Api::<Install>::all(self.client.clone());
        let mut body = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "status": status});
        if let Some(version) = precondition {
            body["metadata"] = json!({"resourceVersion": version});
        }
        match api
            .patch_status(&install.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(response)) if precondition.is_some() && response.code == 409 => {
                Err(ClusterError::InstallChanged { name: install.name_any() })
            }
            Err(source) => Err(ClusterError::WriteStatus { what: format!("Install {}", install.name_any()), source }),
        }
    }

    /// Sets `spec.approval` back to Unapproved, only if the Install did not change since it was read: an approval
    /// given meanwhile was given for what the status showed then, and is judged again on the next reconcile.
    /// Answers the Install as revoked.
    pub async fn revoke_approval(&self, install: &Install) -> Result<Install, ClusterError> {
        let api = Api::<Install>::all(self.client.clone());
        let body =
            json!({"metadata": {"resourceVersion": install.resource_version()}, "spec": {"approval": "Unapproved"}});
        api.patch(&install.name_any(), &PatchParams::default(), &Patch::Merge(&body)).await.map_err(|source| {
            match source {
                kube::Error::Api(response) if response.code == 409 => {
                    ClusterError::InstallChanged { name: install.name_any() }
                }
                source => ClusterError::RevokeApproval { name: install.name_any(), source },
            }
        })
    }

    /// Writes the phase of a CSV record from the health of what the Install applied.
    pub async fn write_csv_phase(
        &self,
        namespace: &str,
        name: &str,
        phase: &str,
        reason: &str,
        message: &str,
    ) -> Result<(), ClusterError> {
        let api = Api::<crate::api::v1alpha1::ClusterServiceVersion>::namespaced(self.client.clone(), namespace);
        let now = jiff_now();
        let body = json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "status": {"phase": phase, "reason": reason, "message": message, "lastUpdateTime": now}});
        api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await.map_err(
            |source| ClusterError::WriteStatus { what: format!("ClusterServiceVersion {namespace}/{name}"), source },
        )?;
        Ok(())
    }

    /// Records events; a failure to record one is logged, never fatal.
    pub async fn record(&self, install: &Install, transitions: &[Transition]) {
        let reference = install.object_ref(&());
        for transition in transitions {
            let event = Event {
                type_: if transition.warning { EventType::Warning } else { EventType::Normal },
                reason: transition.reason.clone(),
                note: Some(transition.note.chars().take(1000).collect()),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &reference).await {
                tracing::warn!(install = %install.name_any(), %error, "failed to record an event");
            }
        }
    }
}

/// The owner reference every object made for an Install carries.
pub fn owner_reference(install: &Install) -> Value {
    json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "name": install.name_any(),
        "uid": install.uid().unwrap_or_default(), "controller": true, "blockOwnerDeletion": true})
}

fn jiff_now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

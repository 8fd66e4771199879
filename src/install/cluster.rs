//! What the Install controller reads and writes with its own identity: discovery (cached), the cluster's RBAC
//! objects, OperatorGroups, the approval webhook's configurations, access reviews of an Install's creator; and the
//! writes that are its own: eponymous ServiceAccounts (created, never adopted), the approved grants, Install status,
//! approval revocation and the content-change mark, CSV record status, events.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{json, Value};

use super::account::{created_for, operator_group_use_checks};
use super::apply::FIELD_MANAGER;
use super::grants::INSTALL_ANNOTATION;
use crate::api::v1::OperatorGroup;
use crate::api::v2alpha1::{
    Install, InstallStatus, Requester, ServiceAccountReference, CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION,
};
use crate::controller::events::Events;
use crate::error::Categorized;
use crate::rbac::{KindIndex, RbacObjects};
use crate::webhook::configuration::{guard_problems, WebhookService, CONFIGURATION_NAME, IDENTITY_CONFIGURATION_NAME};

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
    #[error("failed to clear the content-change mark of Install {name}")]
    ClearContentChange {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to read the approval webhook's configuration")]
    ReadWebhookConfiguration(#[source] kube::Error),
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

impl Categorized for ClusterError {
    fn category(&self) -> &'static str {
        match self {
            Self::Discover(_) => "DiscoveryFailed",
            Self::List { .. } => "ListFailed",
            Self::EnsureServiceAccount { .. } => "ServiceAccountCreateFailed",
            Self::ServiceAccountTaken { .. } => "ServiceAccountNameTaken",
            Self::ReviewCreator { .. } => "CreatorReviewFailed",
            Self::ClearContentChange { .. } => "ContentChangeClearFailed",
            Self::ReadWebhookConfiguration(_) => "WebhookConfigurationReadFailed",
            Self::WriteStatus { .. } => "StatusWriteFailed",
            Self::RevokeApproval { .. } => "ApprovalRevokeFailed",
            Self::InstallChanged { .. } => "InstallChanged",
        }
    }

    /// Only the Install moving on under the reconcile, which is expected and retried.
    fn is_conflict(&self) -> bool {
        matches!(self, Self::InstallChanged { .. })
    }
}

/// The controller's own view of the cluster.
pub struct Cluster {
    pub client: Client,
    pub events: Events,
    discovery: Mutex<Option<(Instant, KindIndex)>>,
}

fn list_error(what: &'static str) -> impl FnOnce(kube::Error) -> ClusterError {
    move |source| ClusterError::List { what, source }
}

impl Cluster {
    pub fn new(client: Client) -> Self {
        Self { events: Events::new(client.clone(), "olmv2-install-controller"), client, discovery: Mutex::new(None) }
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
    pub async fn rbac_objects(&self) -> Result<RbacObjects, ClusterError> {
        let params = ListParams::default();
        let roles = Api::<Role>::all(self.client.clone()).list(&params).await.map_err(list_error("Roles"))?;
        let cluster_roles =
            Api::<ClusterRole>::all(self.client.clone()).list(&params).await.map_err(list_error("ClusterRoles"))?;
        let role_bindings =
            Api::<RoleBinding>::all(self.client.clone()).list(&params).await.map_err(list_error("RoleBindings"))?;
        let cluster_role_bindings = Api::<ClusterRoleBinding>::all(self.client.clone())
            .list(&params)
            .await
            .map_err(list_error("ClusterRoleBindings"))?;
        Ok(RbacObjects {
            roles: roles.items,
            cluster_roles: cluster_roles.items,
            role_bindings: role_bindings.items,
            cluster_role_bindings: cluster_role_bindings.items,
        })
    }

    /// Whether the person who created `install` may use the OperatorGroup account `account` themselves (one of
    /// [`operator_group_use_checks`]); an Install without a recorded creator may not.
    pub async fn creator_may_use(
        &self,
        install: &Install,
        account: &ServiceAccountReference,
    ) -> Result<bool, ClusterError> {
        let Some(creator) = creator_of(install) else { return Ok(false) };
        for check in operator_group_use_checks(account) {
            let allowed = crate::access::allowed(&self.client, &creator, &check).await.map_err(|source| {
                ClusterError::ReviewCreator {
                    install: install.name_any(),
                    account: format!("{}/{}", account.namespace, account.name),
                    source,
                }
            })?;
            if allowed {
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub async fn operator_groups(&self, namespace: &str) -> Result<Vec<OperatorGroup>, ClusterError> {
        let api = Api::<OperatorGroup>::namespaced(self.client.clone(), namespace);
        Ok(api.list(&ListParams::default()).await.map_err(list_error("OperatorGroups"))?.items)
    }

    /// Creates the eponymous ServiceAccount an Install runs as, controlled by the Install. An account of that name
    /// that exists is used only when it was created for this Install (its controlling owner has the Install's uid):
    /// any other is never adopted, relabelled or owned.
    pub async fn ensure_service_account(
        &self,
        install: &Install,
        account: &ServiceAccountReference,
        component_label: Option<&str>,
    ) -> Result<(), ClusterError> {
        let api = Api::<ServiceAccount>::namespaced(self.client.clone(), &account.namespace);
        let ensure_error = |source| ClusterError::EnsureServiceAccount {
            namespace: account.namespace.clone(),
            name: account.name.clone(),
            source,
        };
        let existing = api.get_opt(&account.name).await.map_err(ensure_error)?;
        let existing = match existing {
            Some(existing) => existing,
            None => {
                let mut body = json!({
                    "apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": account.name, "namespace": account.namespace,
                        "annotations": {INSTALL_ANNOTATION: install.name_any()},
                        "ownerReferences": [owner_reference(install)]},
                });
                if let Some(label) = component_label {
                    body["metadata"]["labels"] = json!({label: ""});
                }
                let object: ServiceAccount =
                    serde_json::from_value(body).map_err(|error| ensure_error(kube::Error::SerdeError(error)))?;
                match api.create(&PostParams::default(), &object).await {
                    Ok(created) => created,
                    // Created meanwhile, by a pass of ours or by someone else: judged below like any existing one.
                    Err(kube::Error::Api(response)) if response.code == 409 => {
                        api.get(&account.name).await.map_err(ensure_error)?
                    }
                    Err(source) => return Err(ensure_error(source)),
                }
            }
        };
        if created_for(&existing, &install.uid().unwrap_or_default()) {
            Ok(())
        } else {
            Err(ClusterError::ServiceAccountTaken { namespace: account.namespace.clone(), name: account.name.clone() })
        }
    }

    /// Whether the webhooks guarding approvals still guard: their configurations are as the controller wrote them,
    /// and the webhook answers (a dry-run write of the Install goes through both). Answers what is wrong, if
    /// anything: then nothing may be granted or applied, since an approval on record may not have been checked.
    pub async fn approval_guard(
        &self,
        install: &Install,
        service: &WebhookService,
    ) -> Result<Vec<String>, ClusterError> {
        let read = |error| ClusterError::ReadWebhookConfiguration(error);
        let validating = Api::<ValidatingWebhookConfiguration>::all(self.client.clone())
            .get_opt(CONFIGURATION_NAME)
            .await
            .map_err(read)?;
        let mutating = Api::<MutatingWebhookConfiguration>::all(self.client.clone())
            .get_opt(IDENTITY_CONFIGURATION_NAME)
            .await
            .map_err(read)?;
        let validating = validating.and_then(|c| serde_json::to_value(c).ok());
        let mutating = mutating.and_then(|c| serde_json::to_value(c).ok());
        let mut problems = guard_problems(service, validating.as_ref(), mutating.as_ref());
        if problems.is_empty() {
            let params = PatchParams { dry_run: true, ..PatchParams::default() };
            let probe = json!({"metadata": {"resourceVersion": install.resource_version()}});
            match Api::<Install>::all(self.client.clone())
                .patch(&install.name_any(), &params, &Patch::Merge(&probe))
                .await
            {
                Ok(_) => {}
                // The Install moved on: the next pass probes again.
                Err(kube::Error::Api(response)) if response.code == 409 => {
                    return Err(ClusterError::InstallChanged { name: install.name_any() })
                }
                Err(error) => {
                    problems.push(format!("the webhook did not answer a dry-run write of the Install: {error}"))
                }
            }
        }
        Ok(problems)
    }

    /// Removes the content-change mark once the content it marked was approved and applied, only if the Install did
    /// not change since it was read (a new change would carry a new mark).
    pub async fn clear_content_change(&self, install: &Install) -> Result<(), ClusterError> {
        let api = Api::<Install>::all(self.client.clone());
        let body = json!({"metadata": {"resourceVersion": install.resource_version(),
            "annotations": {CONTENT_CHANGED_BY_ANNOTATION: null}}});
        match api.patch(&install.name_any(), &PatchParams::default(), &Patch::Merge(&body)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(response)) if response.code == 409 => {
                Err(ClusterError::InstallChanged { name: install.name_any() })
            }
            Err(source) => Err(ClusterError::ClearContentChange { name: install.name_any(), source }),
        }
    }

    /// Writes the whole status of an Install with server-side apply; answers the Install as written.
    /// With `precondition`, only if the Install is still at that resourceVersion.
    pub async fn write_status(
        &self,
        install: &Install,
        status: &InstallStatus,
        precondition: Option<&str>,
    ) -> Result<Install, ClusterError> {
        let api = Api::<Install>::all(self.client.clone());
        let mut body = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install", "status": status});
        if let Some(version) = precondition {
            body["metadata"] = json!({"resourceVersion": version});
        }
        match api
            .patch_status(&install.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body))
            .await
        {
            Ok(written) => Ok(written),
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

//! The I/O of a CSV's owned APIServices and webhooks, around the Deployments the CSV loop applies: what the
//! phase machine needs to know of them (`phase::Components`), whether the install may go ahead (its author's
//! rights, OLM's preconditions), the certificates, Services and RBAC written before the Deployments, the
//! APIServices, webhook configurations and CRD conversions written after, and whether they are all in place.
//! `certs`, `apiservices`, `webhooks`, `component_access` and `availability` decide.

use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::ListParams;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};

use super::phase::Components;
use super::rotation::{install_ca, pem_sha256, serving_pair};
use super::strategy::Unhealthy;
use super::{apiservices, availability, certs, component_access, webhooks, Context, ReconcileError};
use crate::access::{allowed, AccessCheck};
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::{ClusterServiceVersion, CsvPhase, WebhookAdmissionType};
use crate::controller::client::{ClientError, Objects};
use crate::tls::CertificateAuthority;
use crate::webhook::csv_author::recorded_author;

/// Errors of one CSV's components.
struct At<'a>(&'a ClusterServiceVersion);

impl At<'_> {
    fn read(&self, what: &'static str) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        move |source| ReconcileError::Read { namespace: self.namespace(), name: self.0.name_any(), what, source }
    }

    fn write(&self, what: String) -> impl FnOnce(ClientError) -> ReconcileError + '_ {
        move |source| ReconcileError::Write { namespace: self.namespace(), name: self.0.name_any(), what, source }
    }

    fn namespace(&self) -> String {
        self.0.namespace().unwrap_or_default()
    }
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// What the phase machine checks of the components in `phase` (Pending: the descriptions and APIService
/// adoption; Succeeded and Failed: whether a certificate must be replaced).
pub async fn observe(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    phase: CsvPhase,
) -> Result<Components, ReconcileError> {
    let at = At(csv);
    let mut components = Components::default();
    if phase == CsvPhase::Pending {
        components.invalid_webhooks = webhooks::invalid(csv);
        components.unadoptable_api_service = unadoptable(ctx, csv).await?.is_some();
    } else {
        let secrets = ctx.client.namespaced::<Secret>(&at.namespace());
        for deployment in certs::served(csv).keys() {
            let service = certs::service_name(deployment);
            let secret = secrets.get_opt(&certs::secret_name(&service)).await.map_err(at.read("Secrets"))?;
            if certs::reusable_ca(secret.as_ref(), &certs::hosts(&service, &at.namespace()), now()).is_none() {
                components.rotate = true;
            }
        }
    }
    Ok(components)
}

/// The first owned APIService that exists and may not be adopted.
async fn unadoptable(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Option<String>, ReconcileError> {
    let at = At(csv);
    for api in csv.spec.api_service_definitions.iter().flat_map(|definitions| &definitions.owned) {
        let name = apiservices::name(api);
        let Some(existing) = ctx.client.all::<APIService>().get_opt(&name).await.map_err(at.read("APIServices"))?
        else {
            continue;
        };
        let owner_phase = match apiservices::owner_of(&existing) {
            Some((namespace, owner)) => ctx
                .client
                .namespaced::<ClusterServiceVersion>(&namespace)
                .get_opt(&owner)
                .await
                .map_err(at.read("CSVs"))?
                .and_then(|owner| owner.status.map(|status| status.phase)),
            None => None,
        };
        let replaced_exists = match csv.spec.replaces.as_deref() {
            Some(replaced) => ctx
                .client
                .namespaced::<ClusterServiceVersion>(&at.namespace())
                .get_opt(replaced)
                .await
                .map_err(at.read("CSVs"))?
                .is_some(),
            None => false,
        };
        if !apiservices::adoptable(csv, &existing, owner_phase, replaced_exists) {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// Whether the install of the components may go ahead: the author holds every right they need
/// (`component_access`), and OLM's preconditions hold (one OperatorGroup for admission webhooks, conversion
/// webhooks on owned CRDs of an AllNamespaces-only CSV, APIServices adoptable). Err(why not), OLM's words.
pub async fn preflight(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Result<(), String>, ReconcileError> {
    let at = At(csv);
    if let Some(author) = recorded_author(csv.annotations()) {
        let may = component_access::author_may_install(ctx.client.kube(), &author, csv)
            .await
            .map_err(|source| ReconcileError::Review { namespace: at.namespace(), name: csv.name_any(), source })?;
        if may.is_err() {
            return Ok(may);
        }
    }
    let admission =
        csv.spec.webhook_definitions.iter().any(|w| w.webhook_type != WebhookAdmissionType::ConversionWebhook);
    if admission {
        let groups =
            ctx.client.namespaced::<OperatorGroup>(&at.namespace()).list().await.map_err(at.read("OperatorGroups"))?;
        if groups.len() != 1 {
            return Ok(Err("error retrieving OperatorGroup info".into()));
        }
    }
    for webhook in
        csv.spec.webhook_definitions.iter().filter(|w| w.webhook_type == WebhookAdmissionType::ConversionWebhook)
    {
        if let Err(message) = webhooks::conversion_precondition(csv, webhook) {
            return Ok(Err(message));
        }
        for crd_name in &webhook.conversion_crds {
            let crd = ctx.client.all::<CustomResourceDefinition>().get_opt(crd_name).await.map_err(at.read("CRDs"))?;
            let Some(crd) = crd else {
                return Ok(Err(format!("unable to get CRD {crd_name} specified in Conversion Webhook: not found")));
            };
            if let Err(message) = webhooks::conversion(csv, webhook, &crd, "") {
                return Ok(Err(message));
            }
        }
    }
    if let Some(name) = unadoptable(ctx, csv).await? {
        return Ok(Err(format!("pre-existing APIService {name} is not adoptable")));
    }
    for (deployment, served) in certs::served(csv) {
        if !served.api_service {
            continue;
        }
        let service = certs::service_name(&deployment);
        let name = certs::auth_delegator_name(&service);
        let delegator =
            ctx.client.all::<ClusterRoleBinding>().get_opt(&name).await.map_err(at.read("ClusterRoleBindings"))?;
        let reader_name = certs::auth_reader_name(&service);
        let reader = ctx
            .client
            .namespaced::<RoleBinding>(certs::KUBE_SYSTEM)
            .get_opt(&reader_name)
            .await
            .map_err(at.read("RoleBindings"))?;
        let claims = [
            (format!("ClusterRoleBinding {name}"), delegator.map(|binding| binding.labels().clone())),
            (
                format!("RoleBinding {}/{reader_name}", certs::KUBE_SYSTEM),
                reader.map(|binding| binding.labels().clone()),
            ),
        ];
        for (what, labels) in claims {
            if let Some(other) = labels.and_then(|labels| certs::claimed_elsewhere(&labels, csv)) {
                return Ok(Err(format!("{what} belongs to CSV {other} and is not taken over")));
            }
        }
    }
    Ok(Ok(()))
}

/// The CA PEM of each serving Deployment after [`install_certificates`], and whether any certificate was issued.
#[derive(Default)]
pub struct Issued {
    /// The CA PEM of each serving Deployment, by name.
    pub cas: BTreeMap<String, String>,
    /// Whether a certificate was issued (not all kept).
    pub rotated: bool,
}

impl Issued {
    /// The `olmcahash` of each serving Deployment.
    pub fn hashes(&self) -> BTreeMap<String, String> {
        self.cas.iter().map(|(deployment, ca)| (deployment.clone(), pem_sha256(ca.as_bytes()))).collect()
    }
}

/// Before the Deployments: each serving Deployment's Service, certificate Secret (kept while good, otherwise
/// issued by one new CA for this install), the Role and RoleBinding reading it, and for APIServices the
/// aggregated API server's bindings.
pub async fn install_certificates(ctx: &Context, csv: &ClusterServiceVersion) -> Result<Issued, ReconcileError> {
    let at = At(csv);
    let namespace = at.namespace();
    let mut ca: Option<CertificateAuthority> = None;
    let mut issued = Issued::default();
    for (deployment, served) in certs::served(csv) {
        let Some(spec) = csv.spec.install.spec.deployments.iter().find(|d| d.name == deployment) else { continue };
        let spec = serde_json::to_value(&spec.spec).unwrap_or_default();
        let service = certs::service_name(&deployment);
        apply(ctx.client.namespaced::<Service>(&namespace), &at, &certs::service(csv, &deployment, &spec, &served))
            .await?;
        let secret_name = certs::secret_name(&service);
        let secrets = ctx.client.namespaced::<Secret>(&namespace);
        let existing = secrets.get_opt(&secret_name).await.map_err(at.read("Secrets"))?;
        let hosts = certs::hosts(&service, &namespace);
        let ca_pem = match certs::reusable_ca(existing.as_ref(), &hosts, now()) {
            Some(ca_pem) => ca_pem,
            None => {
                if ca.is_none() {
                    ca = Some(install_ca().map_err(|e| generate_error(&at, e))?);
                }
                let Some(authority) = ca.as_ref() else { continue };
                let pair = serving_pair(authority, &hosts).map_err(|e| generate_error(&at, e))?;
                apply(ctx.client.namespaced::<Secret>(&namespace), &at, &certs::secret(csv, &service, &pair)).await?;
                issued.rotated = true;
                pair.ca_pem
            }
        };
        let account = certs::account_of(&spec);
        apply(ctx.client.namespaced::<Role>(&namespace), &at, &certs::secret_role(csv, &secret_name)).await?;
        let binding = certs::secret_role_binding(csv, &secret_name, &account);
        apply(ctx.client.namespaced::<RoleBinding>(&namespace), &at, &binding).await?;
        if served.api_service {
            apply(ctx.client.all::<ClusterRoleBinding>(), &at, &certs::auth_delegator(csv, &service, &account)).await?;
            let reader = certs::auth_reader(csv, &service, &account);
            apply(ctx.client.namespaced::<RoleBinding>(certs::KUBE_SYSTEM), &at, &reader).await?;
        }
        issued.cas.insert(deployment, ca_pem);
    }
    Ok(issued)
}

fn generate_error(at: &At<'_>, error: crate::tls::CertificateError) -> ReconcileError {
    ReconcileError::Certificate { namespace: at.namespace(), name: at.0.name_any(), source: error }
}

async fn apply<K>(objects: Objects<K>, at: &At<'_>, object: &Value) -> Result<(), ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    objects.apply(name, object, None).await.map_err(at.write(format!("{} {name}", K::kind(&()))))?;
    Ok(())
}

/// After the Deployments: the owned APIServices, the admission webhooks' configurations (made from
/// `generateName`, or each found by its labels updated) and the conversion webhooks on their CRDs.
pub async fn install_apis(ctx: &Context, csv: &ClusterServiceVersion, issued: &Issued) -> Result<(), ReconcileError> {
    let at = At(csv);
    for api in csv.spec.api_service_definitions.iter().flat_map(|definitions| &definitions.owned) {
        let Some(ca_pem) = issued.cas.get(api.deployment_name.as_deref().unwrap_or_default()) else { continue };
        apply(ctx.client.all::<APIService>(), &at, &apiservices::api_service(csv, api, ca_pem)).await?;
    }
    remove_stale_configurations(ctx, &at).await?;
    if csv.spec.webhook_definitions.is_empty() {
        return Ok(());
    }
    let groups =
        ctx.client.namespaced::<OperatorGroup>(&at.namespace()).list().await.map_err(at.read("OperatorGroups"))?;
    let selector = groups.first().and_then(webhooks::namespace_selector);
    for webhook in &csv.spec.webhook_definitions {
        let Some(ca_pem) = issued.cas.get(&webhook.deployment_name) else { continue };
        match webhook.webhook_type {
            WebhookAdmissionType::ValidatingAdmissionWebhook => {
                let configurations = ctx.client.all::<ValidatingWebhookConfiguration>();
                configure(configurations, &at, webhook, selector.as_ref(), ca_pem).await?
            }
            WebhookAdmissionType::MutatingAdmissionWebhook => {
                let configurations = ctx.client.all::<MutatingWebhookConfiguration>();
                configure(configurations, &at, webhook, selector.as_ref(), ca_pem).await?
            }
            WebhookAdmissionType::ConversionWebhook => {
                let crds = ctx.client.all::<CustomResourceDefinition>();
                for crd_name in &webhook.conversion_crds {
                    let Some(mut crd) = crds.get_opt(crd_name).await.map_err(at.read("CRDs"))? else { continue };
                    let Ok(conversion) = webhooks::conversion(csv, webhook, &crd, ca_pem) else { continue };
                    crd.spec.conversion = serde_json::from_value(conversion).ok();
                    crds.replace(crd_name, &crd)
                        .await
                        .map_err(at.write(format!("the conversion of CRD {crd_name}")))?;
                }
            }
        }
    }
    Ok(())
}

async fn configure<K>(
    configurations: Objects<K>,
    at: &At<'_>,
    webhook: &crate::api::v1alpha1::WebhookDescription,
    selector: Option<&Value>,
    ca_pem: &str,
) -> Result<(), ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let csv = at.0;
    let kind = K::kind(&()).to_string();
    let params = ListParams::default().labels(&webhooks::lookup_selector(csv, webhook));
    let existing = configurations.list_with(&params).await.map_err(at.read("webhook configurations"))?;
    if existing.is_empty() {
        let Some(configuration) = webhooks::configuration(csv, webhook, selector, ca_pem) else { return Ok(()) };
        let object: K = serde_json::from_value(configuration)
            .map_err(ClientError::Encode)
            .map_err(at.write(format!("a {kind}")))?;
        configurations.create(&object).await.map_err(at.write(format!("a {kind}")))?;
    }
    for found in existing {
        let name = found.meta().name.clone().unwrap_or_default();
        let patch = json!({"metadata": {"labels": webhooks::labels(csv, webhook)},
            "webhooks": [webhooks::entry(csv, webhook, selector, ca_pem)]});
        configurations.merge_patch(&name, &patch, None).await.map_err(at.write(format!("{kind} {name}")))?;
    }
    Ok(())
}

/// The `olmcahash` each serving Deployment should carry, from its certificate Secret (none when it is missing:
/// the Deployment is then not what the CSV asks for, and is installed again).
pub async fn ca_hashes(ctx: &Context, csv: &ClusterServiceVersion) -> Result<BTreeMap<String, String>, ReconcileError> {
    let at = At(csv);
    let secrets = ctx.client.namespaced::<Secret>(&at.namespace());
    let mut hashes = BTreeMap::new();
    for deployment in certs::served(csv).keys() {
        let secret = secrets.get_opt(&certs::secret_name(&certs::service_name(deployment))).await;
        let secret = secret.map_err(at.read("Secrets"))?;
        let hash = secret.and_then(|secret| secret.annotations().get(certs::CA_HASH_ANNOTATION).cloned());
        if let Some(hash) = hash {
            hashes.insert(deployment.clone(), hash);
        }
    }
    Ok(hashes)
}

/// Whether the install is complete (`availability::judge`): the Deployments `found`, the owned APIServices
/// available and served, the webhooks in place. Configurations of webhooks the CSV no longer has are deleted
/// (OLM's `cleanUpRemovedWebhooks`), here and on install.
pub async fn health(
    ctx: &Context,
    csv: &ClusterServiceVersion,
    found: &BTreeMap<String, Deployment>,
) -> Result<Result<(), Unhealthy>, ReconcileError> {
    let at = At(csv);
    let deployments = super::strategy::check_with(csv, found, &ca_hashes(ctx, csv).await?);
    let mut api_services = true;
    for api in csv.spec.api_service_definitions.iter().flat_map(|definitions| &definitions.owned) {
        let service = ctx.client.all::<APIService>().get_opt(&apiservices::name(api)).await;
        let service = service.map_err(at.read("APIServices"))?;
        // As OLM's `areAPIServicesAvailable`: discovery is asked only of an APIService reported Available (an
        // unavailable one's discovery is kube-apiserver's 503), and the first one not available settles it.
        let reported = apiservices::available(service.as_ref(), true);
        let served = reported && {
            let listed = ctx.client.kube().list_api_group_resources(&format!("{}/{}", api.group, api.version)).await;
            listed.is_ok_and(|list| list.resources.iter().any(|resource| resource.kind == api.kind))
        };
        if !apiservices::available(service.as_ref(), served) {
            api_services = false;
            break;
        }
    }
    let mut seen = webhooks::Found::default();
    // A CSV without webhooks lists no configurations on every pass: its install removed the stale ones.
    if !csv.spec.webhook_definitions.is_empty() {
        remove_stale_configurations(ctx, &at).await?;
    }
    for webhook in &csv.spec.webhook_definitions {
        let selector = format!(
            "{},{}={}",
            webhooks::lookup_selector(csv, webhook),
            webhooks::HASH_LABEL,
            webhooks::description_hash(webhook)
        );
        let params = ListParams::default().labels(&selector);
        let count = match webhook.webhook_type {
            WebhookAdmissionType::ValidatingAdmissionWebhook => {
                ctx.client.all::<ValidatingWebhookConfiguration>().list_with(&params).await.map(|l| l.len())
            }
            WebhookAdmissionType::MutatingAdmissionWebhook => {
                ctx.client.all::<MutatingWebhookConfiguration>().list_with(&params).await.map(|l| l.len())
            }
            WebhookAdmissionType::ConversionWebhook => {
                for crd_name in &webhook.conversion_crds {
                    let crd = ctx.client.all::<CustomResourceDefinition>().get_opt(crd_name).await;
                    seen.crds.insert(crd_name.clone(), crd.map_err(at.read("CRDs"))?);
                }
                Ok(0)
            }
        };
        seen.configurations.insert(webhook.generate_name.clone(), count.map_err(at.read("webhook configurations"))?);
    }
    Ok(availability::judge(deployments, api_services, webhooks::available(csv, &seen)))
}

/// Deletes the configurations made for webhooks the CSV no longer declares (OLM's `cleanUpRemovedWebhooks`), each
/// only when the CSV's author may delete it: removing a webhook from a CSV never removes more than its author could.
/// One kept is told once as a Warning event, `WebhookConfigurationKept`.
async fn remove_stale_configurations(ctx: &Context, at: &At<'_>) -> Result<(), ReconcileError> {
    let owner = webhooks::owner_selector(at.0);
    let mut kept = remove_stale(ctx, ctx.client.all::<ValidatingWebhookConfiguration>(), at, &owner).await?;
    kept.extend(remove_stale(ctx, ctx.client.all::<MutatingWebhookConfiguration>(), at, &owner).await?);
    if kept.is_empty() {
        ctx.forget_warning(at.0, WEBHOOK_CONFIGURATION_KEPT);
    } else {
        let author = recorded_author(at.0.annotations()).map(|author| author.username).unwrap_or_default();
        let note = format!(
            "the CSV no longer declares the webhooks of {}, but its author {author} may not delete them: they are kept",
            kept.join(", ")
        );
        ctx.warn_once(at.0, WEBHOOK_CONFIGURATION_KEPT, note).await;
    }
    Ok(())
}

/// The reason of the Warning event saying a dropped webhook's configuration is kept for its CSV's author.
pub const WEBHOOK_CONFIGURATION_KEPT: &str = "WebhookConfigurationKept";

/// Deletes the configurations of `csv` (`owner`: its owner labels) made for webhooks it no longer declares; those
/// its author may not delete are kept, and named (`<plural> <name>`).
async fn remove_stale<K>(
    ctx: &Context,
    configurations: Objects<K>,
    at: &At<'_>,
    owner: &str,
) -> Result<Vec<String>, ReconcileError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let params = ListParams::default().labels(owner);
    let mut kept = Vec::new();
    for found in configurations.list_with(&params).await.map_err(at.read("webhook configurations"))? {
        let generate_name = found.meta().labels.as_ref().and_then(|l| l.get(webhooks::GENERATE_NAME_LABEL)).cloned();
        if !webhooks::is_stale(at.0, generate_name.as_deref()) {
            continue;
        }
        let name = found.meta().name.clone().unwrap_or_default();
        let check = AccessCheck::resource(None, "delete", "admissionregistration.k8s.io", &K::plural(&()), &name);
        let may = match recorded_author(at.0.annotations()) {
            Some(author) => allowed(ctx.client.kube(), &author, &check).await.map_err(|source| {
                ReconcileError::Review { namespace: at.namespace(), name: at.0.name_any(), source }
            })?,
            None => false,
        };
        if !may {
            tracing::warn!(csv = %at.0.name_any(), namespace = %at.namespace(), configuration = %name,
                "the CSV's author may not delete the configuration of a webhook it dropped: it is kept");
            kept.push(format!("{} {name}", K::plural(&())));
            continue;
        }
        configurations.ensure_deleted(&name).await.map_err(at.write(format!("webhook configuration {name}")))?;
    }
    Ok(kept)
}

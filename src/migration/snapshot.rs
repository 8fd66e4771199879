//! What the adoption plan is made from ([`Snapshot`]): the Subscriptions, Installs and Operators of the cluster, the
//! namespaces asking for adoption, the package and channels of the catalog entrypoints Operators name alone, the CSVs
//! that are not copies and the images of the bundles OLM v0 installed; the copies' places only when a plan lists
//! them (`olmv2 migrate plan`). Read by the adoption loop on each pass and by `olmv2 migrate`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, PartialObjectMeta};
use kube::ResourceExt;

use super::plan::{plan, Inputs, SubscriptionPlan};
use super::{asks_adoption, AdoptionError};
use crate::api::v1alpha1::{CatalogSource, ClusterServiceVersion, Subscription};
use crate::api::v2alpha1::{Install, Operator};
use crate::catalog::CatalogCache;
use crate::controller::client::ControllerClient;
use crate::legacy::membership::{is_install_record, COPIED_FROM_LABEL};

/// Everything the plan is made from, read with `client`: the Subscriptions, Installs and Operators of the cluster,
/// the namespaces asking for adoption, and the package and channels of every entrypoint an Operator names alone.
pub struct Snapshot {
    pub subscriptions: Vec<Subscription>,
    pub installs: Vec<Install>,
    pub operators: Vec<Operator>,
    pub annotated: Vec<String>,
    pub entrypoints: BTreeMap<(String, String, String), (String, Vec<String>)>,
    /// The CSVs that are not copies.
    pub csvs: Vec<ClusterServiceVersion>,
    /// The images of the bundles OLM v0 installed, from their Subscriptions' catalogs (when catalogs are read).
    pub bundle_images: Option<BTreeMap<(String, String, String), String>>,
    /// The namespaces of each original's copies, `(namespace, name)` → namespaces, when read (`read_copies`).
    pub copies: BTreeMap<(String, String), Vec<String>>,
}

impl Snapshot {
    pub async fn read(client: &ControllerClient, catalogs: Option<&CatalogCache>) -> Result<Self, AdoptionError> {
        let read = |what| move |source| AdoptionError::Read { what, source };
        let subscriptions = client.all::<Subscription>().list().await.map_err(read("Subscriptions"))?;
        let installs = client.all::<Install>().list().await.map_err(read("Installs"))?;
        let operators = client.all::<Operator>().list().await.map_err(read("Operators"))?;
        let namespaces = client.all::<PartialObjectMeta<Namespace>>().list().await.map_err(read("Namespaces"))?;
        let annotated =
            namespaces.iter().filter(|n| asks_adoption(n.annotations())).map(ResourceExt::name_any).collect();
        let mut entrypoints = BTreeMap::new();
        if let Some(catalogs) = catalogs {
            for operator in &operators {
                let Some(updates) = operator.spec.updates.as_ref().and_then(|u| u.catalog_source.as_ref()) else {
                    continue;
                };
                let (None, Some(entrypoint)) = (&updates.package, &updates.entrypoint) else { continue };
                let reference = &updates.catalog_ref;
                let sources = client.namespaced::<CatalogSource>(&reference.namespace);
                let Ok(Some(source)) = sources.get_opt(&reference.name).await else { continue };
                let Ok(loaded) = catalogs.catalog_of(&source).await else { continue };
                for package in loaded.catalog.packages.values() {
                    if package.bundles.contains_key(entrypoint) {
                        let channels = package
                            .channels
                            .values()
                            .filter(|channel| channel.entries.iter().any(|entry| entry.name == *entrypoint))
                            .map(|channel| channel.name.clone())
                            .collect();
                        let key = (reference.namespace.clone(), reference.name.clone(), entrypoint.clone());
                        entrypoints.insert(key, (package.name.clone(), channels));
                    }
                }
            }
        }
        let originals = ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}"));
        let csvs = client.all::<ClusterServiceVersion>().list_with(&originals).await.map_err(read("CSVs"))?;
        let bundle_images = match catalogs {
            Some(catalogs) => Some(installed_bundle_images(client, catalogs, &subscriptions, &csvs).await),
            None => None,
        };
        let copies = BTreeMap::new();
        Ok(Self { subscriptions, installs, operators, annotated, entrypoints, csvs, bundle_images, copies })
    }

    /// Reads where the copied CSVs are (their metadata only), for a plan that lists the copies adoption removes:
    /// `olmv2 migrate plan`. The adoption loop needs none.
    pub async fn read_copies(&mut self, client: &ControllerClient) -> Result<(), AdoptionError> {
        let copied = ListParams::default().labels(COPIED_FROM_LABEL);
        let copies = client
            .all::<PartialObjectMeta<ClusterServiceVersion>>()
            .list_with(&copied)
            .await
            .map_err(|source| AdoptionError::Read { what: "copied CSVs", source })?;
        for copy in copies {
            let (Some(origin), Some(namespace)) = (copy.labels().get(COPIED_FROM_LABEL), copy.namespace()) else {
                continue;
            };
            self.copies.entry((origin.clone(), copy.name_any())).or_default().push(namespace);
        }
        for namespaces in self.copies.values_mut() {
            namespaces.sort();
        }
        Ok(())
    }

    /// The plan for every Subscription, `all` meaning every namespace is asked.
    pub fn plan(&self, all: bool, default_namespace: &str) -> Vec<SubscriptionPlan> {
        let asked = |namespace: &str| all || self.annotated.iter().any(|n| n == namespace);
        plan(&Inputs {
            subscriptions: &self.subscriptions,
            installs: &self.installs,
            operators: &self.operators,
            asked: &asked,
            entrypoints: &self.entrypoints,
            default_namespace,
            csvs: &self.csvs,
            bundle_images: self.bundle_images.as_ref(),
            copies: &self.copies,
        })
    }
}

/// The images of the bundles OLM v0 installed (a Subscription's installed CSV that no Install applied), from the
/// Subscription's catalog: `(catalog namespace, catalog name, bundle)` → image. A catalog that cannot be read
/// leaves its bundles out (the plan then says they are not found, and the next pass reads again).
async fn installed_bundle_images(
    client: &ControllerClient,
    catalogs: &CatalogCache,
    subscriptions: &[Subscription],
    csvs: &[ClusterServiceVersion],
) -> BTreeMap<(String, String, String), String> {
    let mut images = BTreeMap::new();
    for subscription in subscriptions {
        let Some(installed) = subscription.status.as_ref().and_then(|status| status.installed_csv.as_ref()) else {
            continue;
        };
        let namespace = subscription.namespace();
        let plain = csvs
            .iter()
            .any(|csv| csv.namespace() == namespace && csv.name_any() == *installed && !is_install_record(csv));
        if !plain {
            continue;
        }
        let spec = &subscription.spec;
        let sources = client.namespaced::<CatalogSource>(&spec.source_namespace);
        let Ok(Some(source)) = sources.get_opt(&spec.source).await else { continue };
        let loaded = match catalogs.catalog_of(&source).await {
            Ok(loaded) => loaded,
            Err(error) => {
                tracing::info!(catalog = %spec.source, %error, "catalog not read for an adoption");
                continue;
            }
        };
        let bundle = loaded.catalog.packages.get(&spec.name).and_then(|package| package.bundles.get(installed));
        if let Some(bundle) = bundle.filter(|bundle| !bundle.image.is_empty()) {
            let key = (spec.source_namespace.clone(), spec.source.clone(), installed.clone());
            images.insert(key, bundle.image.clone());
        }
    }
    images
}

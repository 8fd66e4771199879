//! Reading an Operator's update source: a bundle image as it is, or a CatalogSource's catalog resolved to the
//! bundle to install now, the bundles it depends on (`dependencies`, against the cluster's Installs and served
//! APIs) and the newer ones in other channels. Failures are outcomes shown in the status.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;

use super::dependencies::{self, Dependency, Held, Inputs};
use super::desired::{holding_bundle, installed_bundle, installed_image, settled, waits_on_policy};
use super::reconcile::Context;
use super::status::SourceOutcome;
use crate::api::v1alpha1::CatalogSource;
use crate::api::v2alpha1::INSTALL_ANNOTATION;
use crate::api::v2alpha1::{
    CatalogSourceReference, CatalogSourceUpdates, Install, Operator, UpdateSource, SUBSCRIPTION_ANNOTATION,
};
use crate::catalog::dependencies::Source;
use crate::catalog::properties::Gvk;
use crate::catalog::resolve::{newer_in_other_channels, resolve, Resolution, Selection};
use crate::catalog::{Catalog, CatalogBundle};
use crate::category::Categorized;

/// What the Operator's `spec.updates` resolves to now. Source failures are outcomes, shown in the status, not
/// reconcile errors: retrying at once would not make a missing package appear.
pub async fn source_outcome(ctx: &Context, operator: &Operator, install: Option<&Install>) -> SourceOutcome {
    let Some(updates) = &operator.spec.updates else { return SourceOutcome::NoSource };
    match updates.source() {
        Err(error) => SourceOutcome::Failed { reason: "InvalidUpdates", message: error.to_string() },
        Ok(UpdateSource::ManifestImage(image)) => SourceOutcome::Resolved {
            image: image.to_owned(),
            bundle: None,
            version: None,
            available: Vec::new(),
            dependencies: Vec::new(),
            holding: false,
        },
        Ok(UpdateSource::CatalogSource(catalog)) => catalog_outcome(ctx, operator, catalog, install).await,
    }
}

/// What an Operator following a CatalogSource resolves to: the bundle its selection leads to now (or the one its
/// Install holds), the newer bundles of other channels, and the bundles it depends on.
async fn catalog_outcome(
    ctx: &Context,
    operator: &Operator,
    updates: &CatalogSourceUpdates,
    install: Option<&Install>,
) -> SourceOutcome {
    let reference = &updates.catalog_ref;
    let source = match read_catalog_source(ctx, reference).await {
        Ok(source) => source,
        Err(failed) => return failed,
    };
    let loaded = match ctx.catalogs.catalog_of(&source).await {
        Ok(loaded) => loaded,
        Err(error) => {
            return SourceOutcome::Failed { reason: error.category(), message: crate::category::report(&error) }
        }
    };
    let holding = holding_bundle(install);
    let resolution = match resolve_bundle(&loaded.catalog, updates, install, holding) {
        Ok(resolution) => resolution,
        Err(failed) => return failed,
    };
    let available = match &resolution.followed {
        Some((package, channel)) => loaded
            .catalog
            .packages
            .get(package)
            .map(|package| newer_in_other_channels(package, channel, &resolution.bundle.version))
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let image = match (holding, install.and_then(installed_image)) {
        (Some(_), Some(image)) => image.to_owned(),
        _ => resolution.bundle.image.clone(),
    };
    let dependencies = if resolution.bundle.requires.is_empty() {
        Vec::new()
    } else {
        let source = Source {
            name: reference.name.clone(),
            namespace: reference.namespace.clone(),
            priority: source.spec.priority.unwrap_or_default(),
            catalog: &loaded.catalog,
        };
        match dependencies_of(ctx, operator, source, &resolution.bundle).await {
            Ok(dependencies) => dependencies,
            Err(failed) => return failed,
        }
    };
    SourceOutcome::Resolved {
        image,
        bundle: Some(resolution.bundle.name.clone()),
        version: Some(resolution.bundle.version.to_string()),
        available,
        dependencies,
        holding: holding.is_some(),
    }
}

/// The CatalogSource the Operator's updates name; missing or unreadable, the outcome that says so.
async fn read_catalog_source(
    ctx: &Context,
    reference: &CatalogSourceReference,
) -> Result<CatalogSource, SourceOutcome> {
    let sources = ctx.client.namespaced::<CatalogSource>(&reference.namespace);
    match sources.get_opt(&reference.name).await {
        Ok(Some(source)) => Ok(source),
        Ok(None) => Err(SourceOutcome::Failed {
            reason: "CatalogSourceNotFound",
            message: format!("CatalogSource {}/{} does not exist", reference.namespace, reference.name),
        }),
        Err(error) => Err(SourceOutcome::Failed {
            reason: "CatalogSourceUnreadable",
            message: format!("reading CatalogSource {}/{}: {error}", reference.namespace, reference.name),
        }),
    }
}

/// The bundle the Operator's selection resolves to in `catalog`, from the bundle its Install holds (`holding`) or
/// has installed; a selection that resolves to nothing, or to a bundle with no image, is the outcome that says so.
fn resolve_bundle(
    catalog: &Catalog,
    updates: &CatalogSourceUpdates,
    install: Option<&Install>,
    holding: Option<&str>,
) -> Result<Resolution, SourceOutcome> {
    let reference = &updates.catalog_ref;
    let selection = Selection {
        package: updates.package.as_deref(),
        channel: updates.channel.as_deref(),
        entrypoint: updates.entrypoint.as_deref(),
    };
    // A bundle waiting on a policy is where the upgrade graph is walked from: its successor may fit.
    let installed = install.filter(|install| settled(install) || waits_on_policy(install)).and_then(installed_bundle);
    // An Install still installing (or waiting for approval) keeps its bundle: upgrades go one at a time.
    let resolved = match holding {
        Some(bundle) => resolve(catalog, Selection { entrypoint: Some(bundle), ..selection }, None),
        None => resolve(catalog, selection, installed),
    };
    let resolution = match resolved {
        Ok(resolution) => resolution,
        Err(error) => return Err(SourceOutcome::Failed { reason: "ResolutionFailed", message: error.to_string() }),
    };
    if resolution.bundle.image.is_empty() {
        // A ConfigMap catalog's bundles carry their content inline, with no image to install from.
        return Err(SourceOutcome::Failed {
            reason: "BundleWithoutImage",
            message: format!(
                "bundle {} of CatalogSource {}/{} has no image: its content is inline in the catalog, which Operators \
                 do not install from",
                resolution.bundle.name, reference.namespace, reference.name
            ),
        });
    }
    Ok(resolution)
}

/// The dependencies of `bundle`, resolved in the Operator's catalog against every Install holding a catalog bundle
/// and every API the cluster's CRDs serve; a dependency whose Install name someone else holds fails the Operator.
async fn dependencies_of(
    ctx: &Context,
    operator: &Operator,
    source: Source<'_>,
    bundle: &CatalogBundle,
) -> Result<Vec<Dependency>, SourceOutcome> {
    let unreadable = |what: &str, error: crate::controller::client::ClientError| SourceOutcome::Failed {
        reason: "DependenciesUnreadable",
        message: format!("listing {what} to resolve dependencies: {error}"),
    };
    let installs = ctx.client.all::<Install>().list().await.map_err(|error| unreadable("Installs", error))?;
    let crds = ctx
        .client
        .all::<CustomResourceDefinition>()
        .list()
        .await
        .map_err(|error| unreadable("CustomResourceDefinitions", error))?;
    let uid = operator.uid().unwrap_or_default();
    let names: Vec<String> = installs.iter().map(ResourceExt::name_any).collect();
    let held: Vec<Held<'_>> = installs
        .iter()
        .zip(&names)
        .filter(|(install, _)| made_by_controller(install))
        .filter_map(|(install, name)| {
            let bundle = installed_bundle(install)?;
            let image = installed_image(install).unwrap_or_default();
            let (settled, owned) = (settled(install), super::reconcile::owned_by(install, &uid));
            Some(Held { install: name, bundle, image, settled, owned })
        })
        .collect();
    let served = served_apis(&crds, &names);
    let name = operator.name_any();
    let inputs = Inputs { operator: &name, source, bundle, served: &served, held: &held };
    let dependencies = dependencies::resolve(&inputs)
        .map_err(|error| SourceOutcome::Failed { reason: error.reason(), message: error.to_string() })?;
    if let Some(taken) = dependencies.iter().find(|dependency| {
        installs
            .iter()
            .any(|install| install.name_any() == dependency.install && !super::reconcile::owned_by(install, &uid))
    }) {
        return Err(SourceOutcome::Failed {
            reason: "InstallNameTaken",
            message: format!(
                "dependency {} needs Install {}, which exists and this Operator does not own; it is left alone",
                taken.bundle, taken.install
            ),
        });
    }
    Ok(dependencies)
}

/// Whether the controller made `install` for an Operator or a Subscription: only those say which catalog bundle
/// they hold by marks nobody else may set (an Operator's owner reference, the Subscription annotation; the webhook
/// refuses them to others). Any other Install counts through the APIs it serves, not the bundle it claims to hold.
fn made_by_controller(install: &Install) -> bool {
    install.owner_references().iter().any(|owner| owner.kind == "Operator" && owner.controller == Some(true))
        || install.annotations().contains_key(SUBSCRIPTION_ANNOTATION)
}

/// Every API the cluster's CustomResourceDefinitions serve, one per served version, but those of a CRD an Install
/// applied that is gone (of `installs`' names): the CRD stays when its Install goes (its objects are users' data), but
/// no operator serves it any more.
fn served_apis(crds: &[CustomResourceDefinition], installs: &[String]) -> Vec<Gvk> {
    crds.iter()
        .filter(|crd| crd.annotations().get(INSTALL_ANNOTATION).is_none_or(|install| installs.contains(install)))
        .flat_map(|crd| {
            crd.spec.versions.iter().filter(|version| version.served).map(|version| Gvk {
                group: crd.spec.group.clone(),
                version: version.name.clone(),
                kind: crd.spec.names.kind.clone(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn install(metadata: serde_json::Value) -> Install {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
            "metadata": metadata, "spec": {"content": []}}))
        .expect("install")
    }

    #[test]
    fn only_installs_the_controller_made_say_which_bundle_they_hold() {
        let owner = |controller: bool| {
            json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "name": "plumbus", "uid": "u",
                    "controller": controller}])
        };
        assert!(made_by_controller(&install(json!({"name": "a", "ownerReferences": owner(true)}))));
        assert!(!made_by_controller(&install(json!({"name": "b", "ownerReferences": owner(false)}))));
        assert!(made_by_controller(&install(
            json!({"name": "c", "annotations": {SUBSCRIPTION_ANNOTATION: "ops/plumbus"}})
        )));
        let claimed =
            json!({"name": "d", "annotations": {crate::operator::desired::BUNDLE_ANNOTATION: "grumbo.v1.0.0"}});
        assert!(!made_by_controller(&install(claimed)), "a bundle annotation alone is anyone's claim");
    }

    #[test]
    fn served_apis_are_the_served_versions_of_every_crd() {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "grumbos.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                     "names": {"plural": "grumbos", "kind": "Grumbo"},
                     "versions": [{"name": "v1", "served": true, "storage": true},
                                  {"name": "v0", "served": false, "storage": false}]}}))
        .expect("crd");
        let grumbo = Gvk { group: "example.com".into(), version: "v1".into(), kind: "Grumbo".into() };
        assert_eq!(served_apis(std::slice::from_ref(&crd), &[]), std::slice::from_ref(&grumbo), "applied by hand");
        let mut left = crd;
        left.metadata.annotations = Some([(INSTALL_ANNOTATION.to_owned(), "a.requires.grumbo".to_owned())].into());
        assert_eq!(served_apis(std::slice::from_ref(&left), &["a.requires.grumbo".to_owned()]), [grumbo]);
        assert_eq!(served_apis(&[left], &["other".to_owned()]), [], "left behind by an Install that is gone");
    }
}

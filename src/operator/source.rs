//! Reading an Operator's update source: a bundle image as it is, or a CatalogSource's catalog resolved to the
//! bundle to install now and the newer ones in other channels. Failures are outcomes shown in the status.

use super::desired::{installed_bundle, installed_image, settled};
use super::reconcile::Context;
use super::status::SourceOutcome;
use crate::api::v1alpha1::CatalogSource;
use crate::api::v2alpha1::{CatalogSourceUpdates, Install, Operator, UpdateSource};
use crate::catalog::resolve::{newer_in_other_channels, resolve, Selection};
use crate::category::Categorized;

/// What the Operator's `spec.updates` resolves to now. Source failures are outcomes, shown in the status, not
/// reconcile errors: retrying at once would not make a missing package appear.
pub async fn source_outcome(ctx: &Context, operator: &Operator, install: Option<&Install>) -> SourceOutcome {
    let Some(updates) = &operator.spec.updates else { return SourceOutcome::NoSource };
    match updates.source() {
        Err(error) => SourceOutcome::Failed { reason: "InvalidUpdates", message: error.to_string() },
        Ok(UpdateSource::ManifestImage(image)) => {
            SourceOutcome::Resolved { image: image.to_owned(), bundle: None, version: None, available: Vec::new() }
        }
        Ok(UpdateSource::CatalogSource(catalog)) => catalog_outcome(ctx, catalog, install).await,
    }
}

async fn catalog_outcome(ctx: &Context, updates: &CatalogSourceUpdates, install: Option<&Install>) -> SourceOutcome {
    let reference = &updates.catalog_ref;
    let sources = ctx.client.namespaced::<CatalogSource>(&reference.namespace);
    let source = match sources.get_opt(&reference.name).await {
        Ok(Some(source)) => source,
        Ok(None) => {
            return SourceOutcome::Failed {
                reason: "CatalogSourceNotFound",
                message: format!("CatalogSource {}/{} does not exist", reference.namespace, reference.name),
            }
        }
        Err(error) => {
            return SourceOutcome::Failed {
                reason: "CatalogSourceUnreadable",
                message: format!("reading CatalogSource {}/{}: {error}", reference.namespace, reference.name),
            }
        }
    };
    let loaded = match ctx.catalogs.catalog_of(&source).await {
        Ok(loaded) => loaded,
        Err(error) => return SourceOutcome::Failed { reason: error.category(), message: crate::error::report(&error) },
    };
    let selection = Selection {
        package: updates.package.as_deref(),
        channel: updates.channel.as_deref(),
        entrypoint: updates.entrypoint.as_deref(),
    };
    let holding = install.filter(|install| !settled(install)).and_then(installed_bundle);
    let installed = install.filter(|install| settled(install)).and_then(installed_bundle);
    // An Install still installing (or waiting for approval) keeps its bundle: upgrades go one at a time.
    let resolved = match holding {
        Some(bundle) => resolve(&loaded.catalog, Selection { entrypoint: Some(bundle), ..selection }, None),
        None => resolve(&loaded.catalog, selection, installed),
    };
    let resolution = match resolved {
        Ok(resolution) => resolution,
        Err(error) => return SourceOutcome::Failed { reason: "ResolutionFailed", message: error.to_string() },
    };
    if resolution.bundle.image.is_empty() {
        // A ConfigMap catalog's bundles carry their content inline, with no image to install from.
        return SourceOutcome::Failed {
            reason: "BundleWithoutImage",
            message: format!(
                "bundle {} of CatalogSource {}/{} has no image: its content is inline in the catalog, which Operators \
                 do not install from",
                resolution.bundle.name, reference.namespace, reference.name
            ),
        };
    }
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
    SourceOutcome::Resolved {
        image,
        bundle: Some(resolution.bundle.name.clone()),
        version: Some(resolution.bundle.version.to_string()),
        available,
    }
}

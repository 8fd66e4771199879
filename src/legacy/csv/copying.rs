//! Making and refreshing an original CSV's copies (OLM v0's `syncCopyCSV`, `ensureCSVsInNamespaces`,
//! `copyToNamespace`): created where they are missing, replaced where they drifted, deleted where they are no longer
//! wanted (copies disabled, a target gone). Used by the CSV loop after each pass over an original, and by the
//! copied-CSV loop for one copy.

use std::collections::BTreeSet;

use futures_util::future::{BoxFuture, FutureExt};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use kube::api::ListParams;
use kube::ResourceExt;

use crate::api::v1::{OLMConfig, OperatorGroup, OLM_CONFIG_NAME, OPERATOR_NAMESPACE_ANNOTATION};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::controller::client::{ClientError, ControllerClient};
use crate::legacy::copies::{copy_namespaces, drift, is_uncopiable, prototype};
use crate::legacy::membership::{missing_annotations, COPIED_FROM_LABEL};

/// Whether copied CSVs are enabled: the `OLMConfig` `cluster` does not disable them (absent: enabled).
pub async fn copies_enabled(client: &ControllerClient) -> Result<bool, ClientError> {
    Ok(enabled_by(client.all::<OLMConfig>().get_opt(OLM_CONFIG_NAME).await?.as_ref()))
}

/// Whether `config` (the `OLMConfig` `cluster`, if any) leaves copied CSVs enabled.
pub fn enabled_by(config: Option<&OLMConfig>) -> bool {
    !config
        .and_then(|config| config.spec.features.as_ref())
        .and_then(|features| features.disable_copied_csvs)
        .unwrap_or(false)
}

/// What a pass over an original decided about its copies.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Copying {
    pub synced: Synced,
    /// Copies are off for it: copies disabled and its group targets every namespace.
    pub disabled: bool,
}

/// Syncs the copies of `original` (its status as just written), member of `group`, given the namespaces that exist
/// (not terminating), the protected ones and whether copies are enabled (they are off only for global groups). An original its group's annotations do not yet describe, or that is
/// uncopiable (not processed, failing about its group), is left as it is, as OLM leaves it.
pub async fn copy_original(
    client: &ControllerClient,
    original: &ClusterServiceVersion,
    group: &OperatorGroup,
    existing: &BTreeSet<String>,
    protected: &BTreeSet<String>,
    copies_enabled: bool,
) -> Result<Copying, ClientError> {
    let namespace = original.namespace().unwrap_or_default();
    let annotated_here = original.annotations().get(OPERATOR_NAMESPACE_ANNOTATION) == Some(&namespace);
    if !annotated_here || !missing_annotations(original, group).is_empty() || is_uncopiable(original) {
        return Ok(Copying::default());
    }
    let targets = group.status.as_ref().map(|status| status.namespaces.clone()).unwrap_or_default();
    let global = targets.iter().any(String::is_empty);
    let enabled = !global || copies_enabled;
    let wanted = copy_namespaces(&namespace, &targets, existing, enabled, protected);
    let synced = sync_copies(client, original, &wanted).await?;
    Ok(Copying { synced, disabled: global && !enabled })
}

/// What syncing an original's copies did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Synced {
    pub created: usize,
    pub refreshed: usize,
    pub deleted: usize,
}

/// Brings the copies of `original` to exactly `wanted` namespaces.
pub async fn sync_copies(
    client: &ControllerClient,
    original: &ClusterServiceVersion,
    wanted: &BTreeSet<String>,
) -> Result<Synced, ClientError> {
    let namespace = original.namespace().unwrap_or_default();
    let name = original.name_any();
    let params = ListParams::default()
        .labels(&format!("{COPIED_FROM_LABEL}={namespace}"))
        .fields(&format!("metadata.name={name}"));
    let existing = client.all::<ClusterServiceVersion>().list_with(&params).await?;
    let proto = prototype(original);
    let present: BTreeSet<String> = existing.iter().filter_map(|copy| copy.namespace()).collect();
    let mut work: Vec<CopyWork> = existing
        .into_iter()
        .filter(|copy| copy.name_any() == name)
        .map(|copy| match copy.namespace().filter(|ns| wanted.contains(ns)) {
            Some(_) => CopyWork::Refresh(Box::new(copy)),
            None => CopyWork::Delete(copy.namespace().unwrap_or_default()),
        })
        .collect();
    work.extend(wanted.difference(&present).cloned().map(CopyWork::Create));
    // Copies are independent: a few at a time, so that a thousand namespaces do not make a thousand round trips in
    // a row (nor a thousand at once).
    let runs: Vec<BoxFuture<'_, Result<Synced, ClientError>>> =
        work.into_iter().map(|item| item.run(client, &proto, &name).boxed()).collect();
    let done: Vec<Synced> = stream::iter(runs).buffer_unordered(COPY_CONCURRENCY).try_collect().await?;
    Ok(done.into_iter().fold(Synced::default(), |total, one| Synced {
        created: total.created + one.created,
        refreshed: total.refreshed + one.refreshed,
        deleted: total.deleted + one.deleted,
    }))
}

/// How many copies of one original are written at once.
const COPY_CONCURRENCY: usize = 8;

/// One copy to make, refresh or delete.
enum CopyWork {
    Create(String),
    Refresh(Box<ClusterServiceVersion>),
    Delete(String),
}

impl CopyWork {
    async fn run(
        self,
        client: &ControllerClient,
        proto: &ClusterServiceVersion,
        name: &str,
    ) -> Result<Synced, ClientError> {
        match self {
            Self::Refresh(copy) => {
                Ok(Synced { refreshed: usize::from(sync_one(client, proto, &copy).await?), ..Synced::default() })
            }
            Self::Delete(namespace) => {
                client.namespaced::<ClusterServiceVersion>(&namespace).ensure_deleted(name).await?;
                Ok(Synced { deleted: 1, ..Synced::default() })
            }
            Self::Create(namespace) => {
                let mut copy = proto.clone();
                copy.metadata.namespace = Some(namespace.clone());
                let objects = client.namespaced::<ClusterServiceVersion>(&namespace);
                let mut created = match objects.create(&copy).await {
                    Ok(created) => created,
                    // Made meanwhile (by another pass): refreshed on the next.
                    Err(error) if error.code() == Some(409) => return Ok(Synced::default()),
                    Err(error) => return Err(error),
                };
                created.status = proto.status.clone();
                objects.replace_status(name, &created).await?;
                Ok(Synced { created: 1, ..Synced::default() })
            }
        }
    }
}

/// Puts `copy` back to `proto` where it drifted (metadata and spec replaced, then status); whether it wrote.
pub async fn sync_one(
    client: &ControllerClient,
    proto: &ClusterServiceVersion,
    copy: &ClusterServiceVersion,
) -> Result<bool, ClientError> {
    let drifted = drift(copy, proto);
    if !drifted.object && !drifted.status {
        return Ok(false);
    }
    let namespace = copy.namespace().unwrap_or_default();
    let objects = client.namespaced::<ClusterServiceVersion>(&namespace);
    let mut current = copy.clone();
    if drifted.object {
        let mut replacement = proto.clone();
        replacement.metadata.namespace = Some(namespace.clone());
        replacement.metadata.resource_version = copy.metadata.resource_version.clone();
        replacement.metadata.uid = copy.metadata.uid.clone();
        replacement.status = copy.status.clone();
        current = objects.replace(&copy.name_any(), &replacement).await?;
    }
    if drift(&current, proto).status {
        current.status = proto.status.clone();
        objects.replace_status(&copy.name_any(), &current).await?;
    }
    Ok(true)
}

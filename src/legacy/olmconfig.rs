//! The `OLMConfig` named `cluster` (OLM v0's `syncOLMConfig`): its `DisabledCopiedCSVs` condition says whether the
//! operators of groups targeting every namespace have the copies they should (one per other active namespace when
//! copies are on, only those of the protected namespaces when they are off), with OLM's reasons and messages. The
//! CSV loop makes and removes the copies; this loop reports, looking again soon while they are not yet as expected.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::watcher;
use kube::ResourceExt;

use super::copies::{is_uncopiable, olm_config_condition, DISABLED_COPIED_CSVS};
use super::membership::{is_install_record, COPIED_FROM_LABEL};
use crate::api::v1::{OLMConfig, OlmConfigStatus, OperatorGroup, OLM_CONFIG_NAME};
use crate::api::v1alpha1::ClusterServiceVersion;
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::conditions;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;

pub struct Context {
    client: ControllerClient,
    protected: BTreeSet<String>,
    basics: Basics,
}

#[derive(Debug, thiserror::Error)]
pub enum OlmConfigError {
    #[error("failed to read what the OLMConfig condition needs ({what})")]
    Read {
        what: &'static str,
        #[source]
        source: ClientError,
    },
    #[error("failed to write the status of OLMConfig cluster")]
    WriteStatus(#[source] ClientError),
}

impl Categorized for OlmConfigError {
    fn category(&self) -> &'static str {
        match self {
            Self::Read { .. } => "OlmConfigReadFailed",
            Self::WriteStatus(_) => "StatusWriteFailed",
        }
    }
}

/// Whether every copiable original of a global group has exactly the copies it should: `copies` maps an original's
/// name to the namespaces holding its copies; `expected_count` is the other active namespaces (copies on), or
/// `protected` (copies off).
pub fn copies_as_expected(
    originals: &[String],
    copies: &BTreeMap<String, BTreeSet<String>>,
    enabled: bool,
    expected_count: usize,
    protected: &BTreeSet<String>,
) -> bool {
    originals.iter().all(|name| {
        let found = copies.get(name).cloned().unwrap_or_default();
        if enabled {
            found.len() == expected_count
        } else {
            found == *protected
        }
    })
}

impl Reconciler for Context {
    type Object = OLMConfig;
    type Error = OlmConfigError;
    const NAME: &'static str = "olmconfig";

    async fn reconcile(self: Arc<Self>, config: Arc<OLMConfig>) -> Result<Action, OlmConfigError> {
        if config.name_any() != OLM_CONFIG_NAME {
            return Ok(Action::await_change());
        }
        let read = |what| move |source| OlmConfigError::Read { what, source };
        let enabled = !config.spec.features.as_ref().and_then(|f| f.disable_copied_csvs).unwrap_or(false);
        let groups = self.client.all::<OperatorGroup>().list().await.map_err(read("OperatorGroups"))?;
        let namespaces = self.client.all::<PartialObjectMeta<Namespace>>().list().await.map_err(read("Namespaces"))?;
        let active = namespaces.iter().filter(|namespace| namespace.metadata.deletion_timestamp.is_none()).count();
        let mut as_expected = true;
        for group in
            groups.iter().filter(|g| g.status.as_ref().is_some_and(|s| s.namespaces.iter().any(String::is_empty)))
        {
            let namespace = group.namespace().unwrap_or_default();
            let originals: Vec<String> = self
                .client
                .namespaced::<ClusterServiceVersion>(&namespace)
                .list_with(&ListParams::default().labels(&format!("!{COPIED_FROM_LABEL}")))
                .await
                .map_err(read("CSVs"))?
                .into_iter()
                .filter(|csv| !is_uncopiable(csv) && !is_install_record(csv))
                .map(|csv| csv.name_any())
                .collect();
            let mut copies: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            let labelled = ListParams::default().labels(&format!("{COPIED_FROM_LABEL}={namespace}"));
            let listed = self
                .client
                .all::<PartialObjectMeta<ClusterServiceVersion>>()
                .list_with(&labelled)
                .await
                .map_err(read("copied CSVs"))?;
            for copy in listed {
                copies.entry(copy.name_any()).or_default().insert(copy.namespace().unwrap_or_default());
            }
            let protected: BTreeSet<String> = self.protected.iter().filter(|p| **p != namespace).cloned().collect();
            as_expected &= copies_as_expected(&originals, &copies, enabled, active.saturating_sub(1), &protected);
        }
        let (status, reason, message) = olm_config_condition(enabled, as_expected);
        let previous = config.status.clone().unwrap_or_default().conditions;
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let mut next =
            conditions([(DISABLED_COPIED_CSVS, status, reason.to_owned(), message.to_owned())], &previous, None, &now);
        next.extend(previous.iter().filter(|c| c.type_ != DISABLED_COPIED_CSVS).cloned());
        let unchanged = previous.iter().any(|c| {
            c.type_ == DISABLED_COPIED_CSVS && c.status == status && c.reason == reason && c.message == message
        });
        if !unchanged {
            self.client
                .all::<OLMConfig>()
                .apply_status(OLM_CONFIG_NAME, &OlmConfigStatus { conditions: next }, None)
                .await
                .map_err(OlmConfigError::WriteStatus)?;
        }
        Ok(Action::requeue(if as_expected { self.basics.resync } else { self.basics.retry }))
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// Starts the OLMConfig loop.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), "olmv2-olmconfig"),
        protected: process.options.protected_copied_csv_namespaces.iter().cloned().collect(),
        basics: process.basics(),
    });
    let controller = watches::controller(Api::<OLMConfig>::all(client), watcher::Config::default());
    runner::run(controller, context, process.shutdown()).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|item| (*item).to_owned()).collect()
    }

    #[test]
    fn copies_are_counted_against_active_namespaces_or_the_protected_set() {
        let copies: BTreeMap<String, BTreeSet<String>> = [("a".to_owned(), set(&["x", "y"]))].into();
        let originals = vec!["a".to_owned()];
        assert!(copies_as_expected(&originals, &copies, true, 2, &set(&[])));
        assert!(!copies_as_expected(&originals, &copies, true, 3, &set(&[])));
        assert!(!copies_as_expected(&originals, &copies, false, 3, &set(&["x"])));
        assert!(copies_as_expected(&originals, &copies, false, 3, &set(&["x", "y"])));
        assert!(!copies_as_expected(&["b".to_owned()], &copies, true, 2, &set(&[])), "b has none");
        assert!(copies_as_expected(&["b".to_owned()], &copies, false, 2, &set(&[])), "none is right when off");
    }
}

//! The CatalogSource loop (OLM v0's `syncCatalogSources`): each CatalogSource's catalog loaded into the process-wide
//! catalog cache (the one Operators and Subscriptions read, so no catalog is loaded twice) and its status written in
//! OLM's fields: `connectionState` (READY, or TRANSIENT_FAILURE with `reason`/`message`), `latestImageRegistryPoll`
//! when a `registryPoll` is due, `configMapReference` for ConfigMap catalogs, OLM's reasons (`SpecInvalidError`,
//! `ConfigMapError`, `RegistryServerError`, `InvalidIntervalError`) and one `Serving` condition. No registry pod or
//! Service runs: the catalog is read in process (docs/legacy.md, 'CatalogSources').
//!
//! `next_status` decides; [`controller`] reads (the cache pulls or reads the ConfigMap) and writes the status only
//! when it changed, so an idle catalog costs no write.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{watcher, WatchStreamExt};
use kube::ResourceExt;

use crate::api::v1alpha1::{
    CatalogSource, CatalogSourceStatus, ConfigMapResourceReference, GrpcConnectionState, SourceType,
};
use crate::catalog::poll::{poll_due, registry_poll, until_next_poll, RegistryPoll};
use crate::catalog::source::{ConfigMapVersion, LoadedCatalog};
use crate::catalog::{CatalogCache, CatalogSourceError};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::conditions::{conditions, transitions, EventPolicy, FALSE, TRUE};
use crate::controller::events::Events;
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;

/// OLM's reasons (`CatalogSourceSpecInvalidError`, ...), and ours for what this controller does not serve.
pub const SPEC_INVALID: &str = "SpecInvalidError";
pub const CONFIG_MAP_ERROR: &str = "ConfigMapError";
pub const REGISTRY_SERVER_ERROR: &str = "RegistryServerError";
pub const INTERVAL_INVALID: &str = "InvalidIntervalError";
pub const UNSUPPORTED: &str = "Unsupported";

/// gRPC connectivity states OLM copies into `connectionState.lastObservedState` (defined with the API: the Installed
/// API reads them).
pub use crate::api::v1alpha1::{READY, TRANSIENT_FAILURE};

/// The condition this controller adds (OLM v0 writes none on CatalogSources).
pub const SERVING: &str = "Serving";
/// The Serving reason of a catalog being served.
pub const AVAILABLE: &str = "Available";

/// What loading the catalog found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Served from `address` (an image pinned by digest, or a ConfigMap).
    Serving { address: String, resolved_image: Option<String>, packages: usize, config_map: Option<ConfigMapVersion> },
    /// Not served: OLM's reason, the message, and where it was looked for (no connection attempted when `None`).
    Failed { reason: &'static str, message: String, address: Option<String> },
}

/// The observation of a load.
pub fn observe(source: &CatalogSource, loaded: Result<&LoadedCatalog, &CatalogSourceError>) -> Observation {
    match loaded {
        Ok(loaded) => Observation::Serving {
            address: loaded.address(),
            resolved_image: loaded.config_map.is_none().then(|| loaded.address()),
            packages: loaded.catalog.packages.len(),
            config_map: loaded.config_map.clone(),
        },
        Err(error) => {
            let message = crate::category::report(error);
            let image = source.spec.image.clone();
            let config_map = || {
                Some(format!(
                    "configmap {}/{}",
                    source.namespace().unwrap_or_default(),
                    source.spec.config_map.as_deref().unwrap_or_default()
                ))
            };
            let (reason, address) = match error {
                CatalogSourceError::SpecInvalid(_) => (SPEC_INVALID, None),
                CatalogSourceError::AddressUnsupported { .. } => (UNSUPPORTED, None),
                CatalogSourceError::Pull { .. }
                | CatalogSourceError::Load { .. }
                | CatalogSourceError::Refused { .. }
                | CatalogSourceError::RecentlyFailed { .. } => (REGISTRY_SERVER_ERROR, image),
                CatalogSourceError::OverBudget { .. }
                    if matches!(source.spec.source_type, SourceType::Configmap | SourceType::Internal) =>
                {
                    (CONFIG_MAP_ERROR, config_map())
                }
                CatalogSourceError::OverBudget { .. } => (REGISTRY_SERVER_ERROR, image),
                CatalogSourceError::ReadConfigMap { .. }
                | CatalogSourceError::ConfigMapNotCatalog { .. }
                | CatalogSourceError::LoadConfigMap { .. } => (CONFIG_MAP_ERROR, config_map()),
            };
            Observation::Failed { reason, message, address }
        }
    }
}

/// The status after `observation`: OLM's fields from `previous`, moved only where the observation moved them.
pub fn next_status(
    previous: &CatalogSourceStatus,
    observation: &Observation,
    poll: Option<&RegistryPoll>,
    polled: bool,
    generation: Option<i64>,
    now: &Time,
) -> CatalogSourceStatus {
    let mut status = CatalogSourceStatus { reason: None, message: None, ..previous.clone() };
    if polled {
        status.latest_image_registry_poll = Some(now.clone());
    }
    let connection = |state: &str, address: &str| {
        let same = previous
            .connection_state
            .as_ref()
            .filter(|c| c.last_observed_state == state && c.address.as_deref() == Some(address));
        Some(GrpcConnectionState {
            address: Some(address.to_owned()),
            last_observed_state: state.to_owned(),
            last_connect_time: same.map_or_else(|| Some(now.clone()), |same| same.last_connect_time.clone()),
        })
    };
    let serving = match observation {
        Observation::Serving { address, resolved_image, packages, config_map } => {
            status.connection_state = connection(READY, address);
            status.resolved_image = resolved_image.clone();
            status.config_map_reference =
                config_map.as_ref().map(|version| config_map_reference(previous, version, now));
            if let Some(error) = poll.and_then(|poll| poll.parse_error.as_ref()) {
                status.reason = Some(INTERVAL_INVALID.to_owned());
                status.message = Some(error.clone());
            }
            (TRUE, AVAILABLE.to_owned(), format!("serving {packages} package(s) from {address}"))
        }
        Observation::Failed { reason, message, address } => {
            status.reason = Some((*reason).to_owned());
            status.message = Some(message.clone());
            match (*reason, address) {
                // OLM stops at an invalid spec, leaving the rest of the status as it was.
                (SPEC_INVALID, _) => {}
                (_, Some(address)) => status.connection_state = connection(TRANSIENT_FAILURE, address),
                (_, None) => {
                    status.connection_state = None;
                    status.resolved_image = None;
                }
            }
            (FALSE, (*reason).to_owned(), message.clone())
        }
    };
    let (condition_status, reason, message) = serving;
    let mut next = conditions([(SERVING, condition_status, reason, message)], &previous.conditions, generation, now);
    next.extend(previous.conditions.iter().filter(|c| c.type_ != SERVING).cloned());
    status.conditions = next;
    status
}

/// The ConfigMap reference, its `lastUpdateTime` moved only when the ConfigMap did (OLM's `IsAMatch`).
fn config_map_reference(
    previous: &CatalogSourceStatus,
    version: &ConfigMapVersion,
    now: &Time,
) -> ConfigMapResourceReference {
    let unchanged = previous.config_map_reference.as_ref().filter(|reference| {
        reference.name == version.name
            && reference.namespace == version.namespace
            && reference.uid == version.uid
            && reference.resource_version == version.resource_version
    });
    ConfigMapResourceReference {
        name: version.name.clone(),
        namespace: version.namespace.clone(),
        uid: version.uid.clone(),
        resource_version: version.resource_version.clone(),
        last_update_time: unchanged.map_or_else(|| Some(now.clone()), |r| r.last_update_time.clone()),
    }
}

const EVENTS: EventPolicy = EventPolicy { abnormal: |condition| condition.status == FALSE, normal_types: &[] };

pub struct Context {
    client: ControllerClient,
    events: Events,
    catalogs: Arc<CatalogCache>,
    basics: Basics,
}

#[derive(Debug, thiserror::Error)]
pub enum CatalogSourceLoopError {
    #[error("failed to write the status of CatalogSource {namespace}/{name}")]
    WriteStatus {
        namespace: String,
        name: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for CatalogSourceLoopError {
    fn category(&self) -> &'static str {
        match self {
            Self::WriteStatus { .. } => "StatusWriteFailed",
        }
    }
}

impl Reconciler for Context {
    type Object = CatalogSource;
    type Error = CatalogSourceLoopError;
    const NAME: &'static str = "catalogsource";

    async fn reconcile(self: Arc<Self>, source: Arc<CatalogSource>) -> Result<Action, CatalogSourceLoopError> {
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let previous = source.status.clone().unwrap_or_default();
        let poll = registry_poll(&source);
        let created = source.metadata.creation_timestamp.as_ref().map(|time| time.0);
        let last_poll = previous.latest_image_registry_poll.as_ref().map(|time| time.0);
        let due = poll.as_ref().is_some_and(|poll| poll_due(created, last_poll, poll.interval, now.0));
        let loaded = if due { self.catalogs.poll(&source).await } else { self.catalogs.catalog_of(&source).await };
        let observation = observe(&source, loaded.as_ref());
        if let Observation::Failed { message, .. } = &observation {
            tracing::info!(reason = ?loaded.as_ref().err().map(Categorized::category), "catalog not served: {message}");
        }
        let next = next_status(&previous, &observation, poll.as_ref(), due, source.metadata.generation, &now);
        if next != previous {
            let (namespace, name) = (source.namespace().unwrap_or_default(), source.name_any());
            self.client
                .namespaced::<CatalogSource>(&namespace)
                .apply_status(&name, &next, None)
                .await
                .map_err(|source| CatalogSourceLoopError::WriteStatus { namespace, name, source })?;
            self.events.publish(source.as_ref(), &transitions(&previous.conditions, &next.conditions, &EVENTS)).await;
        }
        let next_check = match (&observation, &poll) {
            (Observation::Failed { reason: SPEC_INVALID | UNSUPPORTED, .. }, _) => self.basics.resync,
            (Observation::Failed { .. }, _) => self.basics.retry,
            (Observation::Serving { .. }, Some(poll)) => {
                let last_poll = next.latest_image_registry_poll.as_ref().map(|time| time.0);
                until_next_poll(created, last_poll, poll.interval, now.0)
                    .clamp(Duration::from_secs(1), self.basics.resync)
            }
            (Observation::Serving { .. }, None) => self.basics.resync,
        };
        Ok(Action::requeue(next_check))
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// Starts the CatalogSource loop: every CatalogSource, woken also when a ConfigMap one of them names changes.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), "olmv2-catalogsource"),
        events: Events::new(client.clone(), "olmv2-catalogsource-controller"),
        catalogs: process.catalogs.clone(),
        basics: process.basics(),
    });
    let controller = watches::controller(Api::<CatalogSource>::all(client.clone()), watcher::Config::default());
    let sources = controller.store();
    let config_maps = watches::metadata::<ConfigMap>(client, watcher::Config::default()).touched_objects();
    let controller = controller.watches_stream(config_maps, move |config_map| {
        let (namespace, name) = (config_map.namespace(), config_map.name_any());
        sources
            .state()
            .iter()
            .filter(|source| source.namespace() == namespace && source.spec.config_map.as_deref() == Some(&name))
            .map(|source| ObjectRef::from_obj(source.as_ref()))
            .collect::<Vec<_>>()
    });
    runner::run(controller, context, process.shutdown()).boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).expect("a time"))
    }

    fn serving(address: &str) -> Observation {
        Observation::Serving {
            address: address.into(),
            resolved_image: Some(address.into()),
            packages: 2,
            config_map: None,
        }
    }

    fn failed(reason: &'static str, address: Option<&str>) -> Observation {
        Observation::Failed { reason, message: format!("{reason} happened"), address: address.map(str::to_owned) }
    }

    #[test]
    fn a_served_catalog_is_ready_with_its_pinned_address_and_no_reason() {
        let status =
            next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), None, false, Some(1), &at(10));
        let connection = status.connection_state.as_ref().expect("a connection state");
        assert_eq!(connection.last_observed_state, READY);
        assert_eq!(connection.address.as_deref(), Some("r/c@sha256:1"));
        assert_eq!(connection.last_connect_time, Some(at(10)));
        assert_eq!(status.resolved_image.as_deref(), Some("r/c@sha256:1"));
        assert_eq!((status.reason, status.message), (None, None));
        assert_eq!(status.latest_image_registry_poll, None, "no poll configured, none made");
        let condition = &status.conditions[0];
        assert_eq!(
            (condition.type_.as_str(), condition.status.as_str(), condition.reason.as_str()),
            (SERVING, TRUE, AVAILABLE)
        );
        assert_eq!(condition.message, "serving 2 package(s) from r/c@sha256:1");
    }

    #[test]
    fn nothing_moves_while_nothing_changes_so_an_idle_catalog_is_not_written() {
        let first =
            next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), None, false, Some(1), &at(10));
        let again = next_status(&first, &serving("r/c@sha256:1"), None, false, Some(1), &at(500));
        assert_eq!(first, again, "nothing to write");
        let moved = next_status(&first, &serving("r/c@sha256:2"), None, false, Some(1), &at(500));
        assert_ne!(first, moved);
        assert_eq!(moved.connection_state.and_then(|c| c.last_connect_time), Some(at(500)), "a new digest reconnects");
        assert_eq!(moved.conditions[0].last_transition_time, at(10), "still serving: no transition");
    }

    #[test]
    fn a_poll_records_its_time() {
        let poll = RegistryPoll { interval: Duration::from_secs(60), parse_error: None };
        let status =
            next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), Some(&poll), true, None, &at(70));
        assert_eq!(status.latest_image_registry_poll, Some(at(70)));
        let later = next_status(&status, &serving("r/c@sha256:1"), Some(&poll), false, None, &at(90));
        assert_eq!(later.latest_image_registry_poll, Some(at(70)), "not due: kept");
    }

    #[test]
    fn an_interval_that_does_not_parse_is_reported_while_the_catalog_is_served() {
        let poll = RegistryPoll { interval: Duration::from_secs(900), parse_error: Some("bad interval".into()) };
        let status =
            next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), Some(&poll), true, None, &at(1));
        assert_eq!(status.reason.as_deref(), Some(INTERVAL_INVALID));
        assert_eq!(status.message.as_deref(), Some("bad interval"));
        assert_eq!(status.connection_state.map(|c| c.last_observed_state).as_deref(), Some(READY));
    }

    #[test]
    fn a_registry_failure_is_a_transient_failure_with_olm_s_reason_and_a_warning_condition() {
        let ready = next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), None, false, None, &at(1));
        let failing =
            next_status(&ready, &failed(REGISTRY_SERVER_ERROR, Some("r/c:latest")), None, false, None, &at(5));
        assert_eq!(failing.reason.as_deref(), Some(REGISTRY_SERVER_ERROR));
        assert_eq!(failing.message.as_deref(), Some("RegistryServerError happened"));
        let connection = failing.connection_state.as_ref().expect("a state");
        assert_eq!(connection.last_observed_state, TRANSIENT_FAILURE);
        assert_eq!(connection.address.as_deref(), Some("r/c:latest"));
        assert_eq!(connection.last_connect_time, Some(at(5)));
        assert_eq!(failing.conditions[0].status, FALSE);
        assert_eq!(failing.conditions[0].reason, REGISTRY_SERVER_ERROR);
        assert_eq!(failing.conditions[0].last_transition_time, at(5));
        let events = transitions(&ready.conditions, &failing.conditions, &EVENTS);
        assert_eq!(events.len(), 1);
        assert!(events[0].warning);
        let back = next_status(&failing, &serving("r/c@sha256:1"), None, false, None, &at(9));
        assert_eq!(
            (back.reason, back.message),
            (None, None),
            "recovery clears the reason, as OLM's SetError(\"\") does"
        );
        assert!(!transitions(&failing.conditions, &back.conditions, &EVENTS)[0].warning);
    }

    #[test]
    fn an_invalid_spec_leaves_the_rest_of_the_status_as_olm_does() {
        let ready = next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), None, false, None, &at(1));
        let invalid = next_status(&ready, &failed(SPEC_INVALID, None), None, false, None, &at(5));
        assert_eq!(invalid.reason.as_deref(), Some(SPEC_INVALID));
        assert_eq!(invalid.connection_state, ready.connection_state);
        assert_eq!(invalid.resolved_image, ready.resolved_image);
    }

    #[test]
    fn an_unsupported_address_clears_what_an_image_left() {
        let ready = next_status(&CatalogSourceStatus::default(), &serving("r/c@sha256:1"), None, false, None, &at(1));
        let unsupported = next_status(&ready, &failed(UNSUPPORTED, None), None, false, None, &at(5));
        assert_eq!(unsupported.reason.as_deref(), Some(UNSUPPORTED));
        assert_eq!(unsupported.connection_state, None);
        assert_eq!(unsupported.resolved_image, None);
    }

    #[test]
    fn a_catalog_refused_for_its_size_or_for_want_of_room_is_a_transient_failure_saying_which_limit() {
        let source = |spec: serde_json::Value| -> CatalogSource {
            serde_json::from_value(serde_json::json!({"apiVersion": "operators.coreos.com/v1alpha1",
                "kind": "CatalogSource", "metadata": {"name": "c", "namespace": "team"}, "spec": spec}))
            .expect("a CatalogSource")
        };
        let image = source(serde_json::json!({"sourceType": "grpc", "image": "r/c:1"}));
        let refused = CatalogSourceError::Refused {
            image: "r/c:1".into(),
            digest: "sha256:1".into(),
            category: "CatalogOverLimit",
            reason: "a blob (one JSON value or YAML document) is over 16777216 bytes (16 MiB)".into(),
        };
        let Observation::Failed { reason, message, address } = observe(&image, Err(&refused)) else {
            panic!("not served")
        };
        assert_eq!((reason, address.as_deref()), (REGISTRY_SERVER_ERROR, Some("r/c:1")));
        assert!(message.contains("over 16777216 bytes (16 MiB)"), "{message}");
        let status = next_status(
            &CatalogSourceStatus::default(),
            &Observation::Failed { reason, message, address },
            None,
            false,
            None,
            &at(1),
        );
        assert_eq!(status.connection_state.map(|c| c.last_observed_state).as_deref(), Some(TRANSIENT_FAILURE));

        let over = |image: &str| CatalogSourceError::OverBudget { image: image.into(), needed: 1, held: 2, budget: 3 };
        let Observation::Failed { reason, address, .. } = observe(&image, Err(&over("r/c:1"))) else { panic!() };
        assert_eq!((reason, address.as_deref()), (REGISTRY_SERVER_ERROR, Some("r/c:1")));
        let config_map = source(serde_json::json!({"sourceType": "configmap", "configMap": "cm"}));
        let Observation::Failed { reason, address, .. } = observe(&config_map, Err(&over("configmap team/cm"))) else {
            panic!()
        };
        assert_eq!((reason, address.as_deref()), (CONFIG_MAP_ERROR, Some("configmap team/cm")));
    }

    #[test]
    fn a_configmap_reference_moves_its_update_time_only_when_the_configmap_changes() {
        let version = |rv: &str| ConfigMapVersion {
            name: "cm".into(),
            namespace: "olm".into(),
            uid: Some("u".into()),
            resource_version: Some(rv.into()),
        };
        let observed = |rv: &str| Observation::Serving {
            address: "configmap olm/cm".into(),
            resolved_image: None,
            packages: 1,
            config_map: Some(version(rv)),
        };
        let first = next_status(&CatalogSourceStatus::default(), &observed("7"), None, false, None, &at(1));
        let reference = first.config_map_reference.clone().expect("a reference");
        assert_eq!((reference.name.as_str(), reference.namespace.as_str()), ("cm", "olm"));
        assert_eq!(reference.resource_version.as_deref(), Some("7"));
        assert_eq!(reference.last_update_time, Some(at(1)));
        assert_eq!(first.resolved_image, None);
        let same = next_status(&first, &observed("7"), None, false, None, &at(50));
        assert_eq!(first, same);
        let moved = next_status(&first, &observed("8"), None, false, None, &at(50));
        assert_eq!(moved.config_map_reference.and_then(|r| r.last_update_time), Some(at(50)));
    }
}

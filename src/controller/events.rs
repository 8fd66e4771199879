//! Publishing the events a controller's condition transitions make, as that controller (the reporter), on the
//! object they are about. Kubernetes records events of cluster-scoped objects in the `default` namespace.

use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::Resource;

use super::conditions::Transition;

/// What the API server keeps of an event's note.
const NOTE_LIMIT: usize = 1000;

/// The events of one controller.
pub struct Events {
    recorder: Recorder,
}

impl Events {
    /// Events reported by `controller` (`olmv2-install-controller`).
    pub fn new(client: kube::Client, controller: &str) -> Self {
        Self { recorder: Recorder::new(client, Reporter { controller: controller.into(), instance: None }) }
    }

    /// Logs and records one event per transition; a failure to record one is logged, never fatal: the status says
    /// the same.
    pub async fn publish<K: Resource<DynamicType = ()>>(&self, object: &K, transitions: &[Transition]) {
        let reference = object.object_ref(&());
        for transition in transitions {
            tracing::info!(reason = %transition.reason, "{}", transition.note);
            let event = Event {
                type_: if transition.warning { EventType::Warning } else { EventType::Normal },
                reason: transition.reason.clone(),
                note: Some(transition.note.chars().take(NOTE_LIMIT).collect()),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(error) = self.recorder.publish(&event, &reference).await {
                tracing::warn!(%error, "failed to record an event");
            }
        }
    }
}

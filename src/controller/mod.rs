//! The controller pattern every reconciler follows. `runner` drives a reconciler (metrics, error policy, logs,
//! shutdown); `connect` builds the client of the API server; `client` is the reads and writes they all make;
//! `conditions` the Kubernetes condition conventions and the events their transitions make, which `events`
//! publishes; `watches` the watches whose objects are held, trimmed, and `listing` the wait for their first list;
//! `rbac_cache` the cluster's RBAC objects watched once for all. What every controller is built from (the options
//! and the shared caches) is `crate::runtime`, and the list of controllers one process runs `crate::process`, both
//! above this pattern, which imports neither them nor any controller.

pub mod client;
pub mod conditions;
pub mod connect;
pub mod events;
pub mod impersonation;
pub mod leader;
pub mod lease;
pub mod listing;
pub mod rbac_cache;
pub mod runner;
pub mod watches;
pub mod written;

/// In a pass written as a sequence of steps, each answering a `ControlFlow`: goes on with what a step handed over,
/// or ends the pass with the `Action` it decided.
macro_rules! next {
    ($step:expr) => {
        match $step {
            std::ops::ControlFlow::Continue(value) => value,
            std::ops::ControlFlow::Break(action) => return Ok(action),
        }
    };
}
pub(crate) use next;

//! The operator-lifecycle controller: the `operators.coreos.com/v2alpha1` Operator and Install APIs, and OLM v0's
//! legacy loops for compatibility. The binary in `main.rs` only wires these modules together.

pub mod api;
pub mod bundle;
pub mod bundle_command;
pub mod cli;
pub mod crdgen;
pub mod error;
pub mod labels;
pub mod metrics;
pub mod output;
pub mod rbac;
pub mod run;
pub mod server;
pub mod telemetry;

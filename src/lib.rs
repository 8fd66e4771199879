//! The operator-lifecycle controller: the `operators.coreos.com/v2alpha1` Operator and Install APIs, and OLM v0's
//! legacy loops for compatibility. The subcommands of the binary are in `cmd`, on top of the other modules, which
//! never read them; `main.rs` only parses the command line and dispatches to them.

pub mod access;
pub mod api;
pub mod bundle;
pub mod catalog;
pub mod category;
pub mod cmd;
pub mod controller;
pub mod crdgen;
pub mod error;
pub mod install;
pub mod installed;
pub mod labels;
pub mod legacy;
pub mod metrics;
pub mod migration;
pub mod operator;
pub mod output;
pub mod policy;
pub mod process;
pub mod rbac;
pub mod runtime;
pub mod server;
pub mod telemetry;
pub mod tls;
pub mod webhook;

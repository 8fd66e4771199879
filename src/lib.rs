//! The operator-lifecycle controller: the `operators.coreos.com/v2alpha1` Operator and Install APIs, and OLM v0's
//! legacy loops for compatibility. The binary in `main.rs` only wires these modules together.

pub mod access;
pub mod api;
pub mod approve_command;
pub mod bundle;
pub mod bundle_command;
pub mod catalog;
pub mod cli;
pub mod controller;
pub mod crdgen;
pub mod error;
pub mod install;
pub mod labels;
pub mod metrics;
pub mod operator;
pub mod output;
pub mod rbac;
pub mod run;
pub mod server;
pub mod telemetry;
pub mod webhook;

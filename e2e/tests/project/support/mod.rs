//! Helpers of the project's suites: the harness (`harness`: a control plane with the project's CRDs, a registry, the
//! controllers as `deploy/`'s ServiceAccount) and the Install suites' (`installs`); and the emulator's own test
//! helpers (`emulator`: raw requests, kubectl and processes, workloads), shared with its conformance suite rather
//! than copied.

#[path = "../../../apiserver/tests/conformance/support/mod.rs"]
pub mod emulator;
pub mod harness;
pub mod installs;

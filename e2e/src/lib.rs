//! The project on the test control plane: its CRDs, RBAC and controllers installed on the Kubernetes API emulator
//! (`kube-emulator`), a real OCI registry, and the walkthrough the `olmv2-control-plane` binary runs.

pub mod project;
pub mod registry;
pub mod walkthrough;

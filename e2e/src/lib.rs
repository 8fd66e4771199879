//! The project on the test control plane: its CRDs, RBAC and controllers installed on the Kubernetes API emulator
//! (`kube-emulator`), a real OCI registry, and the walkthrough the `olmv2-control-plane` binary runs; and a real
//! Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager) to check the emulator against, with a
//! fault-injecting proxy in front of it for the fault suite.

pub mod cluster;
pub mod fault_proxy;
pub mod kubernetes;
pub mod olm_v0;
pub mod project;
pub mod real;
pub mod registry;
pub mod walkthrough;

//! The test control plane: what a Kubernetes API server checks and does, for the project's tests.

pub mod apiserver;
pub mod backend;
pub mod project;
pub mod registry;
pub mod structural;
pub mod walkthrough;

//! Rust types of every custom resource the controller serves or reads, grouped by API version.
//! The CRD schemas generated from them (see [`crate::crdgen`]) are what refuses bad input at admission time.

pub mod component;
pub mod nullable;
pub mod union;
pub mod v1;
pub mod v1alpha1;
pub mod v2alpha1;

/// The API group of every OLM resource.
pub const GROUP: &str = "operators.coreos.com";

/// The CRD category shared by every resource, so that `kubectl get olm` lists them all.
pub const CATEGORY: &str = "olm";

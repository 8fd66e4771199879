//! A Kubernetes API emulator: what kube-apiserver (with the controllers a cluster runs beside it) checks and does,
//! served over HTTPS so that kube-rs clients, kube-runtime controllers and the real `kubectl` talk to it as to a
//! cluster. `storage` keeps objects, `model` knows the resource types and their kinds, `merge` how objects merge,
//! `crds` and `admission` what CustomResourceDefinitions and webhooks add, `auth` who may do what, `request` the
//! verbs, `http` the wire, `controllers` the cluster's controllers, and `server` starts it all.

pub mod admission;
pub mod aggregator;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod controllers;
pub mod crds;
pub mod http;
pub mod merge;
pub mod model;
pub mod outbound;
pub mod request;
pub mod server;
pub mod status;
pub mod storage;

pub use request::api_server::ApiServer;
pub use request::types::{FieldValidation, PatchType, Target, WriteOptions, Written};
pub use server::{ControlPlane, Options};
pub use status::ApiError;

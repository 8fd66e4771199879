//! A Kubernetes API emulator: what kube-apiserver, and the controllers a cluster runs beside it, check and do,
//! served over HTTPS so that kube-rs clients, kube-runtime controllers and the real `kubectl` talk to it as to a
//! cluster (`ControlPlane::start`).
//!
//! It is built in layers, each importing only layers below it:
//!
//! | layer | what it holds |
//! | --- | --- |
//! | `server` | the control plane started: certificates, HTTPS, what a cluster starts with, kubeconfigs |
//! | `http`, `controllers` | the wire (routes, verbs, watches, media types, Tables, OpenAPI); the cluster's controllers |
//! | `aggregator` | aggregated API servers: their availability, and requests proxied to them |
//! | `request` | the API server: its state, and the verbs, each write step by step |
//! | `admission`, `crds` | admission webhooks; CustomResourceDefinitions and custom resources' schemas |
//! | `model`, `auth` | resource types, discovery and what each kind does; authentication and authorization |
//! | `status` | API errors and the field errors they list |
//! | `storage`, `merge`, `outbound`, `audit`, `faults` | objects and watches; merging; cluster services; audit; faults |
//!
//! `backend` stands apart: HTTPS servers that play the cluster's workloads (webhooks, aggregated API servers) in
//! tests.

pub mod admission;
pub mod aggregator;
pub mod audit;
pub mod auth;
pub mod backend;
pub mod controllers;
pub mod crds;
pub mod faults;
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

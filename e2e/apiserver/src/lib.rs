//! The Kubernetes API emulator. `store` keeps objects with kube-apiserver's storage semantics, `api` carries the
//! request semantics (with `deletion`, `crds`, `managed`, `patch`, `schema`, `builtin`, `defaults`, `services`,
//! `validation`), `http` the URL layout and wire format, `controllers` the cluster controllers tests depend on, and
//! `server` starts it all over HTTPS.

pub mod admission;
pub mod aggregator;
pub mod api;
pub mod apply;
pub mod audit;
pub mod authn;
pub mod backend;
pub mod builtin;
pub mod controllers;
pub mod crds;
pub mod defaults;
pub mod deletion;
pub mod events;
pub mod fieldset;
pub mod front;
pub mod http;
pub mod managed;
pub mod openapi;
pub mod outbound;
pub mod patch;
pub mod policy;
pub mod protobuf;
pub mod rbac;
pub mod resources;
pub mod reviews;
pub mod scale;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod services;
pub mod shape;
pub mod status;
pub mod store;
pub mod structural;
pub mod table;
pub mod validation;
pub mod watch;

pub use server::{ControlPlane, Options};

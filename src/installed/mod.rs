//! The Installed API of seed 002 (`installed.packages.operators.coreos.com/v2alpha1`, `docs/installed.md`): a
//! read-only, namespaced resource that exists in a namespace exactly when an installed operator watches it, named
//! after its CSV, synthesized on request from the CSVs, Subscriptions, OperatorGroups, Installs and namespaces the
//! cluster holds (where an operator is listed only from what the controller writes: its group's or its Install's
//! status, never its CSV's annotations), never stored and never copied per namespace, served by an aggregated API
//! server inside the binary.
//!
//! Pure: `synthesize` decides what a namespace holds, `table` how `kubectl get` shows it and the composite
//! resourceVersion, `view` the cache's per-operator entries and the log watches resume from, `selector` the
//! selectors, `discovery` discovery and OpenAPI, `front_proxy` who a request comes from, `authz` how long an
//! authorization decision is reused, `packagemanifest` OLM v0's
//! PackageManifests (`packages.operators.coreos.com/v1`) built from the loaded catalogs. I/O: `cache` keeps the
//! view current from watches, `http` authenticates, authorizes and routes requests, `serve` lists, gets and
//! watches Installed objects, `packages` answers PackageManifest requests from the loaded catalogs, `server` starts
//! it all and registers the APIServices.

pub mod authz;
pub mod cache;
pub mod discovery;
pub mod front_proxy;
pub mod http;
pub mod packagemanifest;
pub mod packages;
pub mod selector;
pub mod serve;
pub mod server;
pub mod synthesize;
pub mod table;
pub mod view;

pub use server::{ApiOptions, ApiServerError, RunningApi};

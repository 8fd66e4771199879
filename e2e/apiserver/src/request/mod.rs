//! The API server's verbs, independent of HTTP: `api_server` holds the state and reads (get, list, objects as
//! clients see them); `write` creates, updates and patches, `apply` applies server-side and `deletion` deletes, each
//! write step by step as kube-apiserver's generic registry takes it (`decode`, `prepare`, `admit`, `commit`);
//! `scale` is the `scale` subresource. `types` holds the words every caller shares (`Target`, `WriteOptions`...).
//!
//! May import `admission`, `crds`, `auth`, `model`, `merge`, `storage`, `status`, `outbound` and `audit`: everything
//! below it, nothing of the HTTP layer, the aggregator or the controllers.

mod admit;
pub mod api_server;
mod apply;
mod commit;
mod decode;
pub mod deletion;
mod prepare;
pub mod scale;
pub mod types;
mod write;

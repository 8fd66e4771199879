//! The API server's verbs: get, list, create, update and patch (`api_server`), server-side apply (`apply`),
//! deletion (`deletion`) and the `scale` subresource (`scale`).

pub mod api_server;
pub mod apply;
pub mod deletion;
pub mod scale;

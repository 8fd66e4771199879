//! Who may do what: authentication (`authn`: client certificates, static and ServiceAccount tokens), kube-apiserver's
//! RBAC authorizer with its escalation checks (`rbac`), the default policy and ClusterRole aggregation (`policy`),
//! what every request passes before it is served (`front`: authentication, impersonation, request attributes,
//! authorization), the review kinds with TokenRequest (`reviews`) and ServiceAccount tokens as signed JWTs
//! (`tokens`). Each reads the store it is given.
//!
//! May import `storage` and `status`.

pub mod authn;
pub mod front;
pub mod policy;
pub mod rbac;
pub mod reviews;
pub mod tokens;

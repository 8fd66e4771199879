//! Who may do what: authentication (`authn`), kube-apiserver's RBAC authorizer (`rbac`), the default policy and
//! ClusterRole aggregation (`policy`), what every request passes before it is served (`front`: authentication,
//! impersonation, authorization) and the review kinds (`reviews`).

pub mod authn;
pub mod front;
pub mod policy;
pub mod rbac;
pub mod reviews;

//! `operators.coreos.com/v2alpha1`: the cluster-scoped `Operator` and `Install` resources of the simplify-olm-apis proposal,
//! and the deployment configuration both carry.

mod config;
mod install;
mod operator;
mod policy;

pub use config::*;
pub use install::*;
pub use operator::*;
pub use policy::*;

//! `operators.coreos.com/v2alpha1`: the cluster-scoped `Operator` and `Install` resources of the simplify-olm-apis proposal.

mod install;
mod operator;

pub use install::*;
pub use operator::*;

//! `operators.coreos.com/v1`: OLM v0's OperatorGroup and the cluster-wide OLMConfig.

mod olmconfig;
mod operatorgroup;

pub use olmconfig::*;
pub use operatorgroup::*;

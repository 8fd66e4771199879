//! Storage with kube-apiserver's semantics at that layer (`store`: resourceVersions, conflicts, pagination, watch
//! history) and the selectors lists and watches filter by (`selectors`).

pub mod selectors;
pub mod store;

//! The Installed API of seed 002 (`installed.packages.operators.coreos.com/v2alpha1`, `docs/installed.md`): a
//! read-only, namespaced resource that exists in a namespace exactly when an installed operator watches it, named
//! after its CSV, synthesized on request from the CSVs, Subscriptions and OperatorGroups the cluster holds, never
//! stored and never copied per namespace. `synthesize` decides what a namespace holds, `table` how `kubectl get`
//! shows it and the composite resourceVersion of a list (pure); the aggregated API server that serves them is not
//! built yet.

pub mod synthesize;
pub mod table;

//! `operators.coreos.com/v1alpha1`: OLM v0's ClusterServiceVersion, Subscription, InstallPlan and CatalogSource,
//! with the fields OLM reads, so that existing objects and bundles keep working.

mod catalogsource;
mod csv;
mod csv_status;
mod installplan;
mod marks;
mod subscription;

pub use catalogsource::*;
pub use csv::*;
pub use csv_status::*;
pub use installplan::*;
pub use marks::*;
pub use subscription::*;

use schemars::{json_schema, Schema, SchemaGenerator};

/// Schema of a field that holds arbitrary JSON which the API server keeps as given.
pub(crate) fn arbitrary_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

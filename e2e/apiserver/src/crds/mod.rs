//! CustomResourceDefinitions: the checks of a definition (`structural`), what a custom resource's schema does to
//! its objects (`schema`: pruning, defaults, validation) and a definition's life (`lifecycle`: names accepted,
//! established, served, terminating).

pub mod lifecycle;
pub mod schema;
pub mod structural;

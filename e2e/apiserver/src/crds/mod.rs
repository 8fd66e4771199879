//! CustomResourceDefinitions: the checks of a definition kube-apiserver makes (`structural`), what a custom
//! resource's schema does to its objects (`schema`: pruning, defaults, validation), and a definition's life
//! (`lifecycle`: names accepted, established and served, refused writes while it terminates, no longer served once
//! removed), given the store and the served resource types.
//!
//! May import `model`, `storage` and `status`.

pub mod lifecycle;
pub mod schema;
pub mod structural;

//! The API's resources and kinds: the resource types served (`resources`) and their discovery documents
//! (`discovery`), what the built-in kinds' registries do (`builtin`: decoding, create strategies, kind-specific
//! validation), their defaults (`defaults`), metadata validation (`validation`), Events' two APIs (`events`) and
//! the Service storage's field handling and allocations (`services`).
//!
//! May import `storage` and `status`.

pub mod builtin;
pub mod defaults;
pub mod discovery;
pub mod events;
pub mod resources;
pub mod services;
pub mod validation;

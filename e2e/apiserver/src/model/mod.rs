//! The API's resources and kinds: the resource types served and their discovery (`resources`), what the built-in
//! kinds' registries do (`builtin`), their defaults (`defaults`), metadata validation (`validation`), Events' two
//! APIs (`events`) and the Service storage's allocations (`services`).

pub mod builtin;
pub mod defaults;
pub mod events;
pub mod resources;
pub mod services;
pub mod validation;

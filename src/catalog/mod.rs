//! Catalogs: File-Based Catalogs read into packages (`fbc`) with their bundles' dependency properties
//! (`properties`) and their channel heads' CSV descriptions for the PackageManifest API (`description`),
//! resolution of what to install and upgrade to (`resolve`), dependency resolution across catalogs with a SAT solver
//! (`dependencies`), and the catalogs CatalogSources serve kept loaded (`source`): images, polled on their
//! `registryPoll` (`poll`), and ConfigMap catalogs (`configmap`).

pub mod configmap;
pub mod dependencies;
pub mod description;
pub mod fbc;
pub mod poll;
pub mod properties;
pub mod resolve;
pub mod source;

pub use fbc::{Catalog, CatalogBundle, CatalogError};
pub use resolve::{resolve, Resolution, ResolveError, Selection};
pub use source::{CatalogCache, CatalogSourceError, LoadedCatalog};

//! Catalogs: File-Based Catalogs read into packages (`fbc`), resolution of what to install and upgrade to
//! (`resolve`), and CatalogSource images pulled and kept loaded (`source`).

pub mod fbc;
pub mod resolve;
pub mod source;

pub use fbc::{Catalog, CatalogBundle, CatalogError};
pub use resolve::{resolve, Resolution, ResolveError, Selection};
pub use source::{CatalogCache, CatalogSourceError, LoadedCatalog};

//! Catalogs: File-Based Catalogs read as a stream of blobs (`blobs`) into packages (`fbc`) with their bundles'
//! dependency properties (`properties`) and their channel heads' CSV descriptions for the PackageManifest API
//! (`description`), within limits on what one catalog and all catalogs may cost (`limits`, the model's size estimated
//! by `weight`), resolution of what to install and upgrade to (`resolve`), dependency resolution across catalogs with
//! a SAT solver (`dependencies`), and the catalogs CatalogSources serve kept loaded (`source`): images, polled on
//! their `registryPoll` (`poll`), and ConfigMap catalogs (`configmap`).

pub mod blobs;
pub mod configmap;
pub mod dependencies;
pub mod description;
pub mod fbc;
pub mod limits;
pub mod poll;
pub mod properties;
pub mod resolve;
pub mod source;
pub mod weight;

pub use fbc::{Catalog, CatalogBundle, CatalogError};
pub use limits::CatalogLimits;
pub use resolve::{resolve, Resolution, ResolveError, Selection};
pub use source::{CatalogCache, CatalogSourceError, LoadedCatalog};

//! Operator bundles: the registry+v1 format (`model`), conversion into plain manifests (`convert`, with its parts
//! `permissions`, `deployments`, `webhooks` and `deployment_config`, and the names OLM gives what it generates in
//! `names` and `gohash`, and the properties `opm` renders of it in `properties`) with serving certificates for webhooks (issued by `tls`), safe unpacking of image layers
//! (`unpack`), and pulling, building and pushing bundle images (`image`).

pub mod convert;
mod convert_error;
pub mod credentials;
pub mod deployment_config;
pub mod deployments;
pub mod gohash;
pub mod image;
pub mod model;
pub mod names;
pub mod permissions;
pub mod properties;
pub mod reference;
pub mod refused;
pub mod unpack;
pub mod webhooks;

#[cfg(test)]
mod fixtures;

pub use convert::{install_mode, map_namespaces, render, ConvertError, RenderOptions};
pub use deployment_config::{apply_deployment_config, DeploymentConfigError};
pub use model::{Bundle, BundleError};

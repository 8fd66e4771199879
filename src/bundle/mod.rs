//! Operator bundles: the registry+v1 format (`model`), conversion into plain manifests (`convert`) with serving
//! certificates for webhooks (issued by `tls`) and the user's configuration of the Deployments
//! (`deployment_config`), safe unpacking of image layers (`unpack`), and pulling, building and pushing bundle images
//! (`image`).

pub mod convert;
pub mod credentials;
pub mod deployment_config;
pub mod image;
pub mod model;
pub mod unpack;

pub use convert::{install_mode, map_namespaces, render, ConvertError, RenderOptions};
pub use deployment_config::{apply_deployment_config, DeploymentConfigError};
pub use model::{Bundle, BundleError};

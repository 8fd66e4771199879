//! The words the verbs, the HTTP layer and the controllers share: what a request is about (`Target`), how a write
//! is made (`WriteOptions`, `FieldValidation`), what it answers (`Written`), and the patch types.

use serde_json::Value;

use crate::auth::authn::{UserInfo, MASTERS};
use crate::model::resources::ResourceType;
use crate::status::ApiError;

/// What a request is about.
#[derive(Clone, Debug)]
pub struct Target {
    pub resource: ResourceType,
    /// The namespace of the URL; empty for cluster-scoped resources and for lists across all namespaces.
    pub namespace: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

impl Target {
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    /// kube-apiserver's default when a request does not say (kubectl asks for Strict).
    #[default]
    Warn,
    Strict,
}

impl FieldValidation {
    pub fn parse(text: Option<&str>) -> Result<Self, ApiError> {
        match text {
            Some("Strict") => Ok(Self::Strict),
            None | Some("") | Some("Warn") => Ok(Self::Warn),
            Some("Ignore") => Ok(Self::Ignore),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            ))),
        }
    }
}

/// The options of a write request.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    /// `fieldManager`, or the manager derived from the User-Agent.
    pub field_manager: String,
    pub field_manager_given: bool,
    pub field_validation: FieldValidation,
    pub force: bool,
    /// Who writes: RBAC escalation checks and admission see this user.
    pub user: UserInfo,
}

impl WriteOptions {
    /// The options of the control plane's own writes: its controllers act as a member of `system:masters`.
    pub fn internal(manager: &str) -> Self {
        Self {
            field_manager: manager.to_owned(),
            field_manager_given: true,
            user: UserInfo::new(&format!("system:{manager}"), &[MASTERS]),
            ..Self::default()
        }
    }
}

/// The outcome of a write: the HTTP code, the object and any warnings.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    pub code: u16,
    pub object: Value,
    pub warnings: Vec<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Option<Self> {
        match content_type.split(';').next().unwrap_or_default().trim() {
            "application/json-patch+json" => Some(Self::Json),
            "application/merge-patch+json" => Some(Self::Merge),
            "application/strategic-merge-patch+json" => Some(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(Self::Apply),
            _ => None,
        }
    }
}

/// Whether a write creates its object or replaces a stored one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    Create,
    Update,
}

//! API errors as kube-apiserver answers them: a `Status` object with the HTTP code, the reason clients switch on,
//! a message in kube-apiserver's words, and details (name, group, kind, field causes); and the field errors an
//! `Invalid` answer lists as its causes, worded as apimachinery's `field.Error`.

use std::fmt;

use serde_json::{json, Value};

use crate::storage::store::{ResourceId, StoreError};

/// The kind of a field error, as Kubernetes names them in `Invalid` responses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    Required,
    Forbidden,
    Invalid,
    Duplicate,
    NotSupported,
    TooLong,
    TooMany,
}

impl ErrorType {
    /// The wording kube-apiserver uses in front of the detail.
    pub fn phrase(self) -> &'static str {
        match self {
            Self::Required => "Required value",
            Self::Forbidden => "Forbidden",
            Self::Invalid => "Invalid value",
            Self::Duplicate => "Duplicate value",
            Self::NotSupported => "Unsupported value",
            Self::TooLong => "Too long",
            Self::TooMany => "Too many",
        }
    }

    /// The `reason` of a cause in an `Invalid` status.
    pub fn cause_reason(self) -> &'static str {
        match self {
            Self::Required => "FieldValueRequired",
            Self::Forbidden => "FieldValueForbidden",
            Self::Invalid => "FieldValueInvalid",
            Self::Duplicate => "FieldValueDuplicate",
            Self::NotSupported => "FieldValueNotSupported",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
        }
    }
}

/// One reason an object is refused, at a field path written as kube-apiserver writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub error_type: ErrorType,
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            write!(f, "{}: {}", self.field, self.error_type.phrase())
        } else {
            write!(f, "{}: {}: {}", self.field, self.error_type.phrase(), self.detail)
        }
    }
}

pub fn error(field: &str, error_type: ErrorType, detail: impl Into<String>) -> FieldError {
    FieldError { field: field.to_owned(), error_type, detail: detail.into() }
}

/// A failed request, ready to be written as a `Status`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{reason} ({code}): {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

fn details(resource: &ResourceId, name: &str) -> Value {
    let mut details = json!({"kind": resource.resource});
    if !name.is_empty() {
        details["name"] = json!(name);
    }
    if !resource.group.is_empty() {
        details["group"] = json!(resource.group);
    }
    details
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason, message: message.into(), details: None }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn not_found(resource: &ResourceId, name: &str) -> Self {
        Self {
            details: Some(details(resource, name)),
            ..Self::new(404, "NotFound", format!("{} \"{name}\" not found", resource.qualified()))
        }
    }

    /// A 404 for a path that names no resource at all.
    pub fn no_route(path: &str) -> Self {
        Self::new(404, "NotFound", format!("the server could not find the requested resource ({path})"))
    }

    pub fn method_not_allowed(verb: &str, what: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb} {what})"),
        )
    }

    pub fn forbidden(resource: &ResourceId, name: &str, why: &str) -> Self {
        let subject =
            if name.is_empty() { resource.qualified() } else { format!("{} \"{name}\"", resource.qualified()) };
        Self {
            details: Some(details(resource, name)),
            ..Self::new(403, "Forbidden", format!("{subject} is forbidden: {why}"))
        }
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// 422 Invalid: `Kind "name" is invalid: <error>` or `... is invalid: [<error>, <error>]`, with a cause each.
    pub fn invalid(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified_kind = if group.is_empty() { kind.to_owned() } else { format!("{kind}.{group}") };
        let listed: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let summary = match listed.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| {
                let message = if e.detail.is_empty() {
                    e.error_type.phrase().to_owned()
                } else {
                    format!("{}: {}", e.error_type.phrase(), e.detail)
                };
                json!({"reason": e.error_type.cause_reason(), "message": message, "field": e.field})
            })
            .collect();
        let mut details = json!({"name": name, "kind": kind, "causes": causes});
        if !group.is_empty() {
            details["group"] = json!(group);
        }
        Self {
            details: Some(details),
            ..Self::new(422, "Invalid", format!("{qualified_kind} \"{name}\" is invalid: {summary}"))
        }
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "code": self.code,
        });
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }

    /// Whether the write lost a race with another: the object changed between its read and its storage.
    pub fn is_stale_write(&self) -> bool {
        self.code == 409 && self.message.contains("the object has been modified")
    }

    pub fn from_store(error: StoreError, resource: &ResourceId) -> Self {
        let (code, reason) = error.code_and_reason();
        let mut api = Self::new(code, reason, error.to_string());
        match &error {
            StoreError::NotFound { name, .. }
            | StoreError::AlreadyExists { name, .. }
            | StoreError::Conflict { name, .. } => {
                api.details = Some(details(resource, name));
            }
            StoreError::Gone(_) | StoreError::BadRequest(_) => {}
        }
        api
    }
}

/// The `Status` of a successful deletion that removed the object at once.
pub fn success(resource: &ResourceId, name: &str, uid: &Value) -> Value {
    let mut details = details(resource, name);
    details["uid"] = uid.clone();
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

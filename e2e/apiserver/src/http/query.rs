//! What a request's query string says: the list filter (label and field selectors, the namespace of the URL) and
//! the options of a write (`dryRun`, `fieldManager` or the one the User-Agent implies, `fieldValidation`, `force`).

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use crate::auth::authn::UserInfo;
use crate::request::types::{FieldValidation, Target, WriteOptions};
use crate::status::ApiError;
use crate::storage::selectors::{FieldSelector, LabelSelector};
use crate::storage::store::Filter;

/// The query parameters of a request.
pub type Query = BTreeMap<String, String>;

pub(super) fn query_string(query: &Query) -> String {
    serde_urlencoded::to_string(query).unwrap_or_default()
}

pub(super) fn filter(target: &Target, query: &Query) -> Result<Filter, ApiError> {
    let labels = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {}", e.0)))?;
    let fields = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str)).map_err(|e| {
        ApiError::bad_request(format!(
            "invalid selector: '{}'; can't understand '{}'",
            query.get("fieldSelector").map_or("", String::as_str),
            e.0
        ))
    })?;
    let fields = fields
        .stored_fields(|field| target.resource.selectable_field(field))
        .map_err(|field| ApiError::bad_request(format!("field label not supported: {field}")))?;
    Ok(Filter { namespace: (!target.namespace.is_empty()).then(|| target.namespace.clone()), labels, fields })
}

pub(super) fn write_options(query: &Query, headers: &HeaderMap, user: &UserInfo) -> Result<WriteOptions, ApiError> {
    let agent = headers.get("user-agent").and_then(|v| v.to_str().ok()).unwrap_or("unknown");
    let derived: String = agent.split('/').next().unwrap_or("unknown").chars().take(128).collect();
    let given = query.get("fieldManager").filter(|m| !m.is_empty());
    if let Some(manager) = given {
        if manager.chars().count() > 128 {
            return Err(ApiError::new(422, "Invalid", "fieldManager: Too long: must have at most 128 bytes"));
        }
    }
    let dry_run = match query.get("dryRun").map(String::as_str) {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
            )))
        }
    };
    let force = match query.get("force").map(String::as_str) {
        None => false,
        Some("true") => true,
        Some("false") => false,
        Some(other) => return Err(ApiError::bad_request(format!("invalid boolean value for force: {other}"))),
    };
    Ok(WriteOptions {
        dry_run,
        field_manager: given.cloned().unwrap_or(derived),
        field_manager_given: given.is_some(),
        field_validation: FieldValidation::parse(query.get("fieldValidation").map(String::as_str))?,
        force,
        user: user.clone(),
    })
}

//! The audit log: one record per request (who, as whom, what, on which object, and the outcome), kept in memory so
//! tests can prove who created or changed what.

use std::sync::Mutex;

/// One request, as an audit event records it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The authenticated user.
    pub user: String,
    /// The user the request impersonated, if any.
    pub impersonated_user: Option<String>,
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    pub path: String,
    /// The HTTP status code of the answer.
    pub code: u16,
}

impl Record {
    /// The user the request acted as.
    pub fn acting_user(&self) -> &str {
        self.impersonated_user.as_deref().unwrap_or(&self.user)
    }
}

#[derive(Default)]
pub struct AuditLog {
    records: Mutex<Vec<Record>>,
}

impl AuditLog {
    pub fn record(&self, record: Record) {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(record);
    }

    /// Every record so far, oldest first.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

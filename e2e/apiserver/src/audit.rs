//! The audit log: one record per request (who, as whom, what, on which object, and the outcome), kept in memory so
//! tests can prove who created or changed what. The newest `CAPACITY` records are kept.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const CAPACITY: usize = 200_000;

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
    /// The client's `User-Agent`, as an audit event's `userAgent`.
    pub user_agent: String,
    /// The HTTP status code of the answer.
    pub code: u16,
    /// Whether the request was a dry run (`dryRun=All`): admitted and answered as the write would be, stored nowhere.
    pub dry_run: bool,
    /// When the request arrived (an audit event's `requestReceivedTimestamp`, on this process's monotonic clock).
    pub received: Option<Instant>,
    /// How long it took to answer (to an audit event's `ResponseComplete` stage; a watch's until its headers).
    pub took: Duration,
}

impl Record {
    /// The user the request acted as.
    pub fn acting_user(&self) -> &str {
        self.impersonated_user.as_deref().unwrap_or(&self.user)
    }

    /// Whether the request changed a stored object: a create, update or patch that succeeded and was no dry run.
    pub fn wrote(&self) -> bool {
        matches!(self.verb.as_str(), "create" | "update" | "patch") && self.code < 300 && !self.dry_run
    }
}

#[derive(Default)]
pub struct AuditLog {
    records: Mutex<VecDeque<Record>>,
}

impl AuditLog {
    pub fn record(&self, record: Record) {
        let mut records = self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if records.len() == CAPACITY {
            records.pop_front();
        }
        records.push_back(record);
    }

    /// How many records so far `matches` takes (without copying the log, which a poller would do often).
    pub fn count(&self, matches: impl Fn(&Record) -> bool) -> usize {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().filter(|r| matches(r)).count()
    }

    /// Every record so far, oldest first.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter().cloned().collect()
    }
}

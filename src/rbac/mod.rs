//! The RBAC engine: which rules content needs (`required`), which a subject holds (`resolve`, `held`), and which
//! are missing (`missing`), with Kubernetes' own rule-coverage semantics (`rule`); and what the content's bindings and
//! aggregating ClusterRoles grant, and to whom, for the approver to read (`disclosure`). Pure functions over objects
//! the controller has read; nothing here talks to the API server.

pub mod compact;
pub mod disclosure;
pub mod held;
pub mod kinds;
pub mod missing;
pub mod objects;
pub mod required;
pub mod resolve;
pub mod rule;
pub mod subject;

pub use disclosure::{disclose, Disclosure};
pub use kinds::KindIndex;
pub use missing::{missing_permissions, MissingPermissions};
pub use objects::RbacObjects;
pub use required::{required_permissions, Grant, RequiredPermissions, RequiredPermissionsError, Scope, ScopedRule};
pub use resolve::{MissingRole, RbacSnapshot, Roles};
pub use rule::{breakdown, covers, rule_covers, uncovered, Rule};
pub use subject::UserInfo;

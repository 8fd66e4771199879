//! What the approval webhook decides about a write to an Install (docs/design.md, 'Approval'), as pure functions: which
//! writes need the approver checked, the single access checks that make up the pending rules, and the denial text.
//! Setting `spec.approval: Approved` needs every rule pending in the status the write replaces; the status itself,
//! where the pending set is recorded, is written only by the controller.

use serde_json::Value;

use crate::api::v2alpha1::{PendingPermission, PolicyStatus};
pub use crate::rbac::missing::describe_permission;

/// What to do with an admission request for an Install.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Deny(String),
    /// Allowed only if the requesting user holds every one of these rules.
    RequireHeld(Vec<PendingPermission>),
}

/// Judges a request: `subresource` is `Some("status")` for status writes, `old` is absent on create.
pub fn judge(
    subresource: Option<&str>,
    username: &str,
    controller_username: &str,
    old: Option<&Value>,
    new: Option<&Value>,
) -> Verdict {
    if subresource == Some("status") {
        if username == controller_username {
            return Verdict::Allow;
        }
        return Verdict::Deny(format!(
            "the status of an Install records the permissions an approval covers; only the controller ({controller_username}) writes it, not {username}"
        ));
    }
    let approved = |object: Option<&Value>| object.is_some_and(|o| o["spec"]["approval"] == "Approved");
    // Creating an Install already approved approves nothing: no permission has been computed yet, and the
    // controller resets the approval if any turns out to be pending.
    let Some(old) = old else { return Verdict::Allow };
    if !approved(new) || approved(Some(old)) {
        return Verdict::Allow;
    }
    // Content over an InstallPolicy is never let through, whoever approves (cluster-admin included): the controller
    // measures it again before any grant, and says here why the approval is refused.
    let policy: Option<PolicyStatus> = serde_json::from_value(old["status"]["policy"].clone()).ok();
    if let Some(policy) = policy.filter(|policy| crate::policy::exceeds(Some(policy))) {
        let name = old["metadata"]["name"].as_str().unwrap_or_default();
        return Verdict::Deny(format!(
            "Install {name} exceeds an InstallPolicy and no approval can let it through, whoever gives it: {}",
            crate::policy::summary(&policy.violations)
        ));
    }
    let pending: Vec<PendingPermission> =
        serde_json::from_value(old["status"]["pending"]["permissions"].clone()).unwrap_or_default();
    if pending.is_empty() {
        // An approval of nothing would be a blank cheque for whatever is computed next: refused.
        let name = old["metadata"]["name"].as_str().unwrap_or_default();
        return Verdict::Deny(format!(
            "Install {name} has no pending permissions to approve: an approval stands for the permissions status.pending lists when it is given; wait until the controller lists them"
        ));
    }
    Verdict::RequireHeld(pending)
}

/// The denial for a user lacking `lacking` of the pending rules.
pub fn denial(username: &str, install: &str, lacking: &[&PendingPermission]) -> String {
    let rules: Vec<String> = lacking.iter().map(|p| describe_permission(p)).collect();
    format!(
        "user {username:?} may not approve Install {install}: approving grants its ServiceAccount permissions the approver must hold, and {username:?} lacks {} of them: {}",
        lacking.len(),
        rules.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn install(approval: &str, pending: Value) -> Value {
        json!({"spec": {"approval": approval, "content": []}, "status": {"pending": {"count": 1, "permissions": pending}}})
    }

    fn secrets_rule() -> Value {
        json!([{"scope": "Namespaced", "namespaces": ["operators"], "verbs": ["get", "create"], "apiGroups": [""], "resources": ["secrets"]}])
    }

    #[test]
    fn approving_requires_the_pending_rules_of_the_replaced_status() {
        let old = install("Unapproved", secrets_rule());
        let new = install("Approved", json!([]));
        match judge(None, "alice", "controller", Some(&old), Some(&new)) {
            Verdict::RequireHeld(pending) => assert_eq!(pending[0].resources, vec!["secrets"]),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn other_writes_are_allowed() {
        let unapproved = install("Unapproved", secrets_rule());
        let approved = install("Approved", secrets_rule());
        assert_eq!(judge(None, "a", "c", None, Some(&approved)), Verdict::Allow);
        assert_eq!(judge(None, "a", "c", Some(&approved), Some(&approved)), Verdict::Allow);
        assert_eq!(judge(None, "a", "c", Some(&approved), Some(&unapproved)), Verdict::Allow);
        assert_eq!(judge(None, "a", "c", Some(&unapproved), Some(&unapproved)), Verdict::Allow);
        let nothing_pending = install("Unapproved", json!([]));
        assert_eq!(judge(None, "a", "c", Some(&nothing_pending), Some(&nothing_pending)), Verdict::Allow);
    }

    #[test]
    fn approving_with_nothing_pending_is_refused() {
        let nothing_pending = install("Unapproved", json!([]));
        let approved = install("Approved", json!([]));
        match judge(None, "a", "c", Some(&nothing_pending), Some(&approved)) {
            Verdict::Deny(message) => assert!(message.contains("no pending permissions to approve"), "{message}"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn approving_content_that_exceeds_a_policy_is_refused_to_anyone() {
        let mut old = install("Unapproved", secrets_rule());
        old["metadata"]["name"] = json!("plumbus");
        old["status"]["policy"] = json!({"state": "Exceeds", "violations": [
            {"policy": "no-admin", "message": "ClusterRoleBinding grab (binds ClusterRole cluster-admin) is forbidden (forbid[0])"}]});
        let new = install("Approved", secrets_rule());
        match judge(None, "system:admin", "controller", Some(&old), Some(&new)) {
            Verdict::Deny(message) => assert_eq!(
                message,
                "Install plumbus exceeds an InstallPolicy and no approval can let it through, whoever gives it: \
                 InstallPolicy no-admin: ClusterRoleBinding grab (binds ClusterRole cluster-admin) is forbidden (forbid[0])"
            ),
            other => panic!("unexpected {other:?}"),
        }
        old["status"]["policy"] = json!({"state": "Within"});
        assert!(matches!(judge(None, "a", "c", Some(&old), Some(&new)), Verdict::RequireHeld(_)));
    }

    #[test]
    fn only_the_controller_writes_status() {
        let object = install("Unapproved", secrets_rule());
        assert_eq!(judge(Some("status"), "controller", "controller", Some(&object), Some(&object)), Verdict::Allow);
        assert!(matches!(
            judge(Some("status"), "mallory", "controller", Some(&object), Some(&object)),
            Verdict::Deny(_)
        ));
    }

    #[test]
    fn denial_names_the_lacking_rules() {
        let pending: Vec<PendingPermission> = serde_json::from_value(secrets_rule()).expect("pending");
        let text = denial("bob", "plumbus", &[&pending[0]]);
        assert!(text.contains("\"bob\" may not approve Install plumbus"), "{text}");
        assert!(text.contains("get,create secrets (core) in operators"), "{text}");
    }
}

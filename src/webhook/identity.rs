//! Who did what to an Install or an Operator, recorded where nobody can rewrite it, as pure decisions of the
//! mutating webhook (what to write) and the validating webhook (what to refuse):
//!
//! - the creator, as the API server authenticated them, in an annotation written on create and immutable after
//!   (the controller creates an Operator's Install with the Operator's creator);
//! - a change of an Install's content (or namespaces) by someone who does not hold what its ServiceAccount was
//!   granted, or who may not use the OperatorGroup account it runs as: the change stands, but it is marked (the
//!   approval goes back to Unapproved and an annotation names who made it), and the controller applies such
//!   content only after a person holding every rule it uses approves it. Only the controller removes the mark;
//! - an Install's manual-approval annotation (its Operator approves updates by hand) is lifted only by the controller.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::api::v2alpha1::{
    PendingPermission, Requester, ServiceAccountReference, ADOPTED_FROM_ANNOTATION, ADOPTED_FROM_UID_ANNOTATION,
    CONTENT_CHANGED_BY_ANNOTATION, CREATOR_ANNOTATION, MANUAL_APPROVAL_ANNOTATION, OPERATOR_INSTALL_ANNOTATION,
    SUBSCRIPTION_ANNOTATION, TAKES_OVER_CSV_ANNOTATION, TAKES_OVER_CSV_UID_ANNOTATION,
};

/// The annotation value recording `requester`.
pub fn creator_value(requester: &Requester) -> String {
    serde_json::to_string(requester).unwrap_or_default()
}

fn annotation<'a>(object: Option<&'a Value>, key: &str) -> Option<&'a str> {
    object?["metadata"]["annotations"][key].as_str()
}

fn parsed_creator(object: Option<&Value>) -> Option<Requester> {
    serde_json::from_str(annotation(object, CREATOR_ANNOTATION)?).ok()
}

/// What a content change of an Install could borrow: the rules granted to its account (and those of an approval
/// standing on the spec, about to be granted), the OperatorGroup account whose existing rights it may use, and,
/// while the controller has not assigned an account yet, its creator's standing (`creator_only`: only that user may
/// change it unmarked, as nobody knows yet what it will run as).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContentChange {
    pub granted: Vec<PendingPermission>,
    pub operator_group_account: Option<ServiceAccountReference>,
    pub creator_only: Option<String>,
}

/// The content change `old` → `new` of an Install makes, when it changes the content or the namespaces: what it
/// could borrow. None for creates and for other changes.
pub fn content_change(old: Option<&Value>, new: &Value, controller_namespace: &str) -> Option<ContentChange> {
    let old = old?;
    let same =
        old["spec"]["content"] == new["spec"]["content"] && old["spec"]["namespaces"] == new["spec"]["namespaces"];
    if same {
        return None;
    }
    Some(borrowable(old, controller_namespace))
}

/// What changing the content of `install` could borrow, from its spec and status; the grants its uid owns are added
/// by the caller, who reads them from the cluster (the status may lag behind them).
pub fn borrowable(install: &Value, controller_namespace: &str) -> ContentChange {
    let rules = |value: &Value| serde_json::from_value::<Vec<PendingPermission>>(value.clone()).unwrap_or_default();
    let mut granted = rules(&install["status"]["granted"]);
    if install["spec"]["approval"] == "Approved" {
        granted.extend(rules(&install["status"]["pending"]["permissions"]));
    }
    granted.sort();
    granted.dedup();
    let assigned =
        serde_json::from_value::<ServiceAccountReference>(install["status"]["serviceAccountRef"].clone()).ok();
    let creator_only =
        assigned.is_none().then(|| parsed_creator(Some(install)).map(|creator| creator.username).unwrap_or_default());
    let operator_group_account = assigned.filter(|account| account.namespace != controller_namespace);
    ContentChange { granted, operator_group_account, creator_only }
}

/// Whether an update of an Operator changes where its content comes from (`spec.updates`), how its Deployments
/// are configured (`spec.config`) or where it goes (`spec.installNamespace`): the controller then changes its Install's content, which must not borrow what
/// was granted for the old content.
pub fn operator_source_change(old: Option<&Value>, new: &Value) -> bool {
    old.is_some_and(|old| {
        old["spec"]["updates"] != new["spec"]["updates"]
            || old["spec"]["config"] != new["spec"]["config"]
            || old["spec"]["installNamespace"] != new["spec"]["installNamespace"]
    })
}

/// Whether `install` is the one the Operator `operator` (its JSON) owns, as the Operator controller judges it.
pub fn owned_install(operator: &Value, install: &Value) -> bool {
    let uid = &operator["metadata"]["uid"];
    install["metadata"]["ownerReferences"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|owner| owner["kind"] == "Operator" && owner["uid"] == *uid)
}

/// What changing an Operator's source could borrow, when its Install is not there, not its own, or not assigned an
/// account yet: the Operator's creator's standing, which only they may use.
pub fn operator_creator_only(operator: &Value) -> ContentChange {
    let creator = parsed_creator(Some(operator)).map(|creator| creator.username).unwrap_or_default();
    ContentChange { creator_only: Some(creator), ..ContentChange::default() }
}

/// What the mutating webhook writes on a create or an update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutation {
    /// Annotations to set (Some) or remove (None).
    pub annotations: BTreeMap<&'static str, Option<String>>,
    /// Set `spec.approval` to Unapproved.
    pub unapprove: bool,
}

/// The mutation of a write by `requester`: on create the creator is recorded (the controller creating an Operator's
/// Install passes the Operator's creator along); on update the creator and any content-change mark are put back
/// as they were, whatever the request carried, and `untrusted_change` (a content change the requester could not
/// have made with what they hold) marks the Install with their name.
pub fn mutation(
    requester: &Requester,
    controller_username: &str,
    old: Option<&Value>,
    new: &Value,
    untrusted_change: bool,
) -> Mutation {
    let mut annotations = BTreeMap::new();
    let by_controller = requester.username == controller_username;
    match old {
        // The controller creates an Operator's Install on behalf of the Operator's creator, passing them on; with
        // none to pass on (an Operator older than these records), nobody is recorded: the controller itself may
        // use every account, and must never stand as a creator.
        None if by_controller => {
            annotations.insert(CREATOR_ANNOTATION, annotation(Some(new), CREATOR_ANNOTATION).map(str::to_owned));
        }
        None => {
            annotations.insert(CREATOR_ANNOTATION, Some(creator_value(requester)));
        }
        Some(old) => {
            annotations.insert(CREATOR_ANNOTATION, annotation(Some(old), CREATOR_ANNOTATION).map(str::to_owned));
            if !by_controller {
                // Manual approval is the Operator's choice: nobody but the controller lifts it.
                if let Some(manual) = annotation(Some(old), MANUAL_APPROVAL_ANNOTATION) {
                    annotations.insert(MANUAL_APPROVAL_ANNOTATION, Some(manual.to_owned()));
                }
                let mark = if untrusted_change {
                    Some(requester.username.clone())
                } else {
                    annotation(Some(old), CONTENT_CHANGED_BY_ANNOTATION).map(str::to_owned)
                };
                annotations.insert(CONTENT_CHANGED_BY_ANNOTATION, mark);
            }
        }
    }
    Mutation { annotations, unapprove: untrusted_change }
}

/// The JSON patch that applies `mutation` to `new`; empty when `new` already is so.
pub fn patch_operations(new: &Value, mutation: &Mutation) -> Vec<Value> {
    let mut operations = Vec::new();
    let current = new["metadata"]["annotations"].as_object();
    let mut whole = current.cloned().unwrap_or_default();
    for (key, wanted) in &mutation.annotations {
        let present = current.and_then(|map| map.get(*key)).and_then(Value::as_str);
        if present == wanted.as_deref() && !(wanted.is_none() && current.is_some_and(|map| map.contains_key(*key))) {
            continue;
        }
        let path = format!("/metadata/annotations/{}", key.replace('~', "~0").replace('/', "~1"));
        match wanted {
            Some(value) => {
                whole.insert((*key).to_owned(), json!(value));
                if current.is_some() {
                    operations.push(json!({"op": "add", "path": path, "value": value}));
                }
            }
            None => {
                whole.remove(*key);
                if current.is_some() {
                    operations.push(json!({"op": "remove", "path": path}));
                }
            }
        }
    }
    if current.is_none() && !whole.is_empty() {
        operations.push(json!({"op": "add", "path": "/metadata/annotations", "value": whole}));
    }
    if mutation.unapprove && new["spec"]["approval"] != "Unapproved" {
        operations.push(json!({"op": "add", "path": "/spec/approval", "value": "Unapproved"}));
    }
    operations
}

/// Why the validating webhook refuses a write for the records above, if it does: the mutating webhook makes every
/// write through the API comply, so a refusal means it was bypassed or someone wrote after it.
pub fn record_violation(
    requester: &Requester,
    controller_username: &str,
    kind: &str,
    old: Option<&Value>,
    new: &Value,
) -> Option<String> {
    let by_controller = requester.username == controller_username;
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    // Which Subscription an Install serves is the InstallPlan loop's record alone: set by someone else, an Install
    // they made would be taken for the Subscription's and run its operator under their control.
    // So are an adoption's records: which Install an Operator took over from a Subscription (set by anyone else, an
    // Operator would take someone's Install for its own) and where an adopted object came from.
    // And which CSV's objects an Install may take over (set by anyone else, an Install would take over objects
    // OLM v0 made for someone's operator).
    for key in [
        SUBSCRIPTION_ANNOTATION,
        OPERATOR_INSTALL_ANNOTATION,
        ADOPTED_FROM_ANNOTATION,
        ADOPTED_FROM_UID_ANNOTATION,
        TAKES_OVER_CSV_ANNOTATION,
        TAKES_OVER_CSV_UID_ANNOTATION,
    ] {
        if !by_controller && annotation(old, key) != annotation(Some(new), key) {
            return Some(format!("{kind} {name}: only the controller sets the annotation {key}"));
        }
    }
    let owners = new["metadata"]["ownerReferences"].as_array().is_some_and(|owners| !owners.is_empty());
    match old {
        None if !by_controller && parsed_creator(Some(new)).as_ref() != Some(requester) => Some(format!(
            "{kind} {name}: the annotation {CREATOR_ANNOTATION} must record the user who creates it ({})",
            requester.username
        )),
        // An owner reference to an Operator is what makes the controller take an Install for that Operator's (and
        // believe the bundle it says it holds): made by anyone else, it would move their Install under the Operator.
        None if kind == "Install" && !by_controller && owners => {
            Some(format!("{kind} {name}: only the controller sets owner references"))
        }
        None => None,
        Some(old) => {
            if annotation(Some(old), CREATOR_ANNOTATION) != annotation(Some(new), CREATOR_ANNOTATION) {
                return Some(format!("{kind} {name}: the annotation {CREATOR_ANNOTATION} is immutable"));
            }
            let removed = |key: &str| annotation(Some(old), key).is_some() && annotation(Some(new), key).is_none();
            if by_controller {
                return None;
            }
            if !owners_only_removed(old, new) {
                return Some(format!(
                    "{kind} {name}: only the controller sets owner references; others may only remove them"
                ));
            }
            let manual = annotation(Some(old), MANUAL_APPROVAL_ANNOTATION);
            if manual.is_some() && manual != annotation(Some(new), MANUAL_APPROVAL_ANNOTATION) {
                return Some(format!("{kind} {name}: only the controller changes the annotation {MANUAL_APPROVAL_ANNOTATION}, as its Operator's approval setting changes"));
            }
            let newly_marked = annotation(Some(new), CONTENT_CHANGED_BY_ANNOTATION).is_some()
                && annotation(Some(old), CONTENT_CHANGED_BY_ANNOTATION)
                    != annotation(Some(new), CONTENT_CHANGED_BY_ANNOTATION);
            if kind == "Install" && newly_marked && new["spec"]["approval"] == "Approved" {
                return Some(format!(
                    "{kind} {name}: a content change marked for approval cannot be approved in the same write"
                ));
            }
            if removed(CONTENT_CHANGED_BY_ANNOTATION) {
                return Some(format!(
                    "{kind} {name}: only the controller removes the annotation {CONTENT_CHANGED_BY_ANNOTATION}, once a person holding every rule of the changed content approved it"
                ));
            }
            None
        }
    }
}

/// Whether `new`'s owner references are `old`'s, or some of them: the garbage collector removes references (orphan
/// deletion); adding or changing one (another owner, `controller: false`) would change who manages the object.
fn owners_only_removed(old: &Value, new: &Value) -> bool {
    let owners = |object: &Value| object["metadata"]["ownerReferences"].as_array().cloned().unwrap_or_default();
    let before = owners(old);
    owners(new).iter().all(|owner| before.contains(owner))
}

/// Whether an update carries the content-change mark (so the controller will ask for a new approval).
pub fn marked(new: &Value) -> bool {
    annotation(Some(new), CONTENT_CHANGED_BY_ANNOTATION).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> Requester {
        Requester { username: "alice".into(), groups: vec!["devs".into()], ..Requester::default() }
    }

    fn install(annotations: Value, approval: &str, image: &str, status: Value) -> Value {
        json!({"metadata": {"name": "plumbus", "annotations": annotations},
            "spec": {"approval": approval, "content": [{"type": "ManifestImage", "manifestImage": image}]},
            "status": status})
    }

    fn granted_status() -> Value {
        json!({"serviceAccountRef": {"namespace": "olmv2-system", "name": "plumbus-1"},
            "granted": [{"scope": "Cluster", "verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]})
    }

    #[test]
    fn a_create_records_its_creator() {
        let new = json!({"metadata": {"name": "plumbus"}});
        let mutation = mutation(&alice(), "controller", None, &new, false);
        let operations = patch_operations(&new, &mutation);
        assert_eq!(operations.len(), 1);
        assert_eq!(operations[0]["path"], "/metadata/annotations");
        let recorded: Requester =
            serde_json::from_str(operations[0]["value"][CREATOR_ANNOTATION].as_str().unwrap()).unwrap();
        assert_eq!(recorded, alice());
    }

    #[test]
    fn a_creator_the_user_wrote_is_replaced_by_the_user() {
        let forged = creator_value(&Requester { username: "cluster-admin".into(), ..Requester::default() });
        let new = json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: forged}}});
        let operations = patch_operations(&new, &mutation(&alice(), "controller", None, &new, false));
        assert_eq!(operations[0]["path"], "/metadata/annotations/v2alpha1.operators.coreos.com~1creator");
        assert_eq!(operations[0]["value"], creator_value(&alice()));
    }

    #[test]
    fn the_controller_never_stands_as_a_creator() {
        let new = json!({"metadata": {"name": "plumbus"}});
        let controller = Requester { username: "controller".into(), ..Requester::default() };
        let wanted = mutation(&controller, "controller", None, &new, false);
        assert_eq!(wanted.annotations.get(CREATOR_ANNOTATION), Some(&None));
        assert!(patch_operations(&new, &wanted).is_empty());
    }

    #[test]
    fn a_change_marked_in_a_write_is_not_approved_in_it() {
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let old = install(json!({CREATOR_ANNOTATION: "x"}), "Approved", "a", json!({}));
        let approved =
            install(json!({CREATOR_ANNOTATION: "x", CONTENT_CHANGED_BY_ANNOTATION: "bob"}), "Approved", "b", json!({}));
        assert!(record_violation(&bob, "controller", "Install", Some(&old), &approved).is_some());
        let unapproved = install(
            json!({CREATOR_ANNOTATION: "x", CONTENT_CHANGED_BY_ANNOTATION: "bob"}),
            "Unapproved",
            "b",
            json!({}),
        );
        assert!(record_violation(&bob, "controller", "Install", Some(&old), &unapproved).is_none());
    }

    #[test]
    fn owner_references_are_only_ever_removed_by_others() {
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let owner = json!({"kind": "Operator", "uid": "op", "controller": true, "name": "plumbus", "apiVersion": "operators.coreos.com/v2alpha1"});
        let owned = json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: "x"}, "ownerReferences": [owner.clone()]}});
        let mut loosened = owned.clone();
        loosened["metadata"]["ownerReferences"][0]["controller"] = json!(false);
        assert!(record_violation(&bob, "controller", "Install", Some(&owned), &loosened).is_some());
        let mut foreign = owned.clone();
        foreign["metadata"]["ownerReferences"] = json!([owner, {"kind": "Operator", "uid": "other", "name": "x"}]);
        assert!(record_violation(&bob, "controller", "Install", Some(&owned), &foreign).is_some());
        let mut orphaned = owned.clone();
        orphaned["metadata"]["ownerReferences"] = json!([]);
        assert!(record_violation(&bob, "controller", "Install", Some(&owned), &orphaned).is_none(), "GC's orphaning");
    }

    #[test]
    fn the_controller_passes_an_operators_creator_on_to_its_install() {
        let operator_creator = creator_value(&alice());
        let new = json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: operator_creator}}});
        let controller = Requester { username: "controller".into(), ..Requester::default() };
        assert!(patch_operations(&new, &mutation(&controller, "controller", None, &new, false)).is_empty());
    }

    #[test]
    fn an_update_puts_the_records_back() {
        let old = install(
            json!({CREATOR_ANNOTATION: creator_value(&alice()), CONTENT_CHANGED_BY_ANNOTATION: "bob"}),
            "Unapproved",
            "a",
            json!({}),
        );
        // An apply that drops both annotations (server-side apply without them, or a replace).
        let new = install(json!({}), "Unapproved", "a", json!({}));
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let operations = patch_operations(&new, &mutation(&bob, "controller", Some(&old), &new, false));
        assert_eq!(operations.len(), 2, "{operations:?}");
        let mut patched = new.clone();
        let patch: json_patch::Patch = serde_json::from_value(json!(operations)).unwrap();
        json_patch::patch(&mut patched, &patch.0).unwrap();
        assert_eq!(patched["metadata"]["annotations"], old["metadata"]["annotations"]);
    }

    #[test]
    fn an_untrusted_content_change_is_marked_and_unapproved() {
        let old = install(json!({CREATOR_ANNOTATION: "x"}), "Approved", "a", granted_status());
        let new = install(json!({CREATOR_ANNOTATION: "x"}), "Approved", "b", granted_status());
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let mut patched = new.clone();
        let operations = patch_operations(&new, &mutation(&bob, "controller", Some(&old), &new, true));
        let patch: json_patch::Patch = serde_json::from_value(json!(operations)).unwrap();
        json_patch::patch(&mut patched, &patch.0).unwrap();
        assert_eq!(patched["metadata"]["annotations"][CONTENT_CHANGED_BY_ANNOTATION], "bob");
        assert_eq!(patched["spec"]["approval"], "Unapproved");
        assert!(marked(&patched));
    }

    #[test]
    fn only_content_or_namespace_changes_count() {
        let old = install(json!({}), "Unapproved", "a", granted_status());
        assert!(content_change(Some(&old), &old, "olmv2-system").is_none());
        assert!(content_change(None, &old, "olmv2-system").is_none());
        let moved = install(json!({}), "Unapproved", "b", granted_status());
        let change = content_change(Some(&old), &moved, "olmv2-system").expect("a change");
        assert_eq!(change.granted.len(), 1);
        assert!(change.operator_group_account.is_none());
        assert!(change.creator_only.is_none(), "assigned: what was granted is what counts");
        let mut mapped = old.clone();
        mapped["spec"]["namespaces"] = json!([{"from": "default", "to": "kube-system"}]);
        assert!(content_change(Some(&old), &mapped, "olmv2-system").is_some());
        // A deployment configuration lives in the content: changing it is a content change.
        let mut configured = old.clone();
        configured["spec"]["content"][0]["config"] = json!({"env": [{"name": "HTTP_PROXY", "value": "http://p"}]});
        assert!(content_change(Some(&old), &configured, "olmv2-system").is_some());
    }

    #[test]
    fn before_an_account_is_assigned_only_the_creator_changes_content_unmarked() {
        let fresh = install(json!({CREATOR_ANNOTATION: creator_value(&alice())}), "Unapproved", "a", json!({}));
        let other = install(json!({CREATOR_ANNOTATION: creator_value(&alice())}), "Unapproved", "b", json!({}));
        let change = content_change(Some(&fresh), &other, "olmv2-system").expect("a change");
        assert_eq!(change.creator_only.as_deref(), Some("alice"));
        let unknown = install(json!({}), "Unapproved", "a", json!({}));
        let change = content_change(Some(&unknown), &other, "olmv2-system").expect("a change");
        assert_eq!(change.creator_only.as_deref(), Some(""), "no creator: nobody");
        let operator = json!({"metadata": {"annotations": {CREATOR_ANNOTATION: creator_value(&alice())}}});
        assert_eq!(operator_creator_only(&operator).creator_only.as_deref(), Some("alice"));
    }

    #[test]
    fn an_approval_standing_on_the_spec_counts_as_granted() {
        let status = json!({"pending": {"count": 1, "permissions": [{"scope": "Cluster", "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]}});
        let old = install(json!({}), "Approved", "a", status);
        let new = install(json!({}), "Approved", "b", json!({}));
        assert_eq!(content_change(Some(&old), &new, "olmv2-system").expect("change").granted.len(), 1);
    }

    #[test]
    fn an_operators_source_change_is_a_change_of_its_installs_content() {
        let old =
            json!({"metadata": {"uid": "op"}, "spec": {"updates": {"type": "ManifestImage", "manifestImage": "a"}}});
        let mut new = old.clone();
        assert!(!operator_source_change(Some(&old), &new));
        assert!(!operator_source_change(None, &new), "a create borrows nothing");
        new["spec"]["updates"]["manifestImage"] = json!("b");
        assert!(operator_source_change(Some(&old), &new));
        // The deployment configuration goes to the Install's content too.
        let mut configured = old.clone();
        configured["spec"]["config"] = json!({"volumes": [{"name": "token", "secret": {"secretName": "admin-token"}}]});
        assert!(operator_source_change(Some(&old), &configured));
        let install = json!({"metadata": {"ownerReferences": [{"kind": "Operator", "uid": "op", "controller": true}]}});
        assert!(owned_install(&old, &install));
        let foreign =
            json!({"metadata": {"ownerReferences": [{"kind": "Operator", "uid": "other", "controller": true}]}});
        assert!(!owned_install(&old, &foreign));
    }

    #[test]
    fn an_operator_group_account_counts_as_something_to_borrow() {
        let status = json!({"serviceAccountRef": {"namespace": "operators", "name": "robot"}});
        let old = install(json!({}), "Unapproved", "a", status);
        let new = install(json!({}), "Unapproved", "b", json!({}));
        let change = content_change(Some(&old), &new, "olmv2-system").expect("change");
        assert_eq!(change.operator_group_account.map(|a| a.name), Some("robot".into()));
    }

    #[test]
    fn the_validating_webhook_refuses_what_bypassed_the_mutation() {
        let controller = "controller";
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let unrecorded = json!({"metadata": {"name": "plumbus"}});
        assert!(record_violation(&bob, controller, "Install", None, &unrecorded).is_some());
        let recorded =
            json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: creator_value(&bob)}}});
        assert!(record_violation(&bob, controller, "Install", None, &recorded).is_none());
        let other =
            json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: creator_value(&alice())}}});
        assert!(record_violation(&bob, controller, "Install", Some(&recorded), &other).is_some(), "immutable");
        let marked = json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: creator_value(&bob), CONTENT_CHANGED_BY_ANNOTATION: "bob"}}});
        assert!(record_violation(&bob, controller, "Install", Some(&marked), &recorded).is_some());
        let by_controller = Requester { username: controller.into(), ..Requester::default() };
        assert!(record_violation(&by_controller, controller, "Install", Some(&marked), &recorded).is_none());
        let manual = json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: creator_value(&bob), MANUAL_APPROVAL_ANNOTATION: "true"}}});
        assert!(record_violation(&bob, controller, "Install", Some(&manual), &recorded).is_some(), "manual is sticky");
        let lifted = json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: creator_value(&bob), MANUAL_APPROVAL_ANNOTATION: "false"}}});
        assert!(record_violation(&bob, controller, "Install", Some(&manual), &lifted).is_some(), "nor changed");
        assert!(record_violation(&by_controller, controller, "Install", Some(&manual), &recorded).is_none());
    }

    #[test]
    fn manual_approval_is_put_back_for_everyone_but_the_controller() {
        let old =
            install(json!({CREATOR_ANNOTATION: "x", MANUAL_APPROVAL_ANNOTATION: "true"}), "Unapproved", "a", json!({}));
        let new = install(json!({CREATOR_ANNOTATION: "x"}), "Unapproved", "a", json!({}));
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let wanted = mutation(&bob, "controller", Some(&old), &new, false);
        assert_eq!(wanted.annotations.get(MANUAL_APPROVAL_ANNOTATION), Some(&Some("true".to_owned())));
        let controller = Requester { username: "controller".into(), ..Requester::default() };
        let wanted = mutation(&controller, "controller", Some(&old), &new, false);
        assert!(!wanted.annotations.contains_key(MANUAL_APPROVAL_ANNOTATION));
    }

    #[test]
    fn only_the_controller_says_which_subscription_an_install_serves() {
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let claimed = json!({"metadata": {"name": "plumbus.ops",
            "annotations": {CREATOR_ANNOTATION: creator_value(&bob), SUBSCRIPTION_ANNOTATION: "ops/plumbus"}}});
        let refused = record_violation(&bob, "controller", "Install", None, &claimed).expect("refused on create");
        assert!(refused.contains(SUBSCRIPTION_ANNOTATION), "{refused}");
        let plain =
            json!({"metadata": {"name": "plumbus.ops", "annotations": {CREATOR_ANNOTATION: creator_value(&bob)}}});
        assert!(record_violation(&bob, "controller", "Install", Some(&plain), &claimed).is_some(), "nor added later");
        assert!(record_violation(&bob, "controller", "Install", Some(&claimed), &plain).is_some(), "nor removed");
        let controller = Requester { username: "controller".into(), ..Requester::default() };
        assert!(record_violation(&controller, "controller", "Install", None, &claimed).is_none());
        assert!(record_violation(&bob, "controller", "Install", Some(&claimed), &claimed).is_none(), "kept as it is");
    }

    #[test]
    fn only_the_controller_records_an_adoption() {
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let controller = Requester { username: "controller".into(), ..Requester::default() };
        for (kind, key, value) in [
            ("Operator", OPERATOR_INSTALL_ANNOTATION, "victim.ops"),
            ("Operator", ADOPTED_FROM_ANNOTATION, "Subscription ops/plumbus"),
            ("Install", ADOPTED_FROM_ANNOTATION, "Subscription ops/plumbus"),
            ("Install", ADOPTED_FROM_UID_ANNOTATION, "uid-1"),
            ("Install", TAKES_OVER_CSV_ANNOTATION, "ops/plumbus.v1"),
            ("Install", TAKES_OVER_CSV_UID_ANNOTATION, "uid-2"),
        ] {
            let plain =
                json!({"metadata": {"name": "plumbus", "annotations": {CREATOR_ANNOTATION: creator_value(&bob)}}});
            let mut claimed = plain.clone();
            claimed["metadata"]["annotations"][key] = json!(value);
            let refused = record_violation(&bob, "controller", kind, None, &claimed).expect("refused on create");
            assert!(refused.contains(key), "{refused}");
            assert!(record_violation(&bob, "controller", kind, Some(&plain), &claimed).is_some(), "nor added later");
            assert!(record_violation(&bob, "controller", kind, Some(&claimed), &plain).is_some(), "nor removed");
            assert!(record_violation(&controller, "controller", kind, Some(&plain), &claimed).is_none());
            assert!(record_violation(&bob, "controller", kind, Some(&claimed), &claimed).is_none(), "kept as it is");
        }
    }

    #[test]
    fn an_operators_install_namespace_is_part_of_its_source() {
        let old = json!({"spec": {"updates": {"type": "CatalogSource"}}});
        let mut moved = old.clone();
        moved["spec"]["installNamespace"] = json!("kube-system");
        assert!(operator_source_change(Some(&old), &moved));
        assert!(!operator_source_change(Some(&moved), &moved));
    }

    #[test]
    fn nobody_but_the_controller_creates_an_install_owned_by_an_operator() {
        let bob = Requester { username: "bob".into(), ..Requester::default() };
        let forged = json!({"metadata": {"name": "plumbus.requires.grumbo",
            "annotations": {CREATOR_ANNOTATION: creator_value(&bob)},
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "name": "plumbus",
                                 "uid": "victim", "controller": true}]}});
        let refused = record_violation(&bob, "controller", "Install", None, &forged).expect("refused on create");
        assert!(refused.contains("only the controller sets owner references"), "{refused}");
        let controller = Requester { username: "controller".into(), ..Requester::default() };
        assert!(record_violation(&controller, "controller", "Install", None, &forged).is_none());
        let plain = json!({"metadata": {"name": "mine", "annotations": {CREATOR_ANNOTATION: creator_value(&bob)}}});
        assert!(record_violation(&bob, "controller", "Install", None, &plain).is_none(), "an Install of one's own");
    }
}

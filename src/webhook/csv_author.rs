//! Who authored a ClusterServiceVersion's content, recorded by the mutating webhook for the legacy CSV loop: it
//! installs a hand-applied CSV's Deployments only when its author may create them (`legacy::csv`), so that writing
//! a CSV never does more than its author could do by hand. The author is the creator, and then whoever last changed
//! the spec; the controller's own writes (annotations, status, copies) keep the author they carry.
//!
//! The same record for an OperatorGroup's `spec.serviceAccountName`: whoever named the account. Installs in the
//! group's namespace run as that account, so it lends its rights only where the person who chose it could run as it
//! (`install::account`); without this record, anyone who may write OperatorGroups could lend any account of their
//! namespace, an admin's included.

use std::collections::BTreeMap;

use serde_json::Value;

use super::identity::{creator_value, Mutation};
use crate::api::v1::ACCOUNT_NAMED_BY_ANNOTATION;
use crate::api::v2alpha1::{Requester, CREATOR_ANNOTATION};

/// The author recorded on a CSV (`v2alpha1.operators.coreos.com/creator`), when there is one.
pub fn recorded_author(annotations: &BTreeMap<String, String>) -> Option<Requester> {
    serde_json::from_str::<Requester>(annotations.get(CREATOR_ANNOTATION)?)
        .ok()
        .filter(|author| !author.username.is_empty())
}

/// The author annotation a write of a CSV by `requester` leaves: the requester when they create it or change its
/// spec; otherwise what the CSV carried before (on create by the controller: what it wrote, a copy's original's).
pub fn author_mutation(requester: &Requester, controller_username: &str, old: Option<&Value>, new: &Value) -> Mutation {
    let by_controller = requester.username == controller_username;
    let carried = |object: &Value| object["metadata"]["annotations"][CREATOR_ANNOTATION].as_str().map(str::to_owned);
    let author = match old {
        None if by_controller => carried(new),
        Some(old) if by_controller || old["spec"] == new["spec"] => carried(old),
        _ => Some(creator_value(requester)),
    };
    Mutation { annotations: [(CREATOR_ANNOTATION, author)].into(), unapprove: false }
}

/// The record a write of an OperatorGroup by `requester` leaves of who named its account: the requester when the
/// write names an account the group did not name before (a create, a change); what the group carried when the
/// account stays the same (whatever the request claims); nothing when it names none. The controller never writes a
/// group's account, and never stands as the one who named it.
pub fn account_namer_mutation(
    requester: &Requester,
    controller_username: &str,
    old: Option<&Value>,
    new: &Value,
) -> Mutation {
    fn account(group: &Value) -> Option<&str> {
        group["spec"]["serviceAccountName"].as_str().filter(|name| !name.is_empty())
    }
    let carried =
        |group: &Value| group["metadata"]["annotations"][ACCOUNT_NAMED_BY_ANNOTATION].as_str().map(str::to_owned);
    let namer = match (old, account(new)) {
        (_, None) => None,
        (Some(old), Some(named)) if account(old) == Some(named) => carried(old),
        _ if requester.username == controller_username => None,
        _ => Some(creator_value(requester)),
    };
    Mutation { annotations: [(ACCOUNT_NAMED_BY_ANNOTATION, namer)].into(), unapprove: false }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn user(name: &str) -> Requester {
        Requester { username: name.into(), groups: vec!["team".into()], ..Requester::default() }
    }

    fn csv(author: Option<&Requester>, image: &str) -> Value {
        let mut csv = json!({"metadata": {"name": "a", "annotations": {}}, "spec": {"image": image}});
        if let Some(author) = author {
            csv["metadata"]["annotations"][CREATOR_ANNOTATION] = json!(creator_value(author));
        }
        csv
    }

    fn author_of(mutation: &Mutation) -> Option<Requester> {
        let value = mutation.annotations.get(CREATOR_ANNOTATION)?.clone()?;
        serde_json::from_str(&value).ok()
    }

    #[test]
    fn the_creator_is_the_author_whatever_they_claim() {
        let forged = csv(Some(&user("admin")), "x");
        assert_eq!(author_of(&author_mutation(&user("alice"), "ctl", None, &forged)), Some(user("alice")));
    }

    #[test]
    fn a_spec_change_makes_the_changer_the_author_and_other_writes_keep_it() {
        let old = csv(Some(&user("alice")), "x");
        let changed = csv(Some(&user("alice")), "y");
        assert_eq!(author_of(&author_mutation(&user("mallory"), "ctl", Some(&old), &changed)), Some(user("mallory")));
        let relabelled = csv(Some(&user("admin")), "x");
        assert_eq!(author_of(&author_mutation(&user("mallory"), "ctl", Some(&old), &relabelled)), Some(user("alice")));
    }

    #[test]
    fn the_controllers_writes_keep_the_author() {
        let old = csv(Some(&user("alice")), "x");
        let changed = csv(None, "y");
        assert_eq!(author_of(&author_mutation(&user("ctl"), "ctl", Some(&old), &changed)), Some(user("alice")));
        let copy = csv(Some(&user("alice")), "x");
        assert_eq!(author_of(&author_mutation(&user("ctl"), "ctl", None, &copy)), Some(user("alice")));
        let unknown = author_mutation(&user("ctl"), "ctl", None, &csv(None, "x"));
        assert_eq!(unknown.annotations.get(CREATOR_ANNOTATION), Some(&None));
    }

    #[test]
    fn an_unrecorded_or_empty_author_is_none() {
        assert_eq!(recorded_author(&BTreeMap::new()), None);
        let empty: BTreeMap<String, String> =
            [(CREATOR_ANNOTATION.to_owned(), "{\"username\":\"\"}".to_owned())].into();
        assert_eq!(recorded_author(&empty), None);
        let alice: BTreeMap<String, String> = [(CREATOR_ANNOTATION.to_owned(), creator_value(&user("alice")))].into();
        assert_eq!(recorded_author(&alice), Some(user("alice")));
    }

    fn group(account: Option<&str>, namer: Option<&Requester>) -> Value {
        let mut group = json!({"metadata": {"name": "og", "annotations": {}}, "spec": {}});
        if let Some(account) = account {
            group["spec"]["serviceAccountName"] = json!(account);
        }
        if let Some(namer) = namer {
            group["metadata"]["annotations"][ACCOUNT_NAMED_BY_ANNOTATION] = json!(creator_value(namer));
        }
        group
    }

    fn namer_of(mutation: &Mutation) -> Option<Requester> {
        let value = mutation.annotations.get(ACCOUNT_NAMED_BY_ANNOTATION)?.clone()?;
        serde_json::from_str(&value).ok()
    }

    #[test]
    fn whoever_names_an_operator_groups_account_is_recorded_whatever_they_claim() {
        let forged = group(Some("admin-robot"), Some(&user("admin")));
        assert_eq!(namer_of(&account_namer_mutation(&user("mallory"), "ctl", None, &forged)), Some(user("mallory")));
        // Renaming the account of an admin's group makes the renamer its namer.
        let admins = group(Some("robot"), Some(&user("admin")));
        let renamed = group(Some("admin-robot"), Some(&user("admin")));
        let mutation = account_namer_mutation(&user("mallory"), "ctl", Some(&admins), &renamed);
        assert_eq!(namer_of(&mutation), Some(user("mallory")));
        // Setting an account on a group that named none.
        let mutation = account_namer_mutation(&user("mallory"), "ctl", Some(&group(None, None)), &renamed);
        assert_eq!(namer_of(&mutation), Some(user("mallory")));
    }

    #[test]
    fn other_writes_keep_who_named_the_account_and_a_group_naming_none_records_nobody() {
        let admins = group(Some("robot"), Some(&user("admin")));
        let relabelled = group(Some("robot"), Some(&user("mallory")));
        let mutation = account_namer_mutation(&user("mallory"), "ctl", Some(&admins), &relabelled);
        assert_eq!(namer_of(&mutation), Some(user("admin")), "the request's claim is overwritten");
        let claimed = group(None, Some(&user("admin")));
        let mutation = account_namer_mutation(&user("mallory"), "ctl", None, &claimed);
        assert_eq!(mutation.annotations.get(ACCOUNT_NAMED_BY_ANNOTATION), Some(&None), "removed");
        // The controller's writes (annotations, status) keep the record; it never stands as a namer itself.
        let mutation = account_namer_mutation(&user("ctl"), "ctl", Some(&admins), &admins);
        assert_eq!(namer_of(&mutation), Some(user("admin")));
        let mutation = account_namer_mutation(&user("ctl"), "ctl", None, &relabelled);
        assert_eq!(namer_of(&mutation), None);
    }
}

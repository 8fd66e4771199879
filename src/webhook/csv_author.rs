//! Who authored a ClusterServiceVersion's content, recorded by the mutating webhook for the legacy CSV loop: it
//! installs a hand-applied CSV's Deployments only when its author may create them (`legacy::csv`), so that writing
//! a CSV never does more than its author could do by hand. The author is the creator, and then whoever last changed
//! the spec; the controller's own writes (annotations, status, copies) keep the author they carry.

use std::collections::BTreeMap;

use serde_json::Value;

use super::identity::{creator_value, Mutation};
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
}

//! An OperatorGroup's aggregating ClusterRoles (`olm.og.<group>.<level>-<hash>`, made by the OperatorGroup loop)
//! deleted once the group is gone, as OLM's `operatorGroupDeleted` deletes them. The roles are cluster-scoped and
//! the group is not, so no owner reference ties them and no garbage collector removes them. Unlike OLM's handler,
//! which only sees a deletion while it runs, this loop looks at every such role, so roles of a group deleted while
//! the controller was down go too.
//!
//! Only a role whose name is the one its owner labels derive (`roles::group_role_name`) is deleted, and only while
//! no group of that name exists: labelling another ClusterRole as a group's does not get it deleted.

use std::sync::Arc;

use futures_util::future::{BoxFuture, FutureExt};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ListParams, PartialObjectMeta};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Resource, ResourceExt};

use super::roles::{group_role_name, SUFFIXES};
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::{OWNER_KIND_LABEL, OWNER_LABEL, OWNER_NAMESPACE_LABEL};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::controller::runner::{self, Basics, Reconciler};
use crate::controller::watches;
use crate::runtime::Process;

/// The field manager of this loop (it deletes only).
pub const FIELD_MANAGER: &str = "olmv2-operatorgroup-roles";

/// The owner kind of a group's roles.
const GROUP_KIND: &str = "OperatorGroup";

pub struct Context {
    client: ControllerClient,
    basics: Basics,
    /// Every OperatorGroup's metadata, as watched: a group the watch shows exists, and only one it does not show is
    /// looked for live (each change of a group's roles read the group live before).
    groups: Store<PartialObjectMeta<OperatorGroup>>,
}

#[derive(Debug, thiserror::Error)]
pub enum GroupRolesError {
    #[error("failed to read OperatorGroup {namespace}/{name}, whose ClusterRole {role} may be left behind")]
    ReadGroup {
        namespace: String,
        name: String,
        role: String,
        #[source]
        source: ClientError,
    },
    #[error("failed to delete ClusterRole {role} of the deleted OperatorGroup {namespace}/{name}")]
    DeleteRole {
        namespace: String,
        name: String,
        role: String,
        #[source]
        source: ClientError,
    },
}

impl Categorized for GroupRolesError {
    fn category(&self) -> &'static str {
        match self {
            Self::ReadGroup { .. } => "OperatorGroupReadFailed",
            Self::DeleteRole { .. } => "ClusterRoleDeleteFailed",
        }
    }
}

/// The group (namespace, name) `role` was made for, when it is one of a group's aggregating roles by its owner
/// labels and by its name.
pub fn owning_group(role: &impl Resource) -> Option<(String, String)> {
    let labels = role.labels();
    if labels.get(OWNER_KIND_LABEL).map(String::as_str) != Some(GROUP_KIND) {
        return None;
    }
    let (group, namespace) = (labels.get(OWNER_LABEL)?, labels.get(OWNER_NAMESPACE_LABEL)?);
    let name = role.name_any();
    SUFFIXES
        .iter()
        .any(|suffix| group_role_name(namespace, group, suffix) == name)
        .then(|| (namespace.clone(), group.clone()))
}

/// The roles a group of `namespace` and `name` has, by name.
fn roles_of(namespace: &str, name: &str) -> impl Iterator<Item = ObjectRef<PartialObjectMeta<ClusterRole>>> + use<> {
    let names: Vec<String> = SUFFIXES.iter().map(|suffix| group_role_name(namespace, name, suffix)).collect();
    names.into_iter().map(|role| ObjectRef::new(&role))
}

impl Reconciler for Context {
    type Object = PartialObjectMeta<ClusterRole>;
    type Error = GroupRolesError;
    const NAME: &'static str = "operatorgroup-roles";

    async fn reconcile(self: Arc<Self>, role: Arc<PartialObjectMeta<ClusterRole>>) -> Result<Action, GroupRolesError> {
        let Some((namespace, name)) = owning_group(role.as_ref()) else { return Ok(Action::await_change()) };
        let role_name = role.name_any();
        if role.metadata.deletion_timestamp.is_some()
            || self.groups.get(&ObjectRef::new(&name).within(&namespace)).is_some()
        {
            return Ok(Action::await_change());
        }
        // Not shown by the watch, which may not have seen a group just made: deleted only if it is not there.
        let group = self.client.namespaced::<OperatorGroup>(&namespace).get_opt(&name).await.map_err(|source| {
            GroupRolesError::ReadGroup {
                namespace: namespace.clone(),
                name: name.clone(),
                role: role_name.clone(),
                source,
            }
        })?;
        if group.is_some() {
            return Ok(Action::await_change());
        }
        // By name and by the owner labels read, so that a role changed since (no longer the group's) is kept.
        let selected = ListParams::default().fields(&format!("metadata.name={role_name}")).labels(&format!(
            "{OWNER_KIND_LABEL}={GROUP_KIND},{OWNER_LABEL}={name},{OWNER_NAMESPACE_LABEL}={namespace}"
        ));
        self.client.all::<ClusterRole>().delete_collection(&selected).await.map_err(|source| {
            GroupRolesError::DeleteRole {
                namespace: namespace.clone(),
                name: name.clone(),
                role: role_name.clone(),
                source,
            }
        })?;
        tracing::info!(clusterrole = %role_name, operatorgroup = %format!("{namespace}/{name}"), "ClusterRole of a deleted OperatorGroup deleted");
        Ok(Action::await_change())
    }

    fn basics(&self) -> &Basics {
        &self.basics
    }
}

/// Starts the loop: every ClusterRole labelled as a group's (its metadata: labels and name are all a pass reads),
/// woken when it changes and when its group goes.
pub fn controller(process: &Process) -> BoxFuture<'static, ()> {
    let client = process.client.clone();
    let (groups, writer) = kube::runtime::reflector::store();
    let group_changes = kube::runtime::reflector(
        writer,
        watches::metadata::<OperatorGroup>(client.clone(), watcher::Config::default()),
    );
    let context = Arc::new(Context {
        client: ControllerClient::new(client.clone(), FIELD_MANAGER),
        basics: process.basics(),
        groups,
    });
    let owned = watcher::Config::default().labels(&format!("{OWNER_KIND_LABEL}={GROUP_KIND}"));
    let controller = watches::controller(Api::<PartialObjectMeta<ClusterRole>>::all(client), owned)
        .watches_stream(group_changes.touched_objects(), |group| {
            roles_of(&group.namespace().unwrap_or_default(), &group.name_any())
        });
    runner::run(controller, context, process.shutdown()).boxed()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::legacy::apis::ApiSet;
    use crate::legacy::roles::group_role;

    fn role(value: serde_json::Value) -> ClusterRole {
        serde_json::from_value(value).expect("role")
    }

    #[test]
    fn a_groups_roles_are_known_by_their_labels_and_their_derived_name() {
        for suffix in SUFFIXES {
            let made = role(group_role("ops", "og", suffix, &ApiSet::new()));
            assert_eq!(owning_group(&made), Some(("ops".into(), "og".into())), "{suffix}");
        }
        let names: Vec<String> = roles_of("ops", "og").map(|reference| reference.name).collect();
        assert_eq!(names.len(), 3);
        assert!(names.iter().all(|name| name.starts_with("olm.og.og.")), "{names:?}");
    }

    #[test]
    fn another_clusterrole_labelled_as_a_groups_is_not_one() {
        let labels = json!({OWNER_KIND_LABEL: "OperatorGroup", OWNER_LABEL: "ghost", OWNER_NAMESPACE_LABEL: "ops"});
        let precious = role(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "cluster-admin", "labels": labels}}));
        assert_eq!(owning_group(&precious), None, "its name is not the group's");
        let mut other_group = role(group_role("ops", "og", "admin", &ApiSet::new()));
        other_group.labels_mut().insert(OWNER_LABEL.into(), "another".into());
        assert_eq!(owning_group(&other_group), None, "labels naming another group than its name");
        let mut csv_role = role(group_role("ops", "og", "view", &ApiSet::new()));
        csv_role.labels_mut().insert(OWNER_KIND_LABEL.into(), "ClusterServiceVersion".into());
        assert_eq!(owning_group(&csv_role), None, "owned by a CSV");
    }
}

//! Which ServiceAccount an Install runs as (docs/design.md, 'Who an Install runs as'), and when that account's rights
//! count as approved: decided by pure functions, then the pass's first step ([`assign_account`]) that reads the
//! OperatorGroups, makes the account and asks who may use it (the reads and the one write below them).
//!
//! The controller's own account is an eponymous one: named after the Install *and its uid*, so no name an Install
//! can take (`olmv2-controller`, `default`, the name of an Install deleted with `--cascade=orphan`) ever designates
//! an account that already exists; the controller only ever creates it, and uses it only when it carries the
//! Install's uid as its controlling owner. An OperatorGroup's account lends its existing rights only where the
//! Install's creator may use that account themselves, and only where whoever named it in the group could run as it:
//! writing an OperatorGroup must not lend an account its author could not use (an admin's, bound to cluster-admin).

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::ResourceExt;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::cluster::{creator_of, list_error, owner_reference, Cluster, ClusterError};
use super::conditions::Outcome;
use super::grants::INSTALL_ANNOTATION;
use super::objects::{service_account_user, ObjectClient};
use super::reconcile::{Context, Pass, ReconcileError, Step, Stop};
use crate::access::{account_namer_checks, operator_group_use_checks};
use crate::api::v1::{OperatorGroup, ACCOUNT_NAMED_BY_ANNOTATION};
use crate::api::v2alpha1::{Install, Requester, ServiceAccountReference};
use crate::category::Categorized;
use crate::controller::client::{ClientError, ControllerClient};
use crate::rbac::KindIndex;

/// Which ServiceAccount an Install runs as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Assignment {
    /// An account the controller creates in its own namespace for this Install's uid, and owned by it.
    Eponymous(ServiceAccountReference),
    /// The `serviceAccountName` of the one OperatorGroup in the install namespace.
    OperatorGroup { account: ServiceAccountReference, group: String },
}

impl Assignment {
    pub fn account(&self) -> &ServiceAccountReference {
        match self {
            Self::Eponymous(account) | Self::OperatorGroup { account, .. } => account,
        }
    }
}

/// The name of the account the controller creates for an Install: the Install's name, cut to leave room, and ten
/// hex digits of the hash of its uid. The uid makes it unique to this Install: a name an Install chooses can never
/// equal an existing account's, and an Install created again under the same name gets a new account, never the
/// orphaned one with its grants.
pub fn eponymous_name(install: &str, uid: &str) -> String {
    let digest = Sha256::digest(uid.as_bytes());
    let hash: String = digest.iter().take(5).map(|byte| format!("{byte:02x}")).collect();
    // ServiceAccount names are DNS subdomains; 63 keeps them usable as label values and in generated names too.
    let mut prefix: String = install.chars().take(63 - 1 - hash.len()).collect();
    while prefix.ends_with(['-', '.']) {
        prefix.pop();
    }
    format!("{prefix}-{hash}")
}

/// docs/design.md, 'Who an Install runs as': the one OperatorGroup's `serviceAccountName` in the install namespace when
/// exactly one group exists there and names one; otherwise the eponymous account. An OperatorGroup assignment recorded
/// in the status stays (the rules granted to it were approved for it); an eponymous one is always the name derived from
/// the uid, whatever an earlier version recorded.
pub fn assign_service_account(
    recorded: Option<&ServiceAccountReference>,
    install: &str,
    uid: &str,
    install_namespace: &str,
    groups: &[OperatorGroup],
    controller_namespace: &str,
) -> Assignment {
    let eponymous =
        ServiceAccountReference { name: eponymous_name(install, uid), namespace: controller_namespace.to_owned() };
    if let Some(recorded) = recorded.filter(|recorded| recorded.namespace != controller_namespace) {
        let group = groups
            .iter()
            .find(|g| g.spec.service_account_name.as_deref() == Some(recorded.name.as_str()))
            .and_then(|g| g.metadata.name.clone())
            .unwrap_or_default();
        return Assignment::OperatorGroup { account: recorded.clone(), group };
    }
    if recorded.is_some() {
        return Assignment::Eponymous(eponymous);
    }
    if let [group] = groups {
        if let Some(name) = group.spec.service_account_name.as_deref().filter(|n| !n.is_empty()) {
            let account = ServiceAccountReference { name: name.to_owned(), namespace: install_namespace.to_owned() };
            return Assignment::OperatorGroup { account, group: group.metadata.name.clone().unwrap_or_default() };
        }
    }
    Assignment::Eponymous(eponymous)
}

/// Whether an existing account is the one the controller created for the Install with `uid`: its controlling owner
/// is that Install. Any other account of the same name is never adopted.
pub fn created_for(account: &ServiceAccount, uid: &str) -> bool {
    account.metadata.owner_references.iter().flatten().any(|owner| {
        owner.uid == uid
            && owner.kind == "Install"
            && owner.api_version == "operators.coreos.com/v2alpha1"
            && owner.controller == Some(true)
    })
}

/// Who named `account` in `group` (the webhook's record), when `group` names that account and the record is there.
/// A group no longer there, naming another account now, or written before the record existed has nobody: its account
/// lends nothing.
pub fn account_namer(group: Option<&OperatorGroup>, account: &ServiceAccountReference) -> Option<Requester> {
    let group = group?;
    let names_it = group.namespace().as_deref() == Some(account.namespace.as_str())
        && group.spec.service_account_name.as_deref() == Some(account.name.as_str());
    if !names_it {
        return None;
    }
    serde_json::from_str::<Requester>(group.annotations().get(ACCOUNT_NAMED_BY_ANNOTATION)?)
        .ok()
        .filter(|namer| !namer.username.is_empty())
}

/// The account the content runs as, and how its rights count.
pub struct Account {
    pub reference: ServiceAccountReference,
    /// Its username (`system:serviceaccount:<namespace>:<name>`).
    pub user: String,
    /// A client impersonating it.
    pub client: ControllerClient,
    /// The OperatorGroups of the install namespace.
    pub groups: Vec<OperatorGroup>,
    /// Whether what an OperatorGroup's account held before counts as approved for this Install.
    pub lends_existing_rights: bool,
}

impl Account {
    /// `namespace/name`, as messages name it.
    pub fn describe(&self) -> String {
        format!("{}/{}", self.reference.namespace, self.reference.name)
    }

    /// Objects of every kind in `kinds`, read and written as the account.
    pub fn objects<'a>(&'a self, kinds: &'a KindIndex) -> ObjectClient<'a> {
        ObjectClient::new(&self.client, &self.user, kinds)
    }
}

/// The pass's first step: the account, made when it is the Install's own (one already there that was not made for
/// this Install is refused, reported).
pub async fn assign_account(ctx: &Context, pass: &mut Pass<'_>) -> Result<Step<Account>, ReconcileError> {
    let groups = ctx.cluster.operator_groups(&pass.namespace).await?;
    let assignment = assign_service_account(
        pass.previous.service_account_ref.as_ref(),
        &pass.name,
        &pass.uid,
        &pass.namespace,
        &groups,
        &ctx.options.controller_namespace,
    );
    let reference = assignment.account().clone();
    pass.status.service_account_ref = Some(reference.clone());
    if let Assignment::Eponymous(account) = &assignment {
        match ctx.cluster.ensure_service_account(pass.install, account, pass.label.as_deref()).await {
            Ok(()) => {}
            Err(error @ ClusterError::ServiceAccountTaken { .. }) => {
                tracing::warn!(install = %pass.name, %error, "refusing a ServiceAccount not created for this Install");
                let outcome = Outcome::ApplyFailed { reason: error.category(), message: error.to_string() };
                return Ok(Step::Break(Stop::new(outcome, ctx.basics.retry)));
            }
            Err(error) => return Err(error.into()),
        }
    }
    // An OperatorGroup's account lends what it held before only where the Install's creator may use it, and whoever
    // named it in the group could run as it; otherwise, like the Install's own account, only what was granted for
    // this Install's uid counts as approved.
    let lends_existing_rights = match &assignment {
        Assignment::OperatorGroup { account, group } => {
            let group = groups.iter().find(|candidate| candidate.name_any() == *group);
            ctx.cluster.creator_may_use(pass.install, account).await?
                && ctx.cluster.namer_may_use(group, account).await?
        }
        Assignment::Eponymous(_) => false,
    };
    let client = ctx.cluster.as_account(&reference)?;
    Ok(Step::Continue(Account {
        user: service_account_user(&reference),
        reference,
        client,
        groups,
        lends_existing_rights,
    }))
}

/// The reads and the one write of the account's step, as the controller.
impl Cluster {
    pub async fn operator_groups(&self, namespace: &str) -> Result<Vec<OperatorGroup>, ClusterError> {
        self.client.namespaced::<OperatorGroup>(namespace).list().await.map_err(list_error("OperatorGroups"))
    }

    /// Creates the eponymous ServiceAccount an Install runs as, controlled by the Install. An account of that name
    /// that exists is used only when it was created for this Install (its controlling owner has the Install's uid):
    /// any other is never adopted, relabelled or owned.
    pub async fn ensure_service_account(
        &self,
        install: &Install,
        account: &ServiceAccountReference,
        component_label: Option<&str>,
    ) -> Result<(), ClusterError> {
        let accounts = self.client.namespaced::<ServiceAccount>(&account.namespace);
        let ensure_error = |source| ClusterError::EnsureServiceAccount {
            namespace: account.namespace.clone(),
            name: account.name.clone(),
            source,
        };
        let existing = accounts.get_opt(&account.name).await.map_err(ensure_error)?;
        let existing = match existing {
            Some(existing) => existing,
            None => {
                let mut body = json!({
                    "apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": account.name, "namespace": account.namespace,
                        "annotations": {INSTALL_ANNOTATION: install.name_any()},
                        "ownerReferences": [owner_reference(install)]},
                });
                if let Some(label) = component_label {
                    body["metadata"]["labels"] = json!({label: ""});
                }
                let object: ServiceAccount =
                    serde_json::from_value(body).map_err(|error| ensure_error(ClientError::Encode(error)))?;
                // Created, never applied: an apply would adopt an account of the name that exists.
                match accounts.create(&object).await {
                    Ok(created) => created,
                    // Created meanwhile, by a pass of ours or by someone else: judged below like any existing one.
                    Err(error) if error.code() == Some(409) => {
                        accounts.get(&account.name).await.map_err(ensure_error)?
                    }
                    Err(source) => return Err(ensure_error(source)),
                }
            }
        };
        if created_for(&existing, &install.uid().unwrap_or_default()) {
            Ok(())
        } else {
            Err(ClusterError::ServiceAccountTaken { namespace: account.namespace.clone(), name: account.name.clone() })
        }
    }

    /// Whether the person who created `install` may use the OperatorGroup account `account` themselves (one of
    /// [`operator_group_use_checks`]); an Install without a recorded creator may not.
    pub async fn creator_may_use(
        &self,
        install: &Install,
        account: &ServiceAccountReference,
    ) -> Result<bool, ClusterError> {
        let Some(creator) = creator_of(install) else { return Ok(false) };
        for check in operator_group_use_checks(account) {
            let allowed = crate::access::allowed(self.client.kube(), &creator, &check).await.map_err(|source| {
                ClusterError::ReviewCreator {
                    install: install.name_any(),
                    account: format!("{}/{}", account.namespace, account.name),
                    source,
                }
            })?;
            if allowed {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether whoever named `account` in the OperatorGroup `group` could run as it themselves (one of
    /// [`account_namer_checks`]); a group with no record of who named it (or gone) lends nothing.
    pub async fn namer_may_use(
        &self,
        group: Option<&OperatorGroup>,
        account: &ServiceAccountReference,
    ) -> Result<bool, ClusterError> {
        let Some(namer) = account_namer(group, account) else { return Ok(false) };
        for check in account_namer_checks(account) {
            let allowed = crate::access::allowed(self.client.kube(), &namer, &check).await.map_err(|source| {
                ClusterError::ReviewAccountNamer {
                    group: group.map(ResourceExt::name_any).unwrap_or_default(),
                    account: format!("{}/{}", account.namespace, account.name),
                    source,
                }
            })?;
            if allowed {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn group(name: &str, account: Option<&str>) -> OperatorGroup {
        let mut group: OperatorGroup = serde_json::from_value(serde_json::json!({
            "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": name, "namespace": "operators"}, "spec": {}
        }))
        .expect("group");
        group.spec.service_account_name = account.map(str::to_owned);
        group
    }

    fn reference(namespace: &str, name: &str) -> ServiceAccountReference {
        ServiceAccountReference { namespace: namespace.into(), name: name.into() }
    }

    #[test]
    fn the_eponymous_name_carries_the_uid_so_it_never_names_an_existing_account() {
        let name = eponymous_name("olmv2-controller", "uid-1");
        assert!(name.starts_with("olmv2-controller-") && name != "olmv2-controller", "{name}");
        assert_eq!(name, eponymous_name("olmv2-controller", "uid-1"), "stable");
        assert_ne!(name, eponymous_name("olmv2-controller", "uid-2"), "a new Install of the same name: a new account");
        assert_ne!(eponymous_name("default", "u"), "default");
        let long = eponymous_name(&"a".repeat(300), "u");
        assert_eq!(long.len(), 63);
        assert!(!eponymous_name("dotted.name.-", "u").contains(".-"));
    }

    #[test]
    fn without_one_operator_group_naming_an_account_the_install_gets_its_own() {
        let own = Assignment::Eponymous(reference("olmv2-system", &eponymous_name("plumbus", "u")));
        assert_eq!(assign_service_account(None, "plumbus", "u", "operators", &[], "olmv2-system"), own);
        let two = [group("a", Some("robot")), group("b", Some("robot"))];
        assert_eq!(assign_service_account(None, "plumbus", "u", "operators", &two, "olmv2-system"), own);
        let unnamed = [group("a", None)];
        assert_eq!(assign_service_account(None, "plumbus", "u", "operators", &unnamed, "olmv2-system"), own);
    }

    #[test]
    fn the_one_operator_group_naming_an_account_assigns_it() {
        let groups = [group("og", Some("robot"))];
        assert_eq!(
            assign_service_account(None, "plumbus", "u", "operators", &groups, "olmv2-system"),
            Assignment::OperatorGroup { account: reference("operators", "robot"), group: "og".into() }
        );
    }

    #[test]
    fn a_recorded_eponymous_assignment_is_always_the_uid_derived_name() {
        // An earlier version named accounts after the Install alone; such a record is not trusted.
        let old = reference("olmv2-system", "plumbus");
        let assigned = assign_service_account(Some(&old), "plumbus", "u", "operators", &[], "olmv2-system");
        assert_eq!(assigned, Assignment::Eponymous(reference("olmv2-system", &eponymous_name("plumbus", "u"))));
        let groups = [group("og", Some("robot"))];
        let kept = assign_service_account(Some(&old), "plumbus", "u", "operators", &groups, "olmv2-system");
        assert!(matches!(kept, Assignment::Eponymous(_)), "a recorded assignment stays");
    }

    #[test]
    fn a_recorded_operator_group_assignment_stays() {
        let recorded = reference("operators", "robot");
        let assigned = assign_service_account(Some(&recorded), "plumbus", "u", "operators", &[], "olmv2-system");
        assert_eq!(assigned.account(), &recorded);
    }

    #[test]
    fn only_an_account_controlled_by_the_install_uid_is_its_own() {
        let owner = |uid: &str, kind: &str, controller: Option<bool>| OwnerReference {
            api_version: "operators.coreos.com/v2alpha1".into(),
            kind: kind.into(),
            name: "plumbus".into(),
            uid: uid.into(),
            controller,
            block_owner_deletion: None,
        };
        let mut account = ServiceAccount::default();
        assert!(!created_for(&account, "u"), "an account nobody owns is never adopted");
        account.metadata.owner_references = Some(vec![owner("u", "Install", Some(true))]);
        assert!(created_for(&account, "u"));
        assert!(!created_for(&account, "other"), "an orphan of an earlier Install of the same name");
        account.metadata.owner_references = Some(vec![owner("u", "Install", None)]);
        assert!(!created_for(&account, "u"), "not controlling");
        account.metadata.owner_references = Some(vec![owner("u", "Operator", Some(true))]);
        assert!(!created_for(&account, "u"));
    }

    #[test]
    fn an_operator_groups_account_is_named_by_whom_the_webhook_recorded_and_only_for_that_account() {
        let mallory = Requester { username: "mallory".into(), ..Requester::default() };
        let mut named = group("og", Some("robot"));
        assert_eq!(account_namer(Some(&named), &reference("operators", "robot")), None, "no record: nobody");
        named.metadata.annotations =
            Some([(ACCOUNT_NAMED_BY_ANNOTATION.to_owned(), serde_json::to_string(&mallory).expect("json"))].into());
        assert_eq!(account_namer(Some(&named), &reference("operators", "robot")), Some(mallory.clone()));
        assert_eq!(account_namer(Some(&named), &reference("operators", "other")), None, "names another account");
        assert_eq!(account_namer(Some(&named), &reference("elsewhere", "robot")), None, "another namespace");
        assert_eq!(account_namer(None, &reference("operators", "robot")), None, "the group is gone");
        named.metadata.annotations =
            Some([(ACCOUNT_NAMED_BY_ANNOTATION.to_owned(), "{\"username\":\"\"}".to_owned())].into());
        assert_eq!(account_namer(Some(&named), &reference("operators", "robot")), None, "an empty name is nobody");
    }
}

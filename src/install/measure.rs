//! What an Install's content asks of the cluster, measured: the permissions it needs, those its account lacks (only
//! what a person approved counts), what follows from a `create` granted before ([`measure_permissions`]), and how it
//! measures against the InstallPolicies of the moment ([`evaluate_policies`]). The decisions are pure functions of
//! `rbac`, `follows`, `gate` and `policy`; this module reads what they need.

use std::collections::BTreeSet;

use kube::ResourceExt;
use serde_json::Value;

use super::account::Account;
use super::cluster::{list_error, Cluster, ClusterError};
use super::conditions::Outcome;
use super::content;
use super::follows::{self, ObjectKey, Split};
use super::gate::add_grants;
use super::grants::FOLLOWED_ANNOTATION;
use super::objects::applied_ref;
use super::reconcile::{Context, Pass, ReconcileError, Step, Stop};
use super::resolve::Content;
use super::takeover::{self, TakenCsv, Takeover};
use crate::api::v2alpha1::{InstallPolicy, PendingPermission};
use crate::category::Categorized;
use crate::rbac::{
    disclose, missing_permissions, required_permissions, Disclosure, RbacObjects, RbacSnapshot, RequiredPermissions,
    UserInfo,
};

/// What the account needs and lacks for the content.
pub struct Measured {
    /// The cluster's RBAC objects, from the process's watch.
    pub rbac: RbacObjects,
    /// Whom the content's bindings bind and what its aggregated roles gather, shown beside the rules to approve.
    pub disclosure: Disclosure,
    /// What was granted for this Install, read from the grants themselves (the status records them too).
    pub own_grants: Vec<PendingPermission>,
    /// The rules it lacks: those for a person, those following from a `create` granted before.
    pub split: Split,
    /// The objects not there yet whose per-object verbs follow from that `create`.
    pub absent: BTreeSet<ObjectKey>,
    /// Everything the content needs, held or not (what a policy measures).
    pub needed: Vec<PendingPermission>,
}

/// The pass's fourth step: what the content needs, what the account holds of it (counting only what a person
/// approved), and what follows from a `create` granted before; content whose RBAC cannot be read is refused.
pub async fn measure_permissions(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
    content: &Content,
) -> Result<Step<Measured>, ReconcileError> {
    let (rbac, snapshot) = ctx.cluster.rbac_objects().await?;
    let required = match required_permissions(&content.objects, &content.kinds, &snapshot.roles) {
        Ok(required) => required,
        Err(error) => {
            let outcome = Outcome::Invalid { reason: error.category(), message: error.to_string() };
            return Ok(Step::Break(Stop::new(outcome, ctx.basics.resync)));
        }
    };
    let disclosure = match disclose(&content.objects, &snapshot.roles) {
        Ok(disclosure) => disclosure,
        Err(error) => {
            let outcome = Outcome::Invalid { reason: error.category(), message: error.to_string() };
            return Ok(Step::Break(Stop::new(outcome, ctx.basics.resync)));
        }
    };
    let account_user = UserInfo::service_account(&account.reference.namespace, &account.reference.name);
    let owned = rbac.owned_by(&pass.uid);
    // What was granted for this Install, read from the grants themselves: a pass that failed after granting still
    // leaves them counted, here, by the status and by the webhook.
    let own_grants = owned.granted_rules();
    let lent = if account.lends_existing_rights { rbac.without_other_installs(&pass.uid) } else { owned.clone() };
    let held = lent.snapshot();
    // What the content's own Roles and bindings pass on must have been approved by a person: verbs that only
    // followed from a `create` never count for them (`follows`).
    let approved = lent.without_annotated(FOLLOWED_ANNOTATION).snapshot();
    let content_apply = RequiredPermissions { apply: required.apply.clone(), grants: Vec::new() };
    let content_rbac = RequiredPermissions { apply: Vec::new(), grants: required.grants.clone() };
    let missing_for_rbac = missing_permissions(&content_rbac, &approved, &account_user);
    let mut missing = missing_permissions(&content_apply, &held, &account_user);
    missing.permissions = add_grants(&missing.permissions, &missing_for_rbac.permissions);
    missing.missing_roles.extend(missing_for_rbac.missing_roles.iter().cloned());
    // The per-object verbs on objects not there yet whose create was granted for this Install follow from it.
    let candidates = follows::candidates(&missing.permissions, &own_grants, &missing_for_rbac.permissions);
    let absent = if candidates.is_empty() {
        BTreeSet::new()
    } else {
        let existing = follows::existing_rbac(&rbac);
        let (kinds, objects) = (&content.kinds, &content.objects);
        account.objects(kinds).absent(&ctx.cluster.objects(kinds), objects, &candidates, &existing).await?
    };
    let split = follows::split(&missing.permissions, &own_grants, &absent);
    let needed = missing_permissions(&required, &RbacSnapshot::default(), &account_user).permissions;
    Ok(Step::Continue(Measured { rbac, disclosure, own_grants, split, absent, needed }))
}

/// After the gate: the content measured against the InstallPolicies of the moment (`status.policy`), whose ceilings are the
/// cluster's own ClusterRoles, never those an Install applied (content must not widen what it is measured against).
pub async fn evaluate_policies(
    ctx: &Context,
    pass: &mut Pass<'_>,
    content: &Content,
    measured: &Measured,
    taken: Option<&(Takeover, TakenCsv)>,
) -> Result<(), ReconcileError> {
    let policies = ctx.cluster.install_policies().await?;
    if policies.is_empty() {
        return Ok(());
    }
    let ceiling_roles = crate::policy::ceiling::ceiling_roles(&measured.rbac);
    let content_crds = takeover::owned_crds(&content.objects);
    // The content's own APIs are its CRDs that do not exist yet, or that it made (or takes over): read now, as the
    // controller, since grants come before the apply's own refusal to take over a CRD.
    let mut own_crds = BTreeSet::new();
    let controller = ctx.cluster.objects(&content.kinds);
    for crd in content.objects.iter().filter(|object| object["kind"] == "CustomResourceDefinition") {
        let reference = applied_ref(crd);
        let live = controller.get(&reference).await?;
        let taken_over = |live: &Value| {
            taken.is_some_and(|(takeover, csv)| takeover::made_for_csv(live, takeover, csv, &content_crds, &pass.name))
        };
        if content::own_crd(live.as_ref(), &pass.name, &pass.uid, taken_over) {
            own_crds.insert(reference.name);
        }
    }
    let own = crate::policy::ceiling::own_api_rules(&content.objects, &own_crds);
    pass.status.policy =
        crate::policy::evaluate(&policies, &ceiling_roles, &content.kinds, &content.objects, &measured.needed, &own);
    Ok(())
}

/// The policies' read, as the controller.
impl Cluster {
    /// Every InstallPolicy (docs/policy.md): read on each pass, so that a grant or an apply always measures against
    /// the policies of the moment.
    pub async fn install_policies(&self) -> Result<Vec<InstallPolicy>, ClusterError> {
        let mut policies = self.client.all::<InstallPolicy>().list().await.map_err(list_error("InstallPolicies"))?;
        policies.sort_by_key(ResourceExt::name_any);
        Ok(policies)
    }
}

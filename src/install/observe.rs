//! The reading half of an Install's pass (`reconcile`): what it knows of the Install ([`Pass`]), then each step that
//! reads the cluster and hands the next what it found: the account the content runs as ([`assign_account`]), the
//! content resolved and checked ([`resolve_content`]), what the account lacks for it ([`measure_permissions`]),
//! what OLM v0 made for the operator that the first apply takes over ([`takeover`]), and the policies it is measured
//! against ([`evaluate_policies`]). A step that cannot go on reports why and ends the pass ([`Step`]); every decision
//! is a pure function of a sibling module (`account`, `content`, `crd_safety`, `follows`, `gate`, `plan`, `policy`).

use std::collections::BTreeSet;

use kube::runtime::controller::Action;
use kube::ResourceExt;
use serde_json::Value;

use super::account::{assign_service_account, Assignment};
use super::apply::{self, service_account_user};
use super::cluster::ClusterError;
use super::conditions::Outcome;
use super::content::{self, decorate, install_namespace, sort_for_apply, Decoration};
use super::crd_safety;
use super::follows::{self, ObjectKey, Split};
use super::gate::add_grants;
use super::grants::FOLLOWED_ANNOTATION;
use super::reconcile::{owning_operator, report, Context, ReconcileError};
use super::resolve::{Resolved, StoredCertificates};
use super::takeover::{self, TakenCsv, Takeover};
use crate::api::component::component_label_key;
use crate::api::v1::OperatorGroup;
use crate::api::v2alpha1::{
    Install, InstallStatus, PendingPermission, ResolvedContent, ServiceAccountReference, ADOPTED_FROM_ANNOTATION,
};
use crate::category::Categorized;
use crate::controller::client::ControllerClient;
use crate::rbac::{
    disclose, missing_permissions, required_permissions, Disclosure, KindIndex, RbacObjects, RbacSnapshot,
    RequiredPermissions, UserInfo,
};

/// Goes on to the next step with `T`, or ends the pass with the [`Action`] a step decided (its status written).
pub type Step<T> = std::ops::ControlFlow<Action, T>;

/// What the pass knows of the Install, and the status it builds to write at its end.
pub struct Pass<'a> {
    pub install: &'a Install,
    pub name: String,
    pub uid: String,
    /// The status as the pass found it.
    pub previous: InstallStatus,
    /// The namespace the content goes to (its OperatorGroups assign the account).
    pub namespace: String,
    /// The component label of the Operator owning the Install, which everything it applies carries.
    pub label: Option<String>,
    /// The status being built.
    pub status: InstallStatus,
}

impl<'a> Pass<'a> {
    pub fn new(install: &'a Install) -> Self {
        let previous = install.status.clone().unwrap_or_default();
        let status = InstallStatus {
            resolved: previous.resolved.clone(),
            pending: previous.pending.clone(),
            applied: previous.applied.clone(),
            granted: previous.granted.clone(),
            approved_content: previous.approved_content.clone(),
            adopted_from: install.annotations().get(ADOPTED_FROM_ANNOTATION).cloned(),
            ..InstallStatus::default()
        };
        Self {
            install,
            name: install.name_any(),
            uid: install.uid().unwrap_or_default(),
            namespace: install_namespace(&install.spec.namespaces),
            label: owning_operator(install).as_deref().map(component_label_key),
            previous,
            status,
        }
    }
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
}

/// Step 1: the account, made when it is the Install's own (one already there that was not made for this Install is
/// refused, reported).
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
                return stop(ctx, pass, &outcome, ctx.options.retry).await;
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

/// The content: its objects decorated and in apply order, what it resolved to, its CSVs, and the kinds known with
/// its CRDs.
pub struct Content {
    pub objects: Vec<Value>,
    pub resolved: Vec<ResolvedContent>,
    pub csvs: Vec<String>,
    pub kinds: KindIndex,
}

/// Step 2: the content resolved (pulled, or found unpacked) and pinned; refused when it cannot be, or when a CRD of
/// it names an API the cluster serves already.
pub async fn resolve_content(
    ctx: &Context,
    pass: &Pass<'_>,
    account: &Account,
) -> Result<Step<Content>, ReconcileError> {
    let kinds = ctx.cluster.kinds(false).await?;
    let certificates =
        StoredCertificates::from_secrets(&apply::applied_secrets(&account.client, &pass.previous.applied).await);
    let resolved = match ctx.resolver.resolve(pass.install, &kinds, &account.groups, &certificates).await {
        Ok(resolved) => resolved,
        Err(error) => {
            let message = crate::category::report(&error);
            let outcome = if error.is_import_failure() {
                Outcome::ImportFailed { message }
            } else {
                Outcome::Invalid { reason: error.category(), message }
            };
            return stop(ctx, pass, &outcome, ctx.options.retry).await;
        }
    };
    let Resolved { mut objects, resolved, csvs } = resolved;
    let decoration = Decoration { install: &pass.name, uid: &pass.uid, component_label: pass.label.as_deref() };
    decorate(&mut objects, &decoration);
    sort_for_apply(&mut objects);
    // Content defines only new APIs: a CRD naming a resource the cluster serves with no CRD behind it (a built-in,
    // an aggregated API) is refused, before anything counts the rules on that resource as the content's own.
    for reference in crd_safety::crds_naming_served_apis(&objects, &kinds, &pass.previous.applied) {
        if apply::get(&ctx.cluster.client, &kinds, &reference).await?.is_none() {
            let message = format!(
                "CustomResourceDefinition {} names a resource the API server already serves (a built-in or aggregated API): content may define only new APIs",
                reference.name
            );
            let outcome = Outcome::Invalid { reason: "CrdNamesServedApi", message };
            return stop(ctx, pass, &outcome, ctx.options.resync).await;
        }
    }
    let mut kinds = kinds;
    kinds.add_crds(objects.iter());
    if objects.iter().any(|object| !known(&kinds, object)) {
        kinds = ctx.cluster.kinds(true).await?;
        kinds.add_crds(objects.iter());
    }
    Ok(Step::Continue(Content { objects, resolved, csvs, kinds }))
}

fn known(kinds: &KindIndex, object: &Value) -> bool {
    kinds
        .resolve(object["apiVersion"].as_str().unwrap_or_default(), object["kind"].as_str().unwrap_or_default())
        .is_some()
}

/// What the account needs and lacks for the content.
pub struct Measured {
    /// The cluster's RBAC objects, from the process's watch.
    pub rbac: RbacObjects,
    /// Whom the content's bindings bind and what its aggregated roles gather, shown beside the rules to approve.
    pub disclosure: Disclosure,
    /// What was granted for this Install, read from the grants themselves.
    pub own_grants: Vec<PendingPermission>,
    /// The rules it lacks: those for a person, those following from a `create` granted before.
    pub split: Split,
    /// The objects not there yet whose per-object verbs follow from that `create`.
    pub absent: BTreeSet<ObjectKey>,
    /// Everything the content needs, held or not (what a policy measures).
    pub needed: Vec<PendingPermission>,
}

/// Step 3: what the content needs, what the account holds of it (counting only what a person approved), and what
/// follows from a `create` granted before; content whose RBAC cannot be read is refused.
pub async fn measure_permissions(
    ctx: &Context,
    pass: &mut Pass<'_>,
    account: &Account,
    content: &Content,
) -> Result<Step<Measured>, ReconcileError> {
    let (rbac, snapshot) = ctx.cluster.rbac_objects().await?;
    let required = match required_permissions(&content.objects, &content.kinds, &snapshot.roles) {
        Ok(required) => required,
        Err(error) => {
            let outcome = Outcome::Invalid { reason: error.category(), message: error.to_string() };
            return stop(ctx, pass, &outcome, ctx.options.resync).await;
        }
    };
    let disclosure = match disclose(&content.objects, &snapshot.roles) {
        Ok(disclosure) => disclosure,
        Err(error) => {
            let outcome = Outcome::Invalid { reason: error.category(), message: error.to_string() };
            return stop(ctx, pass, &outcome, ctx.options.resync).await;
        }
    };
    let account_user = UserInfo::service_account(&account.reference.namespace, &account.reference.name);
    let owned = rbac.owned_by(&pass.uid);
    // What was granted for this Install, read from the grants themselves: a pass that failed after granting still
    // leaves them counted, here and by the webhook.
    let own_grants = owned.granted_rules();
    pass.status.granted = add_grants(&pass.status.granted, &own_grants);
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
        apply::absent(&account.client, &ctx.cluster.client, kinds, objects, &candidates, &existing).await?
    };
    let split = follows::split(&missing.permissions, &own_grants, &absent);
    let needed = missing_permissions(&required, &RbacSnapshot::default(), &account_user).permissions;
    Ok(Step::Continue(Measured { rbac, disclosure, own_grants, split, absent, needed }))
}

/// Step 4: for an Install made for an operator OLM v0 installed, on its first apply, the CSV whose objects it takes
/// over, while that CSV is the one recorded.
pub async fn takeover(ctx: &Context, pass: &Pass<'_>) -> Result<Option<(Takeover, TakenCsv)>, ReconcileError> {
    Ok(match takeover::first_apply(pass.install, &pass.previous.applied) {
        Some(takeover) => ctx.cluster.taken_csv(&takeover).await?.map(|csv| (takeover, csv)),
        None => None,
    })
}

/// Step 5: the content measured against the InstallPolicies of the moment (`status.policy`), whose ceilings are the
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
    for crd in content.objects.iter().filter(|object| object["kind"] == "CustomResourceDefinition") {
        let reference = content::applied_ref(crd);
        let live = apply::get(&ctx.cluster.client, &content.kinds, &reference).await?;
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

/// Reports `outcome` and ends the pass, to look again after `requeue`.
pub async fn stop<T>(
    ctx: &Context,
    pass: &Pass<'_>,
    outcome: &Outcome,
    requeue: std::time::Duration,
) -> Result<Step<T>, ReconcileError> {
    report(ctx, pass.install, pass.status.clone(), outcome, None).await?;
    Ok(Step::Break(Action::requeue(requeue)))
}

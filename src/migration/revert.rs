//! The way back (seed 004, 'Upgrade / Downgrade Strategy'; `docs/migration.md`): an Operator made a Subscription
//! again, where that is possible. The Subscription takes over the Operator's Install as the InstallPlan loop would
//! have made it (`<package>.<namespace>`), so nothing is re-installed; where the Install has another name, depends on
//! Installs of its own, or shares its namespace with Installs running as other accounts (OLM v0 has one install
//! account per namespace, its OperatorGroup's), the plan says why it cannot go back. `revert_plan` decides; the
//! reverting loop (`revert_controller` in `mod.rs`) does it for Operators annotated [`REVERT_ANNOTATION`].

use kube::ResourceExt;
use serde::Serialize;

use crate::api::v1alpha1::{InstallPlanApproval, SubscriptionConfig};
use crate::api::v2alpha1::{CatalogSourceUpdates, Install, Operator, UpdateApproval, ADOPTED_FROM_ANNOTATION};
use crate::legacy::installplan::execute::install_name;
use crate::operator::reconcile::own_install_name;

use super::plan::Blocked;

/// An Operator annotated so (`"true"`) is made a Subscription again (defined with the API: the webhook reads it).
pub use crate::api::v2alpha1::REVERT_ANNOTATION;

/// On a Subscription made again from an Operator: `Operator <name>`.
pub const REVERTED_FROM_ANNOTATION: &str = "v2alpha1.operators.coreos.com/reverted-from";

/// The Subscription an Operator becomes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevertPlan {
    pub operator: String,
    pub namespace: String,
    pub package: String,
    pub channel: Option<String>,
    pub catalog: String,
    pub manual: bool,
    /// The Operator's Install, which the Subscription takes over.
    pub install: String,
    #[serde(skip)]
    pub source: String,
    #[serde(skip)]
    pub source_namespace: String,
    #[serde(skip)]
    pub config: Option<SubscriptionConfig>,
    pub blocked: Option<Blocked>,
}

fn blocked(reason: &'static str, message: String) -> Option<Blocked> {
    Some(Blocked { reason, message, transient: false })
}

/// What making `operator` a Subscription again takes, or why it cannot be; `installs` are the cluster's,
/// `default_namespace` where an Operator without `installNamespace` installs, and `controller_namespace` where the
/// accounts the controller makes for Installs live (those are its own, not an OperatorGroup's: OLM v0 installs with
/// its own rights where no group names an account).
pub fn revert_plan(
    operator: &Operator,
    installs: &[Install],
    default_namespace: &str,
    controller_namespace: &str,
) -> RevertPlan {
    let name = operator.name_any();
    let namespace = operator.spec.install_namespace.clone().unwrap_or_else(|| default_namespace.to_owned());
    let catalog = operator.spec.updates.as_ref().and_then(|u| u.catalog_source.as_ref());
    let mut plan = unblocked_plan(operator, catalog, &name, &namespace);
    if !operator.annotations().contains_key(ADOPTED_FROM_ANNOTATION) {
        plan.blocked = blocked(
            "NotAdopted",
            format!("Operator {name} was not adopted from a Subscription: it has none to go back to"),
        );
        return plan;
    }
    let Some(package) = catalog.and_then(|c| c.package.clone()) else {
        plan.blocked = blocked(
            "NotFromACatalogPackage",
            format!("Operator {name} does not follow a package of a CatalogSource: a Subscription could not name it"),
        );
        return plan;
    };
    plan.package = package.clone();
    let expected = install_name(&package, &namespace);
    plan.blocked = install_blocker(operator, installs, &plan, &expected, controller_namespace);
    plan
}

/// The Subscription `operator` (named `name`, installing into `namespace`) becomes, following `catalog`, with no
/// package yet and nothing blocking it: `revert_plan` fills those in.
fn unblocked_plan(
    operator: &Operator,
    catalog: Option<&CatalogSourceUpdates>,
    name: &str,
    namespace: &str,
) -> RevertPlan {
    RevertPlan {
        operator: name.to_owned(),
        namespace: namespace.to_owned(),
        package: String::new(),
        channel: catalog.and_then(|c| c.channel.clone()),
        catalog: catalog.map(|c| format!("{}/{}", c.catalog_ref.namespace, c.catalog_ref.name)).unwrap_or_default(),
        manual: catalog.is_some_and(|c| c.approval == UpdateApproval::Manual),
        install: own_install_name(operator),
        source: catalog.map(|c| c.catalog_ref.name.clone()).unwrap_or_default(),
        source_namespace: catalog.map(|c| c.catalog_ref.namespace.clone()).unwrap_or_default(),
        config: operator.spec.config.as_ref().map(SubscriptionConfig::from),
        blocked: None,
    }
}

/// Why the Operator's Install cannot be handed to the Subscription `plan` makes (whose Install would be named
/// `expected`), if it cannot: it has another name, the Operator has Installs of its own for dependencies, or its
/// namespace's Installs run as several accounts.
fn install_blocker(
    operator: &Operator,
    installs: &[Install],
    plan: &RevertPlan,
    expected: &str,
    controller_namespace: &str,
) -> Option<Blocked> {
    let name = &plan.operator;
    let namespace = &plan.namespace;
    if plan.install != expected {
        return blocked(
            "InstallNotASubscriptions",
            format!(
                "Operator {name}'s Install is {}, and a Subscription's would be {expected}: going back would install \
                 the operator again",
                plan.install
            ),
        );
    }
    let dependencies = dependency_installs(operator, installs, expected);
    if !dependencies.is_empty() {
        return blocked(
            "HasDependencyInstalls",
            format!(
                "Operator {name} installed its dependencies through Installs of its own ({}), which no Subscription \
                 serves",
                dependencies.join(", ")
            ),
        );
    }
    let accounts = namespace_accounts(installs, namespace, controller_namespace);
    if accounts.len() > 1 {
        return blocked(
            "SeveralAccountsInNamespace",
            format!(
                "the Installs of namespace {namespace} run as {}: OLM v0 installs a namespace's operators as one \
                 account, its OperatorGroup's; move some to other namespaces first",
                accounts.join(", ")
            ),
        );
    }
    None
}

/// The names of the Installs `operator` owns other than its own (`expected`): those it made for its dependencies.
fn dependency_installs(operator: &Operator, installs: &[Install], expected: &str) -> Vec<String> {
    let uid = operator.uid();
    let owned_by_it = |install: &Install| {
        install.owner_references().iter().any(|owner| owner.kind == "Operator" && Some(&owner.uid) == uid.as_ref())
    };
    installs.iter().filter(|i| owned_by_it(i) && i.name_any() != expected).map(ResourceExt::name_any).collect()
}

/// The accounts (`<namespace>/<name>`, sorted, once each) the Installs into `namespace` run as, leaving out the
/// controller's own (those in `controller_namespace`).
fn namespace_accounts(installs: &[Install], namespace: &str, controller_namespace: &str) -> Vec<String> {
    // OLM v0 installs a namespace's operators as one account: its OperatorGroup's.
    let account_of = |install: &Install| {
        let account = install.status.as_ref()?.service_account_ref.as_ref()?;
        (account.namespace != controller_namespace).then(|| format!("{}/{}", account.namespace, account.name))
    };
    let in_namespace =
        |install: &Install| install.spec.namespaces.iter().any(|m| m.from == "default" && m.to == namespace);
    let mut accounts: Vec<String> = installs.iter().filter(|i| in_namespace(i)).filter_map(account_of).collect();
    accounts.sort();
    accounts.dedup();
    accounts
}

/// Whether `subscription` is the one `plan` makes on behalf of `creator`: named for the Operator, its spec as the
/// plan says, its author the Operator's creator. Anything else of the name (someone's, or ours changed since) is
/// not handed the Install.
pub fn made_by_plan(
    subscription: &crate::api::v1alpha1::Subscription,
    plan: &RevertPlan,
    creator: Option<&str>,
) -> bool {
    let Ok(wanted) = serde_json::from_value::<crate::api::v1alpha1::Subscription>(subscription_for(plan, creator))
    else {
        return false;
    };
    let annotations = subscription.annotations();
    annotations.get(REVERTED_FROM_ANNOTATION) == Some(&format!("Operator {}", plan.operator))
        && annotations.get(crate::api::v2alpha1::CREATOR_ANNOTATION).map(String::as_str) == creator
        && subscription.spec == wanted.spec
}

/// The Subscription `plan` makes, on behalf of the Operator's creator (`creator`, its annotation as recorded).
pub fn subscription_for(plan: &RevertPlan, creator: Option<&str>) -> serde_json::Value {
    let mut annotations = serde_json::json!({REVERTED_FROM_ANNOTATION: format!("Operator {}", plan.operator)});
    if let Some(creator) = creator {
        annotations[crate::api::v2alpha1::CREATOR_ANNOTATION] = serde_json::json!(creator);
    }
    let approval = if plan.manual { InstallPlanApproval::Manual } else { InstallPlanApproval::Automatic };
    serde_json::json!({
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "Subscription",
        "metadata": {"name": plan.package, "namespace": plan.namespace, "annotations": annotations},
        "spec": {"source": plan.source, "sourceNamespace": plan.source_namespace, "name": plan.package,
                 "channel": plan.channel, "installPlanApproval": approval, "config": plan.config},
    })
}

/// What a reverting pass does, from what it read: refuse (why, as a Warning event), or go on, making the
/// Subscription first when it is not there yet, handing the Install over when it is still the Operator's, and
/// deleting the Operator last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RevertPass {
    Refuse(String),
    Proceed { subscribe: bool, hand_over: bool },
}

/// The pass for `operator` along `plan`, given its Install (when there) and the Subscription of the plan's name
/// (when there), made by `creator`. A pass that handed the Install over already only deletes the Operator; before
/// that, a blocked plan, an Install not the Operator's and a Subscription of that name not the plan's are refused.
pub fn revert_pass(
    operator: &Operator,
    plan: &RevertPlan,
    install: Option<&Install>,
    existing: Option<&crate::api::v1alpha1::Subscription>,
    creator: Option<&str>,
) -> RevertPass {
    let name = operator.name_any();
    let key = format!("{}/{}", plan.namespace, plan.package);
    let ours = existing.is_some_and(|subscription| made_by_plan(subscription, plan, creator));
    let handed_over = ours
        && install.is_some_and(|install| {
            install.owner_references().iter().all(|owner| owner.kind != "Operator")
                && install.annotations().get(crate::api::v2alpha1::SUBSCRIPTION_ANNOTATION) == Some(&key)
        });
    if handed_over {
        return RevertPass::Proceed { subscribe: false, hand_over: false };
    }
    if let Some(blocked) = &plan.blocked {
        return RevertPass::Refuse(blocked.message.clone());
    }
    let uid = operator.uid();
    let owned_by_it =
        install.is_some_and(|install| install.owner_references().iter().any(|owner| Some(&owner.uid) == uid.as_ref()));
    if !owned_by_it {
        return RevertPass::Refuse(format!(
            "Install {} is not Operator {name}'s: there is nothing to hand back",
            plan.install
        ));
    }
    if existing.is_some() && !ours {
        return RevertPass::Refuse(format!(
            "a Subscription {key} exists that is not the one Operator {name} becomes: it is left alone"
        ));
    }
    RevertPass::Proceed { subscribe: existing.is_none(), hand_over: true }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn operator(name: &str, package: Option<&str>, namespace: Option<&str>) -> Operator {
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator",
            "metadata": {"name": name, "uid": "op-uid",
                         "annotations": {crate::api::v2alpha1::OPERATOR_INSTALL_ANNOTATION: "plumbus.ops",
                                         ADOPTED_FROM_ANNOTATION: "Subscription ops/plumbus"}},
            "spec": {"installNamespace": namespace, "config": {"env": [{"name": "A", "value": "b"}]},
                     "updates": {"type": "CatalogSource", "catalogSource": {"package": package,
                "channel": "stable", "approval": "Manual", "ref": {"name": "community", "namespace": "olm"}}}}}))
        .unwrap()
    }

    fn install(name: &str, namespace: &str, account: &str, owned: bool) -> Install {
        let owners = if owned {
            json!([{"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Operator", "name": "plumbus", "uid": "op-uid"}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
            "metadata": {"name": name, "ownerReferences": owners},
            "spec": {"namespaces": [{"from": "default", "to": namespace}], "content": []},
            "status": {"serviceAccountRef": {"namespace": "ops", "name": account}}}))
        .unwrap()
    }

    #[test]
    fn an_adopted_operator_goes_back_to_the_subscription_it_was() {
        let installs = [install("plumbus.ops", "ops", "og", true), install("grumbo.ops", "ops", "og", false)];
        let plan =
            revert_plan(&operator("plumbus", Some("plumbus"), Some("ops")), &installs, "operators", "olmv2-system");
        assert_eq!(plan.blocked, None);
        assert_eq!(
            (plan.package.as_str(), plan.namespace.as_str(), plan.install.as_str()),
            ("plumbus", "ops", "plumbus.ops")
        );
        let subscription = subscription_for(&plan, Some("{\"username\":\"admin\"}"));
        assert_eq!(subscription["metadata"]["namespace"], "ops");
        assert_eq!(subscription["spec"]["installPlanApproval"], "Manual");
        assert_eq!(subscription["spec"]["sourceNamespace"], "olm");
        assert_eq!(subscription["spec"]["config"]["env"][0]["name"], "A");
        assert_eq!(subscription["metadata"]["annotations"][REVERTED_FROM_ANNOTATION], "Operator plumbus");
        let made: crate::api::v1alpha1::Subscription = serde_json::from_value(subscription).unwrap();
        assert!(made_by_plan(&made, &plan, Some("{\"username\":\"admin\"}")));
        assert!(!made_by_plan(&made, &plan, Some("{\"username\":\"mallory\"}")), "another author");
        let mut changed = made.clone();
        changed.spec.install_plan_approval = Some(InstallPlanApproval::Automatic);
        assert!(!made_by_plan(&changed, &plan, Some("{\"username\":\"admin\"}")), "changed since");
    }

    #[test]
    fn what_cannot_go_back_says_why() {
        let reason = |operator: Operator, installs: &[Install]| {
            revert_plan(&operator, installs, "operators", "olmv2-system").blocked.map(|b| b.reason)
        };
        let own = [install("plumbus.ops", "ops", "og", true)];
        assert_eq!(reason(operator("plumbus", None, Some("ops")), &own), Some("NotFromACatalogPackage"));
        let mut renamed = operator("plumbus", Some("plumbus"), Some("ops"));
        renamed.annotations_mut().remove(crate::api::v2alpha1::OPERATOR_INSTALL_ANNOTATION);
        assert_eq!(reason(renamed, &own), Some("InstallNotASubscriptions"));
        let mut never_adopted = operator("plumbus", Some("plumbus"), Some("ops"));
        never_adopted.annotations_mut().remove(ADOPTED_FROM_ANNOTATION);
        assert_eq!(reason(never_adopted, &own), Some("NotAdopted"));
        let with_dependency =
            [install("plumbus.ops", "ops", "og", true), install("plumbus.requires.grumbo", "ops", "og", true)];
        assert_eq!(
            reason(operator("plumbus", Some("plumbus"), Some("ops")), &with_dependency),
            Some("HasDependencyInstalls")
        );
        let two_accounts = [install("plumbus.ops", "ops", "og", true), install("fleeb", "ops", "fleeb-1234", false)];
        let plan =
            revert_plan(&operator("plumbus", Some("plumbus"), Some("ops")), &two_accounts, "operators", "olmv2-system");
        let blocked = plan.blocked.unwrap();
        assert_eq!(blocked.reason, "SeveralAccountsInNamespace");
        assert!(blocked.message.contains("ops/fleeb-1234, ops/og"), "{}", blocked.message);
        // Accounts the controller made are its own, as OLM v0 installs with its own rights: they do not count.
        let plan = revert_plan(&operator("plumbus", Some("plumbus"), Some("ops")), &two_accounts, "operators", "ops");
        assert_eq!(plan.blocked, None);
    }

    #[test]
    fn a_pass_makes_the_subscription_hands_the_install_over_and_refuses_what_is_not_the_operators() {
        let creator = Some("{\"username\":\"admin\"}");
        let operator = operator("plumbus", Some("plumbus"), Some("ops"));
        let owned = install("plumbus.ops", "ops", "og", true);
        let plan = revert_plan(&operator, std::slice::from_ref(&owned), "operators", "olmv2-system");
        let proceed = |subscribe, hand_over| RevertPass::Proceed { subscribe, hand_over };
        assert_eq!(revert_pass(&operator, &plan, Some(&owned), None, creator), proceed(true, true));
        let made: crate::api::v1alpha1::Subscription =
            serde_json::from_value(subscription_for(&plan, creator)).unwrap();
        assert_eq!(revert_pass(&operator, &plan, Some(&owned), Some(&made), creator), proceed(false, true));
        let mut handed = install("plumbus.ops", "ops", "og", false);
        handed.annotations_mut().insert(crate::api::v2alpha1::SUBSCRIPTION_ANNOTATION.into(), "ops/plumbus".into());
        assert_eq!(revert_pass(&operator, &plan, Some(&handed), Some(&made), creator), proceed(false, false));
        let theirs = revert_pass(&operator, &plan, Some(&owned), Some(&made), Some("{\"username\":\"mallory\"}"));
        assert!(matches!(theirs, RevertPass::Refuse(m) if m.contains("is not the one Operator plumbus becomes")));
        let stranger = install("plumbus.ops", "ops", "og", false);
        let refused = revert_pass(&operator, &plan, Some(&stranger), None, creator);
        assert!(matches!(refused, RevertPass::Refuse(m) if m.contains("there is nothing to hand back")));
        let blocked = RevertPlan { blocked: blocked("NotAdopted", "never adopted".into()), ..plan.clone() };
        assert_eq!(
            revert_pass(&operator, &blocked, Some(&owned), None, creator),
            RevertPass::Refuse("never adopted".into())
        );
        assert_eq!(
            revert_pass(&operator, &blocked, Some(&handed), Some(&made), creator),
            proceed(false, false),
            "a pass that handed the Install over finishes whatever the plan says now"
        );
    }
}

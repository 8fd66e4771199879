//! `olmv2 migrate plan` and `olmv2 migrate apply` (also `kubectl olmv2 migrate ...`): moving a cluster's
//! Subscriptions to Operators (`docs/migration.md`). `plan` reads the cluster with the user's credentials and prints
//! what adoption would do, changing nothing: each Subscription's Operator (an existing one, or one to generate), its
//! Install and what that Install's account holds today, and what blocks it. `apply` asks the controller to adopt
//! (the namespace annotation `operators.coreos.com/adopt-subscriptions`) and waits until it has; run again after a
//! crash of either, it picks up where they stopped, since the controller does each step only once. `revert` makes
//! Operators Subscriptions again where seed 004 says it can be done (the annotation
//! `operators.coreos.com/revert-to-subscription`), and says where it cannot.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::ResourceExt;
use serde_json::json;

use crate::api::v1alpha1::Subscription;
use crate::api::v2alpha1::{
    Approval, Install, Operator, PendingReason, ADOPTED_FROM_ANNOTATION, CONTENT_CHANGED_BY_ANNOTATION,
};
use crate::cmd::approve::{approve_as_shown, describe_pending};
use crate::controller::client::{ClientError, ControllerClient};
use crate::error::Error;
use crate::install::takeover::takeover_of;
use crate::migration::plan::SubscriptionPlan;
use crate::migration::revert::{revert_plan, RevertPlan, REVERT_ANNOTATION};
use crate::migration::{AdoptionError, Snapshot, ADOPT_ANNOTATION};
use crate::output::table;

#[derive(Debug, clap::Subcommand)]
pub enum MigrateCommand {
    /// Print what adopting Subscriptions into Operators would do, changing nothing.
    Plan(PlanOptions),
    /// Have the controller adopt the Subscriptions of the namespaces, and wait until it has.
    Apply(ApplyOptions),
    /// Have the controller make Operators Subscriptions again where it can, and wait until it has.
    Revert(RevertOptions),
}

#[derive(Debug, Clone, clap::Args)]
pub struct RevertOptions {
    /// The Operators to make Subscriptions again (every Operator adopted from one when none is given).
    pub operators: Vec<String>,
    /// Print what would be done, changing nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// How long to wait for the controller.
    #[arg(long, default_value_t = 300)]
    pub timeout_seconds: u64,
    /// The controller's `--operator-namespace`.
    #[arg(long, default_value = "operators")]
    pub operator_namespace: String,
    /// The controller's `--namespace`, where the accounts it makes for Installs live.
    #[arg(long, default_value = "olmv2-system")]
    pub controller_namespace: String,
}

/// How the plan is printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Yaml,
}

#[derive(Debug, Clone, clap::Args)]
pub struct PlanOptions {
    /// Only the Subscriptions of these namespaces (all namespaces holding Subscriptions when none is given).
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// The controller's `--operator-namespace`: where an Operator naming no `installNamespace` installs.
    #[arg(long, default_value = "operators")]
    pub operator_namespace: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ApplyOptions {
    /// Only the Subscriptions of these namespaces (all namespaces holding Subscriptions when none is given).
    #[arg(long = "namespace", short = 'n')]
    pub namespaces: Vec<String>,
    /// How long to wait for the controller to adopt them.
    #[arg(long, default_value_t = 300)]
    pub timeout_seconds: u64,
    /// The controller's `--operator-namespace`: where an Operator naming no `installNamespace` installs.
    #[arg(long, default_value = "operators")]
    pub operator_namespace: String,
    /// Approve, with your own credentials, what each Install made to take over an operator OLM v0 installed (one the
    /// plan listed when apply started) needs: printed first, then confirmed (the webhook refuses what you do not
    /// hold). Without it, such Installs wait for `kubectl olmv2 approve`.
    #[arg(long)]
    pub approve: bool,
    /// With `--approve`: approve without asking.
    #[arg(long, short)]
    pub yes: bool,
}

pub async fn run(command: MigrateCommand) -> Result<(), Error> {
    let config = kube::Config::infer().await.map_err(Error::LoadClusterConfig)?;
    let client = kube::Client::try_from(config).map_err(Error::BuildClient)?;
    match command {
        MigrateCommand::Plan(options) => {
            let plans = read_plan(&client, &options.namespaces, &options.operator_namespace, true).await?;
            let text = match options.output {
                Format::Table => plan_table(&plans),
                Format::Yaml => serde_yaml_ng::to_string(&plans).map_err(Error::Yaml)?,
            };
            crate::output::write(&text)
        }
        MigrateCommand::Apply(options) => apply(&client, &options).await,
        MigrateCommand::Revert(options) => revert(&client, &options).await,
    }
}

/// The plan for the Subscriptions of `namespaces` (every namespace's when empty), as the controller makes it once
/// they are asked.
async fn read_plan(
    client: &kube::Client,
    namespaces: &[String],
    operator_namespace: &str,
    with_copies: bool,
) -> Result<Vec<SubscriptionPlan>, Error> {
    let reader = ControllerClient::new(client.clone(), "olmv2-migrate");
    let mut snapshot = Snapshot::read(&reader, None).await.map_err(|error| Error::ReadCluster(Box::new(error)))?;
    // Where the copies are is only shown: read for a plan printed, not on every round of `apply`'s wait.
    if with_copies {
        snapshot.read_copies(&reader).await.map_err(|error| Error::ReadCluster(Box::new(error)))?;
    }
    let asked = chosen(&snapshot, namespaces);
    let snapshot = Snapshot { annotated: asked.iter().cloned().collect(), ..snapshot };
    Ok(snapshot.plan(false, operator_namespace).into_iter().filter(|plan| asked.contains(&plan.namespace)).collect())
}

fn chosen(snapshot: &Snapshot, namespaces: &[String]) -> BTreeSet<String> {
    if namespaces.is_empty() {
        snapshot.subscriptions.iter().filter_map(|s| s.metadata.namespace.clone()).collect()
    } else {
        namespaces.iter().cloned().collect()
    }
}

/// The plan as a table, then what blocks, then what adoption leaves as it is.
pub fn plan_table(plans: &[SubscriptionPlan]) -> String {
    if plans.is_empty() {
        return "No Subscriptions to adopt.\n".into();
    }
    let rows: Vec<Vec<String>> = plans.iter().map(plan_row).collect();
    let mut text = table(
        &["SUBSCRIPTION", "PACKAGE", "CHANNEL", "CATALOG", "APPROVAL", "INSTALL", "HOLDS", "OPERATOR", "PLAN"],
        &rows,
    );
    let blocked = blocked_lines(plans);
    let copies = copy_lines(plans);
    push_section(&mut text, "\nCopied CSVs deleted once adopted (what they own passes to the Operator):\n", &copies);
    push_section(&mut text, "\nNot adopted now:\n", &blocked);
    push_adoption_notes(&mut text, plans);
    text
}

/// One plan's row of the table, in the order of `plan_table`'s headers.
fn plan_row(plan: &SubscriptionPlan) -> Vec<String> {
    let operator = operator_cell(plan);
    let outcome = outcome_cell(plan);
    let install = install_cell(plan);
    let holds = holds_cell(plan);
    vec![
        format!("{}/{}", plan.namespace, plan.name),
        plan.package.clone(),
        plan.channel.clone().unwrap_or_else(|| "(default)".into()),
        plan.catalog.clone(),
        if plan.manual { "Manual".into() } else { "Automatic".into() },
        install,
        holds,
        operator,
        outcome,
    ]
}

/// The OPERATOR cell: the Operator's name and whether it is adopted, already there, or made new.
fn operator_cell(plan: &SubscriptionPlan) -> String {
    plan.operator.as_ref().map_or("-".to_owned(), |o| {
        let how = if o.associated {
            "adopting"
        } else if o.exists {
            "existing"
        } else {
            "new"
        };
        format!("{} ({how})", o.name)
    })
}

/// The PLAN cell: what adoption does with the Subscription, or why it waits or is blocked.
fn outcome_cell(plan: &SubscriptionPlan) -> String {
    match &plan.blocked {
        Some(blocked) if blocked.transient => format!("waits: {}", blocked.reason),
        Some(blocked) => format!("blocked: {}", blocked.reason),
        None if plan.takeover.as_ref().is_some_and(|t| t.to_create) => "take over, then adopt".into(),
        None => "adopt".into(),
    }
}

/// The INSTALL cell: the Install, and the CSV it takes over if any.
fn install_cell(plan: &SubscriptionPlan) -> String {
    match (&plan.install, &plan.takeover) {
        (Some(install), Some(takeover)) => format!("{install} (takes over {})", takeover.csv),
        (install, _) => install.clone().unwrap_or_else(|| "-".into()),
    }
}

/// The HOLDS cell: how many rules are granted, and to which account (the CSV's own on a takeover).
fn holds_cell(plan: &SubscriptionPlan) -> String {
    match (&plan.account, &plan.takeover) {
        (None, Some(_)) => format!("{} rules (its CSV's)", plan.granted.len()),
        (account, _) => format!("{} rules as {}", plan.granted.len(), account.as_deref().unwrap_or("-")),
    }
}

/// One line for each blocked Subscription, saying why.
fn blocked_lines(plans: &[SubscriptionPlan]) -> Vec<String> {
    plans
        .iter()
        .filter_map(|plan| Some(format!("  {}/{}: {}", plan.namespace, plan.name, plan.blocked.as_ref()?.message)))
        .collect()
}

/// One line for each taken-over CSV with copies, naming the namespaces its copies are in.
fn copy_lines(plans: &[SubscriptionPlan]) -> Vec<String> {
    plans
        .iter()
        .filter_map(|plan| plan.takeover.as_ref().filter(|t| !t.copies.is_empty()).map(|t| (plan, t)))
        .map(|(plan, takeover)| {
            format!(
                "  {}/{} in {} namespaces: {}",
                plan.namespace,
                takeover.csv,
                takeover.copies.len(),
                takeover.copies.join(", ")
            )
        })
        .collect()
}

/// Appends `heading` then `lines`, one a line, unless there are none.
fn push_section(text: &mut String, heading: &str, lines: &[String]) {
    if !lines.is_empty() {
        text.push_str(heading);
        text.push_str(&lines.join("\n"));
        text.push('\n');
    }
}

/// Appends what adoption leaves as it is, and, when an operator is taken over, what that does.
fn push_adoption_notes(text: &mut String, plans: &[SubscriptionPlan]) {
    text.push_str(
        "\nAn adopted operator keeps running as it is: its Install, account, grants and objects stay, and the rules it \
         holds count as approved; an update needing more waits for approval. An Automatic Subscription whose author \
         may not `install` from its CatalogSource becomes a Manual Operator. Each adopted Subscription is deleted.\n",
    );
    if plans.iter().any(|plan| plan.takeover.is_some()) {
        text.push_str(
            "\nAn operator OLM v0 installed gets an Install of its bundle that takes over what OLM v0 made for its CSV \
             (nothing is deleted or re-created); it applies once a person holding what it needs approves it \
             (`olmv2 migrate apply --approve` approves with your credentials). Its CSV's copies are then removed, \
             what they owned passing to the Operator.\n",
        );
    }
}

/// Annotates the namespaces, then waits until every Subscription the plan adopts is gone.
async fn apply(client: &kube::Client, options: &ApplyOptions) -> Result<(), Error> {
    let plans = read_plan(client, &options.namespaces, &options.operator_namespace, false).await?;
    let namespaces: BTreeSet<String> = plans.iter().map(|plan| plan.namespace.clone()).collect();
    let api = Api::<Namespace>::all(client.clone());
    let body = json!({"metadata": {"annotations": {ADOPT_ANNOTATION: "true"}}});
    for namespace in &namespaces {
        api.patch(namespace, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|source| Error::AskAdoption { namespace: namespace.clone(), source })?;
        crate::output::write(&format!("namespace {namespace}: adoption asked\n"))?;
    }
    let deadline = Instant::now() + Duration::from_secs(options.timeout_seconds);
    // Only the takeovers the plan listed before anything was asked are approved: never an Install that appeared
    // since, nor any other.
    let planned: BTreeMap<String, String> =
        plans.iter().filter_map(|plan| Some((plan.install.clone()?, plan.takeover.as_ref()?.csv.clone()))).collect();
    let mut approved = Handled::default();
    loop {
        let listed: Vec<String> = namespaces.iter().cloned().collect();
        let now = read_plan(client, &listed, &options.operator_namespace, false).await?;
        if options.approve {
            approve_takeovers(client, &now, &planned, options.yes, &mut approved).await?;
        }
        let waits = |plan: &&SubscriptionPlan| {
            plan.blocked.as_ref().is_none_or(|b| b.transient || (options.approve && b.reason == PENDING_APPROVAL))
        };
        let waiting: Vec<&SubscriptionPlan> = now.iter().filter(waits).collect();
        if waiting.is_empty() {
            let adopted = plans.len().saturating_sub(now.len());
            crate::output::write(&format!("{adopted} Subscriptions adopted.\n"))?;
            if now.is_empty() {
                return Ok(());
            }
            crate::output::write(&plan_table(&now))?;
            return Err(Error::AdoptionBlocked { count: now.len() });
        }
        if Instant::now() >= deadline {
            crate::output::write(&plan_table(&now))?;
            return Err(Error::AdoptionTimedOut { count: waiting.len() });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The reason of a Subscription whose takeover Install waits for a person (`migration::plan`).
const PENDING_APPROVAL: &str = "InstallPendingApproval";

/// Why `install` is not approved by `migrate apply --approve`, if it is not: it must be one of the takeovers the
/// plan listed (`planned`: Install → the CSV it takes over), made by the controller to take over that CSV, with the
/// spec it was made with (any change of its content, by whomever, bumps its generation), and wait on permissions
/// alone (anything else is for `kubectl olmv2 approve`, which shows it).
pub fn not_approvable(install: &Install, planned: &BTreeMap<String, String>) -> Option<&'static str> {
    let pending = install.status.as_ref().and_then(|status| status.pending.as_ref());
    let Some(csv) = planned.get(&install.name_any()) else { return Some("it was not in the plan when apply started") };
    if takeover_of(install).is_none_or(|takeover| takeover.name != *csv) {
        Some("it does not take over the CSV the plan said")
    } else if install.metadata.generation != Some(1) {
        Some("its spec changed since it was made: approve it with `kubectl olmv2 approve`, which shows it")
    } else if install.annotations().contains_key(CONTENT_CHANGED_BY_ANNOTATION)
        || pending.and_then(|p| p.reason) == Some(PendingReason::ContentChanged)
    {
        Some("someone changed its content: approve it with `kubectl olmv2 approve`")
    } else if install.spec.approval == Approval::Approved || pending.is_none_or(|p| p.permissions.is_empty()) {
        Some("nothing waits for approval")
    } else {
        None
    }
}

/// What `approve_takeovers` did already: the pending sets shown (so that one is asked about once), and the reasons
/// told for not approving (each told once).
#[derive(Default)]
struct Handled {
    shown: BTreeSet<String>,
    told: BTreeSet<(String, &'static str)>,
}

/// Approves, as the user, each takeover Install the plans say waits for a person and `not_approvable` lets
/// through: shown, then confirmed unless `yes`, once per pending set. A refusal (the user does not hold it all) is
/// reported and the rest goes on.
async fn approve_takeovers(
    client: &kube::Client,
    plans: &[SubscriptionPlan],
    planned: &BTreeMap<String, String>,
    yes: bool,
    handled: &mut Handled,
) -> Result<(), Error> {
    let api = Api::<Install>::all(client.clone());
    for plan in plans.iter().filter(|plan| plan.blocked.as_ref().is_some_and(|b| b.reason == PENDING_APPROVAL)) {
        let Some(name) = &plan.install else { continue };
        let install = api.get(name).await.map_err(|source| Error::ReadInstall { name: name.clone(), source })?;
        if let Some(why) = not_approvable(&install, planned) {
            if handled.told.insert((name.clone(), why)) {
                crate::output::write(&format!("Install {name} is not approved here: {why}.\n"))?;
            }
            continue;
        }
        let pending = install.status.as_ref().and_then(|s| s.pending.as_ref()).map_or(0, |p| p.count);
        if !handled.shown.insert(format!("{name}@{:?}@{pending}", install.metadata.generation)) {
            continue;
        }
        crate::output::write(&describe_pending(&install))?;
        if !yes && !confirmed(&format!("\nApprove Install {name}? [y/N] "))? {
            crate::output::write("Not approved.\n")?;
            continue;
        }
        match approve_as_shown(&api, &install).await {
            // Changed since it was read: the next round shows it again.
            Err(Error::InstallChanged { .. }) => {}
            Err(Error::ApprovalRefused { name, message }) => {
                crate::output::write(&format!("Install {name} was not approved: {message}\n"))?;
            }
            other => other?,
        }
    }
    Ok(())
}

/// Asks `question` on the terminal; only an explicit yes is one.
fn confirmed(question: &str) -> Result<bool, Error> {
    use std::io::BufRead;
    crate::output::write(question)?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(Error::ReadInput)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// The revert plans as a table, then why some cannot go back.
pub fn revert_table(plans: &[RevertPlan]) -> String {
    if plans.is_empty() {
        return "No Operators to make Subscriptions again.\n".into();
    }
    let rows: Vec<Vec<String>> = plans
        .iter()
        .map(|plan| {
            vec![
                plan.operator.clone(),
                format!("{}/{}", plan.namespace, plan.package),
                plan.channel.clone().unwrap_or_else(|| "(default)".into()),
                plan.catalog.clone(),
                if plan.manual { "Manual".into() } else { "Automatic".into() },
                plan.install.clone(),
                plan.blocked.as_ref().map_or("revert".into(), |b| format!("blocked: {}", b.reason)),
            ]
        })
        .collect();
    let mut text = table(&["OPERATOR", "SUBSCRIPTION", "CHANNEL", "CATALOG", "APPROVAL", "INSTALL", "PLAN"], &rows);
    let blocked: Vec<String> = plans
        .iter()
        .filter_map(|plan| Some(format!("  {}: {}", plan.operator, plan.blocked.as_ref()?.message)))
        .collect();
    if !blocked.is_empty() {
        text.push_str("\nCannot go back:\n");
        text.push_str(&blocked.join("\n"));
        text.push('\n');
    }
    text
}

/// Annotates the Operators that can go back, then waits until each is gone and its Subscription is there.
async fn revert(client: &kube::Client, options: &RevertOptions) -> Result<(), Error> {
    let operators = Api::<Operator>::all(client.clone());
    let installs = Api::<Install>::all(client.clone());
    let read = |source| Error::ReadCluster(Box::new(AdoptionError::Read { what: "Operators and Installs", source }));
    let listed_installs = installs.list(&ListParams::default()).await.map_err(|e| read(ClientError::from(e)))?.items;
    let chosen: Vec<Operator> = operators
        .list(&ListParams::default())
        .await
        .map_err(|e| read(ClientError::from(e)))?
        .items
        .into_iter()
        .filter(|operator| {
            if options.operators.is_empty() {
                operator.annotations().contains_key(ADOPTED_FROM_ANNOTATION)
            } else {
                options.operators.contains(&operator.name_any())
            }
        })
        .collect();
    let missing: Vec<String> =
        options.operators.iter().filter(|name| !chosen.iter().any(|o| o.name_any() == **name)).cloned().collect();
    if !missing.is_empty() {
        return Err(Error::OperatorsNotFound { names: missing });
    }
    let plans: Vec<RevertPlan> = chosen
        .iter()
        .map(|o| revert_plan(o, &listed_installs, &options.operator_namespace, &options.controller_namespace))
        .collect();
    crate::output::write(&revert_table(&plans))?;
    if options.dry_run {
        return Ok(());
    }
    let going: Vec<&RevertPlan> = plans.iter().filter(|plan| plan.blocked.is_none()).collect();
    let body = json!({"metadata": {"annotations": {REVERT_ANNOTATION: "true"}}});
    for plan in &going {
        operators
            .patch(&plan.operator, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|source| Error::AskRevert { operator: plan.operator.clone(), source })?;
    }
    let deadline = Instant::now() + Duration::from_secs(options.timeout_seconds);
    loop {
        let mut left = Vec::new();
        for plan in &going {
            let gone = operators.get_opt(&plan.operator).await.map_err(|e| read(ClientError::from(e)))?.is_none();
            let subscriptions = Api::<Subscription>::namespaced(client.clone(), &plan.namespace);
            let back = subscriptions.get_opt(&plan.package).await.map_err(|e| read(ClientError::from(e)))?.is_some();
            if !(gone && back) {
                left.push(plan.operator.clone());
            }
        }
        if left.is_empty() {
            crate::output::write(&format!("{} Operators are Subscriptions again.\n", going.len()))?;
            let blocked = plans.len() - going.len();
            return if blocked == 0 { Ok(()) } else { Err(Error::AdoptionBlocked { count: blocked }) };
        }
        if Instant::now() >= deadline {
            return Err(Error::RevertTimedOut { operators: left });
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
#[path = "migrate_tests.rs"]
mod tests;

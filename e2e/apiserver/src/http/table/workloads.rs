//! Printers of the workload kinds: Deployment, ReplicaSet, ReplicationController, DaemonSet, StatefulSet, Job and
//! CronJob, with their pod templates' containers and images and their selectors in the wide columns.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as core;
use serde_json::{json, Value};

use super::duration::{age, human_duration, timestamp};
use super::format::{bool_pointer, containers, count, format_selector, int, items, labels, name, selector, text};
use super::{age_column, column, doc, name_column, string, Printer};

pub(super) fn printer(group: &str, kind: &str) -> Option<Printer> {
    let (columns, cells): (fn() -> Vec<Value>, super::Cells) = match (group, kind) {
        ("apps", "Deployment") => (deployment_columns, deployment),
        ("apps", "ReplicaSet") => (replica_set_columns, replica_set),
        ("", "ReplicationController") => (controller_columns, controller),
        ("apps", "DaemonSet") => (daemon_set_columns, daemon_set),
        ("apps", "StatefulSet") => (stateful_set_columns, stateful_set),
        ("batch", "Job") => (job_columns, job),
        ("batch", "CronJob") => (cron_job_columns, cron_job),
        _ => return None,
    };
    Some(Printer { columns, cells })
}

fn integer(name: &str, description: String) -> Value {
    column(name, "integer", 0, description)
}

/// The wide `Containers`, `Images` and (where given) `Selector` columns.
fn template_columns(selector: Option<String>) -> Vec<Value> {
    let mut columns = vec![string("Containers", 1, String::new()), string("Images", 1, String::new())];
    columns.extend(selector.map(|description| string("Selector", 1, description)));
    columns
}

fn created(o: &Value, now: Timestamp) -> Value {
    json!(age(&o["metadata"]["creationTimestamp"], now))
}

/// Desired replicas: `spec.replicas`, which every workload kind defaults to 1.
fn desired(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

fn deployment_columns() -> Vec<Value> {
    let status = doc::<apps::DeploymentStatus>;
    let mut columns = vec![
        name_column(),
        string("Ready", 0, String::new()),
        string("Up-to-date", 0, status("updatedReplicas")),
        string("Available", 0, status("availableReplicas")),
        age_column(),
    ];
    columns.extend(template_columns(Some(doc::<apps::DeploymentSpec>("selector"))));
    columns
}

fn deployment(o: &Value, now: Timestamp) -> Vec<Value> {
    let status = &o["status"];
    let (names, images) = containers(&o["spec"]["template"]["spec"]);
    // A Deployment's selector is printed without the `<none>` of the other kinds.
    let selector = selector(&o["spec"]["selector"]).unwrap_or_else(|()| "<invalid>".to_owned());
    vec![
        name(o),
        json!(format!("{}/{}", int(&status["readyReplicas"]), desired(o))),
        json!(int(&status["updatedReplicas"])),
        json!(int(&status["availableReplicas"])),
        created(o, now),
        names,
        images,
        json!(selector),
    ]
}

fn replica_set_columns() -> Vec<Value> {
    let (spec, status) = (doc::<apps::ReplicaSetSpec>, doc::<apps::ReplicaSetStatus>);
    let mut columns = vec![
        name_column(),
        integer("Desired", spec("replicas")),
        integer("Current", status("replicas")),
        integer("Ready", status("readyReplicas")),
        age_column(),
    ];
    columns.extend(template_columns(Some(spec("selector"))));
    columns
}

fn replica_set(o: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = containers(&o["spec"]["template"]["spec"]);
    let status = &o["status"];
    vec![
        name(o),
        json!(desired(o)),
        json!(int(&status["replicas"])),
        json!(int(&status["readyReplicas"])),
        created(o, now),
        names,
        images,
        json!(format_selector(&o["spec"]["selector"])),
    ]
}

fn controller_columns() -> Vec<Value> {
    let (spec, status) = (doc::<core::ReplicationControllerSpec>, doc::<core::ReplicationControllerStatus>);
    let mut columns = vec![
        name_column(),
        integer("Desired", spec("replicas")),
        integer("Current", status("replicas")),
        integer("Ready", status("readyReplicas")),
        age_column(),
    ];
    columns.extend(template_columns(Some(spec("selector"))));
    columns
}

/// A ReplicationController's selector is a plain label set.
fn controller(o: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = containers(&o["spec"]["template"]["spec"]);
    let status = &o["status"];
    vec![
        name(o),
        json!(desired(o)),
        json!(int(&status["replicas"])),
        json!(int(&status["readyReplicas"])),
        created(o, now),
        names,
        images,
        json!(labels(&o["spec"]["selector"])),
    ]
}

fn daemon_set_columns() -> Vec<Value> {
    let status = doc::<apps::DaemonSetStatus>;
    let mut columns = vec![
        name_column(),
        integer("Desired", status("desiredNumberScheduled")),
        integer("Current", status("currentNumberScheduled")),
        integer("Ready", status("numberReady")),
        integer("Up-to-date", status("updatedNumberScheduled")),
        integer("Available", status("numberAvailable")),
        string("Node Selector", 0, doc::<core::PodSpec>("nodeSelector")),
        age_column(),
    ];
    columns.extend(template_columns(Some(doc::<apps::DaemonSetSpec>("selector"))));
    columns
}

fn daemon_set(o: &Value, now: Timestamp) -> Vec<Value> {
    let status = &o["status"];
    let pod_spec = &o["spec"]["template"]["spec"];
    let (names, images) = containers(pod_spec);
    let mut cells = vec![name(o)];
    cells.extend(
        [
            "desiredNumberScheduled",
            "currentNumberScheduled",
            "numberReady",
            "updatedNumberScheduled",
            "numberAvailable",
        ]
        .map(|field| json!(int(&status[field]))),
    );
    cells.extend([json!(labels(&pod_spec["nodeSelector"])), created(o, now), names, images]);
    cells.push(json!(format_selector(&o["spec"]["selector"])));
    cells
}

fn stateful_set_columns() -> Vec<Value> {
    let mut columns = vec![name_column(), string("Ready", 0, String::new()), age_column()];
    columns.extend(template_columns(None));
    columns
}

fn stateful_set(o: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = containers(&o["spec"]["template"]["spec"]);
    let ready = format!("{}/{}", int(&o["status"]["readyReplicas"]), desired(o));
    vec![name(o), json!(ready), created(o, now), names, images]
}

fn job_columns() -> Vec<Value> {
    let mut columns = vec![
        name_column(),
        string("Status", 0, String::new()),
        string("Completions", 0, doc::<batch::JobStatus>("succeeded")),
        string("Duration", 0, String::new()),
        age_column(),
    ];
    columns.extend(template_columns(Some(doc::<batch::JobSpec>("selector"))));
    columns
}

/// Whether the first condition of `kind` is true.
fn condition(o: &Value, kind: &str) -> bool {
    items(&o["status"]["conditions"]).iter().find(|c| text(&c["type"]) == kind).is_some_and(|c| c["status"] == "True")
}

fn job(o: &Value, now: Timestamp) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let succeeded = int(&status["succeeded"]);
    let completions = match (spec["completions"].as_i64(), int(&spec["parallelism"])) {
        (Some(completions), _) => format!("{succeeded}/{completions}"),
        (None, parallelism) if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
        (None, _) => format!("{succeeded}/1"),
    };
    let duration = match (timestamp(&status["startTime"]), timestamp(&status["completionTime"])) {
        (Some(Ok(start)), None) => human_duration(now.duration_since(start)),
        (Some(Ok(start)), Some(Ok(end))) => human_duration(end.duration_since(start)),
        _ => String::new(),
    };
    let state = if condition(o, "Complete") {
        "Complete"
    } else if condition(o, "Failed") {
        "Failed"
    } else if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if condition(o, "Suspended") {
        "Suspended"
    } else if condition(o, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = containers(&spec["template"]["spec"]);
    vec![
        name(o),
        json!(state),
        json!(completions),
        json!(duration),
        created(o, now),
        names,
        images,
        json!(format_selector(&spec["selector"])),
    ]
}

fn cron_job_columns() -> Vec<Value> {
    let (spec, status) = (doc::<batch::CronJobSpec>, doc::<batch::CronJobStatus>);
    let mut columns = vec![
        name_column(),
        string("Schedule", 0, spec("schedule")),
        string("Timezone", 0, spec("timeZone")),
        column("Suspend", "boolean", 0, spec("suspend")),
        integer("Active", status("active")),
        string("Last Schedule", 0, status("lastScheduleTime")),
        age_column(),
    ];
    columns.extend(template_columns(Some(doc::<batch::JobSpec>("selector"))));
    columns
}

fn cron_job(o: &Value, now: Timestamp) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let last =
        if status["lastScheduleTime"].is_string() { age(&status["lastScheduleTime"], now) } else { "<none>".into() };
    let job = &spec["jobTemplate"]["spec"];
    let (names, images) = containers(&job["template"]["spec"]);
    vec![
        name(o),
        json!(text(&spec["schedule"])),
        json!(spec["timeZone"].as_str().unwrap_or("<none>")),
        // A `*bool` printed as a string, although the column says boolean.
        json!(bool_pointer(&spec["suspend"])),
        json!(count(&status["active"])),
        json!(last),
        created(o, now),
        names,
        images,
        json!(format_selector(&job["selector"])),
    ]
}

#[cfg(test)]
#[path = "workloads_tests.rs"]
mod tests;

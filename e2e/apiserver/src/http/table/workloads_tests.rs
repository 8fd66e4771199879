//! Tests of the workload printers: realistic objects, their exact cells.

use super::super::printed;
use serde_json::{json, Value};

const NOW: &str = "2026-03-01T12:00:00Z";

fn columns(group: &str, kind: &str) -> Vec<String> {
    let (columns, _) = printed(group, kind, &json!({}), NOW);
    columns.iter().map(|(name, kind, priority)| format!("{name}:{kind}:{priority}")).collect()
}

fn cells(group: &str, kind: &str, object: &Value) -> Vec<Value> {
    printed(group, kind, object, NOW).1
}

fn template() -> Value {
    json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "app", "image": "example.com/app:1"}, {"name": "proxy", "image": "example.com/proxy:2"}]}})
}

fn metadata() -> Value {
    json!({"name": "web", "creationTimestamp": "2026-03-01T06:50:00Z"})
}

#[test]
fn deployments_and_replica_sets() {
    assert_eq!(
        columns("apps", "Deployment"),
        [
            "Name:string:0",
            "Ready:string:0",
            "Up-to-date:string:0",
            "Available:string:0",
            "Age:string:0",
            "Containers:string:1",
            "Images:string:1",
            "Selector:string:1"
        ]
    );
    let deployment = json!({"metadata": metadata(), "spec": {"replicas": 3, "template": template(),
        "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "track", "operator": "NotIn", "values": ["canary"]}]}},
        "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}});
    assert_eq!(
        cells("apps", "Deployment", &deployment),
        [
            json!("web"),
            json!("2/3"),
            json!(3),
            json!(2),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2"),
            json!("app=web,track notin (canary)")
        ]
    );
    let mut unselected = deployment.clone();
    unselected["spec"]["selector"] = json!({});
    assert_eq!(cells("apps", "Deployment", &unselected)[7], json!(""));
    unselected["spec"]["selector"] = json!({"matchExpressions": [{"key": "a", "operator": "In"}]});
    assert_eq!(cells("apps", "Deployment", &unselected)[7], json!("<invalid>"));

    assert_eq!(
        columns("apps", "ReplicaSet"),
        [
            "Name:string:0",
            "Desired:integer:0",
            "Current:integer:0",
            "Ready:integer:0",
            "Age:string:0",
            "Containers:string:1",
            "Images:string:1",
            "Selector:string:1"
        ]
    );
    let replica_set = json!({"metadata": metadata(), "spec": {"replicas": 2, "template": template(),
        "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d4f8b9c7"}}}, "status": {"replicas": 2}});
    assert_eq!(
        cells("apps", "ReplicaSet", &replica_set),
        [
            json!("web"),
            json!(2),
            json!(2),
            json!(0),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2"),
            json!("app=web,pod-template-hash=5d4f8b9c7")
        ]
    );
    let mut empty = replica_set.clone();
    empty["spec"]["selector"] = json!({});
    assert_eq!(cells("apps", "ReplicaSet", &empty)[7], json!("<none>"));
}

#[test]
fn replication_controllers_daemon_sets_and_stateful_sets() {
    let controller = json!({"metadata": metadata(), "spec": {"replicas": 1, "selector": {"app": "web"}, "template": template()},
        "status": {"replicas": 1, "readyReplicas": 1}});
    assert_eq!(
        cells("", "ReplicationController", &controller),
        [
            json!("web"),
            json!(1),
            json!(1),
            json!(1),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2"),
            json!("app=web")
        ]
    );

    assert_eq!(
        columns("apps", "DaemonSet"),
        [
            "Name:string:0",
            "Desired:integer:0",
            "Current:integer:0",
            "Ready:integer:0",
            "Up-to-date:integer:0",
            "Available:integer:0",
            "Node Selector:string:0",
            "Age:string:0",
            "Containers:string:1",
            "Images:string:1",
            "Selector:string:1"
        ]
    );
    let mut pod_template = template();
    pod_template["spec"]["nodeSelector"] = json!({"kubernetes.io/os": "linux"});
    let daemon_set = json!({"metadata": metadata(), "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": pod_template},
        "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 1,
                   "numberAvailable": 2}});
    assert_eq!(
        cells("apps", "DaemonSet", &daemon_set),
        [
            json!("web"),
            json!(3),
            json!(3),
            json!(2),
            json!(1),
            json!(2),
            json!("kubernetes.io/os=linux"),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2"),
            json!("app=web")
        ]
    );

    assert_eq!(
        columns("apps", "StatefulSet"),
        ["Name:string:0", "Ready:string:0", "Age:string:0", "Containers:string:1", "Images:string:1"]
    );
    let stateful_set = json!({"metadata": metadata(), "spec": {"replicas": 3, "serviceName": "web", "template": template()},
        "status": {"readyReplicas": 1}});
    assert_eq!(
        cells("apps", "StatefulSet", &stateful_set),
        [
            json!("web"),
            json!("1/3"),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2")
        ]
    );
}

fn job(spec: Value, status: Value) -> Value {
    let mut spec = spec;
    spec["template"] = template();
    spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "0a1b"}});
    json!({"metadata": metadata(), "spec": spec, "status": status})
}

#[test]
fn jobs_status_completions_and_duration() {
    assert_eq!(
        columns("batch", "Job"),
        [
            "Name:string:0",
            "Status:string:0",
            "Completions:string:0",
            "Duration:string:0",
            "Age:string:0",
            "Containers:string:1",
            "Images:string:1",
            "Selector:string:1"
        ]
    );
    let complete = job(
        json!({"completions": 3, "parallelism": 2}),
        json!({"succeeded": 3, "startTime": "2026-03-01T07:00:00Z", "completionTime": "2026-03-01T07:03:20Z",
               "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}),
    );
    assert_eq!(
        cells("batch", "Job", &complete),
        [
            json!("web"),
            json!("Complete"),
            json!("3/3"),
            json!("3m20s"),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2"),
            json!("batch.kubernetes.io/controller-uid=0a1b")
        ]
    );
    let running = job(json!({"parallelism": 4}), json!({"succeeded": 1, "startTime": "2026-03-01T11:59:00Z"}));
    assert_eq!(cells("batch", "Job", &running)[1..4], [json!("Running"), json!("1/1 of 4"), json!("60s")]);
    let failed = job(json!({}), json!({"conditions": [{"type": "Failed", "status": "True"}]}));
    assert_eq!(cells("batch", "Job", &failed)[1..4], [json!("Failed"), json!("0/1"), json!("")]);
    let suspended = job(json!({"completions": 1}), json!({"conditions": [{"type": "Suspended", "status": "True"}]}));
    assert_eq!(cells("batch", "Job", &suspended)[1], json!("Suspended"));
    let mut deleting = job(json!({}), json!({"conditions": [{"type": "Suspended", "status": "True"}]}));
    deleting["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:00Z");
    assert_eq!(cells("batch", "Job", &deleting)[1], json!("Terminating"));
    let failing = job(
        json!({}),
        json!({"conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Complete", "status": "False"}]}),
    );
    assert_eq!(cells("batch", "Job", &failing)[1], json!("FailureTarget"));
}

#[test]
fn cron_jobs() {
    assert_eq!(
        columns("batch", "CronJob"),
        [
            "Name:string:0",
            "Schedule:string:0",
            "Timezone:string:0",
            "Suspend:boolean:0",
            "Active:integer:0",
            "Last Schedule:string:0",
            "Age:string:0",
            "Containers:string:1",
            "Images:string:1",
            "Selector:string:1"
        ]
    );
    let cron_job = json!({"metadata": metadata(), "spec": {"schedule": "*/5 * * * *", "timeZone": "Europe/Paris", "suspend": false,
        "jobTemplate": {"spec": {"template": template()}}},
        "status": {"active": [{"kind": "Job", "name": "web-1"}], "lastScheduleTime": "2026-03-01T11:55:00Z"}});
    assert_eq!(
        cells("batch", "CronJob", &cron_job),
        [
            json!("web"),
            json!("*/5 * * * *"),
            json!("Europe/Paris"),
            json!("False"),
            json!(1),
            json!("5m"),
            json!("5h10m"),
            json!("app,proxy"),
            json!("example.com/app:1,example.com/proxy:2"),
            json!("<none>")
        ]
    );
    let bare = json!({"metadata": metadata(), "spec": {"schedule": "@daily", "jobTemplate": {"spec": {"template": {"spec": {}}}}}});
    assert_eq!(cells("batch", "CronJob", &bare)[2..6], [json!("<none>"), json!("<unset>"), json!(0), json!("<none>")]);
}

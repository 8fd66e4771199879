//! The Pod printer: readiness, the status kube derives from the phase, init containers and container states
//! (`Init:1/2`, `CrashLoopBackOff`, `Completed`, `Terminating`...), restarts with the time of the last one, and
//! the wide IP, node, nominated node and readiness gates.

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as core;
use serde_json::{json, Value};

use super::duration::{age, human_duration, timestamp};
use super::format::{int, items, name, text};
use super::{age_column, doc, name_column, string, Printer};

pub(super) fn printer(group: &str, kind: &str) -> Option<Printer> {
    match (group, kind) {
        ("", "Pod") => Some(Printer { columns, cells }),
        _ => None,
    }
}

fn columns() -> Vec<Value> {
    let (spec, status) = (doc::<core::PodSpec>, doc::<core::PodStatus>);
    vec![
        name_column(),
        string("Ready", 0, String::new()),
        string("Status", 0, String::new()),
        string("Restarts", 0, String::new()),
        age_column(),
        string("IP", 1, status("podIP")),
        string("Node", 1, spec("nodeName")),
        string("Nominated Node", 1, status("nominatedNodeName")),
        string("Readiness Gates", 1, spec("readinessGates")),
    ]
}

/// A sidecar: an init container that keeps running (`restartPolicy: Always`).
fn restartable(init_containers: &[Value], name: &str) -> bool {
    init_containers.iter().any(|c| text(&c["name"]) == name && text(&c["restartPolicy"]) == "Always")
}

fn condition_true(pod: &Value, kind: &str) -> bool {
    items(&pod["status"]["conditions"]).iter().find(|c| text(&c["type"]) == kind).is_some_and(|c| c["status"] == "True")
}

/// The later of the last restart seen and when this container last terminated.
fn later(last: &mut Option<Timestamp>, container: &Value) {
    if let Some(Ok(finished)) = timestamp(&container["lastState"]["terminated"]["finishedAt"]) {
        if last.is_none_or(|l| l < finished) {
            *last = Some(finished);
        }
    }
}

/// Why a terminated container stopped: its reason, else its signal or exit code.
fn terminated(state: &Value, prefix: &str) -> String {
    match (text(&state["reason"]), int(&state["signal"])) {
        ("", 0) => format!("{prefix}ExitCode:{}", int(&state["exitCode"])),
        ("", signal) => format!("{prefix}Signal:{signal}"),
        (reason, _) => format!("{prefix}{reason}"),
    }
}

fn cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let (spec, status) = (&pod["spec"], &pod["status"]);
    let init_containers = items(&spec["initContainers"]);
    let phase = text(&status["phase"]);
    let mut reason = if text(&status["reason"]).is_empty() { phase } else { text(&status["reason"]) }.to_owned();
    let scheduling_gated = items(&status["conditions"])
        .iter()
        .any(|c| text(&c["type"]) == "PodScheduled" && text(&c["reason"]) == "SchedulingGated");
    if scheduling_gated {
        reason = "SchedulingGated".to_owned();
    }
    let sidecars = init_containers.iter().filter(|c| text(&c["restartPolicy"]) == "Always").count();
    let total = items(&spec["containers"]).len() + sidecars;
    let mut ready = 0;
    let (mut restarts, mut sidecar_restarts) = (0, 0);
    let (mut last_restart, mut last_sidecar_restart) = (None, None);

    let mut initializing = false;
    for (index, container) in items(&status["initContainerStatuses"]).iter().enumerate() {
        let count = int(&container["restartCount"]);
        restarts += count;
        later(&mut last_restart, container);
        let sidecar = restartable(init_containers, text(&container["name"]));
        if sidecar {
            sidecar_restarts += count;
            later(&mut last_sidecar_restart, container);
        }
        let state = &container["state"];
        if state["terminated"].is_object() && int(&state["terminated"]["exitCode"]) == 0 {
            continue;
        }
        if sidecar && container["started"] == true {
            if container["ready"] == true {
                ready += 1;
            }
            continue;
        }
        let waiting = text(&state["waiting"]["reason"]);
        reason = if state["terminated"].is_object() {
            terminated(&state["terminated"], "Init:")
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{index}/{}", init_containers.len())
        };
        initializing = true;
        break;
    }

    if !initializing || condition_true(pod, "Initialized") {
        restarts = sidecar_restarts;
        last_restart = last_sidecar_restart;
        let mut running = false;
        for container in items(&status["containerStatuses"]).iter().rev() {
            restarts += int(&container["restartCount"]);
            later(&mut last_restart, container);
            let state = &container["state"];
            if !text(&state["waiting"]["reason"]).is_empty() {
                reason = text(&state["waiting"]["reason"]).to_owned();
            } else if state["terminated"].is_object() {
                reason = terminated(&state["terminated"], "");
            } else if container["ready"] == true && state["running"].is_object() {
                running = true;
                ready += 1;
            }
        }
        // A container still running makes a pod whose last container completed Running (or NotReady) again.
        if reason == "Completed" && running {
            reason = if condition_true(pod, "Ready") { "Running" } else { "NotReady" }.to_owned();
        }
    }

    let deleting = pod["metadata"]["deletionTimestamp"].is_string();
    if deleting && text(&status["reason"]) == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_owned();
    }

    let restarts_cell = match last_restart {
        Some(last) if restarts != 0 => format!("{restarts} ({} ago)", human_duration(now.duration_since(last))),
        _ => restarts.to_string(),
    };
    let or_none = |value: &str| if value.is_empty() { "<none>".to_owned() } else { value.to_owned() };
    let gates = items(&spec["readinessGates"]);
    let gates_cell = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let met = gates.iter().filter(|g| condition_true(pod, text(&g["conditionType"]))).count();
        format!("{met}/{}", gates.len())
    };
    vec![
        name(pod),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_cell),
        json!(age(&pod["metadata"]["creationTimestamp"], now)),
        json!(or_none(text(&status["podIPs"][0]["ip"]))),
        json!(or_none(text(&spec["nodeName"]))),
        json!(or_none(text(&status["nominatedNodeName"]))),
        json!(gates_cell),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::printed;
    use serde_json::{json, Value};

    const NOW: &str = "2026-03-01T12:00:00Z";

    fn pod(spec: Value, status: Value) -> Value {
        json!({"metadata": {"name": "web", "creationTimestamp": "2026-03-01T11:00:00Z"}, "spec": spec, "status": status})
    }

    fn status_of(pod: &Value) -> (Value, Value, Value) {
        let (_, cells) = printed("", "Pod", pod, NOW);
        (cells[1].clone(), cells[2].clone(), cells[3].clone())
    }

    #[test]
    fn a_pending_pod_as_created_here() {
        let (columns, cells) =
            printed("", "Pod", &pod(json!({"containers": [{"name": "app"}]}), json!({"phase": "Pending"})), NOW);
        let names: Vec<(&str, u64)> = columns.iter().map(|(n, _, p)| (n.as_str(), *p)).collect();
        assert_eq!(
            names,
            [
                ("Name", 0),
                ("Ready", 0),
                ("Status", 0),
                ("Restarts", 0),
                ("Age", 0),
                ("IP", 1),
                ("Node", 1),
                ("Nominated Node", 1),
                ("Readiness Gates", 1)
            ]
        );
        assert!(columns.iter().all(|(_, kind, _)| kind == "string"));
        assert_eq!(
            cells,
            [
                json!("web"),
                json!("0/1"),
                json!("Pending"),
                json!("0"),
                json!("60m"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn running_with_restarts_ips_and_gates() {
        let running = pod(
            json!({"containers": [{"name": "app"}, {"name": "log"}], "nodeName": "node-1",
                   "readinessGates": [{"conditionType": "example.com/lb"}, {"conditionType": "example.com/dns"}]}),
            json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}], "conditions": [{"type": "example.com/lb", "status": "True"}],
                   "containerStatuses": [
                       {"name": "app", "ready": true, "restartCount": 2, "state": {"running": {}},
                        "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-03-01T11:55:00Z"}}},
                       {"name": "log", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"exitCode": 2, "finishedAt": "2026-03-01T11:59:30Z"}}}]}),
        );
        let (_, cells) = printed("", "Pod", &running, NOW);
        assert_eq!(
            cells[1..],
            [
                json!("1/2"),
                json!("CrashLoopBackOff"),
                json!("3 (30s ago)"),
                json!("60m"),
                json!("10.0.0.5"),
                json!("node-1"),
                json!("<none>"),
                json!("1/2")
            ]
        );
    }

    #[test]
    fn init_containers_and_sidecars() {
        let spec = json!({"initContainers": [{"name": "setup"}, {"name": "proxy", "restartPolicy": "Always"}],
                          "containers": [{"name": "app"}]});
        let waiting = pod(
            spec.clone(),
            json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "setup", "state": {"terminated": {"exitCode": 0}}},
            {"name": "proxy", "started": false, "state": {"waiting": {"reason": "PodInitializing"}}}]}),
        );
        assert_eq!(status_of(&waiting), (json!("0/2"), json!("Init:1/2"), json!("0")));
        let failed = pod(
            spec.clone(),
            json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "setup", "restartCount": 3, "state": {"terminated": {"exitCode": 137, "signal": 9}}}]}),
        );
        assert_eq!(status_of(&failed), (json!("0/2"), json!("Init:Signal:9"), json!("3")));
        let pulling = pod(
            spec.clone(),
            json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "setup", "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
        );
        assert_eq!(status_of(&pulling).1, json!("Init:ErrImagePull"));
        let started = pod(
            spec,
            json!({"phase": "Running", "initContainerStatuses": [
            {"name": "setup", "restartCount": 4, "state": {"terminated": {"exitCode": 0}}},
            {"name": "proxy", "started": true, "ready": true, "restartCount": 1, "state": {"running": {}}}],
            "containerStatuses": [{"name": "app", "ready": true, "state": {"running": {}}}]}),
        );
        assert_eq!(status_of(&started), (json!("2/2"), json!("Running"), json!("1")), "only sidecar restarts count");
    }

    #[test]
    fn finished_and_deleted_pods() {
        let spec = json!({"containers": [{"name": "a"}, {"name": "b"}]});
        let completed = pod(
            spec.clone(),
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [{"name": "a", "ready": true, "state": {"running": {}}},
                                  {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}),
        );
        assert_eq!(status_of(&completed).1, json!("NotReady"));
        let exited = pod(
            spec.clone(),
            json!({"phase": "Failed",
            "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 3}}}]}),
        );
        assert_eq!(status_of(&exited).1, json!("ExitCode:3"));
        let mut deleting = pod(spec.clone(), json!({"phase": "Running"}));
        deleting["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:00Z");
        assert_eq!(status_of(&deleting).1, json!("Terminating"));
        deleting["status"] = json!({"phase": "Running", "reason": "NodeLost"});
        assert_eq!(status_of(&deleting).1, json!("Unknown"));
        let gated = pod(
            spec,
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}]}),
        );
        assert_eq!(status_of(&gated).1, json!("SchedulingGated"));
    }
}

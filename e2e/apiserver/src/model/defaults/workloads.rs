//! The defaults of the kinds that hold a pod template: kubernetes' `SetDefaults_Deployment`, `_ReplicaSet`,
//! `_DaemonSet` and `_StatefulSet` (`pkg/apis/apps/v1`), `SetDefaults_Job`, `_CronJob` and
//! `_PodFailurePolicyOnPodConditionsPattern` (`pkg/apis/batch/v1`), `SetDefaults_ReplicationController` and the
//! `+default` of its replicas (core), each with the pod template's defaults (`pod::template`), as the generated
//! defaulters call them for every nested type. Feature gates are taken as v1.33 sets them by default: the PVC
//! retention policy of StatefulSets (GA) and Jobs' pod replacement policy (beta, on) are defaulted.

use serde_json::{json, Value};

use super::{child, existing, items, pod, set_if_absent, set_if_zero, storage};

/// `SetDefaults_Deployment` and the pod template's defaults.
pub fn deployment(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    set_if_absent(spec, "replicas", json!(1));
    if let Some(strategy) = child(spec, &["strategy"]) {
        set_if_zero(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            if let Some(rolling) = child(strategy, &["rollingUpdate"]) {
                set_if_absent(rolling, "maxUnavailable", json!("25%"));
                set_if_absent(rolling, "maxSurge", json!("25%"));
            }
        }
    }
    set_if_absent(spec, "revisionHistoryLimit", json!(10));
    set_if_absent(spec, "progressDeadlineSeconds", json!(600));
    pod::template(spec);
}

/// `SetDefaults_ReplicaSet` and the pod template's defaults.
pub fn replica_set(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    set_if_absent(spec, "replicas", json!(1));
    pod::template(spec);
}

/// `SetDefaults_DaemonSet`: a rolling update of one pod at a time, without surge (integers, where a Deployment's
/// are percentages), and the pod template's defaults.
pub fn daemon_set(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    if let Some(strategy) = child(spec, &["updateStrategy"]) {
        set_if_zero(strategy, "type", json!("RollingUpdate"));
        if strategy["type"] == "RollingUpdate" {
            if let Some(rolling) = child(strategy, &["rollingUpdate"]) {
                set_if_absent(rolling, "maxUnavailable", json!(1));
                set_if_absent(rolling, "maxSurge", json!(0));
            }
        }
    }
    set_if_absent(spec, "revisionHistoryLimit", json!(10));
    pod::template(spec);
}

/// `SetDefaults_StatefulSet`, the pod template's defaults and each volume claim template's (a claim's own).
pub fn stateful_set(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    set_if_zero(spec, "podManagementPolicy", json!("OrderedReady"));
    if let Some(strategy) = child(spec, &["updateStrategy"]) {
        // Only a defaulted type brings a rolling update: an explicit RollingUpdate without one stays without.
        if strategy.get("type").is_none_or(|t| t.is_null() || t == "") {
            strategy["type"] = json!("RollingUpdate");
            set_if_absent(strategy, "rollingUpdate", json!({}));
        }
        if strategy["type"] == "RollingUpdate" {
            if let Some(rolling) = existing(strategy, &["rollingUpdate"]) {
                set_if_absent(rolling, "partition", json!(0));
            }
        }
    }
    if let Some(policy) = child(spec, &["persistentVolumeClaimRetentionPolicy"]) {
        set_if_zero(policy, "whenDeleted", json!("Retain"));
        set_if_zero(policy, "whenScaled", json!("Retain"));
    }
    set_if_absent(spec, "replicas", json!(1));
    set_if_absent(spec, "revisionHistoryLimit", json!(10));
    pod::template(spec);
    for claim in items(spec, "volumeClaimTemplates") {
        storage::claim(claim);
    }
}

/// `SetDefaults_Job` and what its spec holds.
pub fn job(object: &mut Value) {
    if let Some(labels) = non_empty_labels(&object["spec"]["template"]) {
        label_if_unlabelled(object, labels);
    }
    let Some(spec) = child(object, &["spec"]) else { return };
    if spec.get("completions").is_none_or(Value::is_null) && spec.get("parallelism").is_none_or(Value::is_null) {
        spec["completions"] = json!(1);
    }
    set_if_absent(spec, "parallelism", json!(1));
    // With a backoff limit per index, the global limit is no limit.
    let backoff_limit = if spec["backoffLimitPerIndex"].is_null() { 6 } else { i32::MAX };
    set_if_absent(spec, "backoffLimit", json!(backoff_limit));
    set_if_absent(spec, "completionMode", json!("NonIndexed"));
    set_if_absent(spec, "suspend", json!(false));
    let replacement = if spec["podFailurePolicy"].is_null() { "TerminatingOrFailed" } else { "Failed" };
    set_if_absent(spec, "podReplacementPolicy", json!(replacement));
    set_if_absent(spec, "manualSelector", json!(false));
    job_spec(spec);
}

/// `SetDefaults_CronJob`, and the defaults of the types its job template holds: not `SetDefaults_Job`, which is
/// the Job's (a CronJob's template reads back without completions, parallelism or backoff limit).
pub fn cron_job(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    set_if_zero(spec, "concurrencyPolicy", json!("Allow"));
    set_if_absent(spec, "suspend", json!(false));
    set_if_absent(spec, "successfulJobsHistoryLimit", json!(3));
    set_if_absent(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(job_spec) = child(spec, &["jobTemplate", "spec"]) {
        self::job_spec(job_spec);
    }
}

/// The defaults of the types a JobSpec holds: pod failure policy patterns match `True` conditions unless told
/// otherwise, and the pod template's.
fn job_spec(spec: &mut Value) {
    if let Some(policy) = existing(spec, &["podFailurePolicy"]) {
        for rule in items(policy, "rules") {
            for pattern in items(rule, "onPodConditions") {
                set_if_zero(pattern, "status", json!("True"));
            }
        }
    }
    pod::template(spec);
}

/// `SetDefaults_ReplicationController` (selector and labels from the template's labels when it has none), the
/// `+default=1` of its replicas, and the template's defaults when there is one (a pointer in this kind).
pub fn replication_controller(object: &mut Value) {
    if let Some(labels) = non_empty_labels(&object["spec"]["template"]) {
        label_if_unlabelled(object, labels.clone());
        if let Some(spec) = child(object, &["spec"]) {
            if spec["selector"].as_object().is_none_or(|s| s.is_empty()) {
                spec["selector"] = labels;
            }
        }
    }
    let Some(spec) = child(object, &["spec"]) else { return };
    set_if_absent(spec, "replicas", json!(1));
    if existing(spec, &["template"]).is_some() {
        pod::template(spec);
    }
}

/// Gives an object without labels its template's (`labels`).
fn label_if_unlabelled(object: &mut Value, labels: Value) {
    if non_empty_labels(object).is_none() {
        if let Some(metadata) = child(object, &["metadata"]) {
            metadata["labels"] = labels;
        }
    }
}

/// The labels in an object's metadata, when there are some. Go copies an empty map too, but an empty map is
/// written as no map at all, so only labels that exist make a difference.
fn non_empty_labels(object: &Value) -> Option<Value> {
    let labels = object["metadata"]["labels"].as_object().filter(|l| !l.is_empty())?;
    Some(Value::Object(labels.clone()))
}

#[cfg(test)]
mod tests;

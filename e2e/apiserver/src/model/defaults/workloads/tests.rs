//! The defaults of DaemonSets, StatefulSets, Jobs, CronJobs and ReplicationControllers against what kube-apiserver
//! v1.33 fills in (their pod templates included), what it leaves alone (explicit values of pointer fields, even
//! zeros), and the rules between fields (a Job's completions and parallelism, a StatefulSet's rolling update).

use serde_json::{json, Value};

use crate::model::defaults::tests::{defaulted, defaulted_pod_spec, template};

fn app_template() -> Value {
    template(json!({"containers": [{"name": "app", "image": "app:1"}]}))
}

fn defaulted_template() -> Value {
    template(defaulted_pod_spec("app:1", "IfNotPresent"))
}

fn spec_of(group: &str, kind: &str, spec: Value) -> Value {
    defaulted(group, kind, json!({"metadata": {"name": "x"}, "spec": spec}))["spec"].clone()
}

#[test]
fn a_daemon_set_rolls_one_pod_at_a_time_without_surge() {
    let selector = json!({"matchLabels": {"app": "web"}});
    assert_eq!(
        spec_of("apps", "DaemonSet", json!({"selector": selector, "template": app_template()})),
        json!({"selector": selector, "revisionHistoryLimit": 10, "template": defaulted_template(),
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}})
    );
    let on_delete = spec_of("apps", "DaemonSet", json!({"updateStrategy": {"type": "OnDelete"}}));
    assert_eq!(on_delete["updateStrategy"], json!({"type": "OnDelete"}));
    let explicit = spec_of(
        "apps",
        "DaemonSet",
        json!({"revisionHistoryLimit": 0, "updateStrategy": {"type": "", "rollingUpdate": {"maxUnavailable": "0%"}}}),
    );
    assert_eq!(explicit["revisionHistoryLimit"], 0);
    assert_eq!(
        explicit["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "0%", "maxSurge": 0}})
    );
}

#[test]
fn a_stateful_set_gets_kube_defaults_and_its_claim_templates_those_of_claims() {
    let claim = json!({"metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}});
    let spec = spec_of(
        "apps",
        "StatefulSet",
        json!({"serviceName": "db", "template": app_template(), "volumeClaimTemplates": [claim]}),
    );
    assert_eq!(
        spec,
        json!({"serviceName": "db", "replicas": 1, "revisionHistoryLimit": 10, "podManagementPolicy": "OrderedReady",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            "template": defaulted_template(),
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
                    "volumeMode": "Filesystem"},
                "status": {"phase": "Pending"}}]})
    );
    // Only a defaulted type brings an empty rolling update along.
    let rolling = spec_of("apps", "StatefulSet", json!({"updateStrategy": {"type": "RollingUpdate"}}));
    assert_eq!(rolling["updateStrategy"], json!({"type": "RollingUpdate"}));
    let on_delete = spec_of("apps", "StatefulSet", json!({"updateStrategy": {"type": "OnDelete"}}));
    assert_eq!(on_delete["updateStrategy"], json!({"type": "OnDelete"}));
    let explicit = spec_of(
        "apps",
        "StatefulSet",
        json!({"replicas": 0, "revisionHistoryLimit": 0, "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2}},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete"},
            "volumeClaimTemplates": [{"spec": {"volumeMode": "Block"}, "status": {"phase": "Bound"}}]}),
    );
    assert_eq!((&explicit["replicas"], &explicit["revisionHistoryLimit"]), (&json!(0), &json!(0)));
    assert_eq!(explicit["podManagementPolicy"], "Parallel");
    assert_eq!(
        explicit["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 2, "partition": 0}})
    );
    assert_eq!(
        explicit["persistentVolumeClaimRetentionPolicy"],
        json!({"whenDeleted": "Delete", "whenScaled": "Retain"})
    );
    assert_eq!(
        explicit["volumeClaimTemplates"],
        json!([{"spec": {"volumeMode": "Block"}, "status": {"phase": "Bound"}}])
    );
}

#[test]
fn a_job_gets_kube_defaults_and_its_pod_templates_labels() {
    let job = defaulted("batch", "Job", json!({"metadata": {"name": "x"}, "spec": {"template": app_template()}}));
    assert_eq!(
        job["spec"],
        json!({"completions": 1, "parallelism": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
            "suspend": false, "podReplacementPolicy": "TerminatingOrFailed", "manualSelector": false,
            "template": defaulted_template()})
    );
    assert_eq!(job["metadata"]["labels"], json!({"app": "web"}), "a Job without labels takes its template's");
    let labelled =
        defaulted("batch", "Job", json!({"metadata": {"labels": {"team": "a"}}, "spec": {"template": app_template()}}));
    assert_eq!(labelled["metadata"]["labels"], json!({"team": "a"}));
    let unlabelled_template = defaulted("batch", "Job", json!({"metadata": {"name": "x"}, "spec": {}}));
    assert!(unlabelled_template["metadata"].get("labels").is_none());
}

#[test]
fn a_jobs_completions_parallelism_and_limits_follow_kube_rules() {
    let job = |spec: Value| spec_of("batch", "Job", spec);
    let counts = |spec: &Value| (spec.get("completions").cloned(), spec.get("parallelism").cloned());
    assert_eq!(counts(&job(json!({"completions": 5}))), (Some(json!(5)), Some(json!(1))));
    assert_eq!(counts(&job(json!({"parallelism": 3}))), (None, Some(json!(3))), "a work queue: no completions");
    assert_eq!(counts(&job(json!({"parallelism": 0}))), (None, Some(json!(0))));
    assert_eq!(counts(&job(json!({"completions": 0, "parallelism": 0}))), (Some(json!(0)), Some(json!(0))));
    let per_index = job(json!({"completionMode": "Indexed", "completions": 3, "backoffLimitPerIndex": 1}));
    assert_eq!(per_index["backoffLimit"], i32::MAX, "no global limit");
    assert_eq!(per_index["completionMode"], "Indexed");
    let policy = job(json!({"podFailurePolicy": {"rules": [{"action": "Ignore",
        "onPodConditions": [{"type": "DisruptionTarget"}, {"type": "Custom", "status": "False"}]},
        {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}}));
    assert_eq!(policy["podReplacementPolicy"], "Failed", "a pod failure policy needs pods that have failed");
    assert_eq!(
        policy["podFailurePolicy"]["rules"][0]["onPodConditions"],
        json!([{"type": "DisruptionTarget", "status": "True"}, {"type": "Custom", "status": "False"}])
    );
    let explicit = job(json!({"backoffLimit": 0, "suspend": true, "manualSelector": true,
        "podReplacementPolicy": "TerminatingOrFailed", "completionMode": "NonIndexed"}));
    for (field, value) in [
        ("backoffLimit", json!(0)),
        ("suspend", json!(true)),
        ("manualSelector", json!(true)),
        ("podReplacementPolicy", json!("TerminatingOrFailed")),
    ] {
        assert_eq!(explicit[field], value, "{field}");
    }
}

#[test]
fn a_cron_job_gets_its_own_defaults_and_its_job_templates_pods_not_a_jobs() {
    let mut pod_template = app_template();
    pod_template["spec"]["restartPolicy"] = json!("OnFailure");
    let spec = spec_of(
        "batch",
        "CronJob",
        json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": pod_template,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}}}),
    );
    let mut defaulted_pods = defaulted_template();
    defaulted_pods["spec"]["restartPolicy"] = json!("OnFailure");
    assert_eq!(
        spec,
        json!({"schedule": "*/5 * * * *", "concurrencyPolicy": "Allow", "suspend": false,
            "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": defaulted_pods, "podFailurePolicy": {"rules": [{"action": "Ignore",
                "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]}}}})
    );
    let explicit = spec_of(
        "batch",
        "CronJob",
        json!({"concurrencyPolicy": "Forbid", "suspend": true, "successfulJobsHistoryLimit": 0,
            "failedJobsHistoryLimit": 0}),
    );
    assert_eq!((&explicit["concurrencyPolicy"], &explicit["suspend"]), (&json!("Forbid"), &json!(true)));
    assert_eq!((&explicit["successfulJobsHistoryLimit"], &explicit["failedJobsHistoryLimit"]), (&json!(0), &json!(0)));
}

#[test]
fn a_replication_controller_selects_and_is_labelled_by_its_template() {
    let controller = defaulted(
        "",
        "ReplicationController",
        json!({"metadata": {"name": "x"}, "spec": {"template": app_template()}}),
    );
    assert_eq!(
        controller,
        json!({"metadata": {"name": "x", "labels": {"app": "web"}},
            "spec": {"replicas": 1, "selector": {"app": "web"}, "template": defaulted_template()}})
    );
    let explicit = defaulted(
        "",
        "ReplicationController",
        json!({"metadata": {"labels": {"team": "a"}}, "spec": {"replicas": 0, "selector": {"app": "web", "tier": "x"},
            "template": app_template()}}),
    );
    assert_eq!(explicit["metadata"]["labels"], json!({"team": "a"}));
    assert_eq!(explicit["spec"]["selector"], json!({"app": "web", "tier": "x"}));
    assert_eq!(explicit["spec"]["replicas"], 0);
    let empty_selector =
        defaulted("", "ReplicationController", json!({"spec": {"selector": {}, "template": app_template()}}));
    assert_eq!(empty_selector["spec"]["selector"], json!({"app": "web"}), "an empty selector is no selector");
    let templateless = defaulted("", "ReplicationController", json!({"metadata": {"name": "x"}, "spec": {}}));
    assert_eq!(templateless, json!({"metadata": {"name": "x"}, "spec": {"replicas": 1}}), "its template is a pointer");
}

#[test]
fn defaulting_the_workloads_twice_changes_nothing() {
    for (group, kind, spec) in [
        ("apps", "DaemonSet", json!({"template": app_template()})),
        ("apps", "StatefulSet", json!({"template": app_template(), "volumeClaimTemplates": [{"spec": {}}]})),
        ("batch", "Job", json!({"template": app_template(), "podFailurePolicy": {"rules": []}})),
        ("batch", "CronJob", json!({"jobTemplate": {"spec": {"template": app_template()}}})),
        ("", "ReplicationController", json!({"template": app_template()})),
    ] {
        let once = defaulted(group, kind, json!({"metadata": {"name": "x"}, "spec": spec}));
        assert_eq!(defaulted(group, kind, once.clone()), once, "{kind}");
    }
}

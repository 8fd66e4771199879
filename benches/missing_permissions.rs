//! How long the pending-permission computation takes at scale: 1,000 Roles holding 10,000 rules bound to the
//! installing ServiceAccount, against content of 500 objects (with Roles and bindings among them). The goal is under
//! 50 ms on one core; the computation is single-threaded.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // benchmark set-up fails loudly by design

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use olmv2::rbac::{missing_permissions, required_permissions, KindIndex, RbacSnapshot, UserInfo};
use serde_json::{json, Value};

const NAMESPACES: usize = 100;
const ROLES: usize = 1_000;
const RULES_PER_ROLE: usize = 10;
const OBJECTS: usize = 500;
const RESOURCES: [(&str, &str); 6] =
    [("", "configmaps"), ("", "secrets"), ("", "services"), ("apps", "deployments"), ("batch", "jobs"), ("", "pods")];

fn snapshot() -> RbacSnapshot {
    let mut roles = Vec::new();
    let mut bindings = Vec::new();
    for index in 0..ROLES {
        let namespace = format!("ns-{}", index % NAMESPACES);
        let rules: Vec<Value> = (0..RULES_PER_ROLE)
            .map(|rule| {
                let (group, resource) = RESOURCES[(index + rule) % RESOURCES.len()];
                // Mostly narrow rules, so that few of them cover the content and most must be checked.
                json!({"apiGroups": [group], "resources": [resource], "verbs": ["get", "list"], "resourceNames": [format!("held-{rule}")]})
            })
            .collect();
        roles.push(
            serde_json::from_value::<Role>(
                json!({"metadata": {"name": format!("role-{index}"), "namespace": namespace}, "rules": rules}),
            )
            .unwrap(),
        );
        bindings.push(
            serde_json::from_value::<RoleBinding>(json!({
                "metadata": {"name": format!("binding-{index}"), "namespace": namespace},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("role-{index}")},
                "subjects": [{"kind": "ServiceAccount", "name": "installer", "namespace": "olm"}]
            }))
            .unwrap(),
        );
    }
    RbacSnapshot::new(&roles, &[], bindings, vec![])
}

fn content() -> Vec<Value> {
    (0..OBJECTS)
        .map(|index| {
            let namespace = format!("ns-{}", index % NAMESPACES);
            match index % 10 {
                0 => json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": format!("operator-{index}"), "namespace": namespace},
                    "rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list", "watch"]}]}),
                1 => json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": format!("operator-{index}"), "namespace": namespace},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("operator-{}", index - 1)},
                    "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}]}),
                2 | 3 => json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": format!("operator-{index}"), "namespace": namespace}}),
                4 | 5 => json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("operator-{index}"), "namespace": namespace}}),
                _ => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": format!("operator-{index}"), "namespace": namespace}}),
            }
        })
        .collect()
}

fn pending_permissions(kinds: &KindIndex, snapshot: &RbacSnapshot, objects: &[Value], user: &UserInfo) -> usize {
    let required = required_permissions(objects, kinds, &snapshot.roles).expect("required permissions");
    missing_permissions(&required, snapshot, user).permissions.len()
}

fn bench(c: &mut Criterion) {
    let kinds = KindIndex::kubernetes();
    let snapshot = snapshot();
    let objects = content();
    let user = UserInfo::service_account("olm", "installer");
    let pending = pending_permissions(&kinds, &snapshot, &objects, &user);
    println!("{ROLES} Roles, {} held rules, {OBJECTS} objects: {pending} pending permissions", ROLES * RULES_PER_ROLE);

    c.bench_function("missing permissions: 1,000 Roles, 10,000 held rules, 500 objects", |b| {
        b.iter(|| pending_permissions(black_box(&kinds), black_box(&snapshot), black_box(&objects), black_box(&user)))
    });

    let mut samples: Vec<Duration> = (0..30)
        .map(|_| {
            let start = Instant::now();
            black_box(pending_permissions(&kinds, &snapshot, &objects, &user));
            start.elapsed()
        })
        .collect();
    samples.sort();
    let median = samples[samples.len() / 2];
    let verdict = if median < Duration::from_millis(50) { "meets" } else { "misses" };
    println!("median of 30 runs: {:.2} ms ({verdict} the goal of under 50 ms)", median.as_secs_f64() * 1e3);
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The defaults of pod specs, shared by Pods and the pod templates of workloads (`workloads`): kubernetes'
//! `SetDefaults_PodSpec`, `_Container`, `_Volume` and the volume sources', `_Probe`, `_HTTPGetAction` and
//! `_ObjectFieldSelector`, the `+default` markers of ports, gRPC probes and in-tree volumes; `SetDefaults_Pod` on top
//! for Pods alone (templates never get it); and the v1 conversion that keeps `serviceAccount` an alias of
//! `serviceAccountName`.

use serde_json::{json, Value};

use super::{child, existing, items, set_if_absent, set_if_zero, storage};

/// A Pod's defaults.
pub fn pod(object: &mut Value) {
    let Some(spec) = child(object, &["spec"]) else { return };
    pod_only(spec);
    pod_spec(spec);
}

/// The defaults of the pod template in a workload's `spec`.
pub fn template(workload_spec: &mut Value) {
    if let Some(spec) = child(workload_spec, &["template", "spec"]) {
        pod_spec(spec);
    }
}

/// `SetDefaults_Pod`: requests taken from limits, service links, and host ports on the host network.
fn pod_only(spec: &mut Value) {
    let host_network = spec["hostNetwork"] == true;
    for key in ["initContainers", "containers"] {
        for container in items(spec, key) {
            requests_from_limits(container);
            if host_network {
                for port in items(container, "ports") {
                    let number = port["containerPort"].clone();
                    set_if_zero(port, "hostPort", number);
                }
            }
        }
    }
    set_if_absent(spec, "enableServiceLinks", json!(true));
}

/// Every resource with a limit and no request is requested at its limit.
fn requests_from_limits(container: &mut Value) {
    let Some(limits) = container["resources"]["limits"].as_object().filter(|l| !l.is_empty()).cloned() else {
        return;
    };
    if let Some(requests) = child(container, &["resources", "requests"]) {
        for (resource, quantity) in limits {
            set_if_absent(requests, &resource, quantity);
        }
    }
}

/// `SetDefaults_PodSpec` and the defaults of what the spec holds.
fn pod_spec(spec: &mut Value) {
    set_if_zero(spec, "dnsPolicy", json!("ClusterFirst"));
    set_if_zero(spec, "restartPolicy", json!("Always"));
    set_if_absent(spec, "securityContext", json!({}));
    set_if_absent(spec, "terminationGracePeriodSeconds", json!(30));
    set_if_zero(spec, "schedulerName", json!("default-scheduler"));
    // v1's `serviceAccount` fills an empty `serviceAccountName`, and always reads back as it.
    let account = [&spec["serviceAccountName"], &spec["serviceAccount"]]
        .into_iter()
        .find_map(|name| name.as_str().filter(|n| !n.is_empty()))
        .map(str::to_owned);
    if let (Some(account), Some(map)) = (account, spec.as_object_mut()) {
        map.insert("serviceAccountName".into(), json!(account));
        map.insert("serviceAccount".into(), json!(account));
    }
    for volume in items(spec, "volumes") {
        self::volume(volume);
    }
    for key in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(spec, key) {
            self::container(container);
        }
    }
}

/// `SetDefaults_Volume` (a volume without a source is an emptyDir) and the defaults of its source.
fn volume(volume: &mut Value) {
    let has_source = volume.as_object().is_some_and(|v| v.iter().any(|(key, value)| key != "name" && !value.is_null()));
    if !has_source {
        set_if_absent(volume, "emptyDir", json!({}));
    }
    storage::in_tree_sources(volume);
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = existing(volume, &[source]) {
            set_if_absent(source, "defaultMode", json!(0o644));
        }
    }
    if let Some(downward_api) = existing(volume, &["downwardAPI"]) {
        field_refs(downward_api);
    }
    if let Some(projected) = existing(volume, &["projected"]) {
        for source in items(projected, "sources") {
            if let Some(downward_api) = existing(source, &["downwardAPI"]) {
                field_refs(downward_api);
            }
            if let Some(token) = existing(source, &["serviceAccountToken"]) {
                set_if_absent(token, "expirationSeconds", json!(3600));
            }
        }
    }
    if let Some(claim) = existing(volume, &["ephemeral", "volumeClaimTemplate", "spec"]) {
        storage::claim_spec(claim);
    }
}

/// The field references of a downward API source name their API version.
fn field_refs(downward_api: &mut Value) {
    for item in items(downward_api, "items") {
        if let Some(field_ref) = existing(item, &["fieldRef"]) {
            set_if_zero(field_ref, "apiVersion", json!("v1"));
        }
    }
}

/// `SetDefaults_Container` and the defaults of its ports, environment, probes and lifecycle hooks.
fn container(container: &mut Value) {
    let policy = if pulls_latest(container["image"].as_str().unwrap_or_default()) { "Always" } else { "IfNotPresent" };
    set_if_zero(container, "imagePullPolicy", json!(policy));
    set_if_zero(container, "terminationMessagePath", json!("/dev/termination-log"));
    set_if_zero(container, "terminationMessagePolicy", json!("File"));
    for port in items(container, "ports") {
        set_if_zero(port, "protocol", json!("TCP"));
    }
    for variable in items(container, "env") {
        if let Some(field_ref) = existing(variable, &["valueFrom", "fieldRef"]) {
            set_if_zero(field_ref, "apiVersion", json!("v1"));
        }
    }
    for key in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = existing(container, &[key]) {
            set_if_zero(probe, "timeoutSeconds", json!(1));
            set_if_zero(probe, "periodSeconds", json!(10));
            set_if_zero(probe, "successThreshold", json!(1));
            set_if_zero(probe, "failureThreshold", json!(3));
            if let Some(action) = existing(probe, &["httpGet"]) {
                http_get(action);
            }
            if let Some(grpc) = existing(probe, &["grpc"]) {
                set_if_absent(grpc, "service", json!(""));
            }
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(action) = existing(container, &["lifecycle", hook, "httpGet"]) {
            http_get(action);
        }
    }
}

fn http_get(action: &mut Value) {
    set_if_zero(action, "path", json!("/"));
    set_if_zero(action, "scheme", json!("HTTP"));
}

/// Whether an image reference pulls the `latest` tag: it names that tag, or neither a tag nor a digest. A reference
/// that does not parse counts as another tag, as kube ignores the parse error there.
fn pulls_latest(image: &str) -> bool {
    let (name, digest) = match image.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (image, None),
    };
    if digest.is_some_and(|d| !valid_digest(d)) || name.len() > 255 {
        return false;
    }
    let last_component = name.rfind('/').map_or(0, |slash| slash + 1);
    let (repository, tag) = match name[last_component..].rfind(':') {
        Some(colon) => (&name[..last_component + colon], Some(&name[last_component + colon + 1..])),
        None => (name, None),
    };
    if !valid_repository(repository) {
        return false;
    }
    match tag {
        Some(tag) => valid_tag(tag) && tag == "latest",
        None => digest.is_none(),
    }
}

/// `[domain/]path`: the first component is a registry when it has a `.` or `:`, is `localhost` or is not lowercase,
/// as the docker reference library splits it; path components are lowercase.
fn valid_repository(repository: &str) -> bool {
    let mut components: Vec<&str> = repository.split('/').collect();
    if components.len() > 1 {
        let first = components[0];
        if first.contains(['.', ':']) || first == "localhost" || first.to_lowercase() != first {
            if !valid_domain(first) {
                return false;
            }
            components.remove(0);
        }
    }
    components.iter().all(|c| valid_path_component(c))
}

fn valid_domain(domain: &str) -> bool {
    let valid_port = |port: &str| !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(bracketed) = domain.strip_prefix('[') {
        let Some((address, after)) = bracketed.split_once(']') else { return false };
        return address.parse::<std::net::Ipv6Addr>().is_ok()
            && (after.is_empty() || after.strip_prefix(':').is_some_and(valid_port));
    }
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    port.is_none_or(valid_port)
        && !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Lowercase letters and digits, separated by `.`, `_`, `__` or dashes.
fn valid_path_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !bytes.first().is_some_and(alnum) || !bytes.last().is_some_and(alnum) {
        return false;
    }
    let mut separator = String::new();
    for &byte in bytes {
        if alnum(&byte) {
            if !matches!(separator.as_str(), "" | "." | "_" | "__") && !separator.bytes().all(|b| b == b'-') {
                return false;
            }
            separator.clear();
        } else {
            separator.push(byte as char);
        }
    }
    true
}

fn valid_tag(tag: &str) -> bool {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    tag.len() <= 128 && tag.bytes().next().is_some_and(word) && tag.bytes().all(|b| word(b) || b == b'.' || b == b'-')
}

/// The digests the docker reference library accepts: a registered algorithm and its length of lowercase hex.
fn valid_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else { return false };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    hex.len() == length && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests;

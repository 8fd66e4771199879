//! The Service storage's handling of interlinked spec fields, pure over JSON: values allocated before and left out
//! of a write are kept (`patchAllocatedValues`), `clusterIP` and `clusterIPs` are kept in step
//! (`normalizeClusterIPs`), IP family fields are inferred for this single-stack IPv4 cluster (`initIPFamilyFields`),
//! fields of the old type go on a type change (`dropTypeDependentFields`), and an update's cluster IPs are checked
//! (`validateUpgradeDowngradeClusterIPs`).

use serde_json::{json, Value};

use crate::status::{error, ErrorType, FieldError};

pub(super) fn strings(spec: &Value, key: &str) -> Vec<String> {
    spec[key].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_owned).collect()
}

fn text<'a>(spec: &'a Value, key: &str) -> &'a str {
    spec[key].as_str().unwrap_or_default()
}

/// A list of strings as Go's `%#v` prints it in field errors.
pub(super) fn go_strings(list: &[String]) -> String {
    if list.is_empty() {
        return "[]string(nil)".into();
    }
    let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

pub(super) fn needs_cluster_ip(spec: &Value) -> bool {
    text(spec, "type") != "ExternalName"
}

pub(super) fn needs_node_ports(spec: &Value) -> bool {
    matches!(text(spec, "type"), "NodePort" | "LoadBalancer")
}

pub(super) fn needs_health_check_port(spec: &Value) -> bool {
    text(spec, "type") == "LoadBalancer" && text(spec, "externalTrafficPolicy") == "Local"
}

pub(super) fn node_port(port: &Value) -> u16 {
    port["nodePort"].as_u64().and_then(|p| u16::try_from(p).ok()).unwrap_or(0)
}

fn remove(spec: &mut Value, key: &str) {
    if let Some(map) = spec.as_object_mut() {
        map.remove(key);
    }
}

/// Allocated values a write leaves out are taken from the stored Service, so that sending the same manifest again
/// works: the cluster IPs, node ports (by port name) and the health check node port.
pub(super) fn patch_allocated_values(spec: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && needs_cluster_ip(spec) {
        if text(spec, "clusterIP").is_empty() && !text(old, "clusterIP").is_empty() {
            spec["clusterIP"] = old["clusterIP"].clone();
        }
        if strings(spec, "clusterIPs").is_empty() && !strings(old, "clusterIPs").is_empty() {
            spec["clusterIPs"] = old["clusterIPs"].clone();
        }
    }
    if needs_node_ports(old) && needs_node_ports(spec) {
        let used = |spec: &Value| -> Vec<u16> {
            spec["ports"].as_array().into_iter().flatten().map(node_port).filter(|p| *p != 0).collect()
        };
        let new_ports = used(spec);
        // Ports both keep cannot be handed to another port.
        let kept: Vec<u16> = used(old).into_iter().filter(|p| new_ports.contains(p)).collect();
        let by_name: Vec<(String, u16)> = old["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| (p["name"].as_str().unwrap_or_default().to_owned(), node_port(p)))
            .collect();
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            if node_port(port) != 0 {
                continue;
            }
            let name = port["name"].as_str().unwrap_or_default();
            // The last old port of that name wins, as a Go map built in order would have it.
            if let Some((_, previous)) = by_name.iter().rev().find(|(n, _)| n == name) {
                if *previous != 0 && !kept.contains(previous) {
                    port["nodePort"] = json!(previous);
                }
            }
        }
    }
    if needs_health_check_port(old)
        && needs_health_check_port(spec)
        && spec["healthCheckNodePort"].as_u64().unwrap_or(0) == 0
    {
        spec["healthCheckNodePort"] = old["healthCheckNodePort"].clone();
    }
}

/// `clusterIPs` follows `clusterIP` for clients that only know the singular field.
pub(super) fn normalize_cluster_ips(spec: &mut Value, old: Option<&Value>) {
    let cluster_ip = text(spec, "clusterIP").to_owned();
    let cluster_ips = strings(spec, "clusterIPs");
    let Some(old) = old else {
        if !cluster_ip.is_empty() && cluster_ips.is_empty() {
            spec["clusterIPs"] = json!([cluster_ip]);
        }
        return;
    };
    let old_ip = text(old, "clusterIP");
    let old_ips = strings(old, "clusterIPs");
    if !old_ips.is_empty() && cluster_ips.is_empty() && old_ip == cluster_ip {
        spec["clusterIPs"] = json!(old_ips);
    }
    let same_ips = strings(spec, "clusterIPs") == old_ips;
    if old_ip != cluster_ip && same_ips {
        if cluster_ip.is_empty() {
            remove(spec, "clusterIPs");
        } else {
            spec["clusterIPs"] = json!([cluster_ip]);
        }
    }
}

/// Fills `ipFamilyPolicy` and `ipFamilies` as kube does on a cluster whose only service family is IPv4, after
/// checking the cluster IP fields; the errors are what kube refuses before allocating.
pub(super) fn init_ip_families(spec: &mut Value, old: Option<&Value>) -> Vec<FieldError> {
    if !needs_cluster_ip(spec) {
        return Vec::new();
    }
    let headless_selectorless =
        text(spec, "clusterIP") == "None" && spec["selector"].as_object().is_none_or(|s| s.is_empty());
    if spec["ipFamilyPolicy"].is_null() {
        spec["ipFamilyPolicy"] = match old.map(|o| &o["ipFamilyPolicy"]).filter(|p| p.is_string()) {
            Some(previous) => previous.clone(),
            // Headless Services without a selector may list endpoints of both families.
            None if headless_selectorless => json!("RequireDualStack"),
            None => json!("SingleStack"),
        };
    }
    let errors = check_cluster_ip_fields(spec);
    if !errors.is_empty() {
        return errors;
    }
    let policy = text(spec, "ipFamilyPolicy").to_owned();
    let cluster_ips = strings(spec, "clusterIPs");
    let mut families = strings(spec, "ipFamilies");
    let mut errors = Vec::new();
    if policy == "SingleStack" {
        for (count, what) in [(cluster_ips.len(), "cluster IPs"), (families.len(), "IP families")] {
            if count == 2 {
                errors.push(error(
                    "spec.ipFamilyPolicy",
                    ErrorType::Invalid,
                    format!("\"SingleStack\": must be 'RequireDualStack' or 'PreferDualStack' when multiple {what} are specified"),
                ));
            }
        }
    }
    for (index, ip) in cluster_ips.iter().enumerate().take_while(|(_, ip)| *ip != "None") {
        if index >= families.len() {
            if ip.parse::<std::net::Ipv4Addr>().is_ok() {
                families.push("IPv4".into());
            } else {
                errors.push(error(
                    &format!("spec.clusterIPs[{index}]"),
                    ErrorType::Invalid,
                    format!("{}: IPv6 is not configured on this cluster", go_strings(&cluster_ips)),
                ));
            }
        }
    }
    if !errors.is_empty() {
        return errors;
    }
    if headless_selectorless {
        if families.is_empty() {
            families.push("IPv4".into());
        }
        if families.len() < 2 && policy != "SingleStack" {
            let other = if families[0] == "IPv4" { "IPv6" } else { "IPv4" };
            families.push(other.into());
        }
        spec["ipFamilies"] = json!(families);
        return Vec::new();
    }
    if policy == "RequireDualStack" {
        errors.push(error(
            "spec.ipFamilyPolicy",
            ErrorType::Invalid,
            "\"RequireDualStack\": this cluster is not configured for dual-stack services",
        ));
    }
    for (index, family) in families.iter().enumerate().filter(|(_, f)| *f != "IPv4") {
        errors.push(error(
            &format!("spec.ipFamilies[{index}]"),
            ErrorType::Invalid,
            format!("{family:?}: not configured on this cluster"),
        ));
    }
    if errors.is_empty() {
        if families.is_empty() {
            families.push("IPv4".into());
        }
        spec["ipFamilies"] = json!(families);
    }
    errors
}

/// `ValidateServiceClusterIPsRelatedFields`, which kube runs before allocating.
fn check_cluster_ip_fields(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let cluster_ip = text(spec, "clusterIP");
    let cluster_ips = strings(spec, "clusterIPs");
    if !cluster_ip.is_empty() {
        match cluster_ips.first() {
            None => errors.push(error("spec.clusterIPs", ErrorType::Required, "")),
            Some(first) if first != cluster_ip => errors.push(error(
                "spec.clusterIPs",
                ErrorType::Invalid,
                format!("{}: first value must match `clusterIP`", go_strings(&cluster_ips)),
            )),
            Some(_) => {}
        }
    } else if !cluster_ips.is_empty() {
        errors.push(error(
            "spec.clusterIPs",
            ErrorType::Invalid,
            format!("{}: must be empty when `clusterIP` is not specified", go_strings(&cluster_ips)),
        ));
    }
    let mut seen = Vec::new();
    for (index, family) in strings(spec, "ipFamilies").iter().enumerate() {
        let field = format!("spec.ipFamilies[{index}]");
        if !matches!(family.as_str(), "IPv4" | "IPv6") {
            errors.push(error(
                &field,
                ErrorType::NotSupported,
                format!("{family:?}: supported values: \"IPv4\", \"IPv6\""),
            ));
        }
        if seen.contains(family) {
            errors.push(error(&field, ErrorType::Duplicate, format!("{family:?}")));
        }
        seen.push(family.clone());
    }
    if let Some(policy) = spec["ipFamilyPolicy"].as_str() {
        if !matches!(policy, "PreferDualStack" | "RequireDualStack" | "SingleStack") {
            errors.push(error(
                "spec.ipFamilyPolicy",
                ErrorType::NotSupported,
                format!("{policy:?}: supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""),
            ));
        }
    }
    for (index, ip) in cluster_ips.iter().enumerate() {
        if index == 0 && ip == "None" {
            if cluster_ips.len() > 1 {
                errors.push(error(
                    "spec.clusterIPs",
                    ErrorType::Invalid,
                    format!("{}: 'None' must be the first and only value", go_strings(&cluster_ips)),
                ));
            }
            continue;
        }
        if ip.parse::<std::net::IpAddr>().is_err() {
            errors.push(error(
                &format!("spec.clusterIPs[{index}]"),
                ErrorType::Invalid,
                format!("{ip:?}: must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
            ));
        }
    }
    if cluster_ips.len() > 2 {
        errors.push(error(
            "spec.clusterIPs",
            ErrorType::Invalid,
            format!("{}: may only hold up to 2 values", go_strings(&cluster_ips)),
        ));
    }
    errors
}

/// `dropTypeDependentFields`: on an update to a type that no longer uses them, the cluster IP fields, node ports,
/// `allocateLoadBalancerNodePorts` and `externalTrafficPolicy` go, unless the write changed them itself (validation
/// then has its say).
pub(super) fn drop_type_dependent_fields(spec: &mut Value, old: &Value) {
    if needs_cluster_ip(old) && !needs_cluster_ip(spec) {
        if text(spec, "clusterIP") == text(old, "clusterIP")
            && strings(spec, "clusterIPs") == strings(old, "clusterIPs")
        {
            remove(spec, "clusterIP");
            remove(spec, "clusterIPs");
        }
        for key in ["ipFamilies", "ipFamilyPolicy"] {
            if spec[key] == old[key] {
                remove(spec, key);
            }
        }
    }
    let node_ports = |spec: &Value| -> Vec<u16> {
        spec["ports"].as_array().into_iter().flatten().map(node_port).filter(|p| *p != 0).collect()
    };
    let old_node_ports = node_ports(old);
    if needs_node_ports(old) && !needs_node_ports(spec) && node_ports(spec).iter().all(|p| old_node_ports.contains(p)) {
        for port in spec["ports"].as_array_mut().into_iter().flatten() {
            if let Some(map) = port.as_object_mut() {
                map.remove("nodePort");
            }
        }
    }
    if needs_health_check_port(old)
        && !needs_health_check_port(spec)
        && spec["healthCheckNodePort"] == old["healthCheckNodePort"]
    {
        remove(spec, "healthCheckNodePort");
    }
    let was_load_balancer = text(old, "type") == "LoadBalancer";
    if was_load_balancer && text(spec, "type") != "LoadBalancer" {
        let allocate = &spec["allocateLoadBalancerNodePorts"];
        if allocate.is_boolean() && *allocate == old["allocateLoadBalancerNodePorts"] {
            remove(spec, "allocateLoadBalancerNodePorts");
        }
        if spec["loadBalancerClass"] == old["loadBalancerClass"] {
            remove(spec, "loadBalancerClass");
        }
    }
    if needs_node_ports(old) && !needs_node_ports(spec) && spec["externalTrafficPolicy"] == old["externalTrafficPolicy"]
    {
        remove(spec, "externalTrafficPolicy");
    }
}

/// `validateUpgradeDowngradeClusterIPs` for one family: an update keeps its cluster IPs.
pub fn validate_update(spec: &Value, old: &Value) -> Vec<FieldError> {
    if !needs_cluster_ip(spec) || !needs_cluster_ip(old) {
        return Vec::new();
    }
    let new_ips = strings(spec, "clusterIPs");
    let old_ips = strings(old, "clusterIPs");
    let headless = |ips: &[String]| ips.len() == 1 && ips[0] == "None";
    if headless(&new_ips) && headless(&old_ips) {
        return Vec::new();
    }
    let changed = |index: usize| {
        error(
            &format!("spec.clusterIPs[{index}]"),
            ErrorType::Invalid,
            format!("{}: may not change once set", go_strings(&new_ips)),
        )
    };
    let mut errors = Vec::new();
    if new_ips.len() == old_ips.len() {
        errors.extend(old_ips.iter().zip(&new_ips).enumerate().filter(|(_, (a, b))| a != b).map(|(i, _)| changed(i)));
    } else if new_ips.is_empty() {
        errors.push(error(
            "spec.clusterIPs[0]",
            ErrorType::Invalid,
            format!("{}: primary clusterIP can not be unset", go_strings(&new_ips)),
        ));
    } else if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
        errors.push(changed(0));
    }
    errors
}

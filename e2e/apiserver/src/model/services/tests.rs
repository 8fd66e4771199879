//! The Service storage's field handling and allocation against kube-apiserver's behaviour on a single-stack IPv4
//! cluster: what is filled in, kept, dropped and refused, with kube's messages.

use std::net::Ipv4Addr;

use serde_json::{json, Value};

use super::fields::{drop_type_dependent_fields, init_ip_families, normalize_cluster_ips, patch_allocated_values};
use super::{validate_update, Allocations, Reservation};
use crate::model::resources::Resources;
use crate::status::ApiError;
use crate::storage::store::{ResourceId, Store};

fn messages(errors: &[crate::status::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn cluster_ips_follow_cluster_ip() {
    let mut created = json!({"clusterIP": "10.96.0.10"});
    normalize_cluster_ips(&mut created, None);
    assert_eq!(created["clusterIPs"], json!(["10.96.0.10"]));
    let old = json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]});
    let mut left_out = json!({"clusterIP": "10.96.0.10"});
    normalize_cluster_ips(&mut left_out, Some(&old));
    assert_eq!(left_out["clusterIPs"], json!(["10.96.0.10"]), "an old client's update keeps the plural");
    let mut changed = json!({"clusterIP": "10.96.0.11", "clusterIPs": ["10.96.0.10"]});
    normalize_cluster_ips(&mut changed, Some(&old));
    assert_eq!(changed["clusterIPs"], json!(["10.96.0.11"]), "for validation to refuse");
}

#[test]
fn allocated_values_a_write_leaves_out_are_kept() {
    let old = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000,
        "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
        "ports": [{"name": "http", "port": 80, "nodePort": 30080}, {"name": "https", "port": 443, "nodePort": 30443}]});
    let mut sent = json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local",
        "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443, "nodePort": 30080}, {"name": "new", "port": 8080}]});
    patch_allocated_values(&mut sent, &old);
    assert_eq!((&sent["clusterIP"], &sent["clusterIPs"]), (&json!("10.96.0.10"), &json!(["10.96.0.10"])));
    assert_eq!(sent["healthCheckNodePort"], 31000);
    let node_ports: Vec<&Value> = sent["ports"].as_array().expect("ports").iter().map(|p| &p["nodePort"]).collect();
    assert_eq!(node_ports, [&Value::Null, &json!(30080), &Value::Null], "30080 is taken by another port of the write");
    let mut external = json!({"type": "ExternalName"});
    patch_allocated_values(&mut external, &old);
    assert!(external.get("clusterIP").is_none());
}

#[test]
fn ip_families_for_a_single_stack_cluster() {
    let families = |mut spec: Value| {
        let errors = messages(&init_ip_families(&mut spec, None));
        (spec["ipFamilyPolicy"].clone(), spec["ipFamilies"].clone(), errors)
    };
    let none: Vec<String> = Vec::new();
    assert_eq!(families(json!({"type": "ClusterIP"})), (json!("SingleStack"), json!(["IPv4"]), none.clone()));
    assert_eq!(
        families(json!({"clusterIP": "None", "clusterIPs": ["None"], "selector": {"a": "b"}})),
        (json!("SingleStack"), json!(["IPv4"]), none.clone())
    );
    assert_eq!(
        families(json!({"clusterIP": "None", "clusterIPs": ["None"]})),
        (json!("RequireDualStack"), json!(["IPv4", "IPv6"]), none.clone()),
        "headless without a selector may have endpoints of both families"
    );
    assert_eq!(
        families(json!({"ipFamilyPolicy": "PreferDualStack"})),
        (json!("PreferDualStack"), json!(["IPv4"]), none)
    );
    assert_eq!(
        families(json!({"ipFamilyPolicy": "RequireDualStack"})).2,
        ["spec.ipFamilyPolicy: Invalid value: \"RequireDualStack\": this cluster is not configured for dual-stack services"]
    );
    assert_eq!(
        families(json!({"ipFamilies": ["IPv6"]})).2,
        ["spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster"]
    );
    assert_eq!(
        families(json!({"clusterIP": "fd00::1", "clusterIPs": ["fd00::1"]})).2,
        ["spec.clusterIPs[0]: Invalid value: []string{\"fd00::1\"}: IPv6 is not configured on this cluster"]
    );
    assert_eq!(
        families(json!({"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.2"]})).2,
        ["spec.clusterIPs: Invalid value: []string{\"10.96.0.2\"}: first value must match `clusterIP`"]
    );
    assert_eq!(
        families(json!({"clusterIP": "nope", "clusterIPs": ["nope"]})).2,
        ["spec.clusterIPs[0]: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
    );
    assert_eq!(
        families(json!({"ipFamilyPolicy": "Both"})).2,
        ["spec.ipFamilyPolicy: Unsupported value: \"Both\": supported values: \"PreferDualStack\", \"RequireDualStack\", \"SingleStack\""]
    );
    let mut external = json!({"type": "ExternalName"});
    assert!(init_ip_families(&mut external, None).is_empty());
    assert!(external.get("ipFamilyPolicy").is_none());
    let mut updated = json!({"clusterIP": "10.96.0.5", "clusterIPs": ["10.96.0.5"]});
    init_ip_families(&mut updated, Some(&json!({"ipFamilyPolicy": "PreferDualStack"})));
    assert_eq!(updated["ipFamilyPolicy"], "PreferDualStack", "an update keeps the stored policy");
}

#[test]
fn fields_of_the_old_type_go_unless_the_write_changed_them() {
    let old = json!({"type": "LoadBalancer", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "externalTrafficPolicy": "Local", "healthCheckNodePort": 31000,
        "allocateLoadBalancerNodePorts": true, "ports": [{"port": 80, "nodePort": 30080}]});
    let mut to_cluster_ip = old.clone();
    to_cluster_ip["type"] = json!("ClusterIP");
    drop_type_dependent_fields(&mut to_cluster_ip, &old);
    assert_eq!(
        to_cluster_ip,
        json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack", "ports": [{"port": 80}]})
    );
    let mut to_external = old.clone();
    to_external["type"] = json!("ExternalName");
    to_external["ports"][0]["nodePort"] = json!(30081);
    drop_type_dependent_fields(&mut to_external, &old);
    assert!(to_external.get("clusterIP").is_none() && to_external.get("ipFamilies").is_none());
    assert_eq!(to_external["ports"][0]["nodePort"], 30081, "a new node port is the write's own: validation decides");
}

#[test]
fn an_update_keeps_its_cluster_ips() {
    let old = json!({"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"]});
    assert!(validate_update(&old, &old).is_empty());
    let changed = json!({"clusterIP": "10.96.0.50", "clusterIPs": ["10.96.0.50"]});
    assert_eq!(
        messages(&validate_update(&changed, &old)),
        ["spec.clusterIPs[0]: Invalid value: []string{\"10.96.0.50\"}: may not change once set"]
    );
    let headless = json!({"clusterIP": "None", "clusterIPs": ["None"]});
    assert_eq!(messages(&validate_update(&headless, &old)).len(), 1);
    assert!(validate_update(&headless, &headless).is_empty());
    assert!(validate_update(&json!({"type": "ExternalName"}), &old).is_empty());
}

/// What the Service storage works with: the stored Services and the allocations of writes in flight.
struct Storage {
    store: Store,
    allocations: Allocations,
}

fn api() -> Storage {
    Storage { store: Store::new(1000), allocations: Allocations::default() }
}

/// A write of a Service (not of its status) begins.
fn begin_write<'a>(api: &'a Storage, old: Option<&Value>, object: &mut Value) -> Result<Reservation<'a>, ApiError> {
    let services = Resources::default().lookup("", "v1", "services").cloned().expect("services are served");
    api.allocations.begin_write(&api.store, &services, None, old, object)
}

fn service(name: &str, spec: Value) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"}, "spec": spec});
    crate::model::defaults::apply("", "Service", &mut object);
    object
}

/// Prepares a new Service as its storage would and stores it.
fn create(api: &Storage, name: &str, spec: Value) -> Result<Value, ApiError> {
    let mut object = service(name, spec);
    let reservation = begin_write(api, None, &mut object)?;
    let stored = api.store.create(&ResourceId::new("", "services"), object).expect("stored");
    drop(reservation);
    Ok(stored)
}

fn address(service: &Value) -> Ipv4Addr {
    service["spec"]["clusterIP"].as_str().expect("a cluster IP").parse().expect("an address")
}

#[test]
fn cluster_ips_are_allocated_from_the_service_cidr_and_never_shared() {
    let api = api();
    let first = create(&api, "a", json!({"ports": [{"port": 80}]})).expect("created");
    assert_eq!(first["spec"]["clusterIPs"], json!([first["spec"]["clusterIP"]]));
    assert_eq!(
        (&first["spec"]["ipFamilies"], &first["spec"]["ipFamilyPolicy"]),
        (&json!(["IPv4"]), &json!("SingleStack"))
    );
    let mut seen = std::collections::HashSet::new();
    seen.insert(address(&first));
    for index in 0..50 {
        let next = create(&api, &format!("s{index}"), json!({})).expect("created");
        let ip = address(&next);
        let octets = ip.octets();
        assert!(octets[0] == 10 && (96..112).contains(&octets[1]), "{ip} is in 10.96.0.0/12");
        assert!(u32::from(ip) > u32::from(Ipv4Addr::new(10, 96, 1, 0)), "{ip} is above the static band");
        assert!(seen.insert(ip), "{ip} handed out twice");
    }
    let taken = first["spec"]["clusterIP"].as_str().expect("ip").to_owned();
    let refused = create(&api, "again", json!({"clusterIP": taken})).expect_err("taken");
    assert_eq!(
        (refused.code, refused.message),
        (422, format!("Service \"again\" is invalid: spec.clusterIPs: Invalid value: []string{{\"{taken}\"}}: failed to allocate IP {taken}: provided IP is already allocated"))
    );
    let outside = create(&api, "outside", json!({"clusterIP": "192.168.0.1"})).expect_err("out of range");
    assert!(
        outside
            .message
            .ends_with("failed to allocate IP 192.168.0.1: the provided network does not match the current range"),
        "{}",
        outside.message
    );
    let network = create(&api, "network", json!({"clusterIP": "10.96.0.0"})).expect_err("network address");
    assert!(
        network
            .message
            .ends_with("the provided IP (10.96.0.0) is not in the valid range. The range of valid IPs is 10.96.0.0/12"),
        "{}",
        network.message
    );
    let chosen = create(&api, "chosen", json!({"clusterIP": "10.96.0.10"})).expect("a free address in the static band");
    assert_eq!(chosen["spec"]["clusterIPs"], json!(["10.96.0.10"]));
    let headless = create(&api, "headless", json!({"clusterIP": "None", "selector": {"a": "b"}})).expect("created");
    assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
    let external =
        create(&api, "external", json!({"type": "ExternalName", "externalName": "example.com"})).expect("created");
    assert!(external["spec"].get("clusterIP").is_none());
}

#[test]
fn an_address_is_held_while_its_write_is_in_flight_and_free_once_its_service_is_gone() {
    let api = api();
    let mut first = service("first", json!({"clusterIP": "10.96.0.20"}));
    let reservation = begin_write(&api, None, &mut first).expect("allocated");
    let mut second = service("second", json!({"clusterIP": "10.96.0.20"}));
    assert!(begin_write(&api, None, &mut second).is_err(), "held by the first write");
    drop(reservation);
    let mut third = service("third", json!({"clusterIP": "10.96.0.20"}));
    let reservation: Reservation<'_> = begin_write(&api, None, &mut third).expect("released");
    drop(reservation);
    create(&api, "holder", json!({"clusterIP": "10.96.0.20"})).expect("created");
    assert!(create(&api, "other", json!({"clusterIP": "10.96.0.20"})).is_err());
    api.store.delete(&ResourceId::new("", "services"), "default", "holder", None).expect("deleted");
    create(&api, "other", json!({"clusterIP": "10.96.0.20"})).expect("free once its Service is gone");
}

#[test]
fn updates_keep_what_was_allocated() {
    let api = api();
    let stored =
        create(&api, "web", json!({"type": "NodePort", "ports": [{"name": "http", "port": 80}]})).expect("created");
    let mut update = service("web", json!({"type": "NodePort", "ports": [{"name": "http", "port": 80}]}));
    let reservation = begin_write(&api, Some(&stored), &mut update).expect("prepared");
    drop(reservation);
    for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
        assert_eq!(update["spec"][field], stored["spec"][field], "{field}");
    }
    assert_eq!(update["spec"]["ports"][0]["nodePort"], stored["spec"]["ports"][0]["nodePort"]);
    let external = service("ext", json!({"type": "ExternalName", "externalName": "example.com"}));
    let external = api.store.create(&ResourceId::new("", "services"), external).expect("stored");
    let mut to_cluster_ip = service("ext", json!({"type": "ClusterIP"}));
    drop(begin_write(&api, Some(&external), &mut to_cluster_ip).expect("prepared"));
    assert!(to_cluster_ip["spec"]["clusterIP"].as_str().is_some_and(|ip| ip.starts_with("10.")));
}

#[test]
fn node_ports_are_allocated_in_range_shared_by_port_number_and_never_shared_across_services() {
    let api = api();
    let first = create(
        &api,
        "a",
        json!({"type": "NodePort", "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"}, {"name": "web", "port": 80, "nodePort": 30080}]}),
    )
    .expect("created");
    let ports = &first["spec"]["ports"];
    let shared = ports[0]["nodePort"].as_u64().expect("allocated");
    assert!((30000..=32767).contains(&shared));
    assert_eq!(ports[1]["nodePort"], shared, "one node port per port number");
    assert_eq!(ports[2]["nodePort"], 30080);
    let refused =
        create(&api, "b", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]})).expect_err("taken");
    assert_eq!(
        refused.message,
        "Service \"b\" is invalid: spec.ports[0].nodePort: Invalid value: 30080: provided port is already allocated"
    );
    let outside = create(&api, "c", json!({"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}))
        .expect_err("out of range");
    assert!(outside
        .message
        .ends_with("80: provided port is not in the valid range. The range of valid ports is 30000-32767"));
    let balanced =
        create(&api, "lb", json!({"type": "LoadBalancer", "externalTrafficPolicy": "Local", "ports": [{"port": 443}]}))
            .expect("created");
    let health = balanced["spec"]["healthCheckNodePort"].as_u64().expect("a health check port");
    assert_ne!(health, balanced["spec"]["ports"][0]["nodePort"].as_u64().expect("a node port"));
    let unallocated = create(
        &api,
        "lb2",
        json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false, "ports": [{"port": 443}]}),
    )
    .expect("created");
    assert!(unallocated["spec"]["ports"][0].get("nodePort").is_none());
}

#[test]
fn picks_skip_what_is_taken_and_fall_back_to_the_static_band() {
    assert_eq!(super::pick(10, 2, |o| o == 7), Some(7));
    assert_eq!(super::pick(10, 2, |o| o == 1), Some(1), "the static band once the rest is taken");
    assert_eq!(super::pick(10, 2, |_| false), None);
    let mut taken = super::Taken::default();
    taken.addresses.extend((super::STATIC_ADDRESSES..super::ADDRESSES - 2).map(|o| super::NETWORK + 1 + o));
    let address = Ipv4Addr::from(taken.next_address().unwrap_or_else(|_| panic!("a free address")));
    assert!(address >= Ipv4Addr::new(10, 96, 0, 1) && address <= Ipv4Addr::new(10, 96, 1, 0), "{address}");
    let mut ports = super::Taken::default();
    ports.node_ports.extend((30000..=32767).filter(|p| *p != 30001));
    assert_eq!(ports.next_node_port().ok(), Some(30001));
    match ports.next_node_port() {
        Err(super::Failure::Internal(why)) => assert_eq!(why, "failed to allocate a nodePort: range is full"),
        _ => panic!("the range is full"),
    }
}

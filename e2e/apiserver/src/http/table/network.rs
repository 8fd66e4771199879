//! Printers of the networking kinds: Service (type, cluster IP, external IPs or load balancer ingress, ports with
//! node ports, wide selector), Endpoints (the first three addresses) and Ingress (class, hosts, address, ports).

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::core::v1 as core;
use serde_json::{json, Value};

use super::duration::age;
use super::format::{int, items, labels, name, text, with_more};
use super::{age_column, doc, name_column, string, Printer};

pub(super) fn printer(group: &str, kind: &str) -> Option<Printer> {
    let (columns, cells): (fn() -> Vec<Value>, super::Cells) = match (group, kind) {
        ("", "Service") => (service_columns, service),
        ("", "Endpoints") => {
            (|| vec![name_column(), string("Endpoints", 0, doc::<core::Endpoints>("subsets")), age_column()], endpoints)
        }
        ("networking.k8s.io", "Ingress") => (ingress_columns, ingress),
        _ => return None,
    };
    Some(Printer { columns, cells })
}

fn service_columns() -> Vec<Value> {
    let spec = doc::<core::ServiceSpec>;
    vec![
        name_column(),
        string("Type", 0, spec("type")),
        string("Cluster-IP", 0, spec("clusterIP")),
        string("External-IP", 0, spec("externalIPs")),
        string("Port(s)", 0, spec("ports")),
        age_column(),
        string("Selector", 1, spec("selector")),
    ]
}

fn service(o: &Value, now: Timestamp) -> Vec<Value> {
    let spec = &o["spec"];
    // The first of the cluster IPs (`None` for a headless service), `<none>` without any (ExternalName).
    let cluster_ip = items(&spec["clusterIPs"]).first().map_or("<none>", text);
    let ports: Vec<String> = items(&spec["ports"])
        .iter()
        .map(|p| match int(&p["nodePort"]) {
            node_port if node_port > 0 => format!("{}:{node_port}/{}", int(&p["port"]), text(&p["protocol"])),
            _ => format!("{}/{}", int(&p["port"]), text(&p["protocol"])),
        })
        .collect();
    let ports = if ports.is_empty() { "<none>".to_owned() } else { ports.join(",") };
    vec![
        name(o),
        json!(text(&spec["type"])),
        json!(cluster_ip),
        json!(external_ip(o)),
        json!(ports),
        json!(age(&o["metadata"]["creationTimestamp"], now)),
        json!(labels(&spec["selector"])),
    ]
}

/// The addresses of a load balancer's ingress points (IP, else hostname), sorted, each once. kube-apiserver prints
/// them whole: its printers cut them to 16 characters only for non-wide output, which tables never are.
fn load_balancer(status: &Value) -> Vec<String> {
    let addresses: BTreeSet<&str> = items(&status["ingress"])
        .iter()
        .map(|i| if text(&i["ip"]).is_empty() { text(&i["hostname"]) } else { text(&i["ip"]) })
        .filter(|a| !a.is_empty())
        .collect();
    addresses.into_iter().map(str::to_owned).collect()
}

fn external_ip(service: &Value) -> String {
    let spec = &service["spec"];
    let external: Vec<&str> = items(&spec["externalIPs"]).iter().map(text).collect();
    match text(&spec["type"]) {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_owned(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let mut addresses = load_balancer(&service["status"]["loadBalancer"]);
            addresses.extend(external.iter().map(|ip| (*ip).to_owned()));
            if addresses.is_empty() {
                "<pending>".to_owned()
            } else {
                addresses.join(",")
            }
        }
        "ExternalName" => text(&spec["externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// `formatEndpoints`: `ip:port` for each port of each subset (bare IPs for a subset without ports), the first three
/// and how many more.
fn endpoints(o: &Value, now: Timestamp) -> Vec<Value> {
    const SHOWN: usize = 3;
    let subsets = items(&o["subsets"]);
    let cell = if subsets.is_empty() {
        "<none>".to_owned()
    } else {
        let mut list = Vec::new();
        let mut total = 0;
        for subset in subsets {
            let addresses = items(&subset["addresses"]);
            let ports = items(&subset["ports"]);
            if ports.is_empty() {
                total += addresses.len();
                list.extend(addresses.iter().map(|a| text(&a["ip"]).to_owned()));
            }
            for port in ports {
                total += addresses.len();
                list.extend(addresses.iter().map(|a| host_port(text(&a["ip"]), int(&port["port"]))));
            }
        }
        list.truncate(SHOWN);
        with_more(&list, total, SHOWN)
    };
    vec![name(o), json!(cell), json!(age(&o["metadata"]["creationTimestamp"], now))]
}

/// `net.JoinHostPort`: IPv6 addresses in brackets.
fn host_port(host: &str, port: i64) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn ingress_columns() -> Vec<Value> {
    vec![
        name_column(),
        string("Class", 0, String::new()),
        string("Hosts", 0, String::new()),
        string("Address", 0, String::new()),
        string("Ports", 0, String::new()),
        age_column(),
    ]
}

/// `formatHosts`: the hosts of the rules that name one until three are listed (`*` when none does); when rules
/// follow the third, how many: rules, with a host or not, beyond three.
fn hosts(rules: &[Value]) -> String {
    const SHOWN: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    for rule in rules {
        more |= list.len() == SHOWN;
        if !more && !text(&rule["host"]).is_empty() {
            list.push(text(&rule["host"]).to_owned());
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    if more {
        format!("{} + {} more...", list.join(","), rules.len() - SHOWN)
    } else {
        list.join(",")
    }
}

fn ingress(o: &Value, now: Timestamp) -> Vec<Value> {
    let spec = &o["spec"];
    let class = spec["ingressClassName"].as_str().unwrap_or("<none>");
    let ports = if items(&spec["tls"]).is_empty() { "80" } else { "80, 443" };
    vec![
        name(o),
        json!(class),
        json!(hosts(items(&spec["rules"]))),
        json!(load_balancer(&o["status"]["loadBalancer"]).join(",")),
        json!(ports),
        json!(age(&o["metadata"]["creationTimestamp"], now)),
    ]
}

#[cfg(test)]
mod tests {
    use super::super::printed;
    use serde_json::{json, Value};

    const NOW: &str = "2026-03-01T12:00:00Z";

    fn service(spec: Value, status: Value) -> Vec<Value> {
        let object = json!({"metadata": {"name": "web", "creationTimestamp": "2026-03-01T11:55:00Z"}, "spec": spec,
            "status": status});
        printed("", "Service", &object, NOW).1
    }

    #[test]
    fn services_of_each_type() {
        let object = json!({"metadata": {"name": "web"}, "spec": {"type": "ClusterIP"}});
        let (columns, _) = printed("", "Service", &object, NOW);
        let columns: Vec<(&str, &str, u64)> = columns.iter().map(|(n, t, p)| (n.as_str(), t.as_str(), *p)).collect();
        assert_eq!(
            columns,
            [
                ("Name", "string", 0),
                ("Type", "string", 0),
                ("Cluster-IP", "string", 0),
                ("External-IP", "string", 0),
                ("Port(s)", "string", 0),
                ("Age", "string", 0),
                ("Selector", "string", 1)
            ]
        );
        let cluster_ip = service(
            json!({"type": "ClusterIP", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                   "ports": [{"port": 80, "protocol": "TCP", "targetPort": 8080}, {"port": 53, "protocol": "UDP"}],
                   "selector": {"app": "web", "tier": "front"}}),
            json!({}),
        );
        assert_eq!(
            cluster_ip,
            [
                json!("web"),
                json!("ClusterIP"),
                json!("10.96.0.10"),
                json!("<none>"),
                json!("80/TCP,53/UDP"),
                json!("5m"),
                json!("app=web,tier=front")
            ]
        );
        let node_port = service(
            json!({"type": "NodePort", "clusterIPs": ["10.96.0.11"], "externalIPs": ["192.0.2.1", "192.0.2.2"],
                   "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]}),
            json!({}),
        );
        assert_eq!(node_port[2..5], [json!("10.96.0.11"), json!("192.0.2.1,192.0.2.2"), json!("80:30080/TCP")]);
        assert_eq!(node_port[6], json!("<none>"));
        let pending = service(
            json!({"type": "LoadBalancer", "clusterIPs": ["10.96.0.12"], "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]}),
            json!({"loadBalancer": {}}),
        );
        assert_eq!(pending[3..5], [json!("<pending>"), json!("443:31443/TCP")]);
        let balanced = service(
            json!({"type": "LoadBalancer", "clusterIPs": ["10.96.0.12"], "externalIPs": ["192.0.2.9"]}),
            json!({"loadBalancer": {"ingress": [{"hostname": "a-very-long-load-balancer.example.com"}, {"ip": "203.0.113.7"},
                                                {"ip": "203.0.113.7", "hostname": "ignored.example.com"}]}}),
        );
        assert_eq!(
            balanced[3..5],
            [json!("203.0.113.7,a-very-long-load-balancer.example.com,192.0.2.9"), json!("<none>")]
        );
        let external = service(json!({"type": "ExternalName", "externalName": "db.example.com"}), json!({}));
        assert_eq!(external[1..5], [json!("ExternalName"), json!("<none>"), json!("db.example.com"), json!("<none>")]);
        let headless = service(
            json!({"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"],
            "ports": [{"port": 5432, "protocol": "TCP"}], "selector": {"app": "db"}}),
            json!({}),
        );
        assert_eq!(headless[1..5], [json!("ClusterIP"), json!("None"), json!("<none>"), json!("5432/TCP")]);
    }

    fn endpoints(subsets: Value) -> Value {
        printed("", "Endpoints", &json!({"metadata": {"name": "web"}, "subsets": subsets}), NOW).1[1].clone()
    }

    #[test]
    fn endpoints_list_three_addresses() {
        assert_eq!(endpoints(json!(null)), json!("<none>"));
        assert_eq!(endpoints(json!([{"notReadyAddresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}])), json!(""));
        assert_eq!(
            endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}], "ports": [{"port": 80}]}])),
            json!("10.0.0.1:80,[fd00::1]:80")
        );
        assert_eq!(
            endpoints(
                json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
                             {"addresses": [{"ip": "10.0.1.1"}]}])
            ),
            json!("10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more...")
        );
        assert_eq!(endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}]}])), json!("10.0.0.1"));
    }

    fn ingress(spec: Value, status: Value) -> Vec<Value> {
        let object = json!({"metadata": {"name": "web", "creationTimestamp": "2026-02-20T12:00:00Z"}, "spec": spec, "status": status});
        printed("networking.k8s.io", "Ingress", &object, NOW).1
    }

    #[test]
    fn ingresses_hosts_and_ports() {
        let rules = json!([{"host": "a.example.com"}, {"http": {}}, {"host": "b.example.com"}, {"host": "c.example.com"},
                           {"host": "d.example.com"}, {}]);
        let cells = ingress(
            json!({"ingressClassName": "nginx", "rules": rules, "tls": [{"hosts": ["a.example.com"]}]}),
            json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}}),
        );
        assert_eq!(
            cells,
            [
                json!("web"),
                json!("nginx"),
                json!("a.example.com,b.example.com,c.example.com + 3 more..."),
                json!("203.0.113.9,lb.example.com"),
                json!("80, 443"),
                json!("9d")
            ]
        );
        let cells = ingress(json!({"defaultBackend": {"service": {"name": "web", "port": {"number": 80}}}}), json!({}));
        assert_eq!(cells[1..5], [json!("<none>"), json!("*"), json!(""), json!("80")]);
        let three = json!([{"host": "a"}, {"host": "b"}, {"host": "c"}]);
        assert_eq!(ingress(json!({"rules": three}), json!({}))[2], json!("a,b,c"));
    }
}

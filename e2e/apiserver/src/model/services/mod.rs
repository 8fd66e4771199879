//! What kube-apiserver's Service storage (`pkg/registry/core/service/storage`) does to a Service between mutating
//! admission and validation, on a single-stack IPv4 cluster with the service CIDR 10.96.0.0/12 and node ports
//! 30000-32767: the interlinked fields of `services::fields`, then cluster IPs and node ports allocated. Like kube,
//! it picks them at random above a low band kept for explicit requests; an address or port is taken while a stored
//! Service holds it or a write in flight was handed it, and free again once its Service is gone. Explicit requests
//! for a taken or out-of-range one are refused with kube's errors.
//!
//! May import `storage`, `status` and `model`'s resource types.

mod fields;

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use serde_json::{json, Value};

use crate::model::resources::ResourceType;
use crate::status::ApiError;
use crate::status::{error, ErrorType, FieldError};
use crate::storage::store::{ResourceId, Store};
use fields::{go_strings, needs_cluster_ip, needs_health_check_port, needs_node_ports, node_port, strings};

pub use fields::validate_update;

pub const SERVICE_CIDR: &str = "10.96.0.0/12";
const NETWORK: u32 = u32::from_be_bytes([10, 96, 0, 0]);
const ADDRESSES: u32 = 1 << 20;
/// The addresses kube keeps for explicit requests, min(max(16, size/16), 256), counted from the first usable one.
const STATIC_ADDRESSES: u32 = 256;
const NODE_PORTS: (u16, u16) = (30000, 32767);
/// The node ports kept for explicit requests, min(max(16, size/32), 128).
const STATIC_NODE_PORTS: u32 = 86;

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
enum Held {
    Address(u32),
    NodePort(u16),
}

/// The addresses and node ports handed to writes not yet stored: with the stored Services, what is taken.
#[derive(Debug, Default)]
pub struct Allocations {
    held: Mutex<HashSet<Held>>,
}

impl Allocations {
    fn lock(&self) -> MutexGuard<'_, HashSet<Held>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The Service storage's `BeginCreate`/`BeginUpdate` and the update strategy's dropping of fields of the old
    /// type, for a write of `resource` (a no-op for other kinds, and for the status subresource, whose storage has
    /// no such hooks). `store` holds the other Services, whose addresses and ports are taken.
    pub fn begin_write(
        &self,
        store: &Store,
        resource: &ResourceType,
        subresource: Option<&str>,
        old: Option<&Value>,
        object: &mut Value,
    ) -> Result<Reservation<'_>, ApiError> {
        if !resource.group.is_empty() || resource.kind != "Service" || subresource.is_some() {
            return Ok(Reservation::none());
        }
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
        let old_spec = old.map(|o| &o["spec"]);
        let Some(spec) = object.get_mut("spec").filter(|s| s.is_object()) else { return Ok(Reservation::none()) };
        if let Some(old_spec) = old_spec {
            fields::patch_allocated_values(spec, old_spec);
        }
        fields::normalize_cluster_ips(spec, old_spec);
        let errors = fields::init_ip_families(spec, old_spec);
        if !errors.is_empty() {
            return Err(ApiError::invalid("Service", "", &name, &errors));
        }
        let mut reservation = Reservation { allocations: Some(self), held: Vec::new() };
        {
            let mut held = self.lock();
            let mut taken = Taken::of(store, &namespace, &name, &held);
            allocate_cluster_ip(spec, old_spec, &mut taken)
                .and_then(|()| allocate_node_ports(spec, old_spec, &mut taken))
                .map_err(|failure| failure.into_error(&name))?;
            held.extend(taken.claimed.iter().copied());
            reservation.held = taken.claimed;
        }
        if let Some(old_spec) = old_spec {
            fields::drop_type_dependent_fields(spec, old_spec);
        }
        Ok(reservation)
    }
}

/// What one write was handed, held until the write is stored or refused (when this is dropped).
#[must_use]
pub struct Reservation<'a> {
    allocations: Option<&'a Allocations>,
    held: Vec<Held>,
}

impl Reservation<'_> {
    pub fn none() -> Self {
        Self { allocations: None, held: Vec::new() }
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if let Some(allocations) = self.allocations {
            let mut held = allocations.lock();
            for item in &self.held {
                held.remove(item);
            }
        }
    }
}

/// Why an allocation failed: a field error (422) or kube's internal error (500).
enum Failure {
    Field(FieldError),
    Internal(String),
}

impl Failure {
    fn into_error(self, name: &str) -> ApiError {
        match self {
            Self::Field(error) => ApiError::invalid("Service", "", name, &[error]),
            Self::Internal(why) => ApiError::internal(format!("Internal error occurred: {why}")),
        }
    }
}

/// The addresses and node ports of the other Services and of the writes in flight, and what this write claims.
#[derive(Default)]
struct Taken {
    addresses: HashSet<u32>,
    node_ports: HashSet<u16>,
    claimed: Vec<Held>,
}

impl Taken {
    fn of(store: &Store, namespace: &str, name: &str, held: &HashSet<Held>) -> Self {
        let mut taken = Self::default();
        for service in store.all(&ResourceId::new("", "services")) {
            if service["metadata"]["namespace"] == namespace && service["metadata"]["name"] == name {
                continue;
            }
            let spec = &service["spec"];
            let addresses = strings(spec, "clusterIPs").into_iter().filter_map(|ip| ip.parse::<Ipv4Addr>().ok());
            taken.addresses.extend(addresses.map(u32::from));
            taken.node_ports.extend(spec["ports"].as_array().into_iter().flatten().map(node_port));
            taken.node_ports.extend(spec["healthCheckNodePort"].as_u64().and_then(|p| u16::try_from(p).ok()));
        }
        for item in held {
            match *item {
                Held::Address(address) => taken.addresses.insert(address),
                Held::NodePort(port) => taken.node_ports.insert(port),
            };
        }
        taken
    }

    fn claim_address(&mut self, address: u32) -> bool {
        let free = self.addresses.insert(address);
        if free {
            self.claimed.push(Held::Address(address));
        }
        free
    }

    fn claim_node_port(&mut self, port: u16) -> Result<(), &'static str> {
        if port < NODE_PORTS.0 || port > NODE_PORTS.1 {
            return Err("provided port is not in the valid range. The range of valid ports is 30000-32767");
        }
        if !self.node_ports.insert(port) {
            return Err("provided port is already allocated");
        }
        self.claimed.push(Held::NodePort(port));
        Ok(())
    }

    fn next_address(&mut self) -> Result<u32, Failure> {
        // Offsets count from the first usable address: the network and broadcast addresses are never handed out.
        let offset = pick(ADDRESSES - 2, STATIC_ADDRESSES, |o| !self.addresses.contains(&(NETWORK + 1 + o)))
            .ok_or_else(|| Failure::Internal("failed to allocate a serviceIP: range is full".into()))?;
        let address = NETWORK + 1 + offset;
        self.claim_address(address);
        Ok(address)
    }

    fn next_node_port(&mut self) -> Result<u16, Failure> {
        let size = u32::from(NODE_PORTS.1 - NODE_PORTS.0) + 1;
        let port = pick(size, STATIC_NODE_PORTS, |o| {
            u16::try_from(o).is_ok_and(|o| !self.node_ports.contains(&(NODE_PORTS.0 + o)))
        })
        .and_then(|o| u16::try_from(o).ok())
        .map(|o| NODE_PORTS.0 + o)
        .ok_or_else(|| Failure::Internal("failed to allocate a nodePort: range is full".into()))?;
        self.node_ports.insert(port);
        self.claimed.push(Held::NodePort(port));
        Ok(port)
    }
}

/// A free offset below `size`: from a random start in the band above `reserved`, then in the reserved band, as
/// kube's allocators scan.
fn pick(size: u32, reserved: u32, free: impl Fn(u32) -> bool) -> Option<u32> {
    let dynamic = size - reserved;
    let random = uuid::Uuid::new_v4().as_u64_pair().0 % u64::from(dynamic);
    let start = u32::try_from(random).unwrap_or(0);
    (0..dynamic).map(|i| reserved + (start + i) % dynamic).chain(0..reserved).find(|o| free(*o))
}

/// A new Service's cluster IP (or an ExternalName Service's that gets a type needing one), the requested one or
/// the next free one; a Service that had one keeps it (validation refuses a change).
fn allocate_cluster_ip(spec: &mut Value, old: Option<&Value>, taken: &mut Taken) -> Result<(), Failure> {
    if !needs_cluster_ip(spec) || old.is_some_and(needs_cluster_ip) {
        return Ok(());
    }
    let requested = strings(spec, "clusterIPs");
    let address = match requested.first().map(String::as_str) {
        Some("None") => return Ok(()),
        None => taken.next_address()?,
        Some(ip) => {
            let refused = |why: String| {
                let detail = format!("{}: failed to allocate IP {ip}: {why}", go_strings(&requested));
                Failure::Field(error("spec.clusterIPs", ErrorType::Invalid, detail))
            };
            let address = u32::from(
                ip.parse::<Ipv4Addr>().map_err(|_| Failure::Internal(format!("failed to parse service IP {ip:?}")))?,
            );
            if !(NETWORK..NETWORK + ADDRESSES).contains(&address) {
                return Err(refused("the provided network does not match the current range".into()));
            }
            if address == NETWORK || address == NETWORK + ADDRESSES - 1 {
                return Err(refused(format!(
                    "the provided IP ({ip}) is not in the valid range. The range of valid IPs is {SERVICE_CIDR}"
                )));
            }
            if !taken.claim_address(address) {
                return Err(refused("provided IP is already allocated".into()));
            }
            address
        }
    };
    let ip = Ipv4Addr::from(address).to_string();
    spec["clusterIP"] = json!(ip);
    spec["clusterIPs"] = json!([ip]);
    Ok(())
}

/// The node ports of a NodePort or LoadBalancer Service (`initNodePorts` on create, `updateNodePorts` on update)
/// and its health check node port.
fn allocate_node_ports(spec: &mut Value, old: Option<&Value>, taken: &mut Taken) -> Result<(), Failure> {
    if needs_node_ports(spec) {
        let allocate_new = spec["type"] == "NodePort" || spec["allocateLoadBalancerNodePorts"] != false;
        let ports: Vec<(i64, u16)> = spec["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| (p["port"].as_i64().unwrap_or(0), node_port(p)))
            .collect();
        let old_node_ports: Vec<u16> =
            old.and_then(|o| o["ports"].as_array()).into_iter().flatten().map(node_port).collect();
        // On create, ports with the same number (TCP and UDP) share a node port.
        let mut by_number: HashMap<i64, u16> = HashMap::new();
        let mut claimed_here: HashSet<u16> = HashSet::new();
        for (index, &(number, requested)) in ports.iter().enumerate() {
            if requested == 0 && !allocate_new {
                continue;
            }
            let claim = |taken: &mut Taken, port: u16| {
                taken.claim_node_port(port).map(|()| port).map_err(|why| {
                    let field = format!("spec.ports[{index}].nodePort");
                    Failure::Field(error(&field, ErrorType::Invalid, format!("{port}: {why}")))
                })
            };
            let value = if old.is_none() {
                match by_number.get(&number).copied() {
                    None => {
                        let wanted = ports.iter().find(|(n, p)| *n == number && *p != 0).map(|(_, p)| *p);
                        let value = match wanted {
                            Some(port) => claim(taken, port)?,
                            None => taken.next_node_port()?,
                        };
                        by_number.insert(number, value);
                        value
                    }
                    Some(shared) if requested == 0 => shared,
                    Some(shared) if requested != shared => claim(taken, requested)?,
                    Some(_) => requested,
                }
            } else if requested == 0 {
                taken.next_node_port()?
            } else {
                if !old_node_ports.contains(&requested) && claimed_here.insert(requested) {
                    claim(taken, requested)?;
                }
                requested
            };
            if let Some(port) = spec.get_mut("ports").and_then(|p| p.get_mut(index)).and_then(Value::as_object_mut) {
                port.insert("nodePort".into(), json!(value));
            }
        }
    }
    if needs_health_check_port(spec) {
        let current = spec["healthCheckNodePort"].as_u64().and_then(|p| u16::try_from(p).ok()).unwrap_or(0);
        let previous = old.filter(|o| needs_health_check_port(o)).map(|o| o["healthCheckNodePort"].clone());
        if current == 0 {
            spec["healthCheckNodePort"] = json!(taken.next_node_port()?);
        } else if previous.as_ref() != Some(&spec["healthCheckNodePort"]) {
            taken.claim_node_port(current).map_err(|why| {
                Failure::Internal(format!("failed to allocate requested HealthCheck NodePort {current}: {why}"))
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! The emulator's conformance suite: what kube-apiserver answers, asserted over HTTPS with exact codes, reasons and
//! messages (`rest_*`, `auth`, `admission`, `aggregation`), what kube clients and controllers see (`controller_loop`),
//! the fault-injection switch (`faults`), the storage on its own (`store`), and the real kubectl (`kubectl*`). One test
//! binary, so that it is linked once.

mod admission;
mod aggregation;
mod auth;
mod controller_loop;
mod faults;
mod kubectl;
mod kubectl_commands;
mod kubectl_openapi;
mod rest_defaults;
mod rest_lifecycle;
mod rest_lists_watches;
mod rest_objects;
mod rest_writes;
mod store;
mod support;

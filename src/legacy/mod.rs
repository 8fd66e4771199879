//! OLM v0's loops, run so that existing users can swap controllers and see the same objects, names, annotations,
//! phases, reasons and messages (`docs/legacy.md` lists every deliberate difference). Pure decisions: `targets`
//! (an OperatorGroup's namespaces, install-mode support), `membership` (a CSV's group and annotations), `apis` and
//! `intersection` (provided APIs across groups), `copies` (copied CSVs), `adopted_copies` (the copies of a CSV an
//! Operator's Install took over), `roles` (aggregating ClusterRoles), `tenancy` (a CSV's RBAC copied
//! into its targets or lifted cluster-wide), `hash`.
//! Loops: `catalogsource` (catalogs loaded, their status), `operatorgroup`, `grouproles` (a deleted group's
//! ClusterRoles), `namespaces` (the group labels of namespaces), `csv` (the phase machine, replacement and
//! where each original's copies go), `copier` (the copies written after the passes, from the newest request of each
//! original), `copied` (copies changed or left behind) and `olmconfig` (the copies' condition).

pub mod adopted_copies;
pub mod apis;
pub mod catalogsource;
pub mod copied;
pub mod copier;
pub mod copies;
pub mod csv;
pub mod grouproles;
pub mod hash;
pub mod installplan;
pub mod intersection;
pub mod membership;
pub mod namespaces;
pub mod olmconfig;
pub mod operatorgroup;
pub mod roles;
pub mod subscription;
pub mod targets;
pub mod tenancy;

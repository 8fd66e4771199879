//! The project's end-to-end suites on the test control plane: Installs from approval to drift (`install`,
//! `approval_integrity`), Operators from catalogs (`operator`) with their dependencies (`operator_dependencies`) and
//! updates (`operator_upgrades`), OLM v0's legacy loops (`legacy`) and the migration from them (`migration`), the
//! aggregated API server's Installed objects (`installed_api`) and PackageManifests (`packagemanifests`),
//! attacks on the approval gate and the controller's powers (`attacks`), the walkthrough (`walkthrough`) and the
//! project's CRDs as kube-apiserver takes them (`project_crds`). One test binary, so that it is linked once.

mod approval_integrity;
mod attacks;
mod certificates;
mod faults;
mod install;
mod installed_api;
mod leader;
mod legacy;
mod migration;
mod migration_v0;
mod operator;
mod operator_dependencies;
mod operator_upgrades;
mod packagemanifests;
mod policy;
mod project_crds;
mod support;
mod walkthrough;

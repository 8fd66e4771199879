//! An Operator's dependencies (seed 004: an Operator from a catalog resolves the connected component of the
//! dependency graph that contains it). What its catalog bundle requires is resolved in the Operator's own
//! CatalogSource, the one its creator was allowed to install from, against what the cluster already has: bundles of
//! that catalog which other Installs hold, and every API the cluster serves. Each bundle the resolution adds is
//! installed by an Install the Operator owns (`<operator>.requires.<package>`), labelled as its component and
//! facing the approval gate as any Install does. Pure: the reconciler lists Installs and CRDs and acts on the answer.

use std::collections::BTreeSet;

use semver::Version;

use crate::catalog::dependencies::{resolve_dependencies, DependencyError, Origin, Pick, Problem, Source, Want};
use crate::catalog::properties::Gvk;
use crate::catalog::resolve::next_upgrade;
use crate::catalog::{Catalog, CatalogBundle};

/// An Install holding a catalog bundle (its bundle annotation), as the resolution sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held<'a> {
    pub install: &'a str,
    pub bundle: &'a str,
    /// The image its content holds.
    pub image: &'a str,
    /// Whether it installed that content (its current generation, state Installed).
    pub settled: bool,
    /// Whether the Operator being resolved owns it.
    pub owned: bool,
}

/// What an Operator's dependencies are resolved from.
pub struct Inputs<'a> {
    pub operator: &'a str,
    /// The Operator's CatalogSource.
    pub source: Source<'a>,
    /// The bundle the Operator's own Install is to hold.
    pub bundle: &'a CatalogBundle,
    /// Every API the cluster serves.
    pub served: &'a [Gvk],
    /// Every Install that holds a catalog bundle.
    pub held: &'a [Held<'a>],
}

/// A bundle the Operator needs beside its own, and the Install that is to hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dependency {
    pub install: String,
    pub package: String,
    pub bundle: String,
    pub version: String,
    pub image: String,
}

/// Why an Operator's dependencies cannot be installed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DependenciesError {
    #[error(transparent)]
    Resolve(#[from] DependencyError),
    #[error(
        "dependency {bundle} of CatalogSource {catalog} has no image: its content is inline in the catalog, which \
         Operators do not install from"
    )]
    WithoutImage { bundle: String, catalog: String },
    #[error("dependency package {package:?} cannot name an Install: {name:?} is not a valid object name")]
    InvalidName { package: String, name: String },
}

impl DependenciesError {
    /// The reason of the Operator condition that reports it: OLM's for a resolution that fails.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Resolve(error) => error.reason(),
            Self::WithoutImage { .. } => "BundleWithoutImage",
            Self::InvalidName { .. } => "InvalidDependencyName",
        }
    }
}

/// The name of the Install holding an Operator's dependency on `package`.
pub fn install_name(operator: &str, package: &str) -> String {
    format!("{operator}.requires.{package}")
}

/// Whether `name` is a DNS subdomain, as Kubernetes requires of an Install's name.
fn valid_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The package of a catalog bundle named `name`.
fn find<'c>(catalog: &'c Catalog, name: &str) -> Option<&'c CatalogBundle> {
    catalog.packages.values().find_map(|package| package.bundles.get(name))
}

/// The upgrade of a bundle an Operator installed as a dependency, one step along its channel (the package's default
/// channel when it lists the bundle, else the first that does), as OLM's generated Subscription follows its channel.
fn next_along_channel<'c>(catalog: &'c Catalog, installed: &CatalogBundle) -> Option<&'c CatalogBundle> {
    let package = catalog.packages.get(&installed.package)?;
    let lists = |channel: &&crate::catalog::fbc::Channel| channel.entries.iter().any(|e| e.name == installed.name);
    let default = package.default_channel.as_ref().and_then(|name| package.channels.get(name)).filter(lists);
    let channel = default.or_else(|| package.channels.values().find(lists))?;
    next_upgrade(package, channel, installed).ok().flatten()
}

/// A bundle standing for an API the cluster serves whatever provides it (an Install of content from no catalog, a
/// CSV of OLM, a CRD applied by hand): installed, so it is preferred over installing a provider.
fn served_api(gvk: &Gvk) -> CatalogBundle {
    let name = format!("{gvk} served by the cluster");
    CatalogBundle {
        name: name.clone(),
        package: name,
        image: String::new(),
        version: Version::new(0, 0, 0),
        provides: vec![gvk.clone()],
        requires: Vec::new(),
        unreadable: None,
        labels: Vec::new(),
        deprecated: false,
    }
}

/// The bundles the Operator needs beside its own, newest-fitting and keeping what it installed before, or why none
/// fit. What others installed is taken as it stands (its own needs are its own Operator's business), and the APIs
/// that the Operator's own Installs serve are left out of what is served: they are being resolved again.
pub fn resolve(inputs: &Inputs<'_>) -> Result<Vec<Dependency>, DependenciesError> {
    let catalog = inputs.source.catalog;
    let main = inputs.bundle;
    let owned = owned_bundles(inputs);
    let own_packages: BTreeSet<&str> =
        std::iter::once(main.package.as_str()).chain(owned.iter().map(|bundle| bundle.package.as_str())).collect();
    let own_apis = own_apis_of(inputs, &own_packages);

    let mut installed = standing_bundles(inputs, &own_packages, &own_apis);
    let standing: BTreeSet<Gvk> = installed.iter().flat_map(|bundle| bundle.provides.iter().cloned()).collect();
    let served: BTreeSet<&Gvk> = inputs.served.iter().collect();
    installed
        .extend(served.into_iter().filter(|gvk| !own_apis.contains(gvk) && !standing.contains(*gvk)).map(served_api));

    let problem = Problem {
        sources: vec![inputs.source.clone()],
        installed,
        wants: vec![Want {
            by: format!("Operator {}", inputs.operator),
            package: main.package.clone(),
            candidates: vec![Pick { origin: Origin::Source(0), bundle: main.name.clone() }],
        }],
        // What it installed before, or one step further along its channel.
        preferred: preferred_picks(catalog, &owned),
    };
    let catalog_name = format!("{}/{}", inputs.source.namespace, inputs.source.name);
    resolve_dependencies(&problem)?
        .into_iter()
        .filter(|chosen| chosen.origin == Origin::Source(0) && chosen.bundle.package != main.package)
        .map(|chosen| dependency_of(inputs.operator, chosen.bundle, &catalog_name))
        .collect()
}

/// The catalog bundles of the Installs the Operator owns, other than its own package's: the dependencies it
/// installed before.
fn owned_bundles<'a>(inputs: &Inputs<'a>) -> Vec<&'a CatalogBundle> {
    let catalog = inputs.source.catalog;
    let main = inputs.bundle;
    inputs
        .held
        .iter()
        .filter(|held| held.owned)
        .filter_map(|held| find(catalog, held.bundle))
        .filter(|bundle| bundle.package != main.package)
        .collect()
}

/// Every API that a bundle of the Operator's own packages (`own_packages`) provides, in any version of the catalog,
/// and the APIs of the Operator's bundle: they are being resolved again.
fn own_apis_of<'a>(inputs: &Inputs<'a>, own_packages: &BTreeSet<&str>) -> BTreeSet<&'a Gvk> {
    let catalog = inputs.source.catalog;
    let main = inputs.bundle;
    own_packages
        .iter()
        .filter_map(|package| catalog.packages.get(*package))
        .flat_map(|package| package.bundles.values())
        .chain(std::iter::once(main))
        .flat_map(|bundle| &bundle.provides)
        .collect()
}

/// The bundles of this catalog that Installs of others hold and run, taken as they stand (without requirements),
/// leaving out any that clashes with the Operator's own packages and APIs or with one taken before (in the order
/// of the Installs' names).
fn standing_bundles(
    inputs: &Inputs<'_>,
    own_packages: &BTreeSet<&str>,
    own_apis: &BTreeSet<&Gvk>,
) -> Vec<CatalogBundle> {
    let catalog = inputs.source.catalog;
    let mut installed: Vec<CatalogBundle> = Vec::new();
    let mut others: Vec<&Held<'_>> = inputs.held.iter().filter(|held| !held.owned).collect();
    others.sort_by_key(|held| held.install);
    for held in others {
        // Only what runs, and runs this catalog's content: a bundle of the same name from another catalog, or one
        // still waiting for a person, provides nothing yet.
        let Some(bundle) = find(catalog, held.bundle).filter(|b| held.settled && b.image == held.image) else {
            continue;
        };
        // One bundle per package and one provider per API among what stands: two Installs of one operator (two
        // namespaces' Subscriptions) are one fact for this resolution.
        let clash = own_packages.contains(bundle.package.as_str())
            || installed.iter().any(|other| {
                other.package == bundle.package || other.provides.iter().any(|gvk| bundle.provides.contains(gvk))
            })
            || bundle.provides.iter().any(|gvk| own_apis.contains(gvk));
        if !clash {
            installed.push(CatalogBundle { requires: Vec::new(), ..bundle.clone() });
        }
    }
    installed
}

/// For each dependency the Operator installed before (`owned`), the bundles preferred for its package: the next one
/// along its channel, then the one it has.
fn preferred_picks(catalog: &Catalog, owned: &[&CatalogBundle]) -> Vec<(String, Pick)> {
    owned
        .iter()
        .flat_map(|bundle| {
            let pick = |name: &str| (bundle.package.clone(), Pick { origin: Origin::Source(0), bundle: name.into() });
            next_along_channel(catalog, bundle).map(|next| pick(&next.name)).into_iter().chain([pick(&bundle.name)])
        })
        .collect()
}

/// The dependency on `bundle` (of the catalog named `catalog_name`) of the Operator named `operator`, with the
/// Install to hold it, or why it cannot be installed.
fn dependency_of(operator: &str, bundle: CatalogBundle, catalog_name: &str) -> Result<Dependency, DependenciesError> {
    if bundle.image.is_empty() {
        return Err(DependenciesError::WithoutImage { bundle: bundle.name, catalog: catalog_name.to_owned() });
    }
    let install = install_name(operator, &bundle.package);
    if !valid_name(&install) {
        return Err(DependenciesError::InvalidName { package: bundle.package, name: install });
    }
    Ok(Dependency {
        install,
        package: bundle.package,
        version: bundle.version.to_string(),
        bundle: bundle.name,
        image: bundle.image,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;
    use crate::catalog::dependencies::tests::{bundle, catalog, provides, requires_api, requires_package};

    fn source(catalog: &Catalog) -> Source<'_> {
        Source { name: "community".into(), namespace: "catalogs".into(), priority: 0, catalog }
    }

    fn gvk(kind: &str) -> Gvk {
        Gvk { group: "example.com".into(), version: "v1".into(), kind: kind.into() }
    }

    fn the_catalog() -> Catalog {
        catalog(vec![
            bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![provides("Plumbus"), requires_api("Grumbo")]),
            bundle(
                "plumbus",
                "plumbus.v2.0.0",
                "2.0.0",
                vec![provides("Plumbus"), requires_package("grumbo", ">=1.1.0")],
            ),
            bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo"), requires_api("Fleeb")]),
            bundle("grumbo", "grumbo.v1.1.0", "1.1.0", vec![provides("Grumbo"), requires_api("Fleeb")]),
            bundle("fleeb", "fleeb.v1.0.0", "1.0.0", vec![provides("Fleeb")]),
            bundle("unrelated", "unrelated.v1.0.0", "1.0.0", vec![provides("Other")]),
        ])
    }

    fn main_bundle<'c>(catalog: &'c Catalog, name: &str) -> &'c CatalogBundle {
        find(catalog, name).expect("bundle")
    }

    /// Operator plumbus's inputs, its bundle `bundle` of `catalog`.
    fn operator_inputs<'a>(catalog: &'a Catalog, bundle: &str, served: &'a [Gvk], held: &'a [Held<'a>]) -> Inputs<'a> {
        Inputs { operator: "plumbus", source: source(catalog), bundle: main_bundle(catalog, bundle), served, held }
    }

    fn resolved(catalog: &Catalog, bundle: &str, served: &[Gvk], held: &[Held<'_>]) -> Vec<(String, String)> {
        resolve(&operator_inputs(catalog, bundle, served, held))
            .expect("resolved")
            .into_iter()
            .map(|d| (d.install, d.bundle))
            .collect()
    }

    /// An Install holding `bundle` with `image` (the test catalog's are `registry.example/<bundle>`), installed.
    fn held<'a>(install: &'a str, bundle: &'a str, image: &'a str, owned: bool) -> Held<'a> {
        Held { install, bundle, image, settled: true, owned }
    }

    fn pair(install: &str, bundle: &str) -> (String, String) {
        (install.to_owned(), bundle.to_owned())
    }

    #[test]
    fn the_connected_component_is_installed_newest_first_and_nothing_unrelated() {
        let catalog = the_catalog();
        assert_eq!(
            resolved(&catalog, "plumbus.v1.0.0", &[], &[]),
            [pair("plumbus.requires.fleeb", "fleeb.v1.0.0"), pair("plumbus.requires.grumbo", "grumbo.v1.1.0")]
        );
        let inputs = operator_inputs(&catalog, "plumbus.v1.0.0", &[], &[]);
        let first = resolve(&inputs).expect("resolved").remove(0);
        assert_eq!((first.package.as_str(), first.version.as_str()), ("fleeb", "1.0.0"));
        assert_eq!(first.image, "registry.example/fleeb.v1.0.0");
    }

    #[test]
    fn an_api_the_cluster_serves_is_not_installed_again() {
        let catalog = the_catalog();
        assert_eq!(
            resolved(&catalog, "plumbus.v1.0.0", &[gvk("Fleeb")], &[]),
            [pair("plumbus.requires.grumbo", "grumbo.v1.1.0")]
        );
        assert_eq!(resolved(&catalog, "plumbus.v1.0.0", &[gvk("Grumbo"), gvk("Plumbus")], &[]), []);
    }

    #[test]
    fn the_operators_own_apis_are_resolved_again_not_taken_as_served() {
        let catalog = the_catalog();
        // Plumbus and Grumbo are served because this Operator installed them: an upgrade keeps its own Grumbo.
        let own = [
            held("plumbus", "plumbus.v1.0.0", "registry.example/plumbus.v1.0.0", true),
            held("plumbus.requires.grumbo", "grumbo.v1.0.0", "registry.example/grumbo.v1.0.0", true),
        ];
        let served = [gvk("Plumbus"), gvk("Grumbo"), gvk("Fleeb")];
        assert_eq!(
            resolved(&catalog, "plumbus.v1.0.0", &served, &own),
            [pair("plumbus.requires.grumbo", "grumbo.v1.1.0")],
            "what it installed before moves one step along its channel, as a Subscription's would"
        );
        let top = [held("plumbus", "plumbus.v1.0.0", "registry.example/plumbus.v1.0.0", true)];
        let kept =
            [top[0].clone(), held("plumbus.requires.grumbo", "grumbo.v1.1.0", "registry.example/grumbo.v1.1.0", true)];
        assert_eq!(
            resolved(&catalog, "plumbus.v1.0.0", &served, &kept),
            [pair("plumbus.requires.grumbo", "grumbo.v1.1.0")]
        );
        assert_eq!(
            resolved(&catalog, "plumbus.v2.0.0", &served, &own),
            [pair("plumbus.requires.grumbo", "grumbo.v1.1.0")],
            "an upgrade moves its dependency where the new bundle needs it"
        );
    }

    #[test]
    fn a_bundle_another_install_holds_satisfies_a_package_requirement_as_it_stands() {
        let catalog = the_catalog();
        // grumbo.v1.1.0 runs for someone else (a Subscription's Install); Fleeb, which it needs, is not served: the
        // Operator takes grumbo as it stands and installs nothing for the other's needs.
        let running = [
            held("grumbo.ops", "grumbo.v1.1.0", "registry.example/grumbo.v1.1.0", false),
            held("grumbo.team", "grumbo.v1.1.0", "registry.example/grumbo.v1.1.0", false),
        ];
        assert_eq!(resolved(&catalog, "plumbus.v2.0.0", &[gvk("Grumbo")], &running), []);
        // Held at a version outside the range: the one provider per API stands, and the resolution says so.
        let old = [held("grumbo.ops", "grumbo.v1.0.0", "registry.example/grumbo.v1.0.0", false)];
        let served = [gvk("Grumbo")];
        let inputs = operator_inputs(&catalog, "plumbus.v2.0.0", &served, &old);
        let error = resolve(&inputs).expect_err("grumbo 1.0.0 stands");
        assert_eq!(error.reason(), "ConstraintsNotSatisfiable");
        let message = error.to_string();
        assert!(message.contains("grumbo.v1.0.0 (installed)") && message.contains(">=1.1.0"), "{message}");
    }

    #[test]
    fn a_bundle_held_but_not_running_or_from_another_catalog_provides_nothing() {
        let catalog = the_catalog();
        let waiting =
            [Held { settled: false, ..held("grumbo.ops", "grumbo.v1.1.0", "registry.example/grumbo.v1.1.0", false) }];
        let wanted = [pair("plumbus.requires.fleeb", "fleeb.v1.0.0"), pair("plumbus.requires.grumbo", "grumbo.v1.1.0")];
        assert_eq!(resolved(&catalog, "plumbus.v1.0.0", &[], &waiting), wanted, "still waiting for a person");
        let lookalike = [Held {
            image: "tenant.example/grumbo:evil",
            ..held("grumbo.team", "grumbo.v1.1.0", "registry.example/grumbo.v1.1.0", false)
        }];
        assert_eq!(
            resolved(&catalog, "plumbus.v1.0.0", &[], &lookalike),
            wanted,
            "a bundle of that name, other content"
        );
    }

    #[test]
    fn an_unsatisfiable_requirement_is_explained() {
        let catalog =
            catalog(vec![bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_package("grumbo", ">=3.0.0")])]);
        let inputs = operator_inputs(&catalog, "plumbus.v1.0.0", &[], &[]);
        let error = resolve(&inputs).expect_err("no grumbo");
        assert_eq!(error.reason(), "ConstraintsNotSatisfiable");
        let message = error.to_string();
        assert!(message.contains("grumbo") && message.contains(">=3.0.0"), "{message}");
    }

    fn with_image(mut blob: Value, image: &str) -> Value {
        blob["image"] = json!(image);
        blob
    }

    #[test]
    fn a_dependency_without_an_image_or_a_name_is_refused_with_its_reason() {
        let inline = catalog(vec![
            bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_api("Grumbo")]),
            with_image(bundle("grumbo", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]), ""),
        ]);
        let inputs = operator_inputs(&inline, "plumbus.v1.0.0", &[], &[]);
        assert_eq!(resolve(&inputs).expect_err("inline").reason(), "BundleWithoutImage");
        let odd = catalog(vec![
            bundle("plumbus", "plumbus.v1.0.0", "1.0.0", vec![requires_api("Grumbo")]),
            bundle("Grumbo_Pkg", "grumbo.v1.0.0", "1.0.0", vec![provides("Grumbo")]),
        ]);
        let inputs = operator_inputs(&odd, "plumbus.v1.0.0", &[], &[]);
        assert_eq!(resolve(&inputs).expect_err("name").reason(), "InvalidDependencyName");
    }

    #[test]
    fn install_names_are_dns_subdomains() {
        assert!(valid_name("plumbus.requires.grumbo"));
        assert!(!valid_name("plumbus.requires.Grumbo"));
        assert!(!valid_name("plumbus..grumbo"));
        assert!(!valid_name("-plumbus"));
        assert!(!valid_name(&"a".repeat(254)));
    }
}

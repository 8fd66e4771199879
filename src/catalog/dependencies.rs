//! Dependency resolution across catalogs and what is installed, with resolvo (a CDCL SAT solver), over the
//! properties OLM v0's resolver reads (`properties`). What is wanted (a Subscription's or an Operator's candidate
//! bundles, in the order they are preferred) must be in the solution; every bundle in it brings what it requires
//! (`olm.package.required`, `olm.gvk.required`, `olm.constraint`); at most one bundle per package and one provider
//! per API, as OLM's invariants say. Candidates are preferred as OLM prefers them: what is installed, then the
//! higher catalog priority, the default channel, the newer version. When nothing satisfies every constraint the
//! answer is OLM's `ConstraintsNotSatisfiable`, explained as the chain of requirements that conflict.
//!
//! Pure: the caller reads catalogs and installed CSVs, and acts on the answer.

use std::collections::HashMap;
use std::fmt;

use resolvo::utils::Pool;
use resolvo::{
    Candidates, Condition, ConditionId, ConditionalRequirement, Dependencies, DependencyProvider, Interner,
    KnownDependencies, NameId, Requirement, SolvableId, Solver, SolverCache, StringId, UnsolvableOrCancelled,
    VersionSetId, VersionSetUnionId,
};

use super::fbc::{Catalog, CatalogBundle};
use super::properties::{Constraint, Dependency, Gvk, Rule, VersionRange};

/// A catalog taking part in a resolution.
#[derive(Clone, Debug)]
pub struct Source<'a> {
    /// The CatalogSource's name and namespace.
    pub name: String,
    pub namespace: String,
    /// `spec.priority`: higher is preferred.
    pub priority: i32,
    pub catalog: &'a Catalog,
}

/// Where a bundle comes from: a source (its index) or what is installed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    Installed,
    Source(usize),
}

/// One bundle of a resolution, named by where it comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pick {
    pub origin: Origin,
    pub bundle: String,
}

/// What must be in the solution: one of `candidates` (most preferred first), for `by` (a Subscription or an
/// Operator, named in explanations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    pub by: String,
    pub package: String,
    pub candidates: Vec<Pick>,
}

/// A resolution problem: the sources, what is installed (as bundles: a CSV's name, version and properties), and
/// what is wanted.
#[derive(Clone, Debug, Default)]
pub struct Problem<'a> {
    pub sources: Vec<Source<'a>>,
    pub installed: Vec<CatalogBundle>,
    pub wants: Vec<Want>,
    /// Bundles tried first for their package (the first of the pair) when the solution needs that package, without
    /// being required: what an Operator installed as a dependency before stays unless something else must change.
    pub preferred: Vec<(String, Pick)>,
}

/// A bundle of the solution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub origin: Origin,
    pub bundle: CatalogBundle,
    /// The want it answers, if it answers one (otherwise some chosen bundle requires it).
    pub wanted_by: Option<String>,
}

/// Why a problem has no solution.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DependencyError {
    /// No choice satisfies every constraint: OLM's `ConstraintsNotSatisfiable`.
    #[error("constraints not satisfiable: {explanation}")]
    Unsatisfiable { explanation: String },
    /// A want names a bundle that is not there.
    #[error("{by} wants bundle {bundle:?} of package {package:?}, which {origin} does not hold")]
    UnknownCandidate { by: String, package: String, bundle: String, origin: String },
}

impl DependencyError {
    /// The reason of the condition that reports it, as OLM's.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unsatisfiable { .. } => "ConstraintsNotSatisfiable",
            Self::UnknownCandidate { .. } => "ErrorPreventedResolution",
        }
    }
}

/// Resolves `problem`: the bundles of the solution, ordered by package and bundle name.
pub fn resolve_dependencies(problem: &Problem<'_>) -> Result<Vec<Chosen>, DependencyError> {
    let provider = Provider::new(problem)?;
    let mut requirements = Vec::new();
    // The want each bundle answers (the first that lists it).
    let mut wanted_by: HashMap<usize, &str> = HashMap::new();
    for (want, picks) in problem.wants.iter().zip(&provider.wanted) {
        for index in picks {
            wanted_by.entry(*index).or_insert(&want.by);
        }
        let name = provider.pool.intern_package_name(Name::Package(want.package.clone()));
        let set = provider.pool.intern_version_set(name, Set::Bundles(picks.clone()));
        requirements.push(ConditionalRequirement::from(Requirement::Single(set)));
    }
    // What is installed and wanted by no one stays, as OLM keeps a CSV no Subscription refers to: nothing chosen may
    // take its package or an API it provides.
    for (index, candidate) in provider.bundles.iter().enumerate() {
        if candidate.origin == Origin::Installed && !problem.wants.iter().any(|w| w.package == candidate.bundle.package)
        {
            let name = provider.pool.intern_package_name(Name::Package(candidate.bundle.package.clone()));
            let set = provider.pool.intern_version_set(name, Set::Bundles(vec![index]));
            requirements.push(ConditionalRequirement::from(Requirement::Single(set)));
        }
    }
    let mut solver = Solver::new(provider);
    match solver.solve(resolvo::Problem::new().requirements(requirements)) {
        Ok(solution) => {
            let provider = solver.provider();
            let mut chosen: Vec<Chosen> = solution
                .into_iter()
                .filter_map(|solvable| match provider.pool.resolve_solvable(solvable).record.kind {
                    Kind::Bundle(index) => Some(index),
                    Kind::Provider { .. } => None,
                })
                .map(|index| {
                    let entry = &provider.bundles[index];
                    let wanted_by = wanted_by.get(&index).map(|by| (*by).to_owned());
                    Chosen { origin: entry.origin, bundle: entry.bundle.clone(), wanted_by }
                })
                .collect();
            chosen.sort_by(|a, b| (&a.bundle.package, &a.bundle.name).cmp(&(&b.bundle.package, &b.bundle.name)));
            Ok(chosen)
        }
        Err(UnsolvableOrCancelled::Unsolvable(conflict)) => {
            Err(DependencyError::Unsatisfiable { explanation: conflict.display_user_friendly(&solver).to_string() })
        }
        Err(UnsolvableOrCancelled::Cancelled(_)) => {
            Err(DependencyError::Unsatisfiable { explanation: "the resolution was cancelled".into() })
        }
    }
}

/// A name of the solver: a package (its bundles compete) or an API (its providers compete: one provider per API).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Name {
    Package(String),
    Api(Gvk),
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Package(package) => write!(f, "package {package}"),
            Self::Api(gvk) => write!(f, "API {gvk}"),
        }
    }
}

/// A solvable: a bundle, or a bundle's claim to provide an API.
#[derive(Clone, Debug)]
struct Entry {
    kind: Kind,
    label: String,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Bundle(usize),
    Provider { bundle: usize },
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label)
    }
}

/// A set of solvables of one name.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Set {
    /// Every solvable of the name.
    Any,
    /// Bundles in the range.
    Range(VersionRange),
    /// These bundles, or these bundles' claims to an API.
    Bundles(Vec<usize>),
}

impl resolvo::utils::VersionSet for Set {
    type V = Entry;
}

/// A bundle the solver may choose.
struct Candidate {
    origin: Origin,
    bundle: CatalogBundle,
    default_channel: bool,
    priority: i32,
    source_name: String,
}

/// How explanations name where a bundle comes from.
fn origin_name(origins: &[String], origin: Origin) -> String {
    match origin {
        Origin::Installed => "what is installed".into(),
        Origin::Source(index) => origins.get(index).cloned().unwrap_or_else(|| format!("source {index}")),
    }
}

/// Each bundle's index among the candidates, by where it comes from, its package and its name.
type PickIndex<'a> = HashMap<(Origin, &'a str, &'a str), usize>;

/// Every bundle the solver may choose: what is installed first (preferred above any catalog), then each source's
/// bundles, with the source's priority and whether the bundle is in its package's default channel.
fn candidates_of(problem: &Problem<'_>) -> Vec<Candidate> {
    let mut bundles = Vec::new();
    for bundle in &problem.installed {
        let (default_channel, priority, source_name) = (true, i32::MAX, String::new());
        bundles.push(Candidate {
            origin: Origin::Installed,
            bundle: bundle.clone(),
            default_channel,
            priority,
            source_name,
        });
    }
    for (index, source) in problem.sources.iter().enumerate() {
        for package in source.catalog.packages.values() {
            let default = package.default_channel.as_ref().and_then(|name| package.channels.get(name));
            for bundle in package.bundles.values() {
                bundles.push(Candidate {
                    origin: Origin::Source(index),
                    bundle: bundle.clone(),
                    default_channel: default.is_some_and(|c| c.entries.iter().any(|e| e.name == bundle.name)),
                    priority: source.priority,
                    source_name: format!("{}/{}", source.namespace, source.name),
                });
            }
        }
    }
    bundles
}

/// Interns each bundle in `pool` as a solvable of its package, and as a claim to each API it provides: the
/// solvables of each name, and each bundle's solvable (same index as `bundles`).
fn intern_candidates(
    pool: &Pool<Set, Name>,
    bundles: &[Candidate],
) -> (HashMap<NameId, Vec<SolvableId>>, Vec<SolvableId>) {
    let mut by_name: HashMap<NameId, Vec<SolvableId>> = HashMap::new();
    let mut solvables = Vec::new();
    for (index, candidate) in bundles.iter().enumerate() {
        let name = pool.intern_package_name(Name::Package(candidate.bundle.package.clone()));
        let label = match candidate.origin {
            Origin::Installed => format!("{} (installed)", candidate.bundle.name),
            Origin::Source(_) => format!("{} (from {})", candidate.bundle.name, candidate.source_name),
        };
        let solvable = pool.intern_solvable(name, Entry { kind: Kind::Bundle(index), label: label.clone() });
        by_name.entry(name).or_default().push(solvable);
        solvables.push(solvable);
        for gvk in &candidate.bundle.provides {
            let api = pool.intern_package_name(Name::Api(gvk.clone()));
            let claim =
                pool.intern_solvable(api, Entry { kind: Kind::Provider { bundle: index }, label: label.clone() });
            by_name.entry(api).or_default().push(claim);
        }
    }
    (by_name, solvables)
}

/// Where each of `bundles` is, to find a pick by where it comes from, its package and its name.
fn pick_index(bundles: &[Candidate]) -> PickIndex<'_> {
    bundles
        .iter()
        .enumerate()
        .map(|(i, c)| ((c.origin, c.bundle.package.as_str(), c.bundle.name.as_str()), i))
        .collect()
}

/// The candidates of each want (same order as the problem's), as bundle indices. Each bundle is ranked by its
/// position among the candidates of the first want listing it, and a want's first candidate is favored for its
/// package; a candidate that is not there is an error.
fn rank_wants(
    problem: &Problem<'_>,
    by_pick: &PickIndex<'_>,
    origins: &[String],
    rank: &mut HashMap<usize, usize>,
    favored: &mut HashMap<String, usize>,
) -> Result<Vec<Vec<usize>>, DependencyError> {
    let mut wanted = Vec::new();
    for want in &problem.wants {
        let mut picks = Vec::new();
        for (position, pick) in want.candidates.iter().enumerate() {
            let index =
                by_pick.get(&(pick.origin, want.package.as_str(), pick.bundle.as_str())).copied().ok_or_else(|| {
                    DependencyError::UnknownCandidate {
                        by: want.by.clone(),
                        package: want.package.clone(),
                        bundle: pick.bundle.clone(),
                        origin: origin_name(origins, pick.origin),
                    }
                })?;
            rank.entry(index).or_insert(position);
            picks.push(index);
        }
        if let Some(first) = picks.first() {
            favored.insert(want.package.clone(), *first);
        }
        wanted.push(picks);
    }
    Ok(wanted)
}

struct Provider {
    pool: Pool<Set, Name>,
    bundles: Vec<Candidate>,
    /// The solvable of each bundle (same index).
    solvables: Vec<SolvableId>,
    by_name: HashMap<NameId, Vec<SolvableId>>,
    /// What is tried first for each package: a want's first candidate, else the installed bundle.
    favored: HashMap<String, usize>,
    /// Each bundle's position among the candidates of the first want listing it: a want's order comes first.
    rank: HashMap<usize, usize>,
    /// The candidates of each want (same order as the problem's), as bundle indices.
    wanted: Vec<Vec<usize>>,
}

impl Provider {
    /// The solver's view of `problem`; a want naming a bundle that is not there is an error.
    fn new(problem: &Problem<'_>) -> Result<Self, DependencyError> {
        let bundles = candidates_of(problem);
        let origins: Vec<String> =
            problem.sources.iter().map(|s| format!("catalog {}/{}", s.namespace, s.name)).collect();
        let pool: Pool<Set, Name> = Pool::new();
        let (by_name, solvables) = intern_candidates(&pool, &bundles);
        let by_pick = pick_index(&bundles);
        let mut favored: HashMap<String, usize> = bundles
            .iter()
            .enumerate()
            .filter(|(_, c)| c.origin == Origin::Installed)
            .map(|(i, c)| (c.bundle.package.clone(), i))
            .collect();
        let mut rank = HashMap::new();
        let wanted = rank_wants(problem, &by_pick, &origins, &mut rank, &mut favored)?;
        // Sorted before the rest of its package (a want's candidates keep the rank their want gave them); a preferred
        // bundle that is not there (the catalog dropped it) is simply no preference.
        for (package, pick) in &problem.preferred {
            if let Some(index) = by_pick.get(&(pick.origin, package.as_str(), pick.bundle.as_str())) {
                rank.entry(*index).or_insert(0);
            }
        }
        Ok(Self { pool, bundles, solvables, by_name, favored, rank, wanted })
    }

    fn bundle_of(&self, solvable: SolvableId) -> usize {
        match self.pool.resolve_solvable(solvable).record.kind {
            Kind::Bundle(index) | Kind::Provider { bundle: index } => index,
        }
    }

    fn set(&self, name: Name, set: Set) -> VersionSetId {
        let name = self.pool.intern_package_name(name);
        self.pool.intern_version_set(name, set)
    }

    /// What a bundle's properties require of the solution, or why they cannot be evaluated.
    fn requirements_of(&self, index: usize) -> Result<KnownDependencies, String> {
        let bundle = &self.bundles[index].bundle;
        if let Some(reason) = &bundle.unreadable {
            return Err(format!("its properties cannot be read: {reason}"));
        }
        if bundle.deprecated {
            return Err(format!("bundle {} is deprecated", bundle.name));
        }
        let mut known = KnownDependencies::default();
        // Claiming every API it provides keeps one provider per API.
        for gvk in &bundle.provides {
            known
                .requirements
                .push(Requirement::Single(self.set(Name::Api(gvk.clone()), Set::Bundles(vec![index]))).into());
        }
        for dependency in &bundle.requires {
            match dependency {
                Dependency::Api(gvk) => {
                    known.requirements.push(Requirement::Single(self.set(Name::Api(gvk.clone()), Set::Any)).into())
                }
                Dependency::Package { package, range } => known.requirements.push(
                    Requirement::Single(self.set(Name::Package(package.clone()), Set::Range(range.clone()))).into(),
                ),
                Dependency::Constraint(constraint) => {
                    known.requirements.push(self.matching(dependency, |i| self.satisfies(i, constraint))?)
                }
                Dependency::Label(label) => known
                    .requirements
                    .push(self.matching(dependency, |i| Ok(self.bundles[i].bundle.labels.contains(label)))?),
            }
        }
        Ok(known)
    }

    /// A requirement on the bundles that pass `test` (OLM turns an `olm.constraint` or `olm.label.required` into
    /// one predicate that a single candidate must pass): those of one package, or a union across packages. None
    /// passing leaves the requiring bundle out, saying what it requires.
    fn matching(
        &self,
        dependency: &Dependency,
        test: impl Fn(usize) -> Result<bool, String>,
    ) -> Result<ConditionalRequirement, String> {
        let mut by_package: std::collections::BTreeMap<&str, Vec<usize>> = std::collections::BTreeMap::new();
        for (index, candidate) in self.bundles.iter().enumerate() {
            if test(index)? {
                by_package.entry(candidate.bundle.package.as_str()).or_default().push(index);
            }
        }
        let sets: Vec<VersionSetId> = by_package
            .into_iter()
            .map(|(package, indices)| self.set(Name::Package(package.to_owned()), Set::Bundles(indices)))
            .collect();
        match sets.split_first() {
            None => Err(format!("it requires an operator {dependency}, and no bundle is one")),
            Some((first, [])) => Ok(Requirement::Single(*first).into()),
            Some((first, rest)) => {
                Ok(Requirement::Union(self.pool.intern_version_set_union(*first, rest.iter().copied())).into())
            }
        }
    }

    /// Whether bundle `index` passes `constraint`. CEL rules are not evaluated: a bundle requiring one is left out,
    /// saying so.
    fn satisfies(&self, index: usize, constraint: &Constraint) -> Result<bool, String> {
        let bundle = &self.bundles[index].bundle;
        Ok(match &constraint.rule {
            Rule::Api(gvk) => bundle.provides.contains(gvk),
            Rule::Package { package, range } => bundle.package == *package && range.contains(&bundle.version),
            Rule::All(children) => {
                for child in children {
                    if !self.satisfies(index, child)? {
                        return Ok(false);
                    }
                }
                true
            }
            Rule::Any(children) => {
                for child in children {
                    if self.satisfies(index, child)? {
                        return Ok(true);
                    }
                }
                false
            }
            // None of them holds.
            Rule::Not(children) => {
                for child in children {
                    if self.satisfies(index, child)? {
                        return Ok(false);
                    }
                }
                true
            }
            Rule::Cel(_) => return Err(format!("olm.constraint {constraint}: CEL rules are not evaluated here")),
        })
    }

    fn matches(&self, set: &Set, solvable: SolvableId) -> bool {
        let index = self.bundle_of(solvable);
        let version = &self.bundles[index].bundle.version;
        match set {
            Set::Any => true,
            Set::Range(range) => range.contains(version),
            Set::Bundles(indices) => indices.contains(&index),
        }
    }

    /// OLM's preference: installed first, then higher catalog priority, the default channel, the newer version;
    /// then by catalog and name, so that the answer never depends on the order catalogs were read in.
    fn preference(&self, solvable: SolvableId) -> impl Ord + '_ {
        let candidate = &self.bundles[self.bundle_of(solvable)];
        (
            candidate.origin != Origin::Installed,
            std::cmp::Reverse(candidate.priority),
            !candidate.default_channel,
            std::cmp::Reverse(&candidate.bundle.version),
            &candidate.source_name,
            &candidate.bundle.name,
        )
    }
}

impl Interner for Provider {
    type NameId = NameId;
    type SolvableId = SolvableId;

    fn display_solvable(&self, solvable: SolvableId) -> impl fmt::Display + '_ {
        self.pool.resolve_solvable(solvable).record.label.clone()
    }

    fn display_name(&self, name: NameId) -> impl fmt::Display + '_ {
        self.pool.resolve_package_name(name).to_string()
    }

    fn display_version_set(&self, version_set: VersionSetId) -> impl fmt::Display + '_ {
        match self.pool.resolve_version_set(version_set) {
            Set::Any => "any provider".to_owned(),
            Set::Range(range) => format!("in range {range}"),
            Set::Bundles(indices) => {
                let names: Vec<&str> = indices.iter().map(|i| self.bundles[*i].bundle.name.as_str()).collect();
                names.join(" | ")
            }
        }
    }

    fn display_string(&self, string_id: StringId) -> impl fmt::Display + '_ {
        self.pool.resolve_string(string_id).to_owned()
    }

    fn version_set_name(&self, version_set: VersionSetId) -> NameId {
        self.pool.resolve_version_set_package_name(version_set)
    }

    fn solvable_name(&self, solvable: SolvableId) -> NameId {
        self.pool.resolve_solvable(solvable).name
    }

    fn version_sets_in_union(&self, version_set_union: VersionSetUnionId) -> impl Iterator<Item = VersionSetId> {
        self.pool.resolve_version_set_union(version_set_union)
    }

    fn resolve_condition(&self, condition: ConditionId) -> Condition {
        self.pool.resolve_condition(condition).clone()
    }
}

impl DependencyProvider for Provider {
    async fn filter_candidates(
        &self,
        candidates: &[SolvableId],
        version_set: VersionSetId,
        inverse: bool,
    ) -> Vec<SolvableId> {
        let set = self.pool.resolve_version_set(version_set);
        candidates.iter().copied().filter(|solvable| self.matches(set, *solvable) != inverse).collect()
    }

    async fn get_candidates(&self, name: NameId) -> Option<Candidates<SolvableId>> {
        let candidates = self.by_name.get(&name).cloned().unwrap_or_default();
        let favored = match self.pool.resolve_package_name(name) {
            Name::Package(package) => self.favored.get(package).map(|index| self.solvables[*index]),
            Name::Api(_) => None,
        };
        Some(Candidates { candidates, favored, ..Candidates::default() })
    }

    async fn sort_candidates(&self, _solver: &SolverCache<Self>, solvables: &mut [SolvableId]) {
        let rank = |solvable: &SolvableId| self.rank.get(&self.bundle_of(*solvable)).copied().unwrap_or(usize::MAX);
        solvables.sort_by(|a, b| (rank(a), self.preference(*a)).cmp(&(rank(b), self.preference(*b))));
    }

    async fn get_dependencies(&self, solvable: SolvableId) -> Dependencies {
        match self.pool.resolve_solvable(solvable).record.kind {
            Kind::Bundle(index) => match self.requirements_of(index) {
                Ok(known) => Dependencies::Known(known),
                Err(reason) => Dependencies::Unknown(self.pool.intern_string(reason)),
            },
            // A claim to an API brings the bundle that makes it.
            Kind::Provider { bundle } => {
                let package = Name::Package(self.bundles[bundle].bundle.package.clone());
                let mut known = KnownDependencies::default();
                known.requirements.push(Requirement::Single(self.set(package, Set::Bundles(vec![bundle]))).into());
                Dependencies::Known(known)
            }
        }
    }
}

#[cfg(test)]
#[path = "dependencies_tests.rs"]
pub(crate) mod tests;

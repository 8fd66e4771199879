//! The dependency properties of a catalog bundle, typed as OLM v0's resolver reads them: `olm.gvk` (an API the
//! bundle provides), `olm.gvk.required`, `olm.package.required` (a package in a version range) and `olm.constraint`
//! (gvk, package, all, any, not, cel). Version ranges are blang/semver's (OLM's): a space is AND, `||` is OR, `x`
//! wildcards expand, versions are strict `X.Y.Z`, pre-releases compare as any version does. Their `Display` forms
//! are OLM's predicate strings, so that a resolution failure reads as it does in OLM.

use std::fmt;

use semver::Version;
use serde::Deserialize;
use serde_json::Value;

/// An API: group, version and kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub struct Gvk {
    #[serde(default)]
    pub group: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

impl fmt::Display for Gvk {
    /// OLM's form of an API in its constraint messages: `Kind (group/version)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}/{})", self.kind, self.group, self.version)
    }
}

/// One comparison of a version range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A blang/semver version range: alternatives (`||`) of conjunctions (spaces) of comparisons.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VersionRange {
    text: String,
    alternatives: Vec<Vec<(Op, Version)>>,
}

/// Why a property could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PropertyError {
    #[error("version range {range:?}: {reason}")]
    Range { range: String, reason: String },
    #[error("{property} value {value}: {reason}")]
    Value { property: String, value: String, reason: String },
    #[error("olm.constraint value is greater than max constraint size {MAX_CONSTRAINT_SIZE} bytes")]
    ConstraintTooLarge,
    #[error("constraint is empty")]
    EmptyConstraint,
}

/// OLM's bound on an `olm.constraint` value.
const MAX_CONSTRAINT_SIZE: usize = 2 << 16;

impl VersionRange {
    /// Parses a range as blang/semver's `ParseRange` does, its quirks included: only a space separates
    /// comparators (none after `>`, `<` or `=`), a one-character token is dropped, `||` must stand alone, and a
    /// comparator containing `x` is expanded as a wildcard by its number of parts (`1.x` is [1.0.0, 2.0.0), `1.2.x`
    /// and `1.x.x` are [1.2.0, 1.3.0) and [1.0.0, 1.1.0)).
    pub fn parse(text: &str) -> Result<Self, PropertyError> {
        let error = |reason: String| PropertyError::Range { range: text.to_owned(), reason };
        let tokens = split_and_trim(text);
        let mut groups: Vec<&[String]> = Vec::new();
        let mut last = 0;
        for (index, token) in tokens.iter().enumerate() {
            if token == "||" {
                if index == 0 {
                    return Err(error("First element in range is '||'".into()));
                }
                groups.push(&tokens[last..index]);
                last = index + 1;
            }
        }
        if last == tokens.len() {
            return Err(error("Last element in range is '||'".into()));
        }
        groups.push(&tokens[last..]);
        let mut alternatives = Vec::new();
        for group in groups {
            let mut all = Vec::new();
            for token in group {
                for comparator in expand_wildcard(token).map_err(error)? {
                    all.push(comparison(&comparator).map_err(error)?);
                }
            }
            alternatives.push(all);
        }
        Ok(Self { text: text.to_owned(), alternatives })
    }

    pub fn contains(&self, version: &Version) -> bool {
        self.alternatives.iter().any(|all| {
            all.iter().all(|(op, bound)| {
                let order = version.cmp_precedence(bound);
                match op {
                    Op::Eq => order.is_eq(),
                    Op::Ne => order.is_ne(),
                    Op::Lt => order.is_lt(),
                    Op::Le => order.is_le(),
                    Op::Gt => order.is_gt(),
                    Op::Ge => order.is_ge(),
                }
            })
        })
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// blang's tokens: split at spaces, except a space after `>`, `<` or `=` (so `>= 1.0.0` is one token); tokens of
/// one character are dropped, as blang drops them; spaces inside a token are removed.
fn split_and_trim(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let (mut tokens, mut last, mut last_char) = (Vec::new(), 0, 0u8);
    for (index, byte) in bytes.iter().enumerate() {
        if *byte == b' ' && !matches!(last_char, b'>' | b'<' | b'=') {
            if last + 1 < index {
                tokens.push(text[last..index].replace(' ', ""));
            }
            last = index + 1;
        } else if *byte != b' ' {
            last_char = *byte;
        }
    }
    if last + 1 < bytes.len() {
        tokens.push(text[last..].replace(' ', ""));
    }
    tokens
}

/// The operator (what precedes the first digit) and the version of a comparator.
fn split_comparator(token: &str) -> Result<(&str, &str), String> {
    let digit = token
        .find(|c: char| c.is_ascii_digit())
        .ok_or_else(|| format!("Could not get version from string: {token:?}"))?;
    Ok((token[..digit].trim(), &token[digit..]))
}

/// A token containing `x`, expanded as blang expands wildcards; other tokens as they are.
fn expand_wildcard(token: &str) -> Result<Vec<String>, String> {
    if !token.contains('x') {
        return Ok(vec![token.to_owned()]);
    }
    let (operator, version) = split_comparator(token)?;
    let parts: Vec<&str> = version.split('.').collect();
    // The kind of wildcard, by the number of parts, when the last one is `x`.
    let wildcard = match (parts.len(), parts.last()) {
        (2, Some(&"x")) => Some(Bump::Major),
        (3, Some(&"x")) => Some(Bump::Minor),
        _ => None,
    };
    let mut flat = version.replacen(".x.x", ".x", 1).replacen(".x", ".0", 1);
    if flat.split('.').count() == 2 {
        flat.push_str(".0");
    }
    let mut expanded = Vec::new();
    let (result_operator, increment) = match operator {
        ">" => (">=", true),
        ">=" => (">=", false),
        "<" => ("<", false),
        "<=" => ("<", true),
        "" | "=" | "==" => {
            expanded.push(format!(">={flat}"));
            ("<", true)
        }
        "!=" | "!" => {
            expanded.push(format!("<{flat}"));
            (">=", true)
        }
        _ => ("", false),
    };
    let bound = match (increment, wildcard) {
        (false, _) => flat,
        (true, Some(bump)) => bump.apply(&flat).unwrap_or_default(),
        (true, None) => String::new(),
    };
    expanded.push(format!("{result_operator}{bound}"));
    Ok(expanded)
}

#[derive(Clone, Copy)]
enum Bump {
    Major,
    Minor,
}

impl Bump {
    /// The version with its major (or minor) number one higher; None when that number does not parse or overflows.
    fn apply(self, version: &str) -> Option<String> {
        let mut parts: Vec<String> = version.split('.').map(str::to_owned).collect();
        let index = match self {
            Self::Major => 0,
            Self::Minor => 1,
        };
        let number: u64 = parts.get(index)?.parse().ok()?;
        *parts.get_mut(index)? = number.checked_add(1)?.to_string();
        Some(parts.join("."))
    }
}

/// One comparator: an operator blang knows and a strict version.
fn comparison(comparator: &str) -> Result<(Op, Version), String> {
    let (operator, version) = split_comparator(comparator)?;
    let op = match operator {
        "" | "=" | "==" => Op::Eq,
        "!" | "!=" => Op::Ne,
        "<" => Op::Lt,
        "<=" => Op::Le,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        _ => return Err(format!("Could not parse comparator {operator:?} in {comparator:?}")),
    };
    let parsed =
        Version::parse(version).map_err(|e| format!("Could not parse version {version:?} in {comparator:?}: {e}"))?;
    Ok((op, parsed))
}

/// What a bundle needs of the rest of the solution.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dependency {
    /// `olm.gvk.required`: some bundle providing the API.
    Api(Gvk),
    /// `olm.package.required`: a bundle of the package in the range.
    Package { package: String, range: VersionRange },
    /// `olm.constraint`.
    Constraint(Constraint),
    /// `olm.label.required`: some bundle carrying the `olm.label`.
    Label(String),
}

/// An `olm.constraint`: the first of gvk, package, all, any, not and cel that is set, as OLM reads it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Constraint {
    pub failure_message: Option<String>,
    pub rule: Rule,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Rule {
    Api(Gvk),
    Package {
        package: String,
        range: VersionRange,
    },
    All(Vec<Constraint>),
    Any(Vec<Constraint>),
    /// None of them holds.
    Not(Vec<Constraint>),
    /// A CEL rule over the candidate's properties.
    Cel(String),
}

impl fmt::Display for Dependency {
    /// OLM's predicate strings (`bundle X requires an operator <this>`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Api(gvk) => api(f, gvk),
            Self::Package { package, range } => package_in(f, package, range),
            Self::Constraint(constraint) => write!(f, "{constraint}"),
            Self::Label(label) => write!(f, "with label: {label}"),
        }
    }
}

fn api(f: &mut fmt::Formatter<'_>, gvk: &Gvk) -> fmt::Result {
    write!(f, "providing an API with group: {}, version: {}, kind: {}", gvk.group, gvk.version, gvk.kind)
}

fn package_in(f: &mut fmt::Formatter<'_>, package: &str, range: &VersionRange) -> fmt::Result {
    write!(f, "with package: {package} and with version in range: {range}")
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let joined = |f: &mut fmt::Formatter<'_>, children: &[Constraint], separator: &str| {
            let texts: Vec<String> = children.iter().map(ToString::to_string).collect();
            f.write_str(&texts.join(separator))
        };
        match &self.rule {
            Rule::Api(gvk) => api(f, gvk),
            Rule::Package { package, range } => package_in(f, package, range),
            Rule::All(children) => joined(f, children, " and "),
            Rule::Any(children) => joined(f, children, " or "),
            Rule::Not(children) => joined(f, children, " and not "),
            Rule::Cel(rule) => {
                write!(f, "with constraint: {rule:?} and message: {:?}", self.failure_message.as_deref().unwrap_or(""))
            }
        }
    }
}

/// What one property of a bundle says about dependencies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Read {
    Provides(Gvk),
    Requires(Dependency),
    /// `olm.label`.
    Label(String),
    /// `olm.deprecated`: OLM never resolves to the bundle.
    Deprecated,
    Other,
}

/// Reads one property (`type`, `value`).
pub fn read(kind: &str, value: &Value) -> Result<Read, PropertyError> {
    let invalid = |reason: String| PropertyError::Value { property: kind.to_owned(), value: value.to_string(), reason };
    match kind {
        "olm.gvk" => Ok(Read::Provides(Gvk::deserialize(value).map_err(|e| invalid(e.to_string()))?)),
        "olm.gvk.required" => {
            Ok(Read::Requires(Dependency::Api(Gvk::deserialize(value).map_err(|e| invalid(e.to_string()))?)))
        }
        "olm.package.required" => {
            let required = PackageRequired::deserialize(value).map_err(|e| invalid(e.to_string()))?;
            let range = VersionRange::parse(&required.version_range)?;
            Ok(Read::Requires(Dependency::Package { package: required.package_name, range }))
        }
        "olm.constraint" => {
            if value.to_string().len() > MAX_CONSTRAINT_SIZE {
                return Err(PropertyError::ConstraintTooLarge);
            }
            let blob = ConstraintBlob::deserialize(value).map_err(|e| invalid(e.to_string()))?;
            Ok(Read::Requires(Dependency::Constraint(blob.typed()?)))
        }
        "olm.label" => Ok(Read::Label(Label::deserialize(value).map_err(|e| invalid(e.to_string()))?.label)),
        "olm.label.required" => {
            Ok(Read::Requires(Dependency::Label(Label::deserialize(value).map_err(|e| invalid(e.to_string()))?.label)))
        }
        "olm.deprecated" => Ok(Read::Deprecated),
        _ => Ok(Read::Other),
    }
}

#[derive(Deserialize)]
struct Label {
    #[serde(default)]
    label: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PackageRequired {
    package_name: String,
    version_range: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ConstraintBlob {
    #[serde(default)]
    failure_message: Option<String>,
    #[serde(default)]
    gvk: Option<StrictGvk>,
    #[serde(default)]
    package: Option<StrictPackage>,
    #[serde(default)]
    all: Option<Compound>,
    #[serde(default)]
    any: Option<Compound>,
    #[serde(default)]
    not: Option<Compound>,
    #[serde(default)]
    cel: Option<Cel>,
}

/// The objects inside an `olm.constraint`, read as OLM reads the whole value: unknown fields refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictGvk {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    kind: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StrictPackage {
    package_name: String,
    version_range: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Compound {
    #[serde(default)]
    constraints: Vec<ConstraintBlob>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Cel {
    rule: String,
}

impl ConstraintBlob {
    /// The first field set, in OLM's order: gvk, package, all, any, not, cel.
    fn typed(self) -> Result<Constraint, PropertyError> {
        let children = |compound: Compound| -> Result<Vec<Constraint>, PropertyError> {
            compound.constraints.into_iter().map(ConstraintBlob::typed).collect()
        };
        let rule = if let Some(StrictGvk { group, version, kind }) = self.gvk {
            Rule::Api(Gvk { group, version, kind })
        } else if let Some(package) = self.package {
            Rule::Package { range: VersionRange::parse(&package.version_range)?, package: package.package_name }
        } else if let Some(all) = self.all {
            Rule::All(children(all)?)
        } else if let Some(any) = self.any {
            Rule::Any(children(any)?)
        } else if let Some(not) = self.not {
            Rule::Not(children(not)?)
        } else if let Some(cel) = self.cel {
            Rule::Cel(cel.rule)
        } else {
            return Err(PropertyError::EmptyConstraint);
        };
        Ok(Constraint { failure_message: self.failure_message, rule })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(text: &str) -> Version {
        Version::parse(text).expect("version")
    }

    fn accepts(range: &str, versions: &[&str]) -> Vec<bool> {
        let range = VersionRange::parse(range).expect("range");
        versions.iter().map(|version| range.contains(&v(version))).collect()
    }

    #[test]
    fn ranges_are_blangs_spaces_and_alternatives() {
        assert_eq!(accepts(">=1.0.0 <2.0.0", &["0.9.9", "1.0.0", "1.9.9", "2.0.0"]), [false, true, true, false]);
        assert_eq!(accepts("<1.0.0 || >=3.0.0", &["0.1.0", "1.0.0", "3.0.0"]), [true, false, true]);
        assert_eq!(accepts(">= 1.2.0", &["1.1.9", "1.2.0"]), [false, true], "a space after the operator");
        assert_eq!(accepts("1.2.3", &["1.2.3", "1.2.4"]), [true, false]);
        assert_eq!(accepts("!=1.2.3", &["1.2.3", "1.2.4"]), [false, true]);
        assert_eq!(accepts("! 1.2.3", &["1.2.3", "1.2.4"]), [true, false], "a one-character token is dropped");
        assert_eq!(accepts(">=1.0.0+linux", &["1.0.0"]), [true], "an x in build metadata is no wildcard");
        assert_eq!(accepts(">1.0.0 <=1.1.0", &["1.0.0", "1.1.0", "1.1.1"]), [false, true, false]);
        assert_eq!(accepts(">=1.0.0", &["1.1.0-rc.1"]), [true], "pre-releases compare as any version");
        assert_eq!(accepts("=1.0.0", &["1.0.0+build.7"]), [true], "build metadata is not compared");
    }

    #[test]
    fn wildcards_expand_as_blangs() {
        assert_eq!(accepts("1.2.x", &["1.1.9", "1.2.0", "1.2.9", "1.3.0"]), [false, true, true, false]);
        assert_eq!(accepts("1.x", &["0.9.0", "1.0.0", "1.9.9", "2.0.0"]), [false, true, true, false]);
        assert_eq!(
            accepts("1.x.x", &["1.0.0", "1.0.9", "1.1.0"]),
            [true, true, false],
            "three parts: a patch wildcard"
        );
        assert_eq!(accepts(">=1.2.x", &["1.1.9", "1.2.0"]), [false, true]);
        assert_eq!(accepts("<=1.2.x", &["1.2.9", "1.3.0"]), [true, false]);
        assert_eq!(accepts(">1.2.x", &["1.2.9", "1.3.0"]), [false, true]);
        assert_eq!(accepts("<1.2.x", &["1.1.9", "1.2.0"]), [true, false]);
    }

    #[test]
    fn malformed_ranges_are_errors() {
        for bad in
            ["", "~1.0.0", "^1.0.0", "v1.0.0", "1.0", ">=1.0.0 ||", "|| 1.0.0", "1.0.0||2.0.0", "=>1.0.0", "1.y.x"]
        {
            assert!(VersionRange::parse(bad).is_err(), "{bad:?}");
        }
        assert!(
            VersionRange::parse("18446744073709551615.x").is_err(),
            "an overflowing wildcard is an error, not a panic"
        );
        assert_eq!(
            VersionRange::parse("").map(|_| ()),
            Err(PropertyError::Range { range: String::new(), reason: "Last element in range is '||'".into() })
        );
    }

    #[test]
    fn properties_read_as_olm_reads_them() {
        let gvk = json!({"group": "example.com", "version": "v1", "kind": "Grumbo"});
        let expected = Gvk { group: "example.com".into(), version: "v1".into(), kind: "Grumbo".into() };
        assert_eq!(read("olm.gvk", &gvk), Ok(Read::Provides(expected.clone())));
        assert_eq!(read("olm.gvk.required", &gvk), Ok(Read::Requires(Dependency::Api(expected))));
        let package = read("olm.package.required", &json!({"packageName": "grumbo", "versionRange": ">=1.0.0"}));
        let Ok(Read::Requires(dependency)) = package else { panic!("{package:?}") };
        assert_eq!(dependency.to_string(), "with package: grumbo and with version in range: >=1.0.0");
        assert_eq!(read("olm.bundle.object", &json!({"data": "x"})), Ok(Read::Other));
        assert!(read("olm.package.required", &json!({"packageName": "grumbo", "versionRange": "~1"})).is_err());
        assert_eq!(read("olm.label", &json!({"label": "tier-1"})), Ok(Read::Label("tier-1".into())));
        assert_eq!(
            read("olm.label.required", &json!({"label": "tier-1"})),
            Ok(Read::Requires(Dependency::Label("tier-1".into())))
        );
        assert_eq!(read("olm.deprecated", &json!({})), Ok(Read::Deprecated));
    }

    #[test]
    fn constraints_take_the_first_field_in_olms_order_and_refuse_unknown_ones() {
        let value = json!({"failureMessage": "needs a cert manager",
            "any": {"constraints": [
                {"gvk": {"group": "cert-manager.io", "version": "v1", "kind": "Certificate"}},
                {"package": {"packageName": "cert-manager", "versionRange": ">=1.0.0"}}]},
            "cel": {"rule": "true"}});
        let Ok(Read::Requires(Dependency::Constraint(constraint))) = read("olm.constraint", &value) else {
            panic!("a constraint")
        };
        assert!(matches!(&constraint.rule, Rule::Any(children) if children.len() == 2), "any before cel");
        assert_eq!(
            constraint.to_string(),
            "providing an API with group: cert-manager.io, version: v1, kind: Certificate or with package: \
             cert-manager and with version in range: >=1.0.0"
        );
        let cel =
            read("olm.constraint", &json!({"failureMessage": "m", "cel": {"rule": "properties.exists(p, true)"}}));
        let Ok(Read::Requires(cel)) = cel else { panic!("{cel:?}") };
        assert_eq!(cel.to_string(), r#"with constraint: "properties.exists(p, true)" and message: "m""#);
        assert_eq!(read("olm.constraint", &json!({})), Err(PropertyError::EmptyConstraint));
        assert!(read("olm.constraint", &json!({"gvk": {"group": "g", "version": "v", "kind": "k"}, "x": 1})).is_err());
        assert!(read("olm.constraint", &json!({"gvk": {"group": "g", "version": "v", "kind": "k", "x": 1}})).is_err());
        let package = json!({"package": {"packageName": "p", "versionRange": ">=1.0.0", "x": 1}});
        assert!(read("olm.constraint", &package).is_err(), "unknown fields are refused at every depth");
        let huge = json!({"cel": {"rule": "a".repeat(MAX_CONSTRAINT_SIZE)}});
        assert_eq!(read("olm.constraint", &huge), Err(PropertyError::ConstraintTooLarge));
    }
}

//! Who may install from where: the source rules of the InstallPolicies naming a requester, and whether they allow
//! an image, Raw manifests or a catalog package. A requester no rule names is not limited; one that some rules name
//! may use what any of those allows, nothing else. The webhook enforces it at create and update.

use kube::ResourceExt;
use serde_json::Value;

use crate::api::v2alpha1::{DigestRule, InstallPolicy, PolicySubject, SourceRule, SubjectKind};
use crate::rbac::UserInfo;

/// What a requester asks to install.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source<'a> {
    /// A bundle image reference.
    Image(&'a str),
    /// Raw manifests.
    Raw,
    /// A package of a CatalogSource.
    Package { package: &'a str, catalog_namespace: &'a str, catalog_name: &'a str },
}

/// The answer for one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceVerdict {
    /// No source rule names the requester.
    Unrestricted,
    Allowed,
    /// The denial, naming the policies and what they allow.
    Denied(String),
}

/// Whether `user` may install from `source` under `policies`.
pub fn judge(policies: &[InstallPolicy], user: &UserInfo, source: Source<'_>) -> SourceVerdict {
    let mut naming = Vec::new();
    let mut rules: Vec<&SourceRule> = Vec::new();
    for policy in policies {
        let mut names_user = false;
        for rule in policy.spec.sources.iter().filter(|rule| rule.subjects.iter().any(|s| names(s, user))) {
            names_user = true;
            rules.push(rule);
        }
        if names_user {
            naming.push(policy.name_any());
        }
    }
    if rules.is_empty() {
        return SourceVerdict::Unrestricted;
    }
    if rules.iter().any(|rule| allows(rule, source)) {
        return SourceVerdict::Allowed;
    }
    let allowed: Vec<String> = rules.iter().flat_map(|rule| describe_rule(rule)).collect();
    let allowed = if allowed.is_empty() { "nothing".to_owned() } else { format!("only {}", allowed.join("; ")) };
    SourceVerdict::Denied(format!(
        "user {:?} may not install {}: InstallPolicy {} allows them {allowed}",
        user.name,
        describe_source(source),
        naming.join(", "),
    ))
}

/// The sources a write of an Install asks for: those of its content on create and whenever the content changes
/// (nothing otherwise: an approval or a label moves no source).
pub fn install_sources<'a>(old: Option<&Value>, new: &'a Value) -> Vec<Source<'a>> {
    if old.is_some_and(|old| old["spec"]["content"] == new["spec"]["content"]) {
        return Vec::new();
    }
    let items = new["spec"]["content"].as_array().map(Vec::as_slice).unwrap_or_default();
    items
        .iter()
        .filter_map(|item| match item["type"].as_str() {
            Some("ManifestImage") => item["manifestImage"].as_str().map(Source::Image),
            Some("Raw") => Some(Source::Raw),
            _ => None,
        })
        .collect()
}

/// The source a write of an Operator asks for: its update source on create and whenever that changes.
pub fn operator_source<'a>(old: Option<&Value>, new: &'a Value) -> Option<Source<'a>> {
    let updates = &new["spec"]["updates"];
    if old.is_some_and(|old| old["spec"]["updates"] == *updates) {
        return None;
    }
    match updates["type"].as_str()? {
        "ManifestImage" => updates["manifestImage"].as_str().map(Source::Image),
        "CatalogSource" => {
            let catalog = &updates["catalogSource"];
            Some(Source::Package {
                package: catalog["package"].as_str()?,
                catalog_namespace: catalog["ref"]["namespace"].as_str()?,
                catalog_name: catalog["ref"]["name"].as_str()?,
            })
        }
        _ => None,
    }
}

/// Whether a subject names the user, as an RBAC binding's subject would.
fn names(subject: &PolicySubject, user: &UserInfo) -> bool {
    match subject.kind {
        SubjectKind::User => user.name == subject.name,
        SubjectKind::Group => user.groups.contains(&subject.name),
        SubjectKind::ServiceAccount => {
            subject.namespace.as_deref().is_some_and(|namespace| user.is_service_account(namespace, &subject.name))
        }
    }
}

fn allows(rule: &SourceRule, source: Source<'_>) -> bool {
    match source {
        Source::Raw => rule.raw,
        Source::Image(reference) => {
            let Ok(parsed) = crate::bundle::reference::parse(reference) else { return false };
            let repository = format!("{}/{}", parsed.registry(), parsed.repository());
            rule.images.iter().any(|image| {
                let pinned = parsed.digest().is_some();
                let inside = match image.repository.strip_suffix("/*") {
                    Some(prefix) => repository.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/')),
                    None => repository == image.repository,
                };
                inside && (image.digests == DigestRule::Optional || pinned)
            })
        }
        Source::Package { package, catalog_namespace, catalog_name } => {
            let package_listed = rule.packages.iter().any(|p| p == "*" || p == package);
            let catalog_listed = rule.catalogs.is_empty()
                || rule.catalogs.iter().any(|c| c.namespace == catalog_namespace && c.name == catalog_name);
            package_listed && catalog_listed
        }
    }
}

fn describe_source(source: Source<'_>) -> String {
    match source {
        Source::Image(reference) => format!("image {reference}"),
        Source::Raw => "Raw manifests".to_owned(),
        Source::Package { package, catalog_namespace, catalog_name } => {
            format!("package {package} from CatalogSource {catalog_namespace}/{catalog_name}")
        }
    }
}

fn describe_rule(rule: &SourceRule) -> Vec<String> {
    let mut allowed: Vec<String> = rule
        .images
        .iter()
        .map(|image| match image.digests {
            DigestRule::Required => format!("images {} pinned by digest", image.repository),
            DigestRule::Optional => format!("images {} by tag or digest", image.repository),
        })
        .collect();
    if rule.raw {
        allowed.push("Raw manifests".to_owned());
    }
    if !rule.packages.is_empty() {
        let catalogs = if rule.catalogs.is_empty() {
            "any CatalogSource they may use".to_owned()
        } else {
            rule.catalogs.iter().map(|c| format!("{}/{}", c.namespace, c.name)).collect::<Vec<_>>().join(", ")
        };
        allowed.push(format!("packages {} from {catalogs}", rule.packages.join(", ")));
    }
    allowed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v2alpha1::{CatalogName, ImageSource, InstallPolicySpec};

    const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn policy(name: &str, rules: Vec<SourceRule>) -> InstallPolicy {
        InstallPolicy::new(name, InstallPolicySpec { sources: rules, ..InstallPolicySpec::default() })
    }

    fn team_a(images: &[(&str, DigestRule)]) -> SourceRule {
        SourceRule {
            subjects: vec![PolicySubject { kind: SubjectKind::Group, name: "team-a".into(), namespace: None }],
            images: images
                .iter()
                .map(|(repository, digests)| ImageSource { repository: (*repository).into(), digests: *digests })
                .collect(),
            ..SourceRule::default()
        }
    }

    fn eve() -> UserInfo {
        UserInfo::new("eve", &["team-a", "system:authenticated"])
    }

    #[test]
    fn a_requester_no_rule_names_is_unrestricted() {
        let policies = [policy("sources", vec![team_a(&[("registry.example/approved/*", DigestRule::Required)])])];
        let bob = UserInfo::new("bob", &["system:authenticated"]);
        assert_eq!(judge(&policies, &bob, Source::Raw), SourceVerdict::Unrestricted);
        assert_eq!(judge(&[], &eve(), Source::Raw), SourceVerdict::Unrestricted);
    }

    #[test]
    fn a_prefix_matches_only_at_a_path_boundary() {
        let policies = [policy("sources", vec![team_a(&[("registry.example/approved/*", DigestRule::Optional)])])];
        let verdict = |image: &str| judge(&policies, &eve(), Source::Image(image));
        assert_eq!(verdict("registry.example/approved/plumbus:1"), SourceVerdict::Allowed);
        assert_eq!(verdict("registry.example/approved/team/plumbus:1"), SourceVerdict::Allowed);
        assert!(matches!(verdict("registry.example/approved-evil/plumbus:1"), SourceVerdict::Denied(_)));
        assert!(matches!(verdict("registry.example/other/plumbus:1"), SourceVerdict::Denied(_)));
        assert!(matches!(verdict("other.example/approved/plumbus:1"), SourceVerdict::Denied(_)));
    }

    #[test]
    fn an_exact_repository_matches_only_itself() {
        let policies = [policy("sources", vec![team_a(&[("registry.example/approved", DigestRule::Optional)])])];
        let verdict = |image: &str| judge(&policies, &eve(), Source::Image(image));
        assert_eq!(verdict("registry.example/approved:1"), SourceVerdict::Allowed);
        assert!(matches!(verdict("registry.example/approved/x:1"), SourceVerdict::Denied(_)));
    }

    #[test]
    fn digests_are_required_unless_tags_are_allowed() {
        let policies = [policy("sources", vec![team_a(&[("127.0.0.1:5000/approved/*", DigestRule::Required)])])];
        let pinned = format!("127.0.0.1:5000/approved/plumbus@{DIGEST}");
        assert_eq!(judge(&policies, &eve(), Source::Image(&pinned)), SourceVerdict::Allowed);
        let tagged = judge(&policies, &eve(), Source::Image("127.0.0.1:5000/approved/plumbus:v1"));
        let SourceVerdict::Denied(message) = tagged else { panic!("{tagged:?}") };
        assert_eq!(
            message,
            "user \"eve\" may not install image 127.0.0.1:5000/approved/plumbus:v1: InstallPolicy sources allows them \
             only images 127.0.0.1:5000/approved/* pinned by digest"
        );
    }

    #[test]
    fn docker_hub_short_names_are_normalized() {
        let policies = [policy("sources", vec![team_a(&[("docker.io/library/*", DigestRule::Optional)])])];
        assert_eq!(judge(&policies, &eve(), Source::Image("busybox:1")), SourceVerdict::Allowed);
    }

    #[test]
    fn raw_manifests_need_a_rule_allowing_them() {
        let images_only = [policy("sources", vec![team_a(&[("registry.example/approved/*", DigestRule::Required)])])];
        assert!(matches!(judge(&images_only, &eve(), Source::Raw), SourceVerdict::Denied(_)));
        let raw = SourceRule { raw: true, ..team_a(&[]) };
        let policies = [images_only[0].clone(), policy("raw", vec![raw])];
        assert_eq!(judge(&policies, &eve(), Source::Raw), SourceVerdict::Allowed, "the union of the rules");
    }

    #[test]
    fn packages_are_allowed_by_name_and_catalog() {
        let rule = SourceRule {
            packages: vec!["plumbus".into()],
            catalogs: vec![CatalogName { namespace: "olm".into(), name: "operatorhubio".into() }],
            ..team_a(&[])
        };
        let policies = [policy("catalogs", vec![rule])];
        let package = |package, catalog_name| Source::Package { package, catalog_namespace: "olm", catalog_name };
        assert_eq!(judge(&policies, &eve(), package("plumbus", "operatorhubio")), SourceVerdict::Allowed);
        assert!(matches!(judge(&policies, &eve(), package("grumbo", "operatorhubio")), SourceVerdict::Denied(_)));
        assert!(matches!(judge(&policies, &eve(), package("plumbus", "community")), SourceVerdict::Denied(_)));
    }

    #[test]
    fn service_accounts_and_users_are_named_as_rbac_names_them() {
        let rule = SourceRule {
            subjects: vec![
                PolicySubject { kind: SubjectKind::ServiceAccount, name: "ci".into(), namespace: Some("build".into()) },
                PolicySubject { kind: SubjectKind::User, name: "dave".into(), namespace: None },
            ],
            ..SourceRule::default()
        };
        let policies = [policy("sources", vec![rule])];
        let ci = UserInfo::service_account("build", "ci");
        assert!(matches!(judge(&policies, &ci, Source::Raw), SourceVerdict::Denied(_)));
        let other = UserInfo::service_account("other", "ci");
        assert_eq!(judge(&policies, &other, Source::Raw), SourceVerdict::Unrestricted);
        let dave = UserInfo::new("dave", &[]);
        let SourceVerdict::Denied(message) = judge(&policies, &dave, Source::Raw) else { panic!() };
        assert!(message.ends_with("InstallPolicy sources allows them nothing"), "{message}");
    }

    #[test]
    fn sources_are_asked_for_on_create_and_when_they_change() {
        let install = |image: &str| {
            serde_json::json!({"spec": {"approval": "Unapproved", "content": [
                {"type": "ManifestImage", "manifestImage": image}, {"type": "Raw", "raw": "kind: ConfigMap"}]}})
        };
        let first = install("registry.example/a:1");
        assert_eq!(install_sources(None, &first), vec![Source::Image("registry.example/a:1"), Source::Raw]);
        let mut approved = first.clone();
        approved["spec"]["approval"] = serde_json::json!("Approved");
        assert!(install_sources(Some(&first), &approved).is_empty());
        let moved = install("registry.example/b:1");
        assert_eq!(install_sources(Some(&first), &moved)[0], Source::Image("registry.example/b:1"));

        let operator = serde_json::json!({"spec": {"updates": {"type": "CatalogSource", "catalogSource": {
            "package": "plumbus", "channel": "stable", "ref": {"name": "community", "namespace": "olm"}}}}});
        let package = Source::Package { package: "plumbus", catalog_namespace: "olm", catalog_name: "community" };
        assert_eq!(operator_source(None, &operator), Some(package));
        assert_eq!(operator_source(Some(&operator), &operator), None);
        let image = serde_json::json!({"spec": {"updates": {"type": "ManifestImage", "manifestImage": "registry.example/a:1"}}});
        assert_eq!(operator_source(Some(&operator), &image), Some(Source::Image("registry.example/a:1")));
    }
}

//! OLM v0's PackageManifest API (`packagemanifests.packages.operators.coreos.com/v1`, served by its packageserver),
//! built from the catalogs the CatalogSources serve: what each package of a catalog shows (OLM's
//! `newPackageManifest`, pkg/package-server/provider/registry.go), which catalogs a namespace sees and which one a
//! GET picks (the provider's `List`/`Get`), the Table `kubectl get packagemanifests` prints and the field selector
//! rule (pkg/package-server/storage/reststorage.go, printer.go), and the `icon` subresource
//! (storage/subresources.go). Pure functions over loaded catalogs (`crate::catalog`); the aggregated API server
//! calls them. Nothing is stored: a request builds what it answers from the catalogs in memory.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde_json::{json, Value};

use super::table::{table_of, Column, IncludeObject};
use crate::api::v1alpha1::CatalogSource;
use crate::catalog::description::{BundleDescription, Icon};
use crate::catalog::fbc::{Catalog, Channel, Package};
use crate::catalog::resolve;
use crate::category::Categorized;

/// The group, version, kind and resource served.
pub const GROUP: &str = "packages.operators.coreos.com";
pub const VERSION: &str = "v1";
pub const KIND: &str = "PackageManifest";
pub const LIST_KIND: &str = "PackageManifestList";
pub const RESOURCE: &str = "packagemanifests";

/// The labels OLM gives every PackageManifest: its CatalogSource's name and namespace, its provider's name and URL.
pub const CATALOG_LABEL: &str = "catalog";
pub const CATALOG_NAMESPACE_LABEL: &str = "catalog-namespace";
pub const PROVIDER_LABEL: &str = "provider";
pub const PROVIDER_URL_LABEL: &str = "provider-url";

/// OLM's operating system and architecture labels (pkg/package-server/provider/labels.go): a PackageManifest whose
/// default CSV has no label with the prefix is labelled as supporting linux, or amd64.
const OS_LABEL_PREFIX: &str = "operatorframework.io/os";
const ARCH_LABEL_PREFIX: &str = "operatorframework.io/arch";
pub const DEFAULT_OS_LABEL: &str = "operatorframework.io/os.linux";
pub const DEFAULT_ARCH_LABEL: &str = "operatorframework.io/arch.amd64";
const SUPPORTED: &str = "supported";

/// The icon OLM serves for a package whose default channel's CSV has none, with its media type.
pub const DEFAULT_ICON: &str = r#"
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 258.51 258.51"><defs><style>.cls-1{fill:#d1d1d1;}.cls-2{fill:#8d8d8f;}</style></defs><title>Asset 4</title><g id="Layer_2" data-name="Layer 2"><g id="Layer_1-2" data-name="Layer 1"><path class="cls-1" d="M129.25,20A109.1,109.1,0,0,1,206.4,206.4,109.1,109.1,0,1,1,52.11,52.11,108.45,108.45,0,0,1,129.25,20m0-20h0C58.16,0,0,58.16,0,129.25H0c0,71.09,58.16,129.26,129.25,129.26h0c71.09,0,129.26-58.17,129.26-129.26h0C258.51,58.16,200.34,0,129.25,0Z"/><path class="cls-2" d="M177.54,103.41H141.66L154.9,65.76c1.25-4.4-2.33-8.76-7.21-8.76H102.93a7.32,7.32,0,0,0-7.4,6l-10,69.61c-.59,4.17,2.89,7.89,7.4,7.89h36.9L115.55,197c-1.12,4.41,2.48,8.55,7.24,8.55a7.58,7.58,0,0,0,6.47-3.48L184,113.85C186.86,109.24,183.29,103.41,177.54,103.41Z"/></g></g></svg>
"#;
pub const DEFAULT_ICON_TYPE: &str = "image/svg+xml";

/// The Table's columns (printer.go): the descriptions of Name and Age are Kubernetes' ObjectMeta docs; Age is a
/// string column (OLM prints the age itself), and Catalog shows the CatalogSource's display name.
const COLUMNS: [Column; 3] = [
    (
        "Name",
        "string",
        "name",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may \
         allow a client to request the generation of an appropriate name automatically. Name is primarily intended \
         for creation idempotence and configuration definition. Cannot be updated. More info: \
         https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
    ),
    ("Catalog", "string", "", "The source catalog for this package"),
    (
        "Age",
        "string",
        "",
        "CreationTimestamp is a timestamp representing the server time when this object was created. It is not \
         guaranteed to be set in happens-before order across separate operations. Clients may not set this value. \
         It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. \
         More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
    ),
];

/// A CatalogSource with the catalog it serves.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub catalog_source: &'a CatalogSource,
    pub catalog: &'a Catalog,
}

/// Why a PackageManifest is not shown or a request cannot be answered.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PackageManifestError {
    /// No channel's head has a readable CSV: OLM leaves the package out ("eliding package").
    #[error("package {package} of CatalogSource {namespace}/{catalog_source}: packagemanifest has no valid channels")]
    NoValidChannels { namespace: String, catalog_source: String, package: String },
    /// A list's field selector names no `metadata.name` to equal: OLM's storage refuses it in these words, which
    /// kube-apiserver's handler answers as an internal error (500), as OLM's does.
    #[error("field label not supported: {0}")]
    FieldLabelNotSupported(String),
}

impl Categorized for PackageManifestError {
    fn category(&self) -> &'static str {
        match self {
            Self::NoValidChannels { .. } => "PackageManifestWithoutChannels",
            Self::FieldLabelNotSupported(_) => "FieldLabelNotSupported",
        }
    }
}

/// A PackageManifest built, with the icon its `icon` subresource serves.
struct Built<'a> {
    manifest: Value,
    /// The first icon of the default channel's CSV and the entity tag OLM gives it (`"<name>.<channel>.<csv>"`).
    icon: Option<(&'a Icon, String)>,
}

/// The PackageManifest of `package`, one of the packages `catalog_source` serves, as shown in `namespace` (OLM
/// shows every PackageManifest in the namespace asked for). Its icons are stripped, as OLM's storage strips them
/// from every get and list.
pub fn package_manifest(
    catalog_source: &CatalogSource,
    package: &Package,
    namespace: &str,
) -> Result<Value, PackageManifestError> {
    build(catalog_source, package, namespace).map(|built| built.manifest)
}

fn build<'a>(
    catalog_source: &CatalogSource,
    package: &'a Package,
    namespace: &str,
) -> Result<Built<'a>, PackageManifestError> {
    // Channels in name order (the package's map is ordered), each with its head's description; a channel whose
    // head has none is elided, as OLM elides one whose CSV it cannot read.
    let channels: Vec<(&Channel, &BundleDescription)> = package
        .channels
        .values()
        .filter_map(|channel| {
            let head = resolve::head(package, channel).ok()?;
            Some((channel, package.descriptions.get(&head.name)?))
        })
        .collect();
    let catalog_name = catalog_source.name_any();
    let catalog_namespace = catalog_source.namespace().unwrap_or_default();
    let Some(first) = channels.first() else {
        return Err(PackageManifestError::NoValidChannels {
            namespace: catalog_namespace,
            catalog_source: catalog_name,
            package: package.name.clone(),
        });
    };
    // The default channel's head gives the provider and its labels; when the default channel is elided (or names
    // no channel, which OLM's catalogs cannot), the first channel stands in, as OLM falls back to it.
    let (default_channel, default_head) = package
        .default_channel
        .as_deref()
        .and_then(|default| channels.iter().find(|(channel, _)| channel.name == default))
        .unwrap_or(first);
    let provider = &default_head.shown.provider;

    // Labels, later ones overriding earlier ones in OLM's order: the CatalogSource's, the catalog's name and
    // namespace, the provider's, the default CSV's, then the os/arch defaults when it names none.
    let mut labels: BTreeMap<String, String> = catalog_source.labels().clone();
    labels.insert(CATALOG_LABEL.into(), catalog_name.clone());
    labels.insert(CATALOG_NAMESPACE_LABEL.into(), catalog_namespace.clone());
    labels.insert(PROVIDER_LABEL.into(), provider.name.clone());
    labels.insert(PROVIDER_URL_LABEL.into(), provider.url.clone());
    labels.extend(default_head.labels.iter().map(|(key, value)| (key.clone(), value.clone())));
    if !labels.keys().any(|key| key.starts_with(OS_LABEL_PREFIX)) {
        labels.insert(DEFAULT_OS_LABEL.into(), SUPPORTED.into());
    }
    if !labels.keys().any(|key| key.starts_with(ARCH_LABEL_PREFIX)) {
        labels.insert(DEFAULT_ARCH_LABEL.into(), SUPPORTED.into());
    }

    let shown_channels: Vec<Value> =
        channels.iter().map(|(channel, head)| shown_channel(package, channel, head)).collect();
    let mut status = json!({
        "catalogSource": catalog_name,
        "catalogSourceDisplayName": catalog_source.spec.display_name.clone().unwrap_or_default(),
        "catalogSourcePublisher": catalog_source.spec.publisher.clone().unwrap_or_default(),
        "catalogSourceNamespace": catalog_namespace,
        "provider": serde_json::to_value(provider).unwrap_or_else(|_| json!({})),
        "packageName": package.name,
        "channels": shown_channels,
        "defaultChannel": default_channel.name,
    });
    if let Some(message) = &package.deprecations.package {
        status["deprecation"] = json!({"message": message});
    }
    let icon = if default_head.from_csv_metadata { package.icon.as_ref() } else { default_head.icon.as_ref() };
    let etag = format!("\"{}.{}.{}\"", package.name, default_channel.name, default_head.csv_name);
    Ok(Built {
        manifest: json!({
            "kind": KIND,
            "apiVersion": format!("{GROUP}/{VERSION}"),
            "metadata": {"name": package.name, "namespace": namespace, "labels": labels,
                         "creationTimestamp": catalog_source.metadata.creation_timestamp},
            "spec": {},
            "status": status,
        }),
        icon: icon.map(|icon| (icon, etag)),
    })
}

/// A channel as OLM shows it: its head's CSV name and description (a description made from `olm.csv.metadata`
/// takes the package's when it has none), its entries and its deprecation.
fn shown_channel(package: &Package, channel: &Channel, head: &BundleDescription) -> Value {
    let mut description = serde_json::to_value(&head.shown).unwrap_or_else(|_| json!({}));
    if head.from_csv_metadata && head.shown.long_description.is_empty() {
        if let Some(text) = package.description.as_deref().filter(|text| !text.is_empty()) {
            description["description"] = json!(text);
        }
    }
    let mut shown = json!({
        "name": channel.name,
        "currentCSV": head.csv_name,
        "currentCSVDesc": description,
        "entries": entries(package, channel),
    });
    if let Some(message) = package.deprecations.channels.get(&channel.name) {
        shown["deprecation"] = json!({"message": message});
    }
    shown
}

/// A channel's entries as OLM lists them: each bundle of the channel but those carrying `olm.deprecated`, newest
/// version first, with its `olm.deprecations` message. OLM writes `null` for a channel left with none.
fn entries(package: &Package, channel: &Channel) -> Value {
    let mut bundles: Vec<_> = channel
        .entries
        .iter()
        .filter_map(|entry| package.bundles.get(&entry.name))
        .filter(|bundle| !bundle.deprecated)
        .collect();
    if bundles.is_empty() {
        return Value::Null;
    }
    // blang/semver's order, which ignores build metadata; the sort is stable, so equal versions keep the channel's
    // order (OLM's sort leaves them in no fixed order).
    bundles.sort_by(|a, b| b.version.cmp_precedence(&a.version));
    bundles
        .into_iter()
        .map(|bundle| {
            let mut entry = json!({"name": bundle.name, "version": bundle.version.to_string()});
            if let Some(message) = package.deprecations.bundles.get(&bundle.name) {
                entry["deprecation"] = json!({"message": message});
            }
            entry
        })
        .collect()
}

/// The CatalogSources whose packages a request in `namespace` sees, in the order their packages are picked: the
/// namespace's own, then those of the global catalog namespace (when it is another), each in name order. An empty
/// namespace (a list across all namespaces) sees every one, by namespace and name. OLM lists the catalogs of one
/// namespace in Go map order; name order makes a GET answer the same every time.
pub fn visible<'s, 'a>(sources: &'s [Source<'a>], namespace: &str, global_namespace: &str) -> Vec<&'s Source<'a>> {
    ranked(sources, namespace, global_namespace).into_iter().map(|(_, source)| source).collect()
}

/// Where a CatalogSource's packages come: its namespace's own (0) or the global namespace's (1), its namespace, its
/// name.
type Place = (u8, String, String);

/// The visible CatalogSources, each with its place, in order.
fn ranked<'s, 'a>(sources: &'s [Source<'a>], namespace: &str, global_namespace: &str) -> Vec<(Place, &'s Source<'a>)> {
    let mut seen: Vec<(Place, &'s Source<'a>)> = sources
        .iter()
        .filter_map(|source| {
            let source_namespace = source.catalog_source.namespace().unwrap_or_default();
            let rank = if namespace.is_empty() || source_namespace == namespace {
                0
            } else if source_namespace == global_namespace {
                1
            } else {
                return None;
            };
            Some(((rank, source_namespace, source.catalog_source.name_any()), source))
        })
        .collect();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    seen
}

/// The PackageManifests a list in `namespace` answers (empty: across all namespaces, each in its catalog's
/// namespace): every package of every visible catalog that has a channel to show, the namespace's own catalogs'
/// first, then by package name and catalog name, so the first of a name is the one a GET picks. Same-named
/// packages of several catalogs are all listed, as in OLM.
pub fn list(sources: &[Source<'_>], namespace: &str, global_namespace: &str) -> Vec<Value> {
    // (own or global, catalog namespace, package, catalog name, manifest)
    let mut items: Vec<(u8, &str, &str, &str, Value)> = Vec::new();
    let visible = ranked(sources, namespace, global_namespace);
    for ((rank, source_namespace, name), source) in &visible {
        let shown_in = shown_namespace(source, namespace);
        for package in source.catalog.packages.values() {
            if let Ok(manifest) = package_manifest(source.catalog_source, package, &shown_in) {
                items.push((*rank, source_namespace, &package.name, name, manifest));
            }
        }
    }
    items.sort_by(|a, b| (a.0, a.1, a.2, a.3).cmp(&(b.0, b.1, b.2, b.3)));
    items.into_iter().map(|(_, _, _, _, manifest)| manifest).collect()
}

/// The PackageManifest a GET of `name` in `namespace` answers: the first a list would give, so the namespace's
/// own catalogs win over the global namespace's (OLM's `Get` takes the first of its `List`). None: not found.
pub fn get(sources: &[Source<'_>], namespace: &str, global_namespace: &str, name: &str) -> Option<Value> {
    pick(sources, namespace, global_namespace, name).map(|built| built.manifest)
}

fn pick<'a>(sources: &[Source<'a>], namespace: &str, global_namespace: &str, name: &str) -> Option<Built<'a>> {
    visible(sources, namespace, global_namespace).into_iter().find_map(|source| {
        let package = source.catalog.packages.get(name)?;
        build(source.catalog_source, package, &shown_namespace(source, namespace)).ok()
    })
}

/// The namespace a PackageManifest is shown in: the one asked for, or its catalog's for a list across namespaces.
fn shown_namespace(source: &Source<'_>, namespace: &str) -> String {
    if namespace.is_empty() {
        source.catalog_source.namespace().unwrap_or_default()
    } else {
        namespace.to_owned()
    }
}

/// The PackageManifestList of `items` (OLM's storage always answers a list, `[]` when empty).
pub fn list_object(items: Vec<Value>) -> Value {
    json!({"kind": LIST_KIND, "apiVersion": format!("{GROUP}/{VERSION}"), "metadata": {}, "items": items})
}

/// OLM's storage rule for a list's field selector, given its requirements as the API server parsed them
/// (`(field, equality, value)`; kube-apiserver itself refuses fields other than `metadata.name` and
/// `metadata.namespace`): the value of the first `metadata.name` equality names the only package listed; any other
/// non-empty selector is refused.
pub fn selected_name<'r>(
    requirements: impl IntoIterator<Item = (&'r str, bool, &'r str)>,
) -> Result<Option<&'r str>, PackageManifestError> {
    let requirements: Vec<(&str, bool, &str)> = requirements.into_iter().collect();
    if let Some((_, _, name)) = requirements.iter().find(|(field, equal, _)| *field == "metadata.name" && *equal) {
        return Ok(Some(name));
    }
    match requirements.first() {
        Some((field, _, _)) => Err(PackageManifestError::FieldLabelNotSupported((*field).to_owned())),
        None => Ok(None),
    }
}

/// The `meta.k8s.io/v1` Table of `manifests` (as `list` or `get` gave them) with OLM's columns Name, Catalog (the
/// CatalogSource's display name) and Age (printed at `now`, as kubectl prints ages); no column definitions when
/// `no_headers` (the `noHeaders` table option). Each row carries its object as `include` asks.
pub fn table(manifests: Vec<Value>, include: IncludeObject, no_headers: bool, now: Timestamp) -> Value {
    let rows = manifests.into_iter().map(|manifest| {
        let created = manifest["metadata"]["creationTimestamp"].as_str().and_then(|text| text.parse().ok());
        let cells =
            json!([manifest["metadata"]["name"], manifest["status"]["catalogSourceDisplayName"], age(created, now),]);
        (cells, manifest)
    });
    let columns: &[Column] = if no_headers { &[] } else { &COLUMNS };
    table_of(columns, rows, include, "")
}

/// An age as OLM's printer writes it (`translateTimestampSince`: Kubernetes' `duration.HumanDuration`, and
/// `<unknown>` without a creation time).
pub fn age(created: Option<Timestamp>, now: Timestamp) -> String {
    let Some(created) = created else {
        return "<unknown>".into();
    };
    let seconds = now.duration_since(created).as_secs();
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            rest => format!("{minutes}m{rest}s"),
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            rest => format!("{hours}h{rest}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            rest => format!("{}d{rest}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            days => format!("{}y{days}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// What the `icon` subresource answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IconAnswer {
    /// 304: the request carried `If-None-Match` and a `resourceVersion` parameter. OLM answers so before looking
    /// at anything (whatever the tag), and so does this.
    NotModified,
    /// 404, without a body.
    NotFound,
    /// 200: the image, its `Content-Type` and its `Etag` (empty for the default icon, as OLM sets it).
    Icon { data: Vec<u8>, content_type: String, etag: String },
}

/// The `icon` subresource of PackageManifest `name` in `namespace`: the first icon of its default channel's CSV
/// (for a CSV made from `olm.csv.metadata`, the package's icon), or OLM's default icon when it has none.
pub fn icon(
    sources: &[Source<'_>],
    namespace: &str,
    global_namespace: &str,
    name: &str,
    if_none_match: Option<&str>,
    resource_version: Option<&str>,
) -> IconAnswer {
    if if_none_match.is_some_and(|tag| !tag.is_empty()) && resource_version.is_some_and(|rv| !rv.is_empty()) {
        return IconAnswer::NotModified;
    }
    let Some(built) = pick(sources, namespace, global_namespace, name) else {
        return IconAnswer::NotFound;
    };
    match built.icon {
        Some((icon, etag)) => IconAnswer::Icon { data: icon.data.clone(), content_type: icon.media_type.clone(), etag },
        None => IconAnswer::Icon {
            data: DEFAULT_ICON.as_bytes().to_vec(),
            content_type: DEFAULT_ICON_TYPE.into(),
            etag: String::new(),
        },
    }
}

#[cfg(test)]
#[path = "packagemanifest_tests.rs"]
mod tests;

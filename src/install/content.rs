//! From an Install's content to the plain objects it applies: where namespace-less objects land, how the namespace
//! mapping is applied, which namespaces a bundle's operator watches, which ServiceAccount applies them (docs/design.md,
//! 'Who an Install runs as'), and the labels, annotations and owner references every applied object carries. Pure
//! functions.

use serde_json::{json, Value};

use super::grants::INSTALL_ANNOTATION;
use super::objects::applied_ref;
use crate::api::v1::OperatorGroup;
use crate::api::v1alpha1::{ClusterServiceVersion, PROPERTIES_ANNOTATION};
use crate::api::v2alpha1::{AppliedObject, NamespaceMapping};
use crate::bundle::model::{check_object, yaml_documents, Bundle};
use crate::bundle::properties;
use crate::bundle::BundleError;
use crate::rbac::KindIndex;

/// The namespace content means when it names none: kubectl's default, which `spec.namespaces` can map (seed 004's
/// `from: default, to: operators`).
pub const DEFAULT_NAMESPACE: &str = "default";

/// Annotation marking a ClusterServiceVersion as the record of an Install's bundle: the legacy CSV loop must never
/// install anything for it.
pub const CSV_RECORD_ANNOTATION: &str = "v2alpha1.operators.coreos.com/install-record";

/// Where `namespace` of the content lands after `mapping`.
pub fn mapped_namespace(mapping: &[NamespaceMapping], namespace: &str) -> String {
    mapping.iter().find(|m| m.from == namespace).map_or_else(|| namespace.to_owned(), |m| m.to.clone())
}

/// The namespace a bundle installs into, and where a namespace-less object lands: `default`, mapped.
pub fn install_namespace(mapping: &[NamespaceMapping]) -> String {
    mapped_namespace(mapping, DEFAULT_NAMESPACE)
}

/// The objects of Raw content, each checked to be a Kubernetes object.
pub fn parse_raw(index: usize, text: &str) -> Result<Vec<Value>, BundleError> {
    let file = format!("spec.content[{index}].raw");
    let documents = yaml_documents(&file, text)?;
    for (document, value) in documents.iter().enumerate() {
        check_object(&file, document, value)?;
    }
    Ok(documents)
}

/// Gives namespace-less objects of namespaced kinds the `default` namespace, drops the namespace of cluster-scoped
/// ones (as the API server ignores it), then applies the mapping to every namespace field. Kinds the index does not
/// know keep what they have; computing permissions reports them.
pub fn place_raw(objects: &mut [Value], kinds: &KindIndex, mapping: &[NamespaceMapping]) {
    let mut known = kinds.clone();
    known.add_crds(objects.iter());
    for object in objects.iter_mut() {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        match known.resolve(&api_version, &kind) {
            Some(info) if info.namespaced && object["metadata"]["namespace"].as_str().is_none_or(str::is_empty) => {
                object["metadata"]["namespace"] = json!(DEFAULT_NAMESPACE);
            }
            Some(info) if info.namespaced => {}
            Some(_) => {
                if let Some(metadata) = object["metadata"].as_object_mut() {
                    metadata.remove("namespace");
                }
            }
            None => {}
        }
    }
    let pairs: Vec<(String, String)> = mapping.iter().map(|m| (m.from.clone(), m.to.clone())).collect();
    crate::bundle::map_namespaces(objects, &pairs);
}

/// The namespaces a bundle's operator watches: those of the one OperatorGroup in its namespace when there is exactly
/// one; otherwise, as users expect without one, all namespaces when the CSV supports it, else its own namespace.
pub fn target_namespaces(
    csv: &ClusterServiceVersion,
    install_namespace: &str,
    groups: &[OperatorGroup],
) -> Vec<String> {
    if let [group] = groups {
        if let Some(status) = &group.status {
            if !status.namespaces.is_empty() {
                return status.namespaces.clone();
            }
        }
        if !group.spec.target_namespaces.is_empty() {
            return group.spec.target_namespaces.clone();
        }
        if group.spec.selector.is_none() {
            return vec![String::new()];
        }
    }
    csv.spec.targets_without_group(install_namespace)
}

/// What every applied object carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decoration<'a> {
    pub install: &'a str,
    pub uid: &'a str,
    pub component_label: Option<&'a str>,
}

/// Adds the component label, the Install annotation and, except on CustomResourceDefinitions, an owner reference to
/// the Install, so deleting the Install removes what it applied but never the CRDs (and with them every custom
/// resource users created), as OLM never deletes CRDs either.
pub fn decorate(objects: &mut [Value], decoration: &Decoration<'_>) {
    for object in objects {
        let metadata = &mut object["metadata"];
        if let Some(label) = decoration.component_label {
            if !metadata["labels"].is_object() {
                metadata["labels"] = json!({});
            }
            metadata["labels"][label] = json!("");
        }
        if !metadata["annotations"].is_object() {
            metadata["annotations"] = json!({});
        }
        metadata["annotations"][INSTALL_ANNOTATION] = json!(decoration.install);
        if object["kind"] != "CustomResourceDefinition" {
            let owner = json!({"apiVersion": "operators.coreos.com/v2alpha1", "kind": "Install",
                "name": decoration.install, "uid": decoration.uid});
            let references = &mut object["metadata"]["ownerReferences"];
            match references.as_array_mut() {
                Some(list) => {
                    list.retain(|r| r["uid"] != decoration.uid);
                    list.push(owner);
                }
                None => *references = json!([owner]),
            }
        }
    }
}

/// Whether a live object was created by the Install `install` with `uid`: it carries an owner reference to that uid,
/// or, for a CustomResourceDefinition (which carries none, so that it outlives the Install), the Install's
/// annotation. Any other existing object is never taken over: applying over it would make it the Install's, and
/// deleting the Install would delete it (a Namespace with everything in it, another operator's account).
pub fn created_by(live: &Value, install: &str, uid: &str) -> bool {
    let owned = live["metadata"]["ownerReferences"].as_array().into_iter().flatten().any(|owner| owner["uid"] == uid);
    let annotated = live["metadata"]["annotations"][INSTALL_ANNOTATION].as_str() == Some(install);
    owned || (live["kind"] == "CustomResourceDefinition" && annotated)
}

/// Whether a CRD of an Install's content defines the content's own API, for the InstallPolicy ceilings: it does not
/// exist yet (`live` absent), or the Install made it, or takes it over from the OLM v0 CSV it replaces.
pub fn own_crd(live: Option<&Value>, install: &str, uid: &str, taken_over: impl Fn(&Value) -> bool) -> bool {
    live.is_none_or(|live| created_by(live, install, uid) || taken_over(live))
}

/// The CSV of a bundle as the record an Install applies beside the bundle's objects, with the annotations OLM v0
/// gives the CSVs it installs: the namespace's OperatorGroup (`group`, when it has exactly one) and its targets, and
/// the bundle's properties (`operatorframework.io/properties`, which tie the CSV to its package for a Subscription's
/// resolution).
pub fn csv_record(bundle: &Bundle, namespace: &str, targets: &[String], group: Option<&str>, install: &str) -> Value {
    let mut record = serde_json::to_value(&bundle.csv).unwrap_or_else(|_| json!({}));
    if let Some(object) = record.as_object_mut() {
        object.remove("status");
    }
    record["apiVersion"] = json!("operators.coreos.com/v1alpha1");
    record["kind"] = json!("ClusterServiceVersion");
    let metadata = &mut record["metadata"];
    if let Some(fields) = metadata.as_object_mut() {
        for field in ["resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"] {
            fields.remove(field);
        }
    }
    metadata["namespace"] = json!(namespace);
    if !metadata["annotations"].is_object() {
        metadata["annotations"] = json!({});
    }
    let targets: Vec<&str> = targets.iter().map(String::as_str).filter(|t| !t.is_empty()).collect();
    let annotations = &mut metadata["annotations"];
    match group {
        Some(group) => annotations[crate::api::v1::OPERATOR_GROUP_ANNOTATION] = json!(group),
        // Whatever the bundle's CSV says is not a group of this cluster.
        None => {
            if let Some(written) = annotations.as_object_mut() {
                written.remove(crate::api::v1::OPERATOR_GROUP_ANNOTATION);
            }
        }
    }
    annotations[crate::api::v1::OPERATOR_NAMESPACE_ANNOTATION] = json!(namespace);
    annotations[crate::api::v1::TARGET_NAMESPACES_ANNOTATION] = json!(targets.join(","));
    annotations[PROPERTIES_ANNOTATION] = json!(properties::annotation(&properties::rendered(bundle)));
    annotations[CSV_RECORD_ANNOTATION] = json!(install);
    record
}

/// Whether a CSV is an Install's record, which no legacy loop may act on.
pub fn is_install_record(csv: &ClusterServiceVersion) -> bool {
    csv.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(CSV_RECORD_ANNOTATION))
}

/// The order objects are applied in: what others need first (namespaces, CRDs, accounts, RBAC), the CSV record last.
pub fn apply_rank(object: &Value) -> u8 {
    match object["kind"].as_str().unwrap_or_default() {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "ServiceAccount" => 2,
        "ClusterRole" | "Role" => 3,
        "ClusterRoleBinding" | "RoleBinding" => 4,
        "Secret" | "ConfigMap" => 5,
        "Service" => 6,
        "Deployment" => 7,
        "ClusterServiceVersion" => 9,
        _ => 8,
    }
}

/// Sorts objects into apply order, keeping the content's order within a rank.
pub fn sort_for_apply(objects: &mut [Value]) {
    objects.sort_by_key(apply_rank);
}

/// What was applied before and is no longer in the content, in reverse apply order (dependents first).
pub fn to_prune(previous: &[AppliedObject], current: &[Value]) -> Vec<AppliedObject> {
    let kept: Vec<AppliedObject> = current.iter().map(applied_ref).collect();
    let same = |a: &AppliedObject, b: &AppliedObject| {
        crate::rbac::kinds::group_of(&a.api_version) == crate::rbac::kinds::group_of(&b.api_version)
            && a.kind == b.kind
            && a.namespace == b.namespace
            && a.name == b.name
    };
    let mut pruned: Vec<AppliedObject> =
        previous.iter().filter(|old| !kept.iter().any(|new| same(old, new))).cloned().collect();
    pruned.sort_by_key(|object| std::cmp::Reverse(apply_rank(&json!({"kind": object.kind}))));
    pruned
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::v1::{OperatorGroupSpec, OperatorGroupStatus};
    use crate::api::v1alpha1::InstallModeType;

    fn mapping(from: &str, to: &str) -> Vec<NamespaceMapping> {
        vec![NamespaceMapping { from: from.into(), to: to.into() }]
    }

    fn group(service_account: Option<&str>, targets: &[&str]) -> OperatorGroup {
        let mut group = OperatorGroup::new(
            "og",
            OperatorGroupSpec {
                service_account_name: service_account.map(str::to_owned),
                target_namespaces: targets.iter().map(|t| (*t).to_owned()).collect(),
                ..OperatorGroupSpec::default()
            },
        );
        group.metadata.namespace = Some("operators".into());
        group
    }

    fn csv(modes: &[(InstallModeType, bool)]) -> ClusterServiceVersion {
        let modes: Vec<Value> = modes.iter().map(|(m, s)| json!({"type": m, "supported": s})).collect();
        serde_json::from_value(json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
            "metadata": {"name": "plumbus.v1", "namespace": "x", "resourceVersion": "5", "uid": "u"},
            "spec": {"displayName": "Plumbus", "installModes": modes, "install": {"strategy": "deployment", "spec": {"deployments": []}}},
            "status": {"phase": "Succeeded"}}))
        .expect("csv")
    }

    #[test]
    fn default_maps_through_the_namespace_mapping() {
        assert_eq!(install_namespace(&mapping("default", "operators")), "operators");
        assert_eq!(install_namespace(&[]), "default");
        assert_eq!(mapped_namespace(&mapping("default", "operators"), "other"), "other");
    }

    #[test]
    fn raw_objects_without_namespace_count_as_default_and_are_mapped() {
        let mut objects = parse_raw(
            0,
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: elsewhere\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: c\n  namespace: default\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: d\nsubjects:\n- kind: ServiceAccount\n  name: s\n  namespace: default\nroleRef: {kind: Role, name: r, apiGroup: rbac.authorization.k8s.io}\n",
        )
        .expect("parses");
        place_raw(&mut objects, &KindIndex::kubernetes(), &mapping("default", "operators"));
        assert_eq!(objects[0]["metadata"]["namespace"], "operators");
        assert_eq!(objects[1]["metadata"]["namespace"], "elsewhere");
        assert!(objects[2]["metadata"].get("namespace").is_none());
        assert_eq!(objects[3]["metadata"]["namespace"], "operators");
        assert_eq!(objects[3]["subjects"][0]["namespace"], "operators");
    }

    #[test]
    fn raw_custom_resources_take_their_scope_from_crds_in_the_content() {
        let mut objects = parse_raw(0, "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Widget, plural: widgets}\n---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n").expect("parses");
        place_raw(&mut objects, &KindIndex::kubernetes(), &[]);
        assert_eq!(objects[1]["metadata"]["namespace"], "default");
        assert!(objects[0]["metadata"].get("namespace").is_none());
    }

    #[test]
    fn raw_content_that_is_not_an_object_is_invalid() {
        let error = parse_raw(2, "apiVersion: v1\nkind: ConfigMap\n").expect_err("no name");
        assert!(error.to_string().contains("spec.content[2].raw"), "{error}");
        assert!(parse_raw(0, "kind: [").is_err());
    }

    #[test]
    fn without_operator_group_all_namespaces_when_supported_else_own() {
        let all = csv(&[(InstallModeType::AllNamespaces, true), (InstallModeType::OwnNamespace, true)]);
        assert_eq!(target_namespaces(&all, "operators", &[]), vec![String::new()]);
        let own = csv(&[(InstallModeType::AllNamespaces, false), (InstallModeType::OwnNamespace, true)]);
        assert_eq!(target_namespaces(&own, "operators", &[]), vec!["operators".to_owned()]);
    }

    #[test]
    fn one_operator_group_says_which_namespaces_are_watched() {
        let all = csv(&[(InstallModeType::AllNamespaces, true)]);
        assert_eq!(target_namespaces(&all, "operators", &[group(None, &["a", "b"])]), vec!["a", "b"]);
        let mut with_status = group(None, &["a"]);
        with_status.status = Some(OperatorGroupStatus { namespaces: vec!["c".into()], ..Default::default() });
        assert_eq!(target_namespaces(&all, "operators", &[with_status]), vec!["c"]);
        assert_eq!(target_namespaces(&all, "operators", &[group(None, &[])]), vec![String::new()]);
        let two = [group(None, &["a"]), group(None, &["b"])];
        assert_eq!(target_namespaces(&all, "operators", &two), vec![String::new()]);
    }

    #[test]
    fn only_what_an_install_created_is_its_own() {
        let owned = json!({"kind": "ServiceAccount", "metadata": {"ownerReferences": [{"uid": "u"}]}});
        assert!(created_by(&owned, "plumbus", "u"));
        assert!(!created_by(&owned, "plumbus", "other"), "an orphan of an earlier Install of the name");
        let existing = json!({"kind": "Namespace", "metadata": {"name": "operators"}});
        assert!(!created_by(&existing, "plumbus", "u"));
        let annotated = json!({"kind": "ServiceAccount", "metadata": {"annotations": {INSTALL_ANNOTATION: "plumbus"}}});
        assert!(!created_by(&annotated, "plumbus", "u"), "an annotation anyone can write is not ownership");
        let crd =
            json!({"kind": "CustomResourceDefinition", "metadata": {"annotations": {INSTALL_ANNOTATION: "plumbus"}}});
        assert!(created_by(&crd, "plumbus", "u"));
        assert!(!created_by(&crd, "grumbo", "u"));
    }

    #[test]
    fn decoration_labels_annotates_and_owns_all_but_crds() {
        let mut objects = vec![
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"keep": "me"}}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "b"}}),
        ];
        let decoration = Decoration {
            install: "plumbus",
            uid: "u1",
            component_label: Some("v2alpha1.operators.coreos.com/plumbus"),
        };
        decorate(&mut objects, &decoration);
        decorate(&mut objects, &decoration);
        assert_eq!(
            objects[0]["metadata"]["labels"],
            json!({"keep": "me", "v2alpha1.operators.coreos.com/plumbus": ""})
        );
        assert_eq!(objects[0]["metadata"]["ownerReferences"].as_array().map(Vec::len), Some(1));
        assert_eq!(objects[0]["metadata"]["annotations"][INSTALL_ANNOTATION], "plumbus");
        assert!(objects[1]["metadata"].get("ownerReferences").is_none());
        assert_eq!(objects[1]["metadata"]["labels"]["v2alpha1.operators.coreos.com/plumbus"], "");
    }

    #[test]
    fn the_csv_record_is_placed_and_marked() {
        let bundle = |csv: ClusterServiceVersion| Bundle {
            csv,
            objects: Vec::new(),
            annotations: crate::bundle::model::BundleAnnotations { package: "plumbus".into(), ..Default::default() },
            properties: Vec::new(),
            dependencies: Vec::new(),
        };
        let mut own = csv(&[]);
        own.spec.version = Some("1.0.0".into());
        own.metadata.annotations = Some([(PROPERTIES_ANNOTATION.to_owned(), "stale".to_owned())].into());
        let record = csv_record(&bundle(own), "operators", &[String::new()], Some("og"), "plumbus");
        assert_eq!(record["metadata"]["namespace"], "operators");
        assert_eq!(record["metadata"]["annotations"][CSV_RECORD_ANNOTATION], "plumbus");
        assert_eq!(record["metadata"]["annotations"]["olm.targetNamespaces"], "");
        assert_eq!(record["metadata"]["annotations"]["olm.operatorGroup"], "og");
        assert_eq!(record["metadata"]["annotations"]["olm.operatorNamespace"], "operators");
        assert_eq!(
            record["metadata"]["annotations"][PROPERTIES_ANNOTATION],
            r#"{"properties":[{"type":"olm.package","value":{"packageName":"plumbus","version":"1.0.0"}}]}"#,
            "the bundle's properties replace whatever the CSV carried"
        );
        let mut claiming = csv(&[]);
        claiming.metadata.annotations = Some([("olm.operatorGroup".to_owned(), "elsewhere".to_owned())].into());
        let groupless = csv_record(&bundle(claiming), "operators", &["a".into(), "b".into()], None, "plumbus");
        assert!(groupless["metadata"]["annotations"].get("olm.operatorGroup").is_none());
        assert_eq!(groupless["metadata"]["annotations"]["olm.targetNamespaces"], "a,b");
        let record = csv_record(&bundle(csv(&[])), "operators", &[String::new()], None, "plumbus");
        assert!(record.get("status").is_none());
        assert!(record["metadata"].get("resourceVersion").is_none());
        let parsed: ClusterServiceVersion = serde_json::from_value(record).expect("still a CSV");
        assert!(is_install_record(&parsed));
        assert!(!is_install_record(&csv(&[])));
    }

    #[test]
    fn apply_order_puts_prerequisites_first_and_the_record_last() {
        let mut objects: Vec<Value> = [
            "ClusterServiceVersion",
            "Deployment",
            "RoleBinding",
            "Role",
            "CustomResourceDefinition",
            "Namespace",
            "Widget",
        ]
        .iter()
        .map(|k| json!({"kind": k}))
        .collect();
        sort_for_apply(&mut objects);
        let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "Role",
                "RoleBinding",
                "Deployment",
                "Widget",
                "ClusterServiceVersion"
            ]
        );
    }

    #[test]
    fn objects_dropped_from_the_content_are_pruned_dependents_first() {
        let previous = vec![
            AppliedObject {
                api_version: "v1".into(),
                kind: "ServiceAccount".into(),
                namespace: Some("o".into()),
                name: "a".into(),
            },
            AppliedObject {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                namespace: Some("o".into()),
                name: "d".into(),
            },
            AppliedObject {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("o".into()),
                name: "kept".into(),
            },
        ];
        let current =
            vec![json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kept", "namespace": "o"}})];
        let pruned = to_prune(&previous, &current);
        let kinds: Vec<&str> = pruned.iter().map(|o| o.kind.as_str()).collect();
        assert_eq!(kinds, ["Deployment", "ServiceAccount"]);
    }

    #[test]
    fn a_crd_is_the_contents_own_when_absent_made_by_the_install_or_taken_over() {
        let crd = |annotations: Value| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                   "metadata": {"name": "plumbai.how.theydoit.com", "annotations": annotations}})
        };
        let never = |_: &Value| false;
        assert!(own_crd(None, "plumbus", "uid-1", never), "new to the cluster");
        let ours = crd(json!({INSTALL_ANNOTATION: "plumbus"}));
        assert!(own_crd(Some(&ours), "plumbus", "uid-1", never));
        let theirs = crd(json!({INSTALL_ANNOTATION: "other"}));
        assert!(!own_crd(Some(&theirs), "plumbus", "uid-1", never), "another Install's");
        assert!(!own_crd(Some(&crd(json!({}))), "plumbus", "uid-1", never), "made by someone else");
        assert!(own_crd(Some(&crd(json!({}))), "plumbus", "uid-1", |_| true), "taken over from OLM v0");
    }
}

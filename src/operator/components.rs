//! Components (docs/design.md, 'The component label'): the kinds an Operator gathers by its label, and what its status
//! says of each one — a reference, and the conditions worth a person's attention, copied from the component where it
//! has them (a ClusterServiceVersion's phase becomes one condition, as OLM v0 shows it).

use std::collections::BTreeMap;

use semver::Version;
use serde_json::Value;

use super::kinds::ComponentKind;
use super::projection::{projection_targets, ProjectionTarget};
use crate::api::component::operator_of_label_key;
use crate::api::v2alpha1::{ApiReference, ComponentCondition, ComponentRef};

/// The Operators an object's labels make it a component of.
pub fn operators_of(labels: &BTreeMap<String, String>) -> Vec<String> {
    labels.keys().filter_map(|key| operator_of_label_key(key)).map(str::to_owned).collect()
}

/// What an Operator's status keeps of one component.
#[derive(Clone, Debug, PartialEq)]
pub struct Component {
    pub reference: ComponentRef,
    /// Set for ClusterServiceVersions: what `status.metadata` may be read from (boxed: most components are no CSV,
    /// and the index holds one of these per labelled object).
    pub csv: Option<Box<CsvFacts>>,
    /// What OLM v0's loops generated from it, which carries its label too.
    pub projects_to: Vec<ProjectionTarget>,
}

/// The facts of a ClusterServiceVersion that `status.metadata` projects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CsvFacts {
    pub phase: String,
    pub version: Option<Version>,
    pub display_name: Option<String>,
    pub description: Option<String>,
    pub provides: Vec<ApiReference>,
    pub requires: Vec<ApiReference>,
}

/// The component an object of `kind` is, read from its JSON form.
pub fn component_of(kind: &ComponentKind, object: &Value) -> Component {
    let metadata = &object["metadata"];
    let text = |value: &Value| value.as_str().map(str::to_owned);
    let reference = ComponentRef {
        kind: kind.kind.to_owned(),
        api_version: kind.api_version(),
        namespace: text(&metadata["namespace"]).filter(|_| kind.namespaced),
        name: text(&metadata["name"]).unwrap_or_default(),
        uid: text(&metadata["uid"]),
        resource_version: text(&metadata["resourceVersion"]),
        conditions: conditions_of(kind, object),
    };
    let csv = (kind.kind == "ClusterServiceVersion").then(|| Box::new(csv_facts(object)));
    Component { reference, csv, projects_to: projection_targets(kind, object) }
}

/// Conditions of the kinds seed 004 names, copied as they are; a CSV's phase as one condition. Other kinds have
/// none worth showing.
fn conditions_of(kind: &ComponentKind, object: &Value) -> Vec<ComponentCondition> {
    match kind.kind {
        "ClusterServiceVersion" => csv_phase_condition(object).into_iter().collect(),
        "CustomResourceDefinition"
        | "APIService"
        | "Deployment"
        | "ReplicaSet"
        | "Pod"
        | "Subscription"
        | "InstallPlan"
        | "Install" => copied_conditions(&object["status"]["conditions"]),
        _ => Vec::new(),
    }
}

fn copied_conditions(conditions: &Value) -> Vec<ComponentCondition> {
    let text = |value: &Value| value.as_str().filter(|text| !text.is_empty()).map(str::to_owned);
    let mut copied: Vec<ComponentCondition> = conditions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|condition| {
            Some(ComponentCondition {
                type_: text(&condition["type"])?,
                status: text(&condition["status"]).unwrap_or_else(|| "Unknown".into()),
                reason: text(&condition["reason"]),
                message: text(&condition["message"]),
                last_transition_time: serde_json::from_value(condition["lastTransitionTime"].clone()).ok(),
            })
        })
        .collect();
    copied.sort_by(|a, b| a.type_.cmp(&b.type_));
    copied
}

fn csv_phase_condition(object: &Value) -> Option<ComponentCondition> {
    let status = &object["status"];
    let phase = status["phase"].as_str().filter(|phase| !phase.is_empty())?;
    let text = |value: &Value| value.as_str().filter(|text| !text.is_empty()).map(str::to_owned);
    Some(ComponentCondition {
        type_: phase.to_owned(),
        status: "True".into(),
        reason: text(&status["reason"]),
        message: text(&status["message"]),
        last_transition_time: serde_json::from_value(status["lastTransitionTime"].clone()).ok(),
    })
}

fn csv_facts(object: &Value) -> CsvFacts {
    let spec = &object["spec"];
    let text = |value: &Value| value.as_str().filter(|text| !text.is_empty()).map(str::to_owned);
    CsvFacts {
        phase: object["status"]["phase"].as_str().unwrap_or_default().to_owned(),
        version: spec["version"].as_str().and_then(|version| Version::parse(version).ok()),
        display_name: text(&spec["displayName"]),
        description: text(&spec["description"]),
        provides: api_references(&spec["customresourcedefinitions"]["owned"], &spec["apiservicedefinitions"]["owned"]),
        requires: api_references(
            &spec["customresourcedefinitions"]["required"],
            &spec["apiservicedefinitions"]["required"],
        ),
    }
}

/// API references of CRD descriptions (`name` is `<plural>.<group>`) and APIService descriptions (group given).
fn api_references(crds: &Value, apiservices: &Value) -> Vec<ApiReference> {
    let mut references: Vec<ApiReference> = Vec::new();
    for description in crds.as_array().into_iter().flatten() {
        let name = description["name"].as_str().unwrap_or_default();
        let (plural, group) = name.split_once('.').unwrap_or((name, ""));
        references.push(ApiReference {
            group: group.to_owned(),
            version: description["version"].as_str().unwrap_or_default().to_owned(),
            kind: description["kind"].as_str().unwrap_or_default().to_owned(),
            plural: Some(plural.to_owned()).filter(|plural| !plural.is_empty()),
            singular: None,
        });
    }
    for description in apiservices.as_array().into_iter().flatten() {
        let name = description["name"].as_str().map(str::to_owned);
        references.push(ApiReference {
            group: description["group"].as_str().unwrap_or_default().to_owned(),
            version: description["version"].as_str().unwrap_or_default().to_owned(),
            kind: description["kind"].as_str().unwrap_or_default().to_owned(),
            plural: name,
            singular: None,
        });
    }
    references.sort();
    references.dedup();
    references
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::kinds::COMPONENT_KINDS;
    use serde_json::json;

    fn kind_named(name: &str) -> &'static ComponentKind {
        COMPONENT_KINDS.iter().find(|kind| kind.kind == name).expect("known kind")
    }

    #[test]
    fn only_component_label_keys_name_operators() {
        let labels = BTreeMap::from([
            ("v2alpha1.operators.coreos.com/plumbus".to_owned(), String::new()),
            ("v2alpha1.operators.coreos.com/grumbo".to_owned(), String::new()),
            ("operators.coreos.com/plumbus.operators".to_owned(), String::new()),
            ("app".to_owned(), "plumbus".to_owned()),
        ]);
        assert_eq!(operators_of(&labels), vec!["grumbo".to_owned(), "plumbus".to_owned()]);
    }

    #[test]
    fn a_deployment_reference_carries_its_conditions_sorted() {
        let deployment = json!({
            "metadata": {"name": "plumbus", "namespace": "operators", "uid": "u1", "resourceVersion": "7"},
            "status": {"conditions": [
                {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                 "lastTransitionTime": "2026-11-21T10:00:00Z"},
                {"type": "Available", "status": "False", "reason": "MinimumReplicasUnavailable", "message": "0/1"},
            ]}
        });
        let component = component_of(kind_named("Deployment"), &deployment);
        let reference = component.reference;
        assert_eq!((reference.kind.as_str(), reference.api_version.as_str()), ("Deployment", "apps/v1"));
        assert_eq!(reference.namespace.as_deref(), Some("operators"));
        assert_eq!((reference.uid.as_deref(), reference.resource_version.as_deref()), (Some("u1"), Some("7")));
        let types: Vec<&str> = reference.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, vec!["Available", "Progressing"]);
        assert_eq!(reference.conditions[0].message.as_deref(), Some("0/1"));
        assert!(reference.conditions[1].last_transition_time.is_some());
        assert!(component.csv.is_none());
    }

    #[test]
    fn cluster_scoped_references_have_no_namespace_and_plain_kinds_no_conditions() {
        let role =
            json!({"metadata": {"name": "r", "namespace": "ignored"}, "status": {"conditions": [{"type": "X"}]}});
        let reference = component_of(kind_named("ClusterRole"), &role).reference;
        assert_eq!(reference.namespace, None);
        assert!(reference.conditions.is_empty());
        let config = component_of(kind_named("ConfigMap"), &role).reference;
        assert_eq!(config.namespace.as_deref(), Some("ignored"));
        assert_eq!(config.api_version, "v1");
    }

    #[test]
    fn a_csv_phase_is_one_condition_and_its_facts_are_read() {
        let csv = json!({
            "metadata": {"name": "plumbus.v2.0.0", "namespace": "operators"},
            "spec": {
                "version": "2.0.0", "displayName": "Plumbus", "description": "",
                "customresourcedefinitions": {
                    "owned": [{"name": "plumbai.how.theydoit.com", "version": "v2alpha1", "kind": "Plumbus"}],
                    "required": [{"name": "grumbos.manufacturing.how.theydoit.com", "version": "v1", "kind": "Grumbo"}]
                },
                "apiservicedefinitions": {"owned": [{"group": "metrics.example", "version": "v1", "kind": "Usage", "name": "usages"}]}
            },
            "status": {"phase": "Installing", "reason": "InstallWaiting", "message": "deployment rolling out"}
        });
        let component = component_of(kind_named("ClusterServiceVersion"), &csv);
        let condition = &component.reference.conditions[0];
        assert_eq!((condition.type_.as_str(), condition.status.as_str()), ("Installing", "True"));
        assert_eq!(condition.reason.as_deref(), Some("InstallWaiting"));
        let facts = component.csv.expect("facts");
        assert_eq!(facts.version, Some(Version::new(2, 0, 0)));
        assert_eq!(facts.description, None, "an empty description is no description");
        assert_eq!(facts.provides.len(), 2);
        assert_eq!(facts.provides[0].group, "how.theydoit.com", "sorted by group");
        assert_eq!(facts.provides[0].plural.as_deref(), Some("plumbai"));
        assert_eq!(facts.provides[1].group, "metrics.example");
        assert_eq!(facts.requires[0].kind, "Grumbo");
        let no_phase = component_of(kind_named("ClusterServiceVersion"), &json!({"metadata": {"name": "x"}}));
        assert!(no_phase.reference.conditions.is_empty());
    }

    #[test]
    fn kinds_watched_as_metadata_are_read_from_nothing_else_and_the_others_are() {
        // An object with every field any kind's component reads: a kind watched as metadata only must make the same
        // component of its metadata alone, and a kind watched whole must not (or its whole watch is waste).
        let metadata = json!({"name": "x", "namespace": "operators", "uid": "u", "resourceVersion": "3",
                              "labels": {"v2alpha1.operators.coreos.com/plumbus": ""}});
        let whole = json!({
            "metadata": metadata,
            "spec": {"version": "1.0.0", "displayName": "X",
                     "install": {"spec": {"deployments": [{"name": "d"}]}},
                     "customresourcedefinitions": {"owned": [{"name": "xs.example.com", "version": "v1", "kind": "X"}]},
                     "clusterServiceVersionNames": ["x.v1"]},
            "status": {"phase": "Succeeded", "conditions": [{"type": "Ready", "status": "True"}],
                       "installPlanRef": {"name": "install-1"}, "installedCSV": "x.v1",
                       "plan": [{"resource": {"kind": "Role", "name": "r"}}]}
        });
        let only_metadata = json!({"metadata": metadata});
        for kind in COMPONENT_KINDS {
            let same = component_of(kind, &whole) == component_of(kind, &only_metadata);
            assert_eq!(same, !kind.body, "{}: watched {}", kind.kind, if kind.body { "whole" } else { "as metadata" });
        }
    }

    #[test]
    fn malformed_conditions_are_skipped_not_fatal() {
        let pod = json!({"metadata": {"name": "p"}, "status": {"conditions": [
            {"status": "True"}, {"type": "Ready", "lastTransitionTime": "yesterday"}, 7
        ]}});
        let conditions = component_of(kind_named("Pod"), &pod).reference.conditions;
        assert_eq!(conditions.len(), 1);
        assert_eq!((conditions[0].status.as_str(), conditions[0].last_transition_time.is_none()), ("Unknown", true));
    }
}

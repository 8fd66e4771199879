//! The Deployments of a CSV's install strategy as OLM renders them: in the install namespace, with the strategy's
//! labels and `revisionHistoryLimit: 1`, and on the pod template the CSV's annotations, the template's own over them
//! (OLM v1's precedence), then `olm.targetNamespaces` and `olm.operatorNamespace` over both. Pure functions.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::convert_error::ConvertError;
use super::model::Bundle;
use crate::api::v1::{OPERATOR_NAMESPACE_ANNOTATION, TARGET_NAMESPACES_ANNOTATION};

/// The CSV annotation OLM v1 gathers the bundle's properties in: the CSV's own, then `metadata/properties.yaml`'s.
pub const PROPERTIES_ANNOTATION: &str = "olm.properties";

/// The Deployments by name, each as it is applied.
pub fn render_deployments(
    bundle: &Bundle,
    namespace: &str,
    targets_annotation: &str,
) -> Result<BTreeMap<String, Value>, ConvertError> {
    let csv_annotations = csv_annotations(bundle)?;
    let mut deployments = BTreeMap::new();
    for deployment in &bundle.csv.spec.install.spec.deployments {
        let mut spec = serde_json::to_value(&deployment.spec).map_err(|e| ConvertError::InvalidDeployment {
            deployment: deployment.name.clone(),
            reason: e.to_string(),
        })?;
        // OLM does not roll back, so it keeps one old ReplicaSet rather than ten.
        spec["revisionHistoryLimit"] = json!(1);
        let annotations = pod_annotations(
            &csv_annotations,
            &spec["template"]["metadata"]["annotations"],
            namespace,
            targets_annotation,
        );
        spec["template"]["metadata"]["annotations"] = annotations;
        let mut object = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": deployment.name, "namespace": namespace}, "spec": spec});
        if let Some(labels) = &deployment.label {
            object["metadata"]["labels"] = json!(labels);
        }
        deployments.insert(deployment.name.clone(), object);
    }
    Ok(deployments)
}

/// The pod template's annotations: the CSV's, the template's own (`own`) where both name a key, and OLM's namespace
/// annotations over both. OLM v0 gives the CSV's precedence instead; v1 the template's, which this follows.
pub fn pod_annotations(
    csv: &BTreeMap<String, String>,
    own: &Value,
    namespace: &str,
    targets_annotation: &str,
) -> Value {
    let mut annotations: Map<String, Value> = csv.iter().map(|(key, value)| (key.clone(), json!(value))).collect();
    if let Some(own) = own.as_object() {
        annotations.extend(own.iter().map(|(key, value)| (key.clone(), value.clone())));
    }
    annotations.insert(TARGET_NAMESPACES_ANNOTATION.to_owned(), json!(targets_annotation));
    annotations.insert(OPERATOR_NAMESPACE_ANNOTATION.to_owned(), json!(namespace));
    Value::Object(annotations)
}

/// The CSV's annotations as OLM v1 reads them from a bundle: with `metadata/properties.yaml`'s properties appended
/// to `olm.properties` (as compact JSON) when the bundle has any.
pub fn csv_annotations(bundle: &Bundle) -> Result<BTreeMap<String, String>, ConvertError> {
    let mut annotations = bundle.csv.metadata.annotations.clone().unwrap_or_default();
    if bundle.properties.is_empty() {
        return Ok(annotations);
    }
    let mut properties: Vec<Value> = match annotations.get(PROPERTIES_ANNOTATION) {
        Some(text) => serde_json::from_str(text)
            .map_err(|error| ConvertError::InvalidPropertiesAnnotation { reason: error.to_string() })?,
        None => Vec::new(),
    };
    properties.extend(bundle.properties.iter().map(|p| json!({"type": p.property_type, "value": p.value})));
    let text = serde_json::to_string(&properties)
        .map_err(|error| ConvertError::InvalidPropertiesAnnotation { reason: error.to_string() })?;
    annotations.insert(PROPERTIES_ANNOTATION.to_owned(), text);
    Ok(annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::fixtures::{bundle, deployment_spec};
    use crate::bundle::model::Property;

    fn with_annotations(csv: Value, template: Value) -> Bundle {
        let mut deployment = deployment_spec("manager", json!({}));
        deployment["spec"]["template"]["metadata"]["annotations"] = template;
        let mut bundle =
            bundle(json!({"install": {"strategy": "deployment", "spec": {"deployments": [deployment]}}}), vec![]);
        bundle.csv.metadata.annotations = serde_json::from_value(csv).expect("annotations");
        bundle
    }

    #[test]
    fn the_csvs_annotations_reach_the_pod_template_beneath_its_own_and_olms() {
        let bundle = with_annotations(
            json!({"alm-examples": "[]", "capabilities": "Basic Install", "containerImage": "example.com/op:v1",
                   "description": "An operator.", "repository": "https://example.com/op", "shared": "from the CSV",
                   "olm.targetNamespaces": "stale", "olm.operatorNamespace": "stale"}),
            json!({"shared": "from the template", "kubectl.kubernetes.io/default-container": "manager"}),
        );
        let deployments = render_deployments(&bundle, "operators", "team-a,team-b").expect("renders");
        assert_eq!(
            deployments["manager"]["spec"]["template"]["metadata"]["annotations"],
            json!({"alm-examples": "[]", "capabilities": "Basic Install", "containerImage": "example.com/op:v1",
                   "description": "An operator.", "repository": "https://example.com/op", "shared": "from the template",
                   "kubectl.kubernetes.io/default-container": "manager",
                   "olm.targetNamespaces": "team-a,team-b", "olm.operatorNamespace": "operators"})
        );
    }

    #[test]
    fn a_deployment_is_placed_labelled_and_keeps_one_old_replica_set() {
        let mut bundle = with_annotations(json!(null), json!(null));
        bundle.csv.spec.install.spec.deployments[0].label = Some([("team".to_owned(), "a".to_owned())].into());
        let deployments = render_deployments(&bundle, "operators", "").expect("renders");
        let deployment = &deployments["manager"];
        assert_eq!(
            deployment["metadata"],
            json!({"name": "manager", "namespace": "operators", "labels": {"team": "a"}})
        );
        assert_eq!(deployment["spec"]["revisionHistoryLimit"], 1);
        assert_eq!(
            deployment["spec"]["template"]["metadata"]["annotations"],
            json!({"olm.targetNamespaces": "", "olm.operatorNamespace": "operators"})
        );
    }

    #[test]
    fn bundle_properties_are_appended_to_olm_properties() {
        let mut bundle = with_annotations(
            json!({"olm.properties": r#"[{"type":"olm.maxOpenShiftVersion","value":"4.16"}]"#}),
            json!({}),
        );
        assert_eq!(
            csv_annotations(&bundle).expect("annotations")["olm.properties"],
            r#"[{"type":"olm.maxOpenShiftVersion","value":"4.16"}]"#
        );
        bundle.properties = vec![Property { property_type: "olm.label".into(), value: json!({"label": "x"}) }];
        assert_eq!(
            csv_annotations(&bundle).expect("annotations")["olm.properties"],
            r#"[{"type":"olm.maxOpenShiftVersion","value":"4.16"},{"type":"olm.label","value":{"label":"x"}}]"#
        );
        bundle.csv.metadata.annotations = Some([("olm.properties".to_owned(), "{not json".to_owned())].into());
        assert!(matches!(csv_annotations(&bundle), Err(ConvertError::InvalidPropertiesAnnotation { .. })));
    }
}

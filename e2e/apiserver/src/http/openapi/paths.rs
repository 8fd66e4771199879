//! The operations kube-apiserver publishes for a resource, whichever OpenAPI version renders them: one per verb on
//! the collection and object paths (and the all-namespaces list of a namespaced resource), one per verb of each
//! subresource, each with its `x-kubernetes-action` and group-version-kind, its query parameters (`fieldValidation`
//! on writes is what tells kubectl the server validates fields), what it reads and returns, and the media types a
//! patch accepts (strategic merge for built-in kinds only: kubectl computes its client-side apply patch from the
//! schemas where it finds that type).

use serde_json::Value;

use super::definitions::{gvk, DELETE_OPTIONS, PATCH, STATUS};
use crate::model::resources::ResourceType;

pub const LIST_PARAMETERS: &[&str] = &[
    "allowWatchBookmarks",
    "continue",
    "fieldSelector",
    "labelSelector",
    "limit",
    "resourceVersion",
    "resourceVersionMatch",
    "sendInitialEvents",
    "timeoutSeconds",
    "watch",
];
const WRITE_PARAMETERS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];
const PATCH_PARAMETERS: &[&str] = &["dryRun", "fieldManager", "fieldValidation", "force"];
const DELETE_PARAMETERS: &[&str] = &[
    "dryRun",
    "gracePeriodSeconds",
    "ignoreStoreReadErrorWithClusterBreakingPotential",
    "orphanDependents",
    "propagationPolicy",
];

/// The JSON type of a query parameter.
/// The description of an answer's status code, as kube-apiserver's documents give it.
pub fn response_description(code: u16) -> &'static str {
    match code {
        201 => "Created",
        202 => "Accepted",
        _ => "OK",
    }
}

/// A parameter every operation on a path shares: the path's own (`{name}`, `{namespace}`), then `pretty`.
pub struct SharedParameter {
    pub name: &'static str,
    pub location: &'static str,
    pub description: &'static str,
    pub required: bool,
}

pub fn shared_parameters(path: &str) -> Vec<SharedParameter> {
    let mut parameters: Vec<SharedParameter> =
        [("name", "name of the resource"), ("namespace", "object name and auth scope, such as for teams and projects")]
            .into_iter()
            .filter(|(name, _)| path.contains(&format!("{{{name}}}")))
            .map(|(name, description)| SharedParameter { name, location: "path", description, required: true })
            .collect();
    parameters.push(SharedParameter {
        name: "pretty",
        location: "query",
        description: "If 'true', then the output is pretty printed.",
        required: false,
    });
    parameters
}

pub fn parameter_type(name: &str) -> &'static str {
    match name {
        "allowWatchBookmarks"
        | "sendInitialEvents"
        | "watch"
        | "force"
        | "orphanDependents"
        | "ignoreStoreReadErrorWithClusterBreakingPotential" => "boolean",
        "limit" | "timeoutSeconds" | "gracePeriodSeconds" => "integer",
        _ => "string",
    }
}

const BUILTIN_PATCHES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];
const CUSTOM_PATCHES: &[&str] =
    &["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"];
const BUILTIN_BODIES: &[&str] = &["*/*"];
const CUSTOM_BODIES: &[&str] = &["application/json", "application/yaml"];
/// Responses are JSON here, whatever kube-apiserver would also offer.
pub const PRODUCES: &[&str] = &["application/json"];
pub const PRODUCES_LIST: &[&str] = &["application/json", "application/json;stream=watch"];

/// One published operation.
#[derive(Debug)]
pub struct Operation {
    pub path: String,
    /// `get`, `post`, `put`, `patch` or `delete`.
    pub method: &'static str,
    pub action: &'static str,
    pub id: String,
    pub description: String,
    pub gvk: Value,
    pub parameters: Vec<&'static str>,
    /// The definition the request body holds, and its media types.
    pub body: Option<(String, &'static [&'static str])>,
    /// The definition returned, and the codes it comes with.
    pub returns: (String, &'static [u16]),
    pub produces: &'static [&'static str],
}

/// How operation ids name a group: `Core` for the core group, `RbacAuthorization` for
/// `rbac.authorization.k8s.io`, `OperatorsCoreosCom` for a custom group.
fn group_id(group: &str) -> String {
    if group.is_empty() {
        return "Core".into();
    }
    let trimmed = group.strip_suffix(".k8s.io").unwrap_or(group);
    trimmed.split('.').map(capitalize).collect()
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|first| first.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

/// The definitions a resource's operations read and return.
pub struct Definitions<'a> {
    pub kind: &'a str,
    pub list: Option<&'a str>,
    pub builtin: bool,
}

pub fn gv_path(resource: &ResourceType) -> String {
    if resource.group.is_empty() {
        format!("api/{}", resource.version)
    } else {
        format!("apis/{}/{}", resource.group, resource.version)
    }
}

/// The operations of a resource: those its verbs and subresources allow.
pub fn operations(resource: &ResourceType, definitions: &Definitions) -> Vec<Operation> {
    let can = |verb: &str| resource.verbs.iter().any(|v| v == verb);
    let prefix = format!("/{}", gv_path(resource));
    let collection = if resource.namespaced {
        format!("{prefix}/namespaces/{{namespace}}/{}", resource.plural)
    } else {
        format!("{prefix}/{}", resource.plural)
    };
    let object = format!("{collection}/{{name}}");
    let kind = &resource.kind;
    let id = |verb: &str, suffix: &str| {
        let scope = if resource.namespaced && !suffix.ends_with("ForAllNamespaces") { "Namespaced" } else { "" };
        format!("{verb}{}{}{scope}{kind}{suffix}", group_id(&resource.group), capitalize(&resource.version))
    };
    let own_gvk = gvk(&resource.group, &resource.version, kind);
    let kind_def = definitions.kind.to_owned();
    let (bodies, patches) =
        if definitions.builtin { (BUILTIN_BODIES, BUILTIN_PATCHES) } else { (CUSTOM_BODIES, CUSTOM_PATCHES) };
    let operation = |path: &str, method, action, id: String, description: String| Operation {
        path: path.to_owned(),
        method,
        action,
        id,
        description,
        gvk: own_gvk.clone(),
        parameters: Vec::new(),
        body: None,
        returns: (kind_def.clone(), &[200]),
        produces: PRODUCES,
    };
    let mut found = Vec::new();
    if let (true, Some(list)) = (can("list"), definitions.list) {
        let mut paths = vec![(collection.clone(), "")];
        if resource.namespaced {
            paths.insert(0, (format!("{prefix}/{}", resource.plural), "ForAllNamespaces"));
        }
        for (path, suffix) in paths {
            found.push(Operation {
                parameters: LIST_PARAMETERS.to_vec(),
                returns: (list.to_owned(), &[200]),
                produces: PRODUCES_LIST,
                ..operation(&path, "get", "list", id("list", suffix), format!("list or watch objects of kind {kind}"))
            });
        }
    }
    if can("create") {
        found.push(Operation {
            parameters: WRITE_PARAMETERS.to_vec(),
            body: Some((kind_def.clone(), bodies)),
            returns: (kind_def.clone(), &[200, 201, 202]),
            ..operation(&collection, "post", "post", id("create", ""), format!("create a {kind}"))
        });
    }
    if can("deletecollection") {
        let mut parameters = LIST_PARAMETERS.to_vec();
        parameters.extend(DELETE_PARAMETERS);
        found.push(Operation {
            parameters,
            body: Some((DELETE_OPTIONS.into(), bodies)),
            returns: (STATUS.into(), &[200]),
            ..operation(
                &collection,
                "delete",
                "deletecollection",
                id("deleteCollection", ""),
                format!("delete collection of {kind}"),
            )
        });
    }
    let object_operations = |path: &str, sub: &str, returned: &str, gvk: Value| {
        let mut found = Vec::new();
        let name = capitalize(sub);
        let of = if sub.is_empty() { String::new() } else { format!(" {sub} of") };
        let returned = returned.to_owned();
        if can("get") {
            found.push(Operation {
                gvk: gvk.clone(),
                returns: (returned.clone(), &[200]),
                ..operation(path, "get", "get", id("read", &name), format!("read{of} the specified {kind}"))
            });
        }
        if can("update") {
            found.push(Operation {
                gvk: gvk.clone(),
                parameters: WRITE_PARAMETERS.to_vec(),
                body: Some((returned.clone(), bodies)),
                returns: (returned.clone(), &[200, 201]),
                ..operation(path, "put", "put", id("replace", &name), format!("replace{of} the specified {kind}"))
            });
        }
        if can("patch") {
            found.push(Operation {
                gvk,
                parameters: PATCH_PARAMETERS.to_vec(),
                body: Some((PATCH.into(), patches)),
                returns: (returned, &[200, 201]),
                ..operation(
                    path,
                    "patch",
                    "patch",
                    id("patch", &name),
                    format!("partially update{of} the specified {kind}"),
                )
            });
        }
        found
    };
    found.extend(object_operations(&object, "", definitions.kind, own_gvk.clone()));
    for subresource in &resource.subresources {
        let path = format!("{object}/{subresource}");
        match subresource.as_str() {
            "status" => found.extend(object_operations(&path, "status", definitions.kind, own_gvk.clone())),
            "scale" => found.extend(object_operations(
                &path,
                "scale",
                "io.k8s.api.autoscaling.v1.Scale",
                gvk("autoscaling", "v1", "Scale"),
            )),
            "token" => found.push(Operation {
                gvk: gvk("authentication.k8s.io", "v1", "TokenRequest"),
                parameters: WRITE_PARAMETERS.to_vec(),
                body: Some(("io.k8s.api.authentication.v1.TokenRequest".into(), bodies)),
                returns: ("io.k8s.api.authentication.v1.TokenRequest".into(), &[200, 201, 202]),
                ..operation(&path, "post", "post", id("create", "Token"), format!("create token of a {kind}"))
            }),
            "finalize" => found.push(Operation {
                parameters: WRITE_PARAMETERS.to_vec(),
                body: Some((kind_def.clone(), bodies)),
                returns: (kind_def.clone(), &[200, 201]),
                ..operation(
                    &path,
                    "put",
                    "put",
                    id("replace", "Finalize"),
                    format!("replace finalize of the specified {kind}"),
                )
            }),
            // pods/log is listed in discovery but not served.
            _ => {}
        }
    }
    if can("delete") {
        found.push(Operation {
            parameters: DELETE_PARAMETERS.to_vec(),
            body: Some((DELETE_OPTIONS.into(), bodies)),
            returns: (STATUS.into(), &[200, 202]),
            ..operation(&object, "delete", "delete", id("delete", ""), format!("delete a {kind}"))
        });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::resources::Resources;

    #[test]
    fn a_namespaced_builtin_kind_has_kube_apiserver_operations() {
        let resources = Resources::default();
        let deployments = resources.lookup("apps", "v1", "deployments").expect("served");
        let definitions = Definitions {
            kind: "io.k8s.api.apps.v1.Deployment",
            list: Some("io.k8s.api.apps.v1.DeploymentList"),
            builtin: true,
        };
        let operations = operations(deployments, &definitions);
        let ids: Vec<&str> = operations.iter().map(|o| o.id.as_str()).collect();
        for id in [
            "listAppsV1DeploymentForAllNamespaces",
            "listAppsV1NamespacedDeployment",
            "createAppsV1NamespacedDeployment",
            "deleteCollectionAppsV1NamespacedDeployment",
            "readAppsV1NamespacedDeployment",
            "patchAppsV1NamespacedDeploymentStatus",
            "replaceAppsV1NamespacedDeploymentScale",
            "deleteAppsV1NamespacedDeployment",
        ] {
            assert!(ids.contains(&id), "{id} in {ids:?}");
        }
        let patch = operations.iter().find(|o| o.id == "patchAppsV1NamespacedDeployment").expect("patch");
        assert_eq!(patch.path, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}");
        assert!(patch.parameters.contains(&"fieldValidation"));
        assert!(patch
            .body
            .as_ref()
            .is_some_and(|(_, types)| types.contains(&"application/strategic-merge-patch+json")));
        let scale = operations.iter().find(|o| o.id == "patchAppsV1NamespacedDeploymentScale").expect("scale");
        assert_eq!(scale.gvk, gvk("autoscaling", "v1", "Scale"));
        assert_eq!(group_id("rbac.authorization.k8s.io"), "RbacAuthorization");
        assert_eq!(group_id("operators.coreos.com"), "OperatorsCoreosCom");
    }
}

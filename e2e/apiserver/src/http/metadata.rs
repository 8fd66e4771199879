//! Objects as `meta.k8s.io` PartialObjectMetadata, for clients that ask for metadata only (an `Accept` of
//! `application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`, or `as=PartialObjectMetadataList` for a list:
//! kube's metadata watchers, client-go's metadata informers). As kube-apiserver's response transform does: an object
//! answers with its metadata alone, a list as a PartialObjectMetadataList keeping the list's metadata, every object
//! of a watch's events (bookmarks included) as PartialObjectMetadata; asking the object form of a list, or the list
//! form of an object, is 406 NotAcceptable, and so is a group version other than `meta.k8s.io/v1` and `v1beta1`.

use axum::http::HeaderMap;
use serde_json::{json, Value};

use crate::status::ApiError;

/// What the client asked to receive instead of whole objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metadata {
    list: bool,
    version: String,
}

/// The metadata form the first acceptable media type of `Accept` asks for, if it asks for one. As kube-apiserver
/// negotiates, before anything is done: an entry asking for a conversion it cannot make (another group or version,
/// an unknown kind) is skipped for the next, and when no entry is acceptable the request is refused with 406.
pub fn requested(headers: &HeaderMap) -> Result<Option<Metadata>, ApiError> {
    let Some(accept) = headers.get("accept").and_then(|value| value.to_str().ok()) else { return Ok(None) };
    for entry in accept.split(',') {
        let (mut kind, mut group, mut version) = (None, "", "");
        for (key, value) in entry.split(';').skip(1).filter_map(|p| p.trim().split_once('=')) {
            match key {
                "as" => kind = Some(value),
                "g" => group = value,
                "v" => version = value,
                _ => {}
            }
        }
        let list = match kind {
            None | Some("Table") => return Ok(None),
            Some("PartialObjectMetadata") => false,
            Some("PartialObjectMetadataList") => true,
            Some(_) => continue,
        };
        if group == "meta.k8s.io" && matches!(version, "v1" | "v1beta1") {
            return Ok(Some(Metadata { list, version: version.to_owned() }));
        }
    }
    Err(ApiError::not_acceptable(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf",
    ))
}

impl Metadata {
    fn group_version(&self) -> String {
        format!("meta.k8s.io/{}", self.version)
    }

    /// One object (a get, a write's answer, a watch event's object) as PartialObjectMetadata.
    pub fn object(&self, object: &Value) -> Result<Value, ApiError> {
        if self.list {
            return Err(ApiError::not_acceptable(
                "you requested PartialObjectMetadataList, but the requested object is not a list (*unstructured.Unstructured)",
            ));
        }
        Ok(partial(object, &self.group_version()))
    }

    /// A list as a PartialObjectMetadataList, its `metadata` (resourceVersion, continue, remainingItemCount) kept.
    pub fn list(&self, list: &Value) -> Result<Value, ApiError> {
        if !self.list {
            return Err(ApiError::not_acceptable(
                "you requested PartialObjectMetadata, but the requested object is a list (*unstructured.UnstructuredList)",
            ));
        }
        let group_version = self.group_version();
        let items: Vec<Value> =
            list["items"].as_array().into_iter().flatten().map(|item| partial(item, &group_version)).collect();
        Ok(json!({"kind": "PartialObjectMetadataList", "apiVersion": group_version, "metadata": list["metadata"],
            "items": items}))
    }

    /// Whether a watch can answer in this form: its events carry objects, never lists.
    pub fn check_watch(&self) -> Result<(), ApiError> {
        self.object(&json!({"metadata": {}})).map(|_| ())
    }
}

fn partial(object: &Value, group_version: &str) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": group_version, "metadata": object["metadata"]})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert("accept", value.parse().expect("header"));
        headers
    }

    /// The form `value` asks for, which must be one.
    fn asked(value: &str) -> Metadata {
        requested(&accept(value)).ok().flatten().expect("a metadata form")
    }

    #[test]
    fn only_the_first_media_type_asking_for_metadata_counts() {
        assert_eq!(requested(&HeaderMap::new()), Ok(None));
        assert_eq!(requested(&accept("application/json")), Ok(None));
        assert_eq!(requested(&accept("application/json;as=Table;g=meta.k8s.io;v=v1")), Ok(None));
        assert_eq!(requested(&accept("application/json, application/json;as=PartialObjectMetadata;v=v1")), Ok(None));
        let single = requested(&accept("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"));
        assert_eq!(single, Ok(Some(Metadata { list: false, version: "v1".into() })));
        let list = requested(&accept("application/json; as=PartialObjectMetadataList; g=meta.k8s.io; v=v1beta1"));
        assert_eq!(list, Ok(Some(Metadata { list: true, version: "v1beta1".into() })));
    }

    #[test]
    fn an_object_keeps_its_metadata_only() {
        let object = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let metadata = asked("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1");
        assert_eq!(
            metadata.object(&object).expect("object"),
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"name": "a", "labels": {"x": "y"}}})
        );
        let error = metadata.list(&json!({"items": [object]})).expect_err("a list asked as one object");
        assert_eq!(error.code, 406);
        assert!(metadata.check_watch().is_ok());
    }

    #[test]
    fn a_list_keeps_its_list_metadata_and_each_items_metadata() {
        let list = json!({"apiVersion": "v1", "kind": "NamespaceList",
            "metadata": {"resourceVersion": "7", "continue": "c"},
            "items": [{"metadata": {"name": "a"}, "spec": {}}, {"metadata": {"name": "b"}, "status": {}}]});
        let metadata = asked("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
        assert_eq!(
            metadata.list(&list).expect("list"),
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "7", "continue": "c"},
                "items": [{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "a"}},
                    {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": {"name": "b"}}]})
        );
        assert_eq!(metadata.object(&json!({"metadata": {}})).expect_err("an object asked as a list").code, 406);
        assert_eq!(metadata.check_watch().expect_err("a watch asked as lists").code, 406);
    }

    #[test]
    fn conversions_that_cannot_be_made_are_skipped_for_the_next_entry_or_refused() {
        for asked in [
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v2",
            "application/json;as=PartialObjectMetadata;g=apps;v=v1",
            "application/json;as=Deployment;g=apps;v=v1",
        ] {
            assert_eq!(requested(&accept(asked)).expect_err(asked).code, 406, "{asked}");
            assert_eq!(requested(&accept(&format!("{asked}, application/json"))), Ok(None), "{asked}");
        }
    }
}

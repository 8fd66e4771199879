//! The CustomResourceDefinition finalizer: a deleted definition's custom resources are deleted, then its
//! `customresourcecleanup` finalizer removed.

use super::writes::{delete_quietly, has_finalizer, remove_finalizer, resource_type};
use crate::crds::lifecycle::{crd_resource, CLEANUP_FINALIZER};
use crate::request::api_server::ApiServer;
use crate::storage::store::ResourceId;

pub(super) async fn crd_cleanup(api: &ApiServer) {
    let Some(crd_type) = resource_type(api, &crd_resource()) else { return };
    // Only the definitions being deleted are copied: a pass runs after every burst of writes, and definitions are
    // large.
    for crd in api.store.matching(&crd_resource(), |_, _, crd| !crd["metadata"]["deletionTimestamp"].is_null()) {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        let id = ResourceId::new(group, plural);
        let objects = api.store.all(&id);
        if let Some(resource) = resource_type(api, &id) {
            for object in &objects {
                delete_quietly(api, &resource, object, None).await;
            }
        }
        if objects.is_empty() && has_finalizer(&crd, CLEANUP_FINALIZER) {
            remove_finalizer(api, &crd_type, &crd, CLEANUP_FINALIZER).await;
        }
    }
}

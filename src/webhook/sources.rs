//! The webhook's source check (docs/policy.md, 'Sources'): on a write that asks for a source (an Install's content,
//! an Operator's update source), the InstallPolicies of the moment decide whether the requester may use it. Fails
//! closed: policies that cannot be read refuse the write.

use kube::api::{Api, ListParams};
use kube::Client;

use crate::api::v2alpha1::{InstallPolicy, Requester};
use crate::policy::sources::{judge, Source, SourceVerdict};
use crate::rbac::UserInfo;

/// Why `user` may not use `sources`, if they may not.
pub async fn source_denial(client: &Client, user: &Requester, sources: &[Source<'_>]) -> Option<String> {
    if sources.is_empty() {
        return None;
    }
    let policies = match Api::<InstallPolicy>::all(client.clone()).list(&ListParams::default()).await {
        Ok(list) => list.items,
        Err(error) => {
            tracing::warn!(%error, "listing InstallPolicies failed");
            return Some(format!("the source could not be checked against the InstallPolicies: {error}"));
        }
    };
    let requester = UserInfo { name: user.username.clone(), groups: user.groups.clone() };
    sources.iter().find_map(|source| match judge(&policies, &requester, *source) {
        SourceVerdict::Denied(message) => Some(message),
        SourceVerdict::Allowed | SourceVerdict::Unrestricted => None,
    })
}

//! Schema support for Kubernetes-style discriminated unions: a `type` field names exactly one member that must be set.
//!
//! serde cannot express this shape, so the types keep every member optional and the CRD schema carries the rule as
//! structural `oneOf` branches (only `required`, `enum` and `not` inside them), which a real API server enforces
//! without CEL. The rule is added to the generated CRD (see `crdgen`), after kube's structural rewriting, which
//! would otherwise mistake the branches for an enum's variants.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{JSONSchemaProps, JSON};

/// One member of a union: the value of `type` that selects it, and the JSON name of the field it requires.
#[derive(Clone, Copy, Debug)]
pub struct Member {
    pub discriminator: &'static str,
    pub field: &'static str,
}

/// Adds to `schema` the rule "the member named by `type` is set, and no other member is".
pub fn require_exactly_named_member(schema: &mut JSONSchemaProps, members: &[Member]) {
    let branches = members
        .iter()
        .map(|member| {
            let others: Vec<JSONSchemaProps> = members
                .iter()
                .filter(|other| other.field != member.field)
                .map(|other| JSONSchemaProps { required: Some(vec![other.field.to_owned()]), ..Default::default() })
                .collect();
            let discriminator = JSONSchemaProps {
                enum_: Some(vec![JSON(serde_json::Value::String(member.discriminator.to_owned()))]),
                ..Default::default()
            };
            JSONSchemaProps {
                properties: Some([("type".to_owned(), discriminator)].into()),
                required: Some(vec!["type".to_owned(), member.field.to_owned()]),
                not: (!others.is_empty())
                    .then(|| Box::new(JSONSchemaProps { any_of: Some(others), ..Default::default() })),
                ..Default::default()
            }
        })
        .collect();
    schema.one_of = Some(branches);
}

/// Why a union value cannot be read, for objects that bypassed the schema (for example in unit tests or older stored objects).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UnionError {
    #[error("type is {discriminator} but {field} is not set")]
    MemberMissing { discriminator: &'static str, field: &'static str },
    #[error("type is {discriminator} but {field} is also set")]
    ExtraMember { discriminator: &'static str, field: &'static str },
}

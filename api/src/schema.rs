//! Schema helpers: how opaque and partially modelled objects keep the fields we do not model.
//!
//! kstretch must accept every manifest Strimzi accepts, but it models only the fields it acts on.
//! Three tools make sure the apiserver neither rejects nor prunes the rest:
//!
//! * [`opaque_object`] (and friends) for fields we pass through untouched, such as `template` or
//!   `config`: the schema is `{type: object, x-kubernetes-preserve-unknown-fields: true}`;
//! * [`keep_unknown_fields`], a schemars container transform for structs that model only a part
//!   of Strimzi's object (`#[schemars(transform = keep_unknown_fields)]`);
//! * [`flatten_tagged_variants`] for internally tagged enums (storage `type`): schemars would emit
//!   a `oneOf` that is not a structural schema, so the variants are merged into one object.
//!
//! The CRD post-processing in [`crate::crd`] also marks every kind's `spec` as keeping unknown
//! fields, and [`crate::schema_check`] verifies the result.

use schemars::{Schema, SchemaGenerator, json_schema};
use serde_json::{Map, Value};

/// The OpenAPI extension that tells the apiserver not to prune fields missing from the schema.
pub const PRESERVE_UNKNOWN_FIELDS: &str = "x-kubernetes-preserve-unknown-fields";

/// Schema for an opaque object field: any JSON object, kept as written.
pub fn opaque_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema for a list of opaque objects (for example the full Pod manifests of a StrimziPodSet).
pub fn opaque_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}

/// Schema for Kubernetes `ResourceRequirements` (`resources` fields), in the compact form
/// Strimzi uses: quantities are integers or strings matching the quantity syntax. Used instead of
/// `k8s_openapi`'s schema, which repeats the long `Quantity` documentation for every map and
/// requires `claims[].name`.
pub fn resource_requirements(_: &mut SchemaGenerator) -> Schema {
    let quantities = json_schema!({
        "type": "object",
        "additionalProperties": {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true,
        },
    })
    .to_value();
    json_schema!({
        "type": "object",
        "description": "CPU and memory requests and limits (a Kubernetes `ResourceRequirements`).",
        "properties": {
            "claims": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "request": {"type": "string"},
                    },
                },
            },
            "limits": quantities,
            "requests": quantities,
        },
    })
}

/// Schema for a Kubernetes `LabelSelector`, in the compact form Strimzi uses (no field is
/// required inside `matchExpressions` entries, as in Strimzi's `StrimziPodSet` CRD).
pub fn label_selector(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "properties": {
            "matchExpressions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "key": {"type": "string"},
                        "operator": {"type": "string"},
                        "values": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
            "matchLabels": {
                "type": "object",
                "additionalProperties": {"type": "string"},
            },
        },
    })
}

/// The syntax of a Kubernetes quantity given as a string (`500m`, `2Gi`, `1e3`, ...).
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// Container transform for structs that model only part of the Strimzi object they stand for:
/// the object keeps every field, modelled or not.
pub fn keep_unknown_fields(schema: &mut Schema) {
    schema.insert(PRESERVE_UNKNOWN_FIELDS.to_owned(), Value::Bool(true));
}

/// Merges the schemas of the variants of an internally tagged enum into one structural object
/// schema.
///
/// The result has `type: object`, the union of the variants' properties (the first variant that
/// declares a property wins, so variants should share field types and docs), the tag property as
/// a string `enum` of the variant names, `required: [tag]`, and keeps unknown fields. Validation
/// that a property belongs to the chosen variant is left to the operator, as in Strimzi's own CRDs.
pub fn flatten_tagged_variants(tag: &str, variants: Vec<(&str, Schema)>) -> Schema {
    let mut properties = Map::new();
    let mut tag_values = Vec::new();
    for (name, variant) in variants {
        tag_values.push(Value::String(name.to_owned()));
        let variant_properties = variant
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for (key, property) in variant_properties {
            if key != tag && !properties.contains_key(&key) {
                properties.insert(key, property);
            }
        }
    }
    properties.insert(
        tag.to_owned(),
        json_schema!({
            "type": "string",
            "enum": tag_values,
        })
        .to_value(),
    );
    json_schema!({
        "type": "object",
        "properties": properties,
        "required": [tag],
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn opaque_schemas_keep_unknown_fields() {
        let mut generator = SchemaGenerator::default();
        assert_eq!(
            opaque_object(&mut generator).to_value(),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            opaque_object_list(&mut generator).to_value()["items"][PRESERVE_UNKNOWN_FIELDS],
            json!(true)
        );
    }

    #[test]
    fn tagged_variants_merge_into_one_object() {
        let a = json_schema!({"type": "object", "properties": {"type": {"const": "a"}, "x": {"type": "string"}}});
        let b = json_schema!({"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "integer"}}});
        let merged = flatten_tagged_variants("type", vec![("a", a), ("b", b)]).to_value();
        assert_eq!(merged["type"], json!("object"));
        assert_eq!(merged["required"], json!(["type"]));
        assert_eq!(merged["properties"]["type"]["enum"], json!(["a", "b"]));
        assert_eq!(merged["properties"]["y"]["type"], json!("integer"));
        assert_eq!(merged[PRESERVE_UNKNOWN_FIELDS], json!(true));
        assert!(merged.get("oneOf").is_none());
    }
}

//! Pure checks over CRD schemas, so that schema mistakes show up in `cargo test` without an
//! apiserver: the structural-schema rules the apiserver enforces, kstretch's "never prune" policy,
//! and a small validator that says how the apiserver would treat an object (rejected values,
//! pruned fields).
//!
//! The validator covers `type`, `nullable`, `enum`, `required`, `minimum`/`maximum`, `items`,
//! `properties`, `additionalProperties`, `x-kubernetes-int-or-string` and
//! `x-kubernetes-preserve-unknown-fields`; it does not evaluate `pattern`, length limits or CEL.

use serde_json::{Map, Value};

use crate::schema::PRESERVE_UNKNOWN_FIELDS;

const INT_OR_STRING: &str = "x-kubernetes-int-or-string";
const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];
const VALID_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
/// Root fields the apiserver handles itself; they are never pruned.
const ROOT_BUILTINS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Violations of the apiserver's structural-schema rules in an `openAPIV3Schema` (as JSON), plus
/// kstretch's rule that an object whose content is not described keeps unknown fields (else the
/// apiserver would silently empty it). Each entry names the offending path.
pub fn structural_problems(schema: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check_node(schema, "", false, &mut problems);
    problems
}

fn check_node(node: &Value, path: &str, in_junctor: bool, problems: &mut Vec<String>) {
    let here = if path.is_empty() { "<root>" } else { path };
    let Some(obj) = node.as_object() else {
        problems.push(format!("{here}: schema is not an object"));
        return;
    };
    for forbidden in ["$ref", "definitions", "$defs", "$schema", "const"] {
        if obj.contains_key(forbidden) {
            problems.push(format!(
                "{here}: `{forbidden}` is not allowed in CRD schemas"
            ));
        }
    }
    if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
        problems.push(format!("{here}: `uniqueItems: true` is not allowed"));
    }
    if obj.get(PRESERVE_UNKNOWN_FIELDS) == Some(&Value::Bool(false)) {
        problems.push(format!(
            "{here}: `{PRESERVE_UNKNOWN_FIELDS}: false` is not allowed"
        ));
    }
    let int_or_string = flag(obj, INT_OR_STRING);
    let preserve = flag(obj, PRESERVE_UNKNOWN_FIELDS);
    let type_ = obj.get("type");

    if in_junctor {
        for forbidden in [
            "type",
            "description",
            "default",
            "additionalProperties",
            "nullable",
        ] {
            if obj.contains_key(forbidden) && !int_or_string_pattern(obj) {
                problems.push(format!(
                    "{here}: `{forbidden}` inside allOf/anyOf/oneOf/not is not structural"
                ));
            }
        }
    } else {
        match type_ {
            None if !(int_or_string || preserve) => {
                problems.push(format!("{here}: no `type`"));
            }
            None => {}
            Some(Value::String(t)) if VALID_TYPES.contains(&t.as_str()) => {}
            Some(other) => problems.push(format!("{here}: invalid `type` {other}")),
        }
        if flag(obj, "nullable") && type_.is_none() && !int_or_string {
            problems.push(format!("{here}: `nullable` without `type`"));
        }
        if int_or_string && type_.is_some() {
            problems.push(format!(
                "{here}: `{INT_OR_STRING}` must not also set `type`"
            ));
        }
    }

    let type_str = type_.and_then(Value::as_str);
    if let Some(properties) = obj.get("properties") {
        if !in_junctor && type_str != Some("object") {
            problems.push(format!("{here}: has `properties` but `type` is not object"));
        }
        if obj.contains_key("additionalProperties") {
            problems.push(format!(
                "{here}: `properties` and `additionalProperties` are mutually exclusive"
            ));
        }
        match properties.as_object() {
            Some(properties) => {
                for (name, child) in properties {
                    check_node(child, &format!("{path}.{name}"), in_junctor, problems);
                }
            }
            None => problems.push(format!("{here}: `properties` is not a map")),
        }
    }
    match obj.get("additionalProperties") {
        Some(Value::Bool(false)) => {
            problems.push(format!(
                "{here}: `additionalProperties: false` is not allowed"
            ));
        }
        Some(Value::Bool(true)) => {
            problems.push(format!(
                "{here}: `additionalProperties: true` is not structural; use {PRESERVE_UNKNOWN_FIELDS}"
            ));
        }
        Some(child) => check_node(child, &format!("{path}.*"), in_junctor, problems),
        None => {}
    }
    match obj.get("items") {
        Some(Value::Array(_)) => problems.push(format!("{here}: `items` must be one schema")),
        Some(child) => {
            if !in_junctor && type_str != Some("array") {
                problems.push(format!("{here}: has `items` but `type` is not array"));
            }
            check_node(child, &format!("{path}[]"), in_junctor, problems);
        }
        None => {
            if !in_junctor && type_str == Some("array") {
                problems.push(format!("{here}: array without `items`"));
            }
        }
    }
    for junctor in JUNCTORS {
        let children: Vec<&Value> = match obj.get(junctor) {
            Some(Value::Array(children)) => children.iter().collect(),
            Some(child @ Value::Object(_)) => vec![child],
            Some(_) => {
                problems.push(format!("{here}: malformed `{junctor}`"));
                continue;
            }
            None => continue,
        };
        for child in children {
            check_node(child, &format!("{path}({junctor})"), true, problems);
        }
    }

    // kstretch policy: an object that describes nothing must keep what it is given.
    let is_root_metadata = path == ".metadata";
    if !in_junctor
        && type_str == Some("object")
        && !obj.contains_key("properties")
        && !obj.contains_key("additionalProperties")
        && !preserve
        && !is_root_metadata
    {
        problems.push(format!(
            "{here}: object without properties must set {PRESERVE_UNKNOWN_FIELDS} (its content would be pruned)"
        ));
    }
}

/// `anyOf: [{type: integer}, {type: string}]` under `x-kubernetes-int-or-string` is the one
/// allowed use of `type` inside a junctor.
fn int_or_string_pattern(obj: &Map<String, Value>) -> bool {
    obj.len() == 1
        && matches!(
            obj.get("type").and_then(Value::as_str),
            Some("integer" | "string")
        )
}

fn flag(obj: &Map<String, Value>, key: &str) -> bool {
    obj.get(key) == Some(&Value::Bool(true))
}

/// What the apiserver would object to or prune in `instance` (a whole custom resource as JSON)
/// under `schema` (the version's `openAPIV3Schema` as JSON). Entries starting with `pruned:` are
/// fields that would be silently dropped; the others would be rejected. Empty means the object
/// is accepted unchanged (up to the checks listed in the module docs).
pub fn instance_problems(schema: &Value, instance: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    validate(schema, instance, "", true, &mut problems);
    problems
}

fn validate(schema: &Value, value: &Value, path: &str, root: bool, problems: &mut Vec<String>) {
    let here = if path.is_empty() { "<root>" } else { path };
    let Some(s) = schema.as_object() else {
        return;
    };
    if value.is_null() {
        if !flag(s, "nullable") {
            problems.push(format!("{here}: null is not allowed"));
        }
        return;
    }
    if flag(s, INT_OR_STRING) {
        if !(value.is_i64() || value.is_u64() || value.is_string()) {
            problems.push(format!(
                "{here}: expected an integer or a string, got {value}"
            ));
        }
        return;
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "boolean" => value.is_boolean(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            _ => true,
        };
        if !ok {
            problems.push(format!("{here}: expected {t}, got {value}"));
            return;
        }
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        problems.push(format!(
            "{here}: {value} is not one of {}",
            Value::Array(allowed.clone())
        ));
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = s.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            problems.push(format!("{here}: {n} is below the minimum {min}"));
        }
        if let Some(max) = s.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            problems.push(format!("{here}: {n} is above the maximum {max}"));
        }
    }
    match value {
        Value::Object(fields) => validate_object(s, fields, path, root, problems),
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (index, item) in items.iter().enumerate() {
                    validate(
                        item_schema,
                        item,
                        &format!("{path}[{index}]"),
                        false,
                        problems,
                    );
                }
            }
        }
        _ => {}
    }
}

fn validate_object(
    s: &Map<String, Value>,
    fields: &Map<String, Value>,
    path: &str,
    root: bool,
    problems: &mut Vec<String>,
) {
    let here = if path.is_empty() { "<root>" } else { path };
    if let Some(required) = s.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                problems.push(format!("{here}: required field `{name}` is missing"));
            }
        }
    }
    let properties = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties").filter(|a| a.is_object());
    let preserve = flag(s, PRESERVE_UNKNOWN_FIELDS);
    for (name, child) in fields {
        let child_path = format!("{path}.{name}");
        if root && ROOT_BUILTINS.contains(&name.as_str()) {
            continue;
        }
        if let Some(child_schema) = properties.and_then(|p| p.get(name)) {
            validate(child_schema, child, &child_path, false, problems);
        } else if let Some(additional) = additional {
            validate(additional, child, &child_path, false, problems);
        } else if !preserve {
            problems.push(format!("pruned: {child_path}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accepts_a_structural_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {
                        "size": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "pods": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                        "mode": {"type": "string", "enum": ["a", "b"], "nullable": true}
                    }
                },
                "metadata": {"type": "object"}
            }
        });
        assert_eq!(structural_problems(&schema), Vec::<String>::new());
    }

    #[test]
    fn finds_non_structural_constructs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"oneOf": [{"type": "object", "properties": {"x": {"type": "string"}}}]},
                "b": {"properties": {"y": {"type": "string"}}},
                "c": {"type": "object"},
                "d": {"nullable": true},
                "e": {"type": ["string", "null"]},
                "f": {"$ref": "#/definitions/F", "type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "g": {"type": "object", "additionalProperties": true}
            }
        });
        let problems = structural_problems(&schema).join("\n");
        for expected in [
            ".a: no `type`",
            ".a(oneOf): `type` inside",
            ".b: no `type`",
            ".c: object without properties",
            ".d: no `type`",
            ".e: invalid `type`",
            ".f: `$ref`",
            ".g: `additionalProperties: true`",
        ] {
            assert!(
                problems.contains(expected),
                "missing {expected:?} in\n{problems}"
            );
        }
    }

    #[test]
    fn validator_reports_rejections_and_pruning() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["replicas"],
                    "properties": {
                        "replicas": {"type": "integer", "minimum": 0},
                        "role": {"type": "string", "enum": ["broker"]},
                        "cpu": {"x-kubernetes-int-or-string": true},
                        "config": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                    }
                }
            }
        });
        let good = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"replicas": 3, "role": "broker", "cpu": 2, "config": {"any": {"thing": 1}}, "labels": {"a": "b"}}
        });
        assert_eq!(instance_problems(&schema, &good), Vec::<String>::new());
        let bad = json!({
            "spec": {"replicas": -1, "role": "controller", "cpu": true, "labels": {"a": 1}, "extra": 1}
        });
        let problems = instance_problems(&schema, &bad).join("\n");
        for expected in [
            ".spec.replicas: -1 is below the minimum 0",
            ".spec.role: \"controller\" is not one of",
            ".spec.cpu: expected an integer or a string",
            ".spec.labels.a: expected string",
            "pruned: .spec.extra",
        ] {
            assert!(
                problems.contains(expected),
                "missing {expected:?} in\n{problems}"
            );
        }
        let missing = instance_problems(&schema, &json!({"spec": {}})).join("\n");
        assert!(missing.contains("required field `replicas` is missing"));
    }
}

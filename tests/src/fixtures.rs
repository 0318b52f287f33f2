//! Strimzi-shaped example manifests under `tests/fixtures/strimzi/`, and the check that the
//! apiserver stored every field of them.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

/// One YAML document of a fixture file.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub file: PathBuf,
    pub doc: Value,
}

impl Manifest {
    pub fn api_version(&self) -> &str {
        self.doc["apiVersion"].as_str().unwrap_or_default()
    }
    pub fn kind(&self) -> &str {
        self.doc["kind"].as_str().unwrap_or_default()
    }
    pub fn name(&self) -> &str {
        self.doc["metadata"]["name"].as_str().unwrap_or_default()
    }
}

/// `tests/fixtures/strimzi/<version>/`.
pub fn dir(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/strimzi")
        .join(version)
}

/// Every document of every `*.yaml` file in `tests/fixtures/strimzi/<version>/`, in file order.
pub fn load(version: &str) -> Vec<Manifest> {
    let dir = dir(version);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    files.sort();
    let mut manifests = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("fixture is readable");
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let value = Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{}: invalid YAML: {e}", file.display()));
            if !value.is_null() {
                manifests.push(Manifest {
                    file: file.clone(),
                    doc: value,
                });
            }
        }
    }
    manifests
}

/// The paths of `wanted` whose values are missing from, or different in, `stored`: empty when
/// the apiserver kept every field the user wrote (nothing pruned, nothing rewritten).
pub fn missing_fields(wanted: &Value, stored: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    compare(wanted, stored, String::new(), &mut missing);
    missing
}

fn compare(wanted: &Value, stored: &Value, path: String, missing: &mut Vec<String>) {
    match (wanted, stored) {
        (Value::Object(w), Value::Object(s)) => {
            for (key, w_value) in w {
                let child = format!("{path}.{key}");
                match s.get(key) {
                    Some(s_value) => compare(w_value, s_value, child, missing),
                    None => missing.push(child),
                }
            }
        }
        (Value::Array(w), Value::Array(s)) if w.len() == s.len() => {
            for (i, (w_item, s_item)) in w.iter().zip(s).enumerate() {
                compare(w_item, s_item, format!("{path}[{i}]"), missing);
            }
        }
        (Value::Number(w), Value::Number(s)) if w.as_f64() == s.as_f64() => {}
        (w, s) if w == s => {}
        (w, s) => missing.push(format!("{path}: wrote {w}, stored {s}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_superset_keeps_everything() {
        let wanted = json!({"spec": {"replicas": 3, "roles": ["broker"], "config": {"a": 1}}});
        let stored = json!({"spec": {"replicas": 3.0, "roles": ["broker"], "config": {"a": 1, "b": 2}}, "status": {}});
        assert!(missing_fields(&wanted, &stored).is_empty());
    }

    #[test]
    fn pruned_and_changed_fields_are_named() {
        let wanted =
            json!({"spec": {"template": {"pod": {"affinity": {}}}, "list": [1, 2], "x": "a"}});
        let stored = json!({"spec": {"template": {}, "list": [1], "x": "b"}});
        assert_eq!(
            missing_fields(&wanted, &stored),
            [
                ".spec.list: wrote [1,2], stored [1]",
                ".spec.template.pod",
                ".spec.x: wrote \"a\", stored \"b\"",
            ]
        );
    }
}

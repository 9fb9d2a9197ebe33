//! The CRD's CEL rules, evaluated client-side with kube-cel as the apiserver evaluates them:
//! every rule compiles, every case in `tests/cases/refused-by-cel.yaml` is refused with its
//! message, every rule has a case, and every example in `examples/virtualservers/` passes.
//! The same cases are sent to the real apiserver by the e2e operator test.

use kube::CustomResourceExt;
use kube_cel::Validator;
use serde::Deserialize;
use serde_json::{json, Value};
use skiff_operator::crd::VirtualServer;
use std::path::Path;

#[derive(Deserialize)]
struct Case {
    name: String,
    refused: String,
    spec: Value,
}

fn schema() -> Value {
    let crd = VirtualServer::crd();
    let version = &crd.spec.versions[0];
    serde_json::to_value(
        version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("the CRD has a schema"),
    )
    .unwrap()
}

fn object(name: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": "skiff.dev/v1alpha1",
        "kind": "VirtualServer",
        "metadata": { "name": name, "namespace": "default" },
        "spec": spec,
    })
}

fn cases() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases/refused-by-cel.yaml");
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Every (rule, message) pair in the schema, wherever it sits.
fn rules(schema: &Value, out: &mut Vec<(String, String)>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(list)) = map.get("x-kubernetes-validations") {
                for r in list {
                    out.push((
                        r["rule"].as_str().unwrap().to_string(),
                        r["message"].as_str().unwrap_or_default().to_string(),
                    ));
                }
            }
            map.values().for_each(|v| rules(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| rules(v, out)),
        _ => {}
    }
}

#[test]
fn every_rule_compiles() {
    let compiled = kube_cel::compile_schema(&schema());
    assert!(
        !compiled.has_errors(),
        "CEL rules that do not compile: {:?}",
        compiled.compilation_errors()
    );
    let mut all = Vec::new();
    rules(&schema(), &mut all);
    assert!(all.len() >= 7, "{all:?}");
}

#[test]
fn each_refused_case_fails_with_its_message() {
    let validator = Validator::new();
    let schema = schema();
    let cases = cases();
    assert!(cases.len() >= 10);
    for case in &cases {
        let errors = match validator.validate(&schema, &object(&case.name, &case.spec), None) {
            Ok(()) => panic!("case {} passed the CEL rules", case.name),
            Err(e) => e.into_vec(),
        };
        assert!(
            errors.iter().any(|e| e.message.contains(&case.refused)),
            "case {}: wanted {:?}, got {:?}",
            case.name,
            case.refused,
            errors.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn every_rule_has_a_refused_case() {
    let mut all = Vec::new();
    rules(&schema(), &mut all);
    let cases = cases();
    for (rule, message) in all {
        assert!(
            cases.iter().any(|c| message.contains(&c.refused)),
            "no case in refused-by-cel.yaml for rule {rule:?} ({message})"
        );
    }
}

#[test]
fn the_examples_pass_every_rule() {
    let validator = Validator::new();
    let schema = schema();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/virtualservers");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let example: Value =
            serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        if let Err(e) = validator.validate(&schema, &example, None) {
            panic!("{} is refused: {e}", path.display());
        }
    }
}

#[test]
fn slo_objectives_within_bounds_pass() {
    let validator = Validator::new();
    let schema = schema();
    for slo in [
        json!({ "availability": { "target": 0.999 }, "latency": { "thresholdSeconds": 0.25, "target": 0.99 } }),
        json!({ "latency": { "thresholdSeconds": 1, "target": 0.9 } }),
        json!({ "latency": { "thresholdSeconds": 0.0001, "target": 0.5 } }),
        json!({ "availability": { "target": 0.5 } }),
        json!({ "latency": { "thresholdSeconds": 10, "target": 0.999 } }),
    ] {
        let spec =
            json!({ "hosts": ["a.example"], "content": { "configMap": "site" }, "slo": slo });
        if let Err(e) = validator.validate(&schema, &object("slo", &spec), None) {
            panic!("{slo} is refused: {e}");
        }
    }
}

//! OpenAI's strict structured output accepts only a subset of JSON Schema:
//! every property listed in `required`, `additionalProperties: false` on every
//! object, no `format`/range/length keywords, `anyOf` instead of `oneOf`.
//! This turns our full schema into that subset for sending; the answer is
//! still validated against the full schema by the caller. It never changes
//! the schema the caller holds.

use serde_json::{Map, Value};

/// Keywords strict mode rejects; dropped from the schema sent.
const UNSUPPORTED: &[&str] = &[
    "$schema",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "default",
    "examples",
];

/// The strict-mode version of `schema`.
pub fn to_strict(schema: &Value) -> Value {
    let mut out = schema.clone();
    strictify(&mut out);
    out
}

fn strictify(node: &mut Value) {
    match node {
        Value::Object(map) => {
            for key in UNSUPPORTED {
                map.remove(*key);
            }
            if let Some(one_of) = map.remove("oneOf") {
                map.insert("anyOf".to_owned(), one_of);
            }
            if let Some(Value::Object(props)) = map.get("properties") {
                let names: Vec<Value> = props.keys().cloned().map(Value::String).collect();
                map.insert("required".to_owned(), Value::Array(names));
                map.insert("additionalProperties".to_owned(), Value::Bool(false));
            } else if is_object_type(map) {
                map.insert("additionalProperties".to_owned(), Value::Bool(false));
                map.entry("properties")
                    .or_insert_with(|| Value::Object(Map::new()));
                map.entry("required")
                    .or_insert_with(|| Value::Array(Vec::new()));
            }
            for (key, child) in map.iter_mut() {
                // `properties` and `$defs` hold schemas by name; recurse into
                // each. Other values are schemas or arrays of schemas.
                if key == "properties" || key == "$defs" || key == "definitions" {
                    if let Value::Object(named) = child {
                        named.values_mut().for_each(strictify);
                    }
                } else if key != "enum" && key != "const" && key != "required" {
                    strictify(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strictify),
        _ => {}
    }
}

fn is_object_type(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_property_becomes_required_and_unsupported_keywords_go() {
        let full = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "a": { "type": "integer", "format": "uint32", "minimum": 0 },
                "b": { "type": "array", "items": { "$ref": "#/$defs/Item" }, "default": [] },
                "c": { "oneOf": [ { "const": "x" }, { "const": "y" } ] }
            },
            "required": ["a"],
            "$defs": { "Item": { "type": "object", "properties": { "id": { "type": "string", "pattern": "^x" } } } }
        });
        let strict = to_strict(&full);
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "properties": {
                    "a": { "type": "integer" },
                    "b": { "type": "array", "items": { "$ref": "#/$defs/Item" } },
                    "c": { "anyOf": [ { "const": "x" }, { "const": "y" } ] }
                },
                "required": ["a", "b", "c"],
                "additionalProperties": false,
                "$defs": { "Item": { "type": "object", "properties": { "id": { "type": "string" } }, "required": ["id"], "additionalProperties": false } }
            })
        );
        assert_eq!(
            full["required"],
            json!(["a"]),
            "the full schema is untouched"
        );
    }
}

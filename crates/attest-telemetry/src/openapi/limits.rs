//! Limits an assembled document states that no one handler's types can: the rule of a resource's path
//! parameter (a collection's `{name}` is a collection name in every operation under it), and the limits a role's
//! configuration sets (`router.max_k`, `answer.max_question_bytes`, …), which a document built from types alone
//! would not know. The rules themselves come from `attest_core::contract`.

use serde_json::Value;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::{Object, OpenApi, RefOr, Schema};

use attest_core::contract;

/// A resource's path, the name of its path parameter, and that parameter's rule.
type PathParameter = (&'static str, &'static str, fn() -> Object);

/// Each resource's path parameter and its rule: every operation whose path starts with the resource's path has
/// the parameter, with the same meaning. The more specific path comes first.
const PATH_PARAMETERS: [PathParameter; 4] = [
    ("/v1/collections/{name}", "name", contract::collection_name),
    ("/v1/keys/{id}", "id", contract::key_id),
    ("/v1/snapshots/jobs/{id}", "id", contract::job_id),
    ("/v1/snapshots/{id}", "id", contract::snapshot_id),
];

/// Gives the path parameters of `op` (at `path`) their resource's rule.
pub(super) fn path_parameters(path: &str, op: &mut Operation) {
    for parameter in op.parameters.iter_mut().flatten() {
        if !matches!(parameter.parameter_in, ParameterIn::Path) {
            continue;
        }
        let rule = PATH_PARAMETERS.iter().find(|(resource, name, _)| {
            *name == parameter.name
                && (path == *resource || path.starts_with(&format!("{resource}/")))
        });
        if let Some((_, _, schema)) = rule {
            parameter.schema = Some(RefOr::T(Schema::Object(schema())));
        }
    }
}

/// Merges JSON Schema keywords into properties of the document's component schemas: each
/// `(schema, property, keywords)` sets `keywords` (`{"maximum": 100}`) on `property` of component `schema`,
/// keeping what the property says already (its type, its description). A schema or property that is not there
/// is a bug of the caller (a field renamed) and panics, so a test that builds the document finds it.
pub fn constrain(mut doc: OpenApi, limits: &[(&str, &str, Value)]) -> OpenApi {
    let schemas = &mut doc.components.get_or_insert_with(Default::default).schemas;
    for (schema, property, keywords) in limits {
        let Some(RefOr::T(Schema::Object(object))) = schemas.get_mut(*schema) else {
            panic!("the OpenAPI document has no object schema {schema}");
        };
        let Some(field) = object.properties.get_mut(*property) else {
            panic!("schema {schema} has no property {property}");
        };
        // Only this property's schema goes through JSON: it is a plain schema, which serde reads back whole.
        let mut json = serde_json::to_value(&*field).expect("a schema serialises");
        let (Value::Object(json_object), Value::Object(keywords)) = (&mut json, keywords) else {
            panic!("{schema}.{property}: a property and its limits are JSON objects");
        };
        json_object.extend(keywords.clone());
        *field = serde_json::from_value(json).expect("a constrained schema is still one");
    }
    doc
}

/// The keywords of a rule's schema that limit a value (lengths, ranges, pattern, enum, items), without its
/// type and description: merged into a property, it keeps the property's own (a nullable type, its doc).
pub fn rule(schema: Object) -> Value {
    let mut json = serde_json::to_value(schema).expect("a schema serialises");
    if let Value::Object(keywords) = &mut json {
        keywords.remove("type");
        keywords.remove("description");
    }
    json
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn limits_are_merged_into_the_named_property_and_a_missing_one_is_refused() {
        let doc = crate::openapi::document([]);
        let before = serde_json::to_value(&doc).unwrap();
        let pointer = "/components/schemas/ErrorDetail/properties/message";
        let doc = constrain(doc, &[("ErrorDetail", "message", json!({"maxLength": 7}))]);
        let after = serde_json::to_value(&doc).unwrap();
        let mut expected = before.pointer(pointer).unwrap().clone();
        expected["maxLength"] = json!(7);
        assert_eq!(after.pointer(pointer).unwrap(), &expected);
        for (schema, property) in [("ErrorDetail", "colour"), ("Colour", "message")] {
            let missing = std::panic::catch_unwind(|| {
                constrain(
                    crate::openapi::document([]),
                    &[(schema, property, json!({"maxLength": 7}))],
                )
            });
            assert!(missing.is_err(), "{schema}.{property}");
        }
    }

    #[test]
    fn a_rule_keeps_its_limits_and_leaves_type_and_description_to_the_property() {
        let keywords = rule(contract::collection_name());
        assert_eq!(keywords["maxLength"], 128);
        assert!(keywords.get("type").is_none() && keywords.get("description").is_none());
    }
}

//! The links of the document: from each operation that creates a resource (or names one in its request) to
//! every operation that takes the resource's id, so that a client, or a fuzzer's stateful phase, can follow
//! create → use → delete without guessing which response field is which parameter. One table names where each
//! id comes from; the operations it links to are found by path, so an operation added under a resource is
//! linked without being listed.

use std::collections::BTreeMap;

use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::path::ParameterIn;
use utoipa::openapi::{OpenApi, RefOr};

/// Where an id comes from: the operation, its responses that carry it, the resource path whose operations take
/// it, and a runtime expression for each parameter of those operations.
struct Source {
    operation_id: &'static str,
    statuses: &'static [&'static str],
    resource: &'static str,
    parameters: &'static [(&'static str, &'static str)],
    /// Fields of the target's JSON body, each from an expression (for an operation that takes the id in its
    /// body).
    body: &'static [(&'static str, &'static str)],
}

const SOURCES: [Source; 6] = [
    Source {
        operation_id: "create_collection",
        statuses: &["200", "201"],
        resource: "/v1/collections/{name}",
        parameters: &[("name", "$response.body#/name")],
        body: &[],
    },
    Source {
        operation_id: "ingest_documents",
        statuses: &["200"],
        resource: "/v1/collections/{name}/documents/{id}",
        parameters: &[
            ("name", "$request.path.name"),
            ("id", "$request.body#/documents/0/id"),
        ],
        body: &[],
    },
    Source {
        operation_id: "create_key",
        statuses: &["201"],
        resource: "/v1/keys/{id}",
        parameters: &[("id", "$response.body#/id")],
        body: &[],
    },
    Source {
        operation_id: "create_snapshot",
        statuses: &["202"],
        resource: "/v1/snapshots/{id}",
        parameters: &[
            ("id", "$response.body#/snapshot"),
            ("from", "$request.body#/destination"),
        ],
        body: &[],
    },
    Source {
        operation_id: "create_snapshot",
        statuses: &["202"],
        resource: "/v1/snapshots/jobs/{id}",
        parameters: &[("id", "$response.body#/id")],
        body: &[],
    },
    Source {
        operation_id: "create_snapshot",
        statuses: &["202"],
        resource: "/v1/snapshots/restore",
        parameters: &[],
        body: &[
            ("source", "$request.body#/destination"),
            ("id", "$response.body#/snapshot"),
        ],
    },
];

/// Adds the links of [`SOURCES`] to `doc`'s operations. A link is named after the operation it leads to.
pub(super) fn add(doc: &mut OpenApi) {
    // (operation id, its path, the names of its parameters) of every operation.
    let mut operations: Vec<(String, String, Vec<String>)> = Vec::new();
    for (path, item) in &doc.paths.paths {
        for (_, op) in super::operations(item) {
            let names = op
                .parameters
                .iter()
                .flatten()
                .filter(|p| matches!(p.parameter_in, ParameterIn::Path | ParameterIn::Query))
                .map(|p| p.name.clone())
                .collect();
            if let Some(id) = &op.operation_id {
                operations.push((id.clone(), path.clone(), names));
            }
        }
    }
    for source in &SOURCES {
        let targets: BTreeMap<&str, _> = operations
            .iter()
            .filter(|(_, path, _)| {
                path == source.resource || path.starts_with(&format!("{}/", source.resource))
            })
            .map(|(id, _, names)| {
                let mut link = LinkBuilder::new().operation_id(id.as_str());
                for (name, expression) in source.parameters {
                    if names.iter().any(|n| n == name) {
                        link = link.parameter(*name, *expression);
                    }
                }
                if !source.body.is_empty() {
                    let body: serde_json::Map<String, serde_json::Value> = source
                        .body
                        .iter()
                        .map(|(field, expression)| (field.to_string(), (*expression).into()))
                        .collect();
                    link = link.request_body(Some(body));
                }
                (id.as_str(), link.build())
            })
            .collect();
        let Some(op) = doc
            .paths
            .paths
            .values_mut()
            .flat_map(super::operations_mut)
            .map(|(_, op)| op)
            .find(|op| op.operation_id.as_deref() == Some(source.operation_id))
        else {
            continue;
        };
        for status in source.statuses {
            if let Some(RefOr::T(response)) = op.responses.responses.get_mut(*status) {
                for (id, link) in &targets {
                    response
                        .links
                        .insert((*id).to_string(), RefOr::T(link.clone()));
                }
            }
        }
    }
}

/// utoipa 5.5 writes a Link Object's fields in snake case (`operation_id`), which OpenAPI does not know: a
/// reader sees a link to no operation. Only a Link has these field names (an Operation writes `operationId`,
/// and no schema of the API has such a property), so the serialised document is mended by name.
pub(super) fn camel_case(json: &str) -> String {
    json.replace("\"operation_id\": ", "\"operationId\": ")
        .replace("\"operation_ref\": ", "\"operationRef\": ")
        .replace("\"request_body\": ", "\"requestBody\": ")
}

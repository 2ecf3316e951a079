//! The document model every parser produces, and the limits a document must respect before it
//! is accepted into the index.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::IngestError;

/// The fields a document may carry in an ingest body or a JSONL line (SPEC "HTTP API v1":
/// `{id, title?, text, metadata?, tenant?}`); any other field is refused, named, so that a misspelt
/// `tenant` or `metadata` is never silently dropped.
pub const DOCUMENT_FIELDS: [&str; 5] = ["id", "title", "text", "metadata", "tenant"];

/// One source document, as parsed and normalised, before chunking.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SourceDocument {
    pub id: String,
    /// May be empty.
    #[serde(default)]
    pub title: String,
    pub text: String,
    /// Scalars or arrays of scalars only (see [`SourceDocument::validate`]).
    #[serde(default)]
    pub metadata: Map<String, Value>,
    #[serde(default)]
    pub tenant: Option<String>,
}

/// Size limits enforced by [`SourceDocument::validate`]. All lengths are in UTF-8 bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct DocumentLimits {
    /// Longest `id` (and `tenant`). Default 512.
    pub max_id_len: usize,
    /// Largest `text`. Default 1 000 000.
    pub max_text_bytes: usize,
    /// Largest `metadata`, measured as compact JSON. Default 16 384.
    pub max_metadata_bytes: usize,
    /// Longest `title`. Default 1024.
    pub max_title_len: usize,
}

impl Default for DocumentLimits {
    fn default() -> Self {
        DocumentLimits {
            max_id_len: 512,
            max_text_bytes: 1_000_000,
            max_metadata_bytes: 16_384,
            max_title_len: 1024,
        }
    }
}

/// Why a document with these field names is refused (every field not in [`DOCUMENT_FIELDS`] named,
/// sorted), or `None` when it has no other field.
pub(crate) fn unknown_fields<'a>(keys: impl IntoIterator<Item = &'a String>) -> Option<String> {
    // A field name can be as long as the line; a reason quotes at most 80 characters of it.
    let quote = |k: &str| format!("`{}`", k.chars().take(80).collect::<String>());
    let mut unknown: Vec<String> = keys
        .into_iter()
        .filter(|k| !DOCUMENT_FIELDS.contains(&k.as_str()))
        .map(|k| quote(k))
        .collect();
    if unknown.is_empty() {
        return None;
    }
    unknown.sort();
    let known: Vec<String> = DOCUMENT_FIELDS.iter().map(|k| quote(k)).collect();
    Some(format!(
        "unknown field{} {}: a document has {}",
        if unknown.len() == 1 { "" } else { "s" },
        unknown.join(", "),
        known.join(", ")
    ))
}

impl SourceDocument {
    /// Checks the document against `limits` and the shape rules; the error names the first
    /// offending field (`id`, `title`, `text`, `tenant`, `metadata` or `metadata.<key>`).
    ///
    /// Rules: `id` is non-empty without control characters; `text` is non-blank; `tenant`, when
    /// present, follows the `id` rules; metadata values are strings, numbers, booleans or arrays
    /// of those. Nulls and nested objects are rejected because metadata feeds exact-match
    /// filters, where neither has a meaning.
    pub fn validate(&self, limits: &DocumentLimits) -> Result<(), IngestError> {
        check_key("id", &self.id, limits.max_id_len)?;
        if self.title.len() > limits.max_title_len {
            return Err(too_long("title", self.title.len(), limits.max_title_len));
        }
        if self.text.len() > limits.max_text_bytes {
            return Err(too_long("text", self.text.len(), limits.max_text_bytes));
        }
        if self.text.trim().is_empty() {
            return Err(IngestError::field("text", "is empty"));
        }
        // Empty is the default tenant, as it is wherever a request names a tenant.
        if let Some(tenant) = self.tenant.as_ref().filter(|t| !t.is_empty()) {
            check_key("tenant", tenant, limits.max_id_len)?;
        }
        for (key, value) in &self.metadata {
            if key.is_empty() {
                return Err(IngestError::field("metadata", "has an empty key"));
            }
            check_metadata_value(key, value)?;
        }
        let size = serde_json::to_vec(&self.metadata).map_or(usize::MAX, |v| v.len());
        if size > limits.max_metadata_bytes {
            return Err(too_long("metadata", size, limits.max_metadata_bytes));
        }
        Ok(())
    }
}

/// A title or text as a caller sent it, normalised ([`crate::normalize_text`]), when it was at most `max` bytes
/// as sent: the limit holds for what was sent, not only for what is left once normalisation drops control
/// characters and collapses whitespace (the API document's `maxLength` says so; [`SourceDocument::validate`]
/// checks what is stored).
pub fn normalized_within(s: &str, field: &str, max: usize) -> Result<String, IngestError> {
    if s.len() > max {
        return Err(too_long(field, s.len(), max));
    }
    Ok(crate::normalize_text(s))
}

fn too_long(field: &str, got: usize, max: usize) -> IngestError {
    IngestError::field(field, format!("is {got} bytes, the limit is {max}"))
}

/// Ids and tenants end up in storage keys and log lines, where control characters would
/// corrupt framing or hide the real value.
fn check_key(field: &str, value: &str, max_len: usize) -> Result<(), IngestError> {
    if value.is_empty() {
        return Err(IngestError::field(field, "is empty"));
    }
    if value.len() > max_len {
        return Err(too_long(field, value.len(), max_len));
    }
    if value.chars().any(char::is_control) {
        return Err(IngestError::field(field, "contains control characters"));
    }
    Ok(())
}

fn check_metadata_value(key: &str, value: &Value) -> Result<(), IngestError> {
    let field = || format!("metadata.{key}");
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => Ok(()),
        Value::Null => Err(IngestError::field(
            field(),
            "null is not allowed; omit the key instead",
        )),
        Value::Object(_) => Err(IngestError::field(
            field(),
            "nested objects are not allowed; values must be strings, numbers, booleans or arrays of those",
        )),
        Value::Array(items) => {
            if items
                .iter()
                .all(|v| matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)))
            {
                Ok(())
            } else {
                Err(IngestError::field(
                    field(),
                    "arrays may only hold strings, numbers or booleans",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> SourceDocument {
        SourceDocument {
            id: "d1".into(),
            title: "T".into(),
            text: "body".into(),
            metadata: Map::new(),
            tenant: None,
        }
    }

    fn field_of(err: IngestError) -> String {
        match err {
            IngestError::InvalidField { field, .. } => field,
            other => panic!("unexpected error {other}"),
        }
    }

    fn meta(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn valid_document_passes() {
        let mut d = doc();
        d.metadata = meta(json!({"lang": "en", "year": 2020, "ok": true, "tags": ["a", 1, false]}));
        d.tenant = Some("acme".into());
        d.validate(&DocumentLimits::default()).unwrap();
    }

    #[test]
    fn limits_name_the_field() {
        let limits = DocumentLimits {
            max_id_len: 4,
            max_text_bytes: 10,
            max_metadata_bytes: 20,
            max_title_len: 3,
        };
        let mut d = doc();
        d.id = "toolong".into();
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "id");

        let mut d = doc();
        d.title = "long title".into();
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "title");

        let mut d = doc();
        d.text = "x".repeat(11);
        let err = d.validate(&limits).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid field `text`: is 11 bytes, the limit is 10"
        );

        let mut d = doc();
        d.metadata = meta(json!({"k": "a value that is long"}));
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "metadata");

        let mut d = doc();
        d.tenant = Some("tenant-x".into());
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "tenant");
    }

    #[test]
    fn shape_rules() {
        let limits = DocumentLimits::default();
        let mut d = doc();
        d.id = String::new();
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "id");
        d.id = "a\u{0}b".into();
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "id");

        let mut d = doc();
        d.text = " \n ".into();
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "text");

        // An empty tenant is the default one, as wherever a request names a tenant; a tenant with a control
        // character is refused.
        let mut d = doc();
        d.tenant = Some(String::new());
        d.validate(&limits).unwrap();
        d.tenant = Some("a\u{1}".into());
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "tenant");
    }

    #[test]
    fn metadata_must_be_flat() {
        let limits = DocumentLimits::default();
        let mut d = doc();
        d.metadata = meta(json!({"a": 1, "nested": {"x": 1}}));
        let err = d.validate(&limits).unwrap_err();
        assert!(err.to_string().contains("nested objects"), "{err}");
        assert_eq!(field_of(err), "metadata.nested");

        d.metadata = meta(json!({"arr": [1, [2]]}));
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "metadata.arr");
        d.metadata = meta(json!({"arr": [{"x": 1}]}));
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "metadata.arr");
        d.metadata = meta(json!({"n": null}));
        assert_eq!(field_of(d.validate(&limits).unwrap_err()), "metadata.n");
    }

    #[test]
    fn serde_defaults_for_optional_fields() {
        let d: SourceDocument = serde_json::from_str(r#"{"id":"x","text":"y"}"#).unwrap();
        assert_eq!(d.title, "");
        assert!(d.metadata.is_empty() && d.tenant.is_none());
        let l: DocumentLimits = serde_json::from_str(r#"{"max_id_len": 8}"#).unwrap();
        assert_eq!(l.max_id_len, 8);
        assert_eq!(l.max_text_bytes, 1_000_000);
    }
}

//! Error type shared by every ingest stage (validation, parsing, file access).

/// Why a document or file could not be ingested.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// A document field breaks a limit or a shape rule; `field` names it (e.g. `metadata.lang`).
    #[error("invalid field `{field}`: {reason}")]
    InvalidField { field: String, reason: String },
    /// The input bytes are not UTF-8; the message says where.
    #[error("invalid utf-8 {0}")]
    InvalidUtf8(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
}

impl IngestError {
    pub(crate) fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        IngestError::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

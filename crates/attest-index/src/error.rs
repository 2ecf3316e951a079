//! Errors of the storage engine. One enum for the crate; the shard role maps it to gRPC status codes.

use std::path::PathBuf;

/// Everything that can go wrong inside a shard's storage engine.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// The caller sent something the engine will not store or search (wrong dimension, NaN, bad filter ...).
    #[error("invalid argument `{field}`: {reason}")]
    InvalidArgument { field: String, reason: String },
    /// A file on disk failed its checksum or structural validation.
    #[error("corrupt file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error("faiss: {0}")]
    Faiss(String),
    #[error("tantivy: {0}")]
    Tantivy(String),
    #[error("rocksdb: {0}")]
    RocksDb(String),
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    #[error("serialization: {0}")]
    Serialization(String),
    /// The engine cannot take the write now (sealing is behind); the caller may retry.
    #[error("busy: {0}")]
    Busy(String),
    /// Data on disk of a format version this build does not read (see `attest_core::format`).
    #[error("{0}")]
    Format(#[from] attest_core::format::FormatError),
    /// The data directory is below its free-space reserve, or a write met the end of the filesystem: the write
    /// is refused, reads go on.
    #[error("{0}")]
    DiskFull(String),
}

impl IndexError {
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        IndexError::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        IndexError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

impl From<faiss::error::Error> for IndexError {
    fn from(e: faiss::error::Error) -> Self {
        IndexError::Faiss(e.to_string())
    }
}

impl From<tantivy::TantivyError> for IndexError {
    fn from(e: tantivy::TantivyError) -> Self {
        IndexError::Tantivy(e.to_string())
    }
}

impl From<rocksdb::Error> for IndexError {
    fn from(e: rocksdb::Error) -> Self {
        IndexError::RocksDb(e.to_string())
    }
}

impl From<attest_core::disk::DiskFull> for IndexError {
    fn from(e: attest_core::disk::DiskFull) -> Self {
        IndexError::DiskFull(e.to_string())
    }
}

impl IndexError {
    /// Whether this is the filesystem being out of space (the reserve refused the write, or RocksDB or the OS
    /// met ENOSPC): the caller hears "disk full", not an internal error.
    pub fn is_disk_full(&self) -> bool {
        match self {
            IndexError::DiskFull(_) => true,
            IndexError::RocksDb(m) => attest_core::disk::is_out_of_space(m),
            IndexError::Io(e) => e.raw_os_error() == Some(libc::ENOSPC),
            _ => false,
        }
    }
}

pub type Result<T, E = IndexError> = std::result::Result<T, E>;

//! What meta accepts of a collection name and an API key record, checked before a command is proposed and again
//! when it is applied (the rules themselves are `attest_core`'s).

use super::ApiKeyRecord;
use crate::error::StateError;

/// Collection names travel in URLs and file names (the rule of `attest_core::limits`). Meta keys collections
/// by stored name, so it also accepts a copy's `name~tag`, which users' names cannot be.
pub fn validate_collection_name(name: &str) -> Result<(), StateError> {
    match attest_core::limits::stored_collection_name_problem(name) {
        Some(problem) => Err(StateError::InvalidArgument(format!(
            "collection name {name:?}: {problem}"
        ))),
        None => Ok(()),
    }
}

/// A key record meta accepts: its hash, id and grant in the shape `attest_core::keys` defines.
pub fn validate_key(key: &ApiKeyRecord) -> Result<(), StateError> {
    validate_key_hash(&key.key_sha256)?;
    if let Some(p) = attest_core::keys::key_id_problem(&key.id) {
        return Err(StateError::InvalidArgument(format!("key id: {p}")));
    }
    if !key.parent_id.is_empty() {
        if let Some(p) = attest_core::keys::key_id_problem(&key.parent_id) {
            return Err(StateError::InvalidArgument(format!("parent key id: {p}")));
        }
    }
    let scopes: Vec<String> = key.scopes.iter().map(|&s| scope_name(s)).collect();
    match attest_core::keys::grant_problem(&scopes, &key.tenants, &key.collections) {
        Some((field, p)) => Err(StateError::InvalidArgument(format!("{field}: {p}"))),
        None => Ok(()),
    }
}

/// The `attest_core::keys::Scope` name of an `attest.v1.Scope` value (an unknown value keeps its number, and is
/// refused by the grant rule).
pub fn scope_name(scope: i32) -> String {
    use attest_core::keys::Scope;
    match scope {
        1 => Scope::Read.as_str().to_string(),
        2 => Scope::Write.as_str().to_string(),
        3 => Scope::Admin.as_str().to_string(),
        other => format!("scope#{other}"),
    }
}

/// A key hash is 64 lowercase hex digits.
pub fn validate_key_hash(hash: &str) -> Result<(), StateError> {
    let ok = hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(StateError::InvalidArgument(
            "key_sha256 must be 64 lowercase hex digits".into(),
        ))
    }
}

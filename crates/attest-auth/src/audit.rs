//! One structured log line per authenticated write and admin action (`event: "audit"`, target `attest_audit`):
//! who (key id), for which tenant, what, on which collection and object, and how it really ended (`ok`, or the
//! error code of the answer the caller got: a delete of nothing is `NOT_FOUND`, never `ok`). Reads are not
//! audited: the access log has them.

use attest_proto::ErrorCode;

use crate::keyring::Principal;

/// What an audited action acted on; a field the action has none of stays empty.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Action<'a> {
    /// `create_key`, `revoke_key`, `ingest`, `delete_document`, `restore_snapshot`, ...
    pub name: &'a str,
    pub collection: &'a str,
    /// The tenants the action acted for (comma-separated): a document's, a key's grant.
    pub tenant: &'a str,
    /// The object it names besides the collection: a key id, a document id, a snapshot id.
    pub target: &'a str,
}

impl<'a> Action<'a> {
    pub fn new(name: &'a str) -> Self {
        Action {
            name,
            ..Action::default()
        }
    }

    pub fn collection(self, collection: &'a str) -> Self {
        Action { collection, ..self }
    }

    pub fn tenant(self, tenant: &'a str) -> Self {
        Action { tenant, ..self }
    }

    pub fn target(self, target: &'a str) -> Self {
        Action { target, ..self }
    }
}

/// Logs the outcome of `action` done for `principal`: `failed` is the code of the error answered, `None` when it
/// succeeded.
pub fn record(principal: &Principal, action: &Action<'_>, failed: Option<ErrorCode>) {
    let result = failed.map_or("ok", ErrorCode::as_str);
    tracing::info!(target: "attest_audit", event = "audit", key_id = %principal.key_id,
        tenant = %action.tenant, action = %action.name, collection = %action.collection,
        target_id = %action.target, result = %result, "audited action");
}

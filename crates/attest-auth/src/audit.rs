//! One structured log line per authenticated write and admin action (`event: "audit"`, target `attest_audit`):
//! who (key id), for which tenant, what, on which collection, and how it ended. Reads are not audited: the
//! access log has them.

use attest_proto::ErrorCode;

use crate::keyring::Principal;

/// Logs the outcome of `action` done for `principal`: `failed` is the error's code, `None` when it succeeded
/// (`tenant` empty where the action has none).
pub fn record(
    principal: &Principal,
    action: &str,
    collection: &str,
    tenant: &str,
    failed: Option<ErrorCode>,
) {
    let result = failed.map_or("ok", ErrorCode::as_str);
    tracing::info!(target: "attest_audit", event = "audit", key_id = %principal.key_id, tenant = %tenant,
        action = %action, collection = %collection, result = %result, "audited action");
}

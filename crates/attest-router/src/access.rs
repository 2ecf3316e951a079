//! What each router operation requires of its caller, said once for both fronts: the scope of every operation
//! ([`Op::scope`]; HTTP puts it on the route, gRPC checks it first thing), and the rewrites that make a request
//! act only as the caller's key allows — its collection must be one the key lists, and its tenant is resolved from
//! the key (a tenant the key lacks is PERMISSION_DENIED before anything is done) and stamped on the request, so
//! the shard's mandatory tenant filter and the documents written carry the key's tenant, never the body's say-so.

use attest_auth::audit::Action;
use attest_auth::{Principal, Scope};
use attest_proto::v1 as pb;
use attest_proto::ErrorCode;

use crate::error::RouterError;
use crate::ingest::IngestDocument;

/// The router's operations, as far as access is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    ListCollections,
    GetCollection,
    Stats,
    /// `GET /v1/collections/{name}/eval`: the collection's latest eval report.
    EvalReport,
    Search,
    Ingest,
    DeleteDocument,
    CreateCollection,
    DropCollection,
    Maintain,
    SetThresholds,
    ManageKeys,
    Snapshots,
    /// Re-embedding a collection (and reading or cancelling its job).
    Reembed,
    /// `GET /v1/cluster`: nodes, addresses and placement are the operator's business.
    Cluster,
}

impl Op {
    /// The scope an operation needs: reads `read`, document writes `write`, the shape of the cluster `admin`.
    pub fn scope(self) -> Scope {
        match self {
            Op::ListCollections | Op::GetCollection | Op::Stats | Op::EvalReport | Op::Search => {
                Scope::Read
            }
            Op::Ingest | Op::DeleteDocument => Scope::Write,
            Op::CreateCollection
            | Op::DropCollection
            | Op::Maintain
            | Op::SetThresholds
            | Op::ManageKeys
            | Op::Snapshots
            | Op::Reembed
            | Op::Cluster => Scope::Admin,
        }
    }
}

/// Writes the audit line of a write or admin action (both fronts) and passes its outcome on: the line's result is
/// the outcome's, so it must be the answer the caller gets.
pub fn audited<T>(
    principal: &Principal,
    action: Action<'_>,
    outcome: Result<T, RouterError>,
) -> Result<T, RouterError> {
    let failed = outcome.as_ref().err().map(RouterError::code);
    attest_auth::audit::record(principal, &action, failed);
    outcome
}

/// [`audited`] for a delete, whose `Ok(false)` (nothing to delete) is audited as `NOT_FOUND`: HTTP answers it 404
/// and gRPC `deleted: false`, and neither is the `ok` of a delete that happened.
pub fn audited_delete(
    principal: &Principal,
    action: Action<'_>,
    outcome: Result<bool, RouterError>,
) -> Result<bool, RouterError> {
    let failed = match &outcome {
        Ok(true) => None,
        Ok(false) => Some(ErrorCode::NotFound),
        Err(e) => Some(e.code()),
    };
    attest_auth::audit::record(principal, &action, failed);
    outcome
}

/// Snapshots and restores carry every tenant's documents: only a key unlimited in tenants and collections may
/// take, list, delete or restore them.
pub fn whole_cluster(principal: &Principal, what: &str) -> Result<(), RouterError> {
    principal
        .require_unrestricted(what)
        .map_err(RouterError::Callee)
}

/// A collection the key may act on.
pub fn collection(principal: &Principal, name: &str) -> Result<(), RouterError> {
    principal.collection(name).map_err(RouterError::Callee)
}

/// A search as the key allows: its collection checked, its tenant the key's.
pub fn search(
    principal: &Principal,
    req: &mut pb::SearchRequest,
    default_tenant: &str,
) -> Result<(), RouterError> {
    collection(principal, &req.collection)?;
    req.tenant = principal
        .tenant(Some(&req.tenant), default_tenant)
        .map_err(RouterError::Callee)?;
    Ok(())
}

/// An ingest batch as the key allows: every document's tenant resolved and stamped; one the key may not write
/// refuses the whole batch (nothing is written). Returns the tenants written, for the audit line.
pub fn ingest(
    principal: &Principal,
    collection_name: &str,
    docs: &mut [IngestDocument],
    default_tenant: &str,
) -> Result<Vec<String>, RouterError> {
    collection(principal, collection_name)?;
    let mut tenants: Vec<String> = Vec::new();
    for d in docs.iter_mut() {
        let t = principal
            .tenant(d.source.tenant.as_deref(), default_tenant)
            .map_err(RouterError::Callee)?;
        if !tenants.contains(&t) {
            tenants.push(t.clone());
        }
        d.source.tenant = Some(t);
    }
    Ok(tenants)
}

/// The tenant a delete acts for.
pub fn delete(
    principal: &Principal,
    collection_name: &str,
    tenant: Option<&str>,
    default_tenant: &str,
) -> Result<String, RouterError> {
    collection(principal, collection_name)?;
    principal
        .tenant(tenant, default_tenant)
        .map_err(RouterError::Callee)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admin_operation_needs_admin_and_reads_need_only_read() {
        for op in [
            Op::CreateCollection,
            Op::DropCollection,
            Op::Maintain,
            Op::SetThresholds,
            Op::ManageKeys,
            Op::Cluster,
        ] {
            assert_eq!(op.scope(), Scope::Admin, "{op:?}");
        }
        assert_eq!(Op::Ingest.scope(), Scope::Write);
        assert_eq!(Op::DeleteDocument.scope(), Scope::Write);
        assert_eq!(Op::Search.scope(), Scope::Read);
    }
}

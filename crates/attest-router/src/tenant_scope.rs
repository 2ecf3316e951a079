//! Actions on a whole collection under a key limited to some tenants (issue 69). Dropping a collection, setting or
//! clearing its answer thresholds and maintaining it touch every tenant's documents in it, so a key that may not
//! act for every tenant (`*`) may do them only when each tenant with a live document there is one of its own; the
//! cluster view shows such a key only the collections it could administer so. Deleting its own tenants' documents
//! stays a `write` action, never refused here (docs/SECURITY.md "Tenant-limited admin keys").
//!
//! Whose documents a collection holds is asked of the shards (the Stats RPC lists a replica's tenants): from
//! enough replicas of each shard that every write quorum meets one of them, so no acknowledged document is
//! missed. When that many do not answer, or a replica does not list its tenants (a node from before the list), the
//! set is unknown and the action is refused: never assumed empty.

use std::collections::BTreeSet;

use attest_auth::Principal;
use attest_proto::v1 as pb;

use crate::collection::CollectionRecord;
use crate::collections::Collections;
use crate::error::RouterError;
use crate::replicas::ShardCall;

impl Collections {
    /// The tenants with a live document in `collection` (see the module's header for how they are learnt).
    pub async fn tenants(
        &self,
        collection: &str,
        request_id: &str,
    ) -> Result<BTreeSet<String>, RouterError> {
        let rec = self.shared.view.get(collection)?;
        self.tenants_of(&rec, request_id).await
    }

    async fn tenants_of(
        &self,
        rec: &CollectionRecord,
        request_id: &str,
    ) -> Result<BTreeSet<String>, RouterError> {
        let mut tenants = BTreeSet::new();
        for shard in 0..rec.shards {
            let replicas = self.shared.view.write_replicas(rec, shard as usize);
            // A write is acknowledged by `quorum` of the n replicas: any n - quorum + 1 of them include one
            // that holds it.
            let needed =
                replicas.len() + 1 - self.shared.write_quorum(replicas.len()).min(replicas.len());
            let calls = replicas.iter().map(|endpoint| {
                endpoint.call(ShardCall::Stats {
                    request_id: request_id.to_string(),
                    req: pb::ShardStatsRequest {
                        collection: rec.stored_name.clone(),
                        shard,
                    },
                })
            });
            let mut answered = 0;
            let mut problem = None;
            for outcome in futures::future::join_all(calls).await {
                let listed = outcome.and_then(pb::ShardStatsResponse::try_from);
                match listed {
                    Ok(stats) if stats.tenants_listed => {
                        answered += 1;
                        tenants.extend(stats.tenants);
                    }
                    Ok(_) => problem = Some("a replica does not list its tenants".to_string()),
                    Err(e) => problem = Some(e.message().to_string()),
                }
            }
            if replicas.is_empty() || answered < needed {
                return Err(RouterError::Unavailable(format!(
                    "cannot tell whose documents shard {shard} of `{}` holds ({answered} of {} replicas answered, \
                     {needed} needed{}); an action on the whole collection needs that under a key limited to \
                     some tenants",
                    rec.name,
                    replicas.len(),
                    problem.map(|p| format!(": {p}")).unwrap_or_default()
                )));
            }
        }
        Ok(tenants)
    }
}

/// Refuses `what` (`drop`, `set the thresholds of`, ...) on collection `name` unless the key may act on it and
/// on every tenant with documents in it. A key for every tenant costs no call to the shards.
pub async fn whole_collection(
    collections: &Collections,
    principal: &Principal,
    what: &str,
    name: &str,
    request_id: &str,
) -> Result<(), RouterError> {
    principal.collection(name).map_err(RouterError::Callee)?;
    if principal.every_tenant() {
        return Ok(());
    }
    let held = collections.tenants(name, request_id).await?;
    principal
        .covers_tenants(what, name, held.iter().map(String::as_str))
        .map_err(RouterError::Callee)
}

/// Whether the cluster view shows `rec` to this key: one it may act on whose every tenant is the key's (unknown
/// tenants: hidden).
pub async fn administers(
    collections: &Collections,
    principal: &Principal,
    rec: &CollectionRecord,
    request_id: &str,
) -> bool {
    if !principal.sees_collection(&rec.name) {
        return false;
    }
    if principal.every_tenant() {
        return true;
    }
    match collections.tenants_of(rec, request_id).await {
        Ok(held) => held.iter().all(|t| principal.allows_tenant(t)),
        Err(_) => false,
    }
}

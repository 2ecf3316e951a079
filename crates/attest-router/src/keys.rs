//! API keys through the router (admin scope): minted here (the key is returned once and never stored), kept
//! hashed in meta, listed and revoked by id. A key manages only keys within its own grant: it mints none wider
//! than itself, and lists and revokes only those its scope, tenants and collections cover. The router re-reads
//! meta's state after each change so its own key ring has it at once; every other front looks a key it does not
//! know up in meta when it is first shown (`KeyRing::authenticate_fresh`), and has revocations from its next poll.
//! Expiry is part of the grant: a key mints none that outlives it, and a minted key records its parent, so that
//! revoking a key stops every key it minted (the key ring follows the chain at authentication).

use std::sync::Arc;

use attest_auth::audit::Action;
use attest_auth::keyring::{deny, now_ms, scope_of, scope_to_pb};
use attest_auth::{secret, Principal};
use attest_core::contract;
use attest_core::keys::{grant_problem, key_lifetime_ms, Scope};
use attest_proto::v1 as pb;
use attest_proto::ErrorCode;

use crate::access::audited;
use crate::error::RouterError;
use crate::shared::Shared;

/// What a new key may do (HTTP `POST /v1/keys`, gRPC `CreateKey`, `attest key create`).
#[derive(Debug, Clone, Default, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct KeyGrant {
    #[schema(schema_with = contract::scopes)]
    pub scopes: Vec<String>,
    #[schema(schema_with = contract::grant_tenants)]
    pub tenants: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = contract::grant_collections)]
    pub collections: Vec<String>,
    #[serde(default)]
    #[schema(schema_with = contract::key_lifetime)]
    pub expires_in: Option<String>,
}

/// API keys, kept hashed in meta.
#[derive(Clone)]
pub struct Keys {
    shared: Arc<Shared>,
}

impl Keys {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        Keys {
            shared: Arc::clone(shared),
        }
    }

    /// Mints a key with this grant and stores its hash in meta; returns the key (to be shown once) and its record.
    /// Audited (both fronts call this): the grant's tenants, the new key's id as target.
    pub async fn create(
        &self,
        caller: &Principal,
        grant: KeyGrant,
    ) -> Result<(String, pb::ApiKeyInfo), RouterError> {
        let tenants = grant.tenants.join(",");
        let created = self.mint_key(caller, grant).await;
        let id = created
            .as_ref()
            .map(|(_, k)| k.id.clone())
            .unwrap_or_default();
        audited(
            caller,
            Action::new("create_key").tenant(&tenants).target(&id),
            created,
        )
    }

    async fn mint_key(
        &self,
        caller: &Principal,
        grant: KeyGrant,
    ) -> Result<(String, pb::ApiKeyInfo), RouterError> {
        if let Some((field, problem)) =
            grant_problem(&grant.scopes, &grant.tenants, &grant.collections)
        {
            return Err(RouterError::invalid(field, problem));
        }
        let scopes: Vec<Scope> = grant
            .scopes
            .iter()
            .filter_map(|s| Scope::parse(s))
            .collect();
        caller
            .may_grant(&scopes, &grant.tenants, &grant.collections)
            .map_err(RouterError::Callee)?;
        let ttl = match grant.expires_in.as_deref() {
            None | Some("") => None,
            Some(text) => {
                Some(key_lifetime_ms(text).map_err(|e| RouterError::invalid("expires_in", e))?)
            }
        };
        let created = now_ms();
        let expires_at_ms = ttl.map(|t| created.saturating_add(t));
        // Expiry is part of the grant: a key never mints one that outlives it (issue 69).
        caller
            .may_expire_at(expires_at_ms)
            .map_err(RouterError::Callee)?;
        let minted = secret::mint();
        let info = pb::ApiKeyInfo {
            key_sha256: minted.sha256_hex,
            id: minted.id,
            scopes: scopes.iter().map(|&s| scope_to_pb(s) as i32).collect(),
            tenants: grant.tenants,
            collections: grant.collections,
            expires_at_ms: expires_at_ms.unwrap_or(0),
            created_ms: created,
            revoked: false,
            parent_id: caller.parent_link().unwrap_or_default().to_string(),
        };
        self.shared
            .view
            .meta()
            .put_api_key(info.clone())
            .await
            .map_err(RouterError::from_meta_write)?;
        self.shared.view.refresh(true).await?;
        Ok((minted.key, info))
    }

    /// The keys meta holds (hashes, never keys) that lie within the caller's grant, as of a linearizable read
    /// (which the view applies too).
    pub async fn list(&self, caller: &Principal) -> Result<Vec<pb::ApiKeyInfo>, RouterError> {
        let state = self.shared.view.refresh(true).await?;
        let mut keys: Vec<pb::ApiKeyInfo> = state
            .api_keys
            .into_iter()
            .filter(|k| grant_of(k, caller).is_none())
            .collect();
        keys.sort_by_key(|k| (k.created_ms, k.id.clone()));
        Ok(keys)
    }

    /// Marks the key with this id revoked (NOT_FOUND for an unknown id, PERMISSION_DENIED for a key outside the
    /// caller's grant; revoking twice is fine). Audited: the key's tenants, its id as target.
    pub async fn revoke(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<pb::ApiKeyInfo, RouterError> {
        let revoked = self.mark_revoked(caller, id).await;
        let tenants = revoked
            .as_ref()
            .map(|k| k.tenants.join(","))
            .unwrap_or_default();
        audited(
            caller,
            Action::new("revoke_key").tenant(&tenants).target(id),
            revoked,
        )
    }

    async fn mark_revoked(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<pb::ApiKeyInfo, RouterError> {
        let state = self.shared.view.refresh(true).await?;
        let mut key = state
            .api_keys
            .into_iter()
            .find(|k| k.id == id)
            .ok_or_else(|| RouterError::NotFound(format!("no API key with id `{id}`")))?;
        if let Some(excess) = grant_of(&key, caller) {
            return Err(RouterError::Callee(deny(
                ErrorCode::PermissionDenied,
                "grant",
                format!("this API key may not revoke key `{id}`: that key holds {excess}"),
            )));
        }
        key.revoked = true;
        self.shared
            .view
            .meta()
            .put_api_key(key.clone())
            .await
            .map_err(RouterError::from_meta_write)?;
        self.shared.view.refresh(true).await?;
        Ok(key)
    }
}

/// What of a stored key's grant lies beyond the caller's (`None`: the caller may see and revoke it).
fn grant_of(key: &pb::ApiKeyInfo, caller: &Principal) -> Option<String> {
    let scopes: Vec<Scope> = key.scopes.iter().filter_map(|&s| scope_of(s)).collect();
    caller.grant_excess(&scopes, &key.tenants, &key.collections)
}

//! [`KeyRing`]: the keys meta holds (hashes and grants only), refreshed from each cluster state a node polls, plus
//! the static admin key an operator starts the node with; and [`Principal`], what an authenticated request may do.
//!
//! Authentication is off until [`KeyRing::enable`] is called with the admin key (`--admin-key` /
//! `ATTEST_ADMIN_KEY`): an open `attest dev` on loopback then acts as a principal that may do everything. Once on,
//! every request needs a bearer token that is the admin key or a live key of meta's; a key meta marks revoked or
//! that has expired is refused from the next poll on (the poll interval is 1 s, so within 2 s), and a key minted
//! a moment ago is looked up in meta the first time it is shown ([`KeyRing::authenticate_fresh`]). A key minted
//! by another key names it as its parent, and is refused as soon as any key it descends from is revoked or has
//! expired (issue 69): revoking a key revokes everything it minted, on every front at the same poll.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use attest_core::keys::{Scope, ANY_TENANT};
use attest_proto::v1 as pb;
use attest_proto::{ApiError, ErrorCode, MetaClient};
use parking_lot::RwLock;
use subtle::ConstantTimeEq;

use crate::refresh::{KeyRefresh, StateFetch};
use crate::secret;

/// Shortest admin key accepted: a bootstrap secret, so it must not be guessable.
pub const MIN_ADMIN_KEY_LEN: usize = 24;

/// Why `admin_key` cannot be a bootstrap admin key (too short, or with spaces), if it cannot.
pub fn admin_key_problem(admin_key: &str) -> Result<(), String> {
    if admin_key.len() < MIN_ADMIN_KEY_LEN || admin_key.chars().any(char::is_whitespace) {
        return Err(format!(
            "the admin key must be at least {MIN_ADMIN_KEY_LEN} characters without spaces"
        ));
    }
    Ok(())
}
/// The key id logs show for the admin key.
pub const ADMIN_KEY_ID: &str = "admin";

/// Counts a refusal in `auth_denied_total{reason}` and makes its error.
pub fn deny(code: ErrorCode, reason: &'static str, message: impl Into<String>) -> ApiError {
    metrics::counter!("auth_denied_total", "reason" => reason).increment(1);
    ApiError::new(code, message)
}

struct StoredKey {
    sha256: [u8; 32],
    scope: Option<Scope>,
    tenants: Vec<String>,
    collections: Vec<String>,
    expires_at_ms: u64,
    revoked: bool,
    /// The id of the key that minted it ("" for the bootstrap admin key's).
    parent_id: String,
}

/// The longest chain of parents followed: keys mint keys within their own grant, so a deeper chain is a
/// mistake, and a cycle (never minted, but a record could be written so) must not loop.
const MAX_KEY_CHAIN: usize = 32;

#[derive(Default)]
struct Keys {
    version: u64,
    by_id: HashMap<String, StoredKey>,
}

/// The keys a node accepts. Shared (`Arc`) by the node's HTTP and gRPC fronts and its meta watcher.
#[derive(Default)]
pub struct KeyRing {
    enabled: AtomicBool,
    admin_sha256: RwLock<Option<[u8; 32]>>,
    keys: RwLock<Keys>,
    refresh: KeyRefresh,
}

impl KeyRing {
    /// A ring with authentication off (every request is the open principal) until [`KeyRing::enable`].
    pub fn open() -> Arc<Self> {
        Arc::new(KeyRing::default())
    }

    /// Turns authentication on, with `admin_key` as the bootstrap credential (admin scope, every tenant).
    pub fn enable(&self, admin_key: &str) -> Result<(), String> {
        admin_key_problem(admin_key)?;
        *self.admin_sha256.write() = Some(secret::digest(admin_key));
        self.enabled.store(true, Ordering::SeqCst);
        Ok(())
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::SeqCst)
    }

    /// Takes the keys of a cluster state (an older state than the one held is ignored).
    pub fn apply(&self, state: &pb::ClusterState) {
        let mut keys = self.keys.write();
        // Keys change only with the state's version: a poll of the same version has nothing new (and an older
        // one comes from a lagging meta follower).
        if keys.version != 0 && state.version <= keys.version {
            return;
        }
        keys.version = state.version;
        keys.by_id = state
            .api_keys
            .iter()
            .filter_map(|k| {
                let mut sha256 = [0u8; 32];
                hex::decode_to_slice(&k.key_sha256, &mut sha256).ok()?;
                let scope = k.scopes.iter().filter_map(|&s| scope_of(s)).max();
                Some((
                    k.id.clone(),
                    StoredKey {
                        sha256,
                        scope,
                        tenants: k.tenants.clone(),
                        collections: k.collections.clone(),
                        expires_at_ms: k.expires_at_ms,
                        revoked: k.revoked,
                        parent_id: k.parent_id.clone(),
                    },
                ))
            })
            .collect();
    }

    /// Gives the ring a read of meta's state for [`KeyRing::authenticate_fresh`] (see [`crate::refresh`]).
    pub fn set_refresh(&self, fetch: StateFetch) {
        self.refresh.set(fetch);
    }

    /// [`KeyRing::set_refresh`] with a linearizable read of this meta group (a follower that has not applied
    /// the new key yet answers only once it has).
    pub fn refresh_from(&self, meta: &MetaClient) {
        let meta = meta.clone();
        self.set_refresh(Arc::new(move || {
            let meta = meta.clone();
            Box::pin(async move {
                meta.cluster_state(true)
                    .await
                    .inspect_err(|e| {
                        tracing::warn!(error = %e, event = "key_refresh_failed",
                            "could not read meta's keys for an unknown key")
                    })
                    .ok()
            })
        }));
    }

    /// The principal an `Authorization` header value (or gRPC `authorization` metadata) stands for.
    pub fn authenticate(&self, authorization: Option<&str>) -> Result<Principal, ApiError> {
        self.check(authorization).map_err(Refusal::deny)
    }

    /// As [`KeyRing::authenticate`], but a well-formed key the ring does not know is looked up in meta first
    /// (when the ring has a read of meta): a key minted a moment ago through another front is accepted.
    pub async fn authenticate_fresh(
        &self,
        authorization: Option<&str>,
    ) -> Result<Principal, ApiError> {
        let ticket = self.refresh.ticket();
        match self.check(authorization) {
            Err(refusal) if refusal.reason == "unknown" && self.refresh.is_set() => {
                let well_formed = authorization
                    .and_then(secret::bearer)
                    .and_then(secret::key_id)
                    .is_some();
                if well_formed {
                    if let Some(state) = self.refresh.state_since(ticket).await {
                        self.apply(&state);
                    }
                    return self.authenticate(authorization);
                }
                Err(refusal.deny())
            }
            outcome => outcome.map_err(Refusal::deny),
        }
    }

    fn check(&self, authorization: Option<&str>) -> Result<Principal, Refusal> {
        if !self.enabled() {
            return Ok(Principal::open());
        }
        let Some(header) = authorization else {
            return Err(Refusal::new(
                "missing",
                "an API key is required (Authorization: Bearer <key>)",
            ));
        };
        let Some(token) = secret::bearer(header) else {
            return Err(Refusal::new(
                "malformed",
                "the Authorization header must be `Bearer <key>`",
            ));
        };
        let presented = secret::digest(token);
        if let Some(admin) = *self.admin_sha256.read() {
            if bool::from(presented.ct_eq(&admin)) {
                return Ok(Principal {
                    key_id: ADMIN_KEY_ID.into(),
                    scope: Some(Scope::Admin),
                    tenants: vec![ANY_TENANT.into()],
                    collections: vec![],
                    expires_at_ms: 0,
                    minted: false,
                    credential: Some(Arc::from(header)),
                });
            }
        }
        let unknown = || Refusal::new("unknown", "unknown API key");
        let id = secret::key_id(token).ok_or_else(unknown)?;
        let keys = self.keys.read();
        let stored = keys.by_id.get(id).ok_or_else(unknown)?;
        if !bool::from(presented.ct_eq(&stored.sha256)) {
            return Err(unknown());
        }
        if stored.revoked {
            return Err(Refusal::new("revoked", "this API key was revoked"));
        }
        if stored.expires_at_ms != 0 && now_ms() >= stored.expires_at_ms {
            return Err(Refusal::new("expired", "this API key has expired"));
        }
        ancestry_problem(&keys, stored)?;
        Ok(Principal {
            key_id: id.to_string(),
            scope: stored.scope,
            tenants: stored.tenants.clone(),
            collections: stored.collections.clone(),
            expires_at_ms: stored.expires_at_ms,
            minted: true,
            credential: Some(Arc::from(header)),
        })
    }
}

/// Refuses a key whose parent, or any key above it, is revoked, expired or unknown to the ring (a parent is
/// stored before its children, so a missing one is not a key that could vouch for this one).
fn ancestry_problem(keys: &Keys, key: &StoredKey) -> Result<(), Refusal> {
    let mut parent = key.parent_id.as_str();
    for _ in 0..MAX_KEY_CHAIN {
        if parent.is_empty() {
            return Ok(());
        }
        let Some(above) = keys.by_id.get(parent) else {
            return Err(Refusal::new(
                "parent_revoked",
                "the API key that minted this one is gone",
            ));
        };
        if above.revoked {
            return Err(Refusal::new(
                "parent_revoked",
                "the API key that minted this one was revoked",
            ));
        }
        if above.expires_at_ms != 0 && now_ms() >= above.expires_at_ms {
            return Err(Refusal::new(
                "parent_expired",
                "the API key that minted this one has expired",
            ));
        }
        parent = above.parent_id.as_str();
    }
    Err(Refusal::new(
        "chain",
        "this API key descends from too many keys",
    ))
}

/// Why a credential was refused, before it is counted (a refusal retried after a refresh counts once).
struct Refusal {
    reason: &'static str,
    message: &'static str,
}

impl Refusal {
    fn new(reason: &'static str, message: &'static str) -> Self {
        Refusal { reason, message }
    }

    fn deny(self) -> ApiError {
        deny(ErrorCode::Unauthenticated, self.reason, self.message)
    }
}

/// The scope of an `attest.v1.Scope` value (`None` for an unknown or unspecified one).
pub fn scope_of(value: i32) -> Option<Scope> {
    match pb::Scope::try_from(value).ok()? {
        pb::Scope::Read => Some(Scope::Read),
        pb::Scope::Write => Some(Scope::Write),
        pb::Scope::Admin => Some(Scope::Admin),
        pb::Scope::Unspecified => None,
    }
}

/// The `attest.v1.Scope` value of a scope.
pub fn scope_to_pb(scope: Scope) -> pb::Scope {
    match scope {
        Scope::Read => pb::Scope::Read,
        Scope::Write => pb::Scope::Write,
        Scope::Admin => pb::Scope::Admin,
    }
}

pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// What an authenticated request may do. `Clone` is cheap; `Debug` never shows the credential.
#[derive(Clone)]
pub struct Principal {
    /// The key's public id (`admin` for the bootstrap key, `-` when authentication is off).
    pub key_id: String,
    scope: Option<Scope>,
    tenants: Vec<String>,
    collections: Vec<String>,
    /// Unix ms after which the key is refused (0: never): no key it mints may outlive it.
    expires_at_ms: u64,
    /// Whether the key is one of meta's (the parent a key it mints names), not the bootstrap key or an open node.
    minted: bool,
    /// The `Authorization` value it came with, forwarded on the calls made for it (answer tier → router).
    credential: Option<Arc<str>>,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal")
            .field("key_id", &self.key_id)
            .field("scope", &self.scope)
            .field("tenants", &self.tenants)
            .field("collections", &self.collections)
            .finish_non_exhaustive()
    }
}

impl Principal {
    /// The caller of a node with authentication off: every scope, tenant and collection.
    pub fn open() -> Self {
        Principal {
            key_id: "-".into(),
            scope: Some(Scope::Admin),
            tenants: vec![ANY_TENANT.into()],
            collections: vec![],
            expires_at_ms: 0,
            minted: false,
            credential: None,
        }
    }

    /// The id a key minted by this one records as its parent (`None` for the bootstrap admin key and an open
    /// node, which are not meta's keys).
    pub fn parent_link(&self) -> Option<&str> {
        self.minted.then_some(self.key_id.as_str())
    }

    /// Refuses (PERMISSION_DENIED) a key that would outlive this one: expiring after it (`Some` unix ms) or
    /// never (`None`) when this one expires.
    pub fn may_expire_at(&self, child_expires_at_ms: Option<u64>) -> Result<(), ApiError> {
        if self.expires_at_ms == 0 || child_expires_at_ms.is_some_and(|t| t <= self.expires_at_ms) {
            return Ok(());
        }
        Err(deny(
            ErrorCode::PermissionDenied,
            "grant",
            format!(
                "this API key may not grant a key that outlives it: it expires at unix ms {}, so a key it mints \
                 needs an expires_in that ends by then",
                self.expires_at_ms
            ),
        ))
    }

    /// Refuses (PERMISSION_DENIED) unless the key holds `scope` or a higher one.
    pub fn require(&self, scope: Scope) -> Result<(), ApiError> {
        if self.scope.is_some_and(|held| held >= scope) {
            return Ok(());
        }
        Err(deny(
            ErrorCode::PermissionDenied,
            "scope",
            format!("this API key lacks the {} scope", scope.as_str()),
        ))
    }

    /// Whether the key may act for `tenant`.
    pub fn allows_tenant(&self, tenant: &str) -> bool {
        self.tenants.iter().any(|t| t == ANY_TENANT || t == tenant)
    }

    /// Whether the key acts for every tenant (`*`): an action on a whole collection needs no look at whose
    /// documents it holds.
    pub fn every_tenant(&self) -> bool {
        self.tenants.iter().any(|t| t == ANY_TENANT)
    }

    /// Refuses (PERMISSION_DENIED) an action on the whole of collection `name` — dropping it, its shared answer
    /// thresholds, its maintenance — when it holds documents of tenants this key may not act for, naming them
    /// (issue 69: a key limited to some tenants never destroys or changes what other tenants share).
    pub fn covers_tenants<'a>(
        &self,
        what: &str,
        name: &str,
        held: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), ApiError> {
        let outside: Vec<String> = held
            .into_iter()
            .filter(|t| !self.allows_tenant(t))
            .map(|t| format!("{t:?}"))
            .collect();
        if outside.is_empty() {
            return Ok(());
        }
        Err(deny(
            ErrorCode::PermissionDenied,
            "tenant",
            format!(
                "this API key may not {what} collection {name:?}: it holds documents of tenant(s) {} that the key \
                 may not act for (a key for every tenant it holds may)",
                outside.join(", ")
            ),
        ))
    }

    /// The tenant a request acts as: the one it names, if it is a tenant name (else INVALID_ARGUMENT) and the
    /// key allows it (else PERMISSION_DENIED); when it names none, `default` if the key allows it, else the key's
    /// first tenant. Every request that names a tenant (ingest, search, delete, ask) comes through here, so a
    /// tenant a key could never be granted is refused where it is named.
    pub fn tenant(&self, requested: Option<&str>, default: &str) -> Result<String, ApiError> {
        let requested = requested.filter(|t| !t.is_empty());
        if let Some(problem) = requested.and_then(attest_core::keys::tenant_problem) {
            return Err(ApiError::invalid("tenant", problem));
        }
        match requested {
            Some(t) if self.allows_tenant(t) => Ok(t.to_string()),
            Some(t) => Err(deny(
                ErrorCode::PermissionDenied,
                "tenant",
                format!("this API key may not act for tenant {t:?}"),
            )),
            None if self.allows_tenant(default) => Ok(default.to_string()),
            None => Ok(self
                .tenants
                .iter()
                .find(|t| *t != ANY_TENANT)
                .cloned()
                .unwrap_or_else(|| default.to_string())),
        }
    }

    /// Whether the key may act on this collection (a key without a collection list may act on all).
    pub fn sees_collection(&self, name: &str) -> bool {
        self.collections.is_empty() || self.collections.iter().any(|c| c == name)
    }

    /// Refuses (PERMISSION_DENIED) a collection the key does not list.
    pub fn collection(&self, name: &str) -> Result<(), ApiError> {
        if self.sees_collection(name) {
            return Ok(());
        }
        Err(deny(
            ErrorCode::PermissionDenied,
            "collection",
            format!("this API key may not act on collection {name:?}"),
        ))
    }

    /// The `Authorization` value to forward on calls made for this caller (`None` when authentication is off).
    pub fn credential(&self) -> Option<&str> {
        self.credential.as_deref()
    }

    /// What in a grant reaches beyond this key (a higher scope, a tenant or collection it may not act on), or
    /// `None` when the grant lies within it. A key may mint, list and revoke only keys within its own grant.
    pub fn grant_excess(
        &self,
        scopes: &[Scope],
        tenants: &[String],
        collections: &[String],
    ) -> Option<String> {
        if let Some(s) = scopes
            .iter()
            .find(|&&s| self.scope.is_none_or(|held| s > held))
        {
            return Some(format!("the {} scope", s.as_str()));
        }
        if let Some(t) = tenants.iter().find(|t| !self.allows_tenant(t)) {
            return Some(if t == ANY_TENANT {
                "every tenant (\"*\")".into()
            } else {
                format!("tenant {t:?}")
            });
        }
        if self.collections.is_empty() {
            return None;
        }
        if collections.is_empty() {
            return Some("every collection (no collection list)".into());
        }
        collections
            .iter()
            .find(|c| !self.sees_collection(c))
            .map(|c| format!("collection {c:?}"))
    }

    /// Refuses (PERMISSION_DENIED) a grant wider than this key's own, saying what is too wide.
    pub fn may_grant(
        &self,
        scopes: &[Scope],
        tenants: &[String],
        collections: &[String],
    ) -> Result<(), ApiError> {
        match self.grant_excess(scopes, tenants, collections) {
            None => Ok(()),
            Some(excess) => Err(deny(
                ErrorCode::PermissionDenied,
                "grant",
                format!("this API key may not grant {excess}: it does not hold it itself"),
            )),
        }
    }

    /// Whether the key acts for every tenant and collection with the admin scope: what operations on the whole
    /// cluster need (snapshots and restores hold every tenant's documents).
    pub fn unrestricted(&self) -> bool {
        self.scope == Some(Scope::Admin)
            && self.tenants.iter().any(|t| t == ANY_TENANT)
            && self.collections.is_empty()
    }

    /// Refuses (PERMISSION_DENIED) a key limited to some tenants or collections.
    pub fn require_unrestricted(&self, what: &str) -> Result<(), ApiError> {
        if self.unrestricted() {
            return Ok(());
        }
        Err(deny(
            ErrorCode::PermissionDenied,
            "restricted",
            format!(
                "{what} needs an admin key for every tenant and collection; this one is limited"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADMIN: &str = "an-admin-key-of-enough-length";

    fn ring_with(keys: Vec<pb::ApiKeyInfo>, version: u64) -> Arc<KeyRing> {
        let ring = KeyRing::open();
        ring.enable(ADMIN).unwrap();
        ring.apply(&pb::ClusterState {
            version,
            api_keys: keys,
            ..Default::default()
        });
        ring
    }

    fn info(m: &secret::MintedKey, scope: pb::Scope, tenants: &[&str]) -> pb::ApiKeyInfo {
        pb::ApiKeyInfo {
            key_sha256: m.sha256_hex.clone(),
            id: m.id.clone(),
            scopes: vec![scope as i32],
            tenants: tenants.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        }
    }

    fn bearer(key: &str) -> Option<String> {
        Some(format!("Bearer {key}"))
    }

    #[test]
    fn open_ring_lets_everything_through() {
        let ring = KeyRing::open();
        let p = ring.authenticate(None).unwrap();
        p.require(Scope::Admin).unwrap();
        assert_eq!(p.tenant(Some("x"), "default").unwrap(), "x");
        // A name no key could be granted is refused even where no key is needed.
        let bad = p.tenant(Some("a b"), "default").unwrap_err();
        assert_eq!(
            (bad.code, bad.field.as_deref()),
            (ErrorCode::InvalidArgument, Some("tenant"))
        );
        assert!(p.credential().is_none());
        assert!(ring.enable("short").is_err());
    }

    #[test]
    fn tokens_are_checked_against_hashes_and_state() {
        let read = secret::mint();
        let gone = secret::mint();
        let mut revoked = info(&gone, pb::Scope::Write, &["a"]);
        revoked.revoked = true;
        let old = secret::mint();
        let mut expired = info(&old, pb::Scope::Write, &["a"]);
        expired.expires_at_ms = 1;
        let ring = ring_with(
            vec![info(&read, pb::Scope::Read, &["a"]), revoked, expired],
            3,
        );
        let code = |h: Option<String>| ring.authenticate(h.as_deref()).unwrap_err().code;
        assert_eq!(code(None), ErrorCode::Unauthenticated);
        assert_eq!(code(Some("Basic x".into())), ErrorCode::Unauthenticated);
        assert_eq!(code(bearer("junk")), ErrorCode::Unauthenticated);
        // Right id, wrong secret.
        let forged = format!("attest_{}_{}", read.id, "0".repeat(64));
        assert_eq!(code(bearer(&forged)), ErrorCode::Unauthenticated);
        assert_eq!(code(bearer(&gone.key)), ErrorCode::Unauthenticated);
        assert_eq!(code(bearer(&old.key)), ErrorCode::Unauthenticated);
        let p = ring.authenticate(bearer(&read.key).as_deref()).unwrap();
        assert_eq!(p.key_id, read.id);
        p.require(Scope::Read).unwrap();
        assert_eq!(
            p.require(Scope::Write).unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        let admin = ring.authenticate(bearer(ADMIN).as_deref()).unwrap();
        admin.require(Scope::Admin).unwrap();
        assert_eq!(admin.credential(), Some(format!("Bearer {ADMIN}").as_str()));
        // An older state does not bring a key back; a newer one without it removes it.
        ring.apply(&pb::ClusterState {
            version: 2,
            ..Default::default()
        });
        assert!(ring.authenticate(bearer(&read.key).as_deref()).is_ok());
        ring.apply(&pb::ClusterState {
            version: 4,
            ..Default::default()
        });
        assert!(ring.authenticate(bearer(&read.key).as_deref()).is_err());
    }

    #[test]
    fn a_key_grants_nothing_beyond_its_own() {
        let k = secret::mint();
        let mut i = info(&k, pb::Scope::Admin, &["a"]);
        i.collections = vec!["docs".into()];
        let ring = ring_with(vec![i], 1);
        let scoped = ring.authenticate(bearer(&k.key).as_deref()).unwrap();
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let excess = |scopes: &[Scope], tenants: &[&str], collections: &[&str]| {
            scoped.grant_excess(scopes, &v(tenants), &v(collections))
        };
        assert_eq!(
            excess(&[Scope::Read, Scope::Admin], &["a"], &["docs"]),
            None
        );
        assert_eq!(
            excess(&[Scope::Read], &["*"], &["docs"]).unwrap(),
            "every tenant (\"*\")"
        );
        assert_eq!(
            excess(&[Scope::Read], &["a", "b"], &["docs"]).unwrap(),
            "tenant \"b\""
        );
        assert_eq!(
            excess(&[Scope::Read], &["a"], &[]).unwrap(),
            "every collection (no collection list)"
        );
        assert_eq!(
            excess(&[Scope::Read], &["a"], &["wiki"]).unwrap(),
            "collection \"wiki\""
        );
        assert_eq!(
            scoped
                .may_grant(&[Scope::Read], &v(&["b"]), &v(&["docs"]))
                .unwrap_err()
                .code,
            ErrorCode::PermissionDenied
        );
        assert!(!scoped.unrestricted());
        assert_eq!(
            scoped.require_unrestricted("a snapshot").unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        // A write key may not mint an admin key even for its own tenant.
        let w = secret::mint();
        let ring = ring_with(vec![info(&w, pb::Scope::Write, &["*"])], 2);
        let writer = ring.authenticate(bearer(&w.key).as_deref()).unwrap();
        assert_eq!(
            writer
                .grant_excess(&[Scope::Admin], &v(&["a"]), &[])
                .unwrap(),
            "the admin scope"
        );
        assert!(!writer.unrestricted());
        // The bootstrap admin key and an open node hold everything.
        let admin = ring.authenticate(bearer(ADMIN).as_deref()).unwrap();
        assert_eq!(admin.grant_excess(&[Scope::Admin], &v(&["*"]), &[]), None);
        assert!(admin.unrestricted() && Principal::open().unrestricted());
    }

    #[tokio::test]
    async fn an_unknown_well_formed_key_is_looked_up_once() {
        let late = secret::mint();
        let ring = ring_with(vec![], 1);
        let header = bearer(&late.key);
        assert!(
            ring.authenticate_fresh(header.as_deref()).await.is_err(),
            "no refresh set"
        );
        let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (counted, stored) = (Arc::clone(&reads), info(&late, pb::Scope::Read, &["a"]));
        ring.set_refresh(Arc::new(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let state = pb::ClusterState {
                version: 2,
                api_keys: vec![stored.clone()],
                ..Default::default()
            };
            Box::pin(async move { Some(state) })
        }));
        assert!(ring.authenticate(header.as_deref()).is_err());
        let p = ring.authenticate_fresh(header.as_deref()).await.unwrap();
        assert_eq!(p.key_id, late.id);
        // A malformed token never costs a read of meta; a known key needs none.
        assert!(ring
            .authenticate_fresh(bearer("junk").as_deref())
            .await
            .is_err());
        assert!(ring.authenticate_fresh(header.as_deref()).await.is_ok());
        assert_eq!(reads.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_key_is_refused_once_a_key_above_it_is_revoked_or_expired() {
        let (p, c, g) = (secret::mint(), secret::mint(), secret::mint());
        let parent = info(&p, pb::Scope::Admin, &["*"]);
        let mut child = info(&c, pb::Scope::Write, &["*"]);
        child.parent_id = p.id.clone();
        let mut grand = info(&g, pb::Scope::Read, &["*"]);
        grand.parent_id = c.id.clone();
        let ring = ring_with(vec![parent.clone(), child.clone(), grand.clone()], 1);
        let minted = ring.authenticate(bearer(&c.key).as_deref()).unwrap();
        assert_eq!(minted.parent_link(), Some(c.id.as_str()));
        assert!(ring.authenticate(bearer(&g.key).as_deref()).is_ok());
        let state = |version, parent: &pb::ApiKeyInfo| pb::ClusterState {
            version,
            api_keys: vec![parent.clone(), child.clone(), grand.clone()],
            ..Default::default()
        };
        let mut revoked = parent.clone();
        revoked.revoked = true;
        ring.apply(&state(2, &revoked));
        assert!(ring.authenticate(bearer(&p.key).as_deref()).is_err());
        for k in [&c, &g] {
            let e = ring.authenticate(bearer(&k.key).as_deref()).unwrap_err();
            assert_eq!(e.code, ErrorCode::Unauthenticated);
            assert!(e.message.contains("revoked"), "{}", e.message);
        }
        let mut expired = parent.clone();
        expired.expires_at_ms = 1;
        ring.apply(&state(3, &expired));
        let e = ring.authenticate(bearer(&g.key).as_deref()).unwrap_err();
        assert!(e.message.contains("expired"), "{}", e.message);
        // A parent the ring does not hold vouches for nothing.
        ring.apply(&pb::ClusterState {
            version: 4,
            api_keys: vec![grand.clone()],
            ..Default::default()
        });
        assert!(ring.authenticate(bearer(&g.key).as_deref()).is_err());
        // The bootstrap key and an open node are no one's parent.
        let admin = ring.authenticate(bearer(ADMIN).as_deref()).unwrap();
        assert_eq!(admin.parent_link(), None);
        assert_eq!(Principal::open().parent_link(), None);
    }

    #[test]
    fn an_expiring_key_grants_no_key_that_outlives_it() {
        let k = secret::mint();
        let mut i = info(&k, pb::Scope::Admin, &["*"]);
        let hour = now_ms() + 3_600_000;
        i.expires_at_ms = hour;
        let ring = ring_with(vec![i], 1);
        let p = ring.authenticate(bearer(&k.key).as_deref()).unwrap();
        assert_eq!(
            p.may_expire_at(None).unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        assert!(p.may_expire_at(Some(hour + 1)).is_err());
        assert!(p.may_expire_at(Some(hour)).is_ok());
        let admin = ring.authenticate(bearer(ADMIN).as_deref()).unwrap();
        assert!(admin.may_expire_at(None).is_ok());
    }

    #[test]
    fn a_whole_collection_needs_every_tenant_it_holds() {
        let k = secret::mint();
        let ring = ring_with(vec![info(&k, pb::Scope::Admin, &["acme"])], 1);
        let p = ring.authenticate(bearer(&k.key).as_deref()).unwrap();
        assert!(!p.every_tenant());
        assert!(p.covers_tenants("drop", "docs", ["acme"]).is_ok());
        assert!(p.covers_tenants("drop", "docs", []).is_ok());
        let e = p
            .covers_tenants("drop", "docs", ["acme", "beta", "gamma"])
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::PermissionDenied);
        assert!(e.message.contains("\"beta\", \"gamma\""), "{}", e.message);
        assert!(Principal::open().every_tenant());
    }

    #[test]
    fn tenants_and_collections_come_from_the_key() {
        let k = secret::mint();
        let mut i = info(&k, pb::Scope::Write, &["acme", "beta"]);
        i.collections = vec!["docs".into()];
        let ring = ring_with(vec![i], 1);
        let p = ring.authenticate(bearer(&k.key).as_deref()).unwrap();
        assert_eq!(p.tenant(Some("beta"), "default").unwrap(), "beta");
        assert_eq!(p.tenant(None, "default").unwrap(), "acme");
        assert_eq!(p.tenant(Some(""), "beta").unwrap(), "beta");
        assert_eq!(
            p.tenant(Some("other"), "default").unwrap_err().code,
            ErrorCode::PermissionDenied
        );
        p.collection("docs").unwrap();
        assert!(!p.sees_collection("wiki"));
        assert_eq!(
            p.collection("wiki").unwrap_err().code,
            ErrorCode::PermissionDenied
        );
    }
}

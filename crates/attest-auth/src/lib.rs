//! Who is calling, and what they may do (SPEC "Security", issue 15): API keys minted here and stored hashed in
//! meta, the key ring every router and answer replica keeps in step with meta's cluster state, the
//! [`Principal`] a request acts as (its scope, tenants and collections), and the checks and audit lines the HTTP
//! and gRPC fronts share.
//!
//! - [`secret`]: minting a key (`attest_<id>_<secret>`), hashing it, reading its id.
//! - [`keyring`]: [`KeyRing`] (authenticates a bearer token in constant time; off in an open `attest dev`) and
//!   [`Principal`] (scope, tenant and collection checks; refusals counted in `auth_denied_total{reason}`).
//! - [`refresh`]: the on-demand read of meta's keys when a front is shown a key it does not know yet.
//! - [`http`]: the axum middleware that puts the caller's [`Principal`] on a request, per required scope.
//! - [`grpc`]: the same for a tonic request's `authorization` metadata.
//! - [`audit`]: one structured line per authenticated write and admin action.
//! - [`cluster`]: [`cluster::ClusterGuard`], the check in front of the internal services (`ShardService`,
//!   `MetaService`): the cluster credential only.

pub mod audit;
pub mod cluster;
pub mod grpc;
pub mod http;
pub mod keyring;
pub mod refresh;
pub mod secret;

pub use attest_core::keys::Scope;
pub use keyring::{KeyRing, Principal};

//! `Router`: the routing services the HTTP and gRPC fronts call, each over the state they share
//! ([`crate::shared::Shared`]):
//! - [`Collections`]: create, drop, thresholds, maintain, stats, the tenants a collection holds;
//! - [`Ingest`]: validate → near duplicates (asked of the shards) → chunk → embed → place → write; delete;
//! - [`Search`]: validate → embed → fan out → fuse, alone or as a batch;
//! - [`Keys`]: API keys minted, listed and revoked through meta;
//! - [`Snapshots`]: cluster snapshots created, listed and restored, as jobs;
//! - [`Reembed`]: a collection re-embedded online with another model, as a job.
//!
//! A service that needs another holds it (a restore drops and creates collections; a re-embedding writes its copy
//! through ingest); nothing else crosses.

use std::sync::Arc;

use attest_embed::{Embedder, LocalEmbedderConfig};
use attest_snapshot::DestinationPolicy;

use crate::collections::Collections;
use crate::config::RouterConfig;
use crate::embedders::Embedders;
use crate::ingest::Ingest;
use crate::keys::Keys;
use crate::meta_jobs::JobTable;
use crate::reembed::Reembed;
use crate::search::Search;
use crate::shared::Shared;
use crate::snapshots::Snapshots;
use crate::topology::ClusterView;

/// The router role's services, as the fronts get them.
pub struct Router {
    shared: Arc<Shared>,
    collections: Collections,
    ingest: Ingest,
    search: Search,
    keys: Keys,
    snapshots: Snapshots,
    reembed: Reembed,
}

/// A router's settings beyond its config: the runtime of the local models collections may be filled by, and
/// where snapshots may be written.
pub struct RouterBuilder {
    config: RouterConfig,
    view: Arc<ClusterView>,
    embedders: Embedders,
    snapshot_destinations: DestinationPolicy,
}

impl RouterBuilder {
    /// Runs the local models of collections filled by another model than the configured one with `local`'s
    /// runtime settings (`embedder.local`).
    pub fn local_embedder_settings(mut self, local: LocalEmbedderConfig) -> Self {
        self.embedders = self.embedders.with_local_settings(local);
        self
    }

    /// Admits directory snapshot destinations as `policy` says (`snapshots.allowed_roots`; none by default).
    pub fn snapshot_destinations(mut self, policy: DestinationPolicy) -> Self {
        self.snapshot_destinations = policy;
        self
    }

    pub fn build(self) -> Router {
        let shared = Arc::new(Shared::new(self.config, self.view, self.embedders));
        let collections = Collections::new(&shared);
        let ingest = Ingest::new(&shared);
        let jobs = JobTable::new(&shared);
        Router {
            search: Search::new(&shared),
            keys: Keys::new(&shared),
            snapshots: Snapshots::new(
                &shared,
                collections.clone(),
                jobs.clone(),
                self.snapshot_destinations,
            ),
            reembed: Reembed::new(&shared, ingest.clone(), jobs),
            collections,
            ingest,
            shared,
        }
    }
}

impl Router {
    /// A router over meta's shard map (`view` keeps it fresh) with the default settings of [`RouterBuilder`].
    pub fn new(config: RouterConfig, view: Arc<ClusterView>, embedder: Arc<dyn Embedder>) -> Self {
        Router::builder(config, view, embedder).build()
    }

    pub fn builder(
        config: RouterConfig,
        view: Arc<ClusterView>,
        embedder: Arc<dyn Embedder>,
    ) -> RouterBuilder {
        let embedders = Embedders::new(embedder, config.query_cache_capacity);
        RouterBuilder {
            config,
            view,
            embedders,
            snapshot_destinations: DestinationPolicy::default(),
        }
    }

    pub fn collections(&self) -> &Collections {
        &self.collections
    }

    pub fn ingest(&self) -> &Ingest {
        &self.ingest
    }

    pub fn search(&self) -> &Search {
        &self.search
    }

    pub fn keys(&self) -> &Keys {
        &self.keys
    }

    pub fn snapshots(&self) -> &Snapshots {
        &self.snapshots
    }

    pub fn reembed(&self) -> &Reembed {
        &self.reembed
    }

    pub fn config(&self) -> &RouterConfig {
        &self.shared.config
    }

    /// Meta's shard map as this router watches it (readiness, the cluster view).
    pub fn view(&self) -> &Arc<ClusterView> {
        &self.shared.view
    }

    /// The API keys this router accepts (meta's, refreshed with the shard map).
    pub fn key_ring(&self) -> &Arc<attest_auth::KeyRing> {
        self.shared.view.keys()
    }

    /// The configured embedder (new collections are filled by it unless they name another model).
    pub fn embedder(&self) -> &Arc<dyn Embedder> {
        &self.shared.embedders.configured().passages
    }
}

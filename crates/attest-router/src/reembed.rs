//! Re-embedding a collection online (`attest collection reembed NAME --embedder MODEL`, `POST
//! /v1/collections/{name}/reembed`): new vectors and a new index built beside the old while the collection keeps
//! serving and taking writes, then one switch.
//!
//! The router that accepts the request checks it, records the job in meta (in the job table snapshot jobs use,
//! under an id `reembed-<tag>`), creates the copy `name~tag` (the collection's shards, replication, index,
//! chunking and thresholds; the new model's identity and dimension) and answers. From the moment meta holds the
//! copy every router writes each ingest and delete of `name` into it too, at the same version
//! ([`crate::ingest`]). A task of that router then:
//! 1. copies every document, shard by shard ([`crate::reembed::copy`]): the texts of its chunks are embedded
//!    with the new model and written to the copy at the document's version. Versions decide (last writer wins),
//!    so a mirrored newer write is never overwritten by an older copy of it;
//! 2. compares versions again, until a pass finds nothing to repair: a write by a router that had not yet seen
//!    the copy, a mirror that failed;
//! 3. switches: one meta command points `name` at the copy and drops the old collection. A search reads the old
//!    collection or the new one, never neither.
//!
//! A cancel or a failure drops the copy; the old collection serves throughout. Progress (documents per shard,
//! passes) is put to meta as every job's is ([`crate::meta_jobs`]); a job whose router fell silent is recorded
//! failed, and its copy dropped, by the next router that reads it.

pub mod copy;

use std::sync::Arc;

use attest_core::limits;
use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use tracing::{info, warn};

use crate::collection::{identity_to_proto, CollectionRecord};
use crate::error::RouterError;
use crate::ingest::Ingest;
use crate::meta_jobs::{JobState, JobTable, MetaJob, Tracker};
use crate::shared::Shared;

/// The prefix of a re-embedding's job id (the job table is shared with snapshot jobs).
pub const JOB_PREFIX: &str = "reembed-";

/// Where a re-embedding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReembedPhase {
    /// Copying every document into the copy with new vectors.
    Copying,
    /// Comparing versions again and repairing what the copy missed.
    Comparing,
    /// Pointing the collection's name at the copy.
    Switching,
    /// Ended (see the job's state).
    Ended,
}

/// One shard's progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShardReembed {
    pub shard: u32,
    /// Live documents the shard held at its last listing.
    pub documents: u64,
    /// Documents written to the copy with new vectors (the first pass and the repairs after it).
    pub copied: u64,
    /// Of those, written by a pass after the first (what mirroring had missed).
    pub repaired: u64,
}

/// A re-embedding job (`GET /v1/reembed/jobs/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReembedJob {
    pub id: String,
    pub collection: String,
    /// The model the collection is being re-embedded with.
    pub embedder: String,
    /// The model it was embedded with.
    pub from_embedder: String,
    /// The stored name of the copy being built (`collection~tag`).
    pub copy: String,
    pub state: JobState,
    pub phase: ReembedPhase,
    pub cancel_requested: bool,
    /// The router running it.
    pub router: String,
    /// Unix ms, meta's clock.
    pub created_ms: u64,
    pub updated_ms: u64,
    /// Comparison passes run so far (the first copies everything).
    pub passes: u32,
    pub shards: Vec<ShardReembed>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /v1/reembed/jobs`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ReembedJobList {
    /// Oldest first.
    pub jobs: Vec<ReembedJob>,
}

impl MetaJob for ReembedJob {
    const NOUN: &'static str = "re-embedding job";
    const EVENT: &'static str = "reembed";

    fn id(&self) -> &str {
        &self.id
    }

    fn state(&self) -> JobState {
        self.state
    }

    fn owner(&self) -> &str {
        &self.router
    }

    fn updated_ms(&self) -> u64 {
        self.updated_ms
    }

    fn stamp(&mut self, info: &pb::SnapshotJobInfo) {
        self.cancel_requested = info.cancel_requested;
        self.created_ms = info.created_ms;
        self.updated_ms = info.updated_ms;
        self.router = info.owner.clone();
    }

    fn mark_cancel_requested(&mut self) {
        self.cancel_requested = true;
    }

    fn fail(&mut self, why: String, router: &str) {
        self.state = JobState::Failed;
        self.phase = ReembedPhase::Ended;
        self.error = Some(format!("{why}; start it again"));
        self.router = router.to_string();
    }
}

/// Whether a job id names a re-embedding (not a snapshot job).
pub fn is_reembed_job(id: &str) -> bool {
    id.starts_with(JOB_PREFIX)
}

/// The running re-embedding as its work sees it: progress to report, and the cancellation to watch.
pub type ReembedTracker = Tracker<ReembedJob>;

/// The copy's tag: 12 hex digits of a fresh uuid (also the job's id after [`JOB_PREFIX`]).
fn new_tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..12].to_string()
}

/// Re-embedding: a collection's copy built with another model while it serves, then one switch.
#[derive(Clone)]
pub struct Reembed {
    shared: Arc<Shared>,
    /// The copy is written as ingest writes.
    ingest: Ingest,
    table: JobTable,
}

impl Reembed {
    pub(crate) fn new(shared: &Arc<Shared>, ingest: Ingest, table: JobTable) -> Self {
        Reembed {
            shared: Arc::clone(shared),
            ingest,
            table,
        }
    }

    /// Checks the request, records the job, creates the copy (so that writes are mirrored into it from now)
    /// and starts the work in a task of this router; answers the job as recorded.
    pub async fn start(
        &self,
        name: &str,
        model: &str,
        request_id: &str,
    ) -> Result<ReembedJob, RouterError> {
        if let Some(problem) = limits::embedder_model_problem(model) {
            return Err(RouterError::invalid("embedder", problem));
        }
        let rec = self.shared.view.get(name)?;
        if self.shared.view.copy_of(name).is_some() {
            // A copy left by a job whose router stopped is dropped when its job is read (settled failed).
            self.jobs().await?;
        }
        if self.shared.view.copy_of(name).is_some() {
            return Err(RouterError::AlreadyExists(format!(
                "collection `{name}` is being re-embedded already (see GET /v1/reembed/jobs)"
            )));
        }
        let model = self.shared.embedders.for_new(model).await?;
        let identity = model.passages.identity();
        if identity.model == rec.embedder.model && identity.checksum == rec.embedder.checksum {
            return Err(RouterError::invalid(
                "embedder",
                format!(
                    "collection `{name}` is embedded with {} already",
                    identity.model
                ),
            ));
        }
        let tag = new_tag();
        let job = ReembedJob {
            id: format!("{JOB_PREFIX}{tag}"),
            collection: name.to_string(),
            embedder: identity.model.clone(),
            from_embedder: rec.embedder.model.clone(),
            copy: limits::stored_collection_name(name, &tag),
            state: JobState::Running,
            phase: ReembedPhase::Copying,
            cancel_requested: false,
            router: self.shared.instance.clone(),
            created_ms: 0,
            updated_ms: 0,
            passes: 0,
            shards: (0..rec.shards)
                .map(|shard| ShardReembed {
                    shard,
                    documents: 0,
                    copied: 0,
                    repaired: 0,
                })
                .collect(),
            error: None,
        };
        let (recorded, tracker) = self.table.record_job(&job).await?;
        let copy = match self
            .create_copy(&rec, &job.copy, &identity, request_id)
            .await
        {
            Ok(copy) => copy,
            Err(e) => {
                let why = RouterError::Internal(format!("the copy could not be created: {e}"));
                self.finish_reembed(&tracker, Err(why)).await;
                return Err(e);
            }
        };
        info!(job = %job.id, collection = name, embedder = %identity.model, copy = %job.copy,
            event = "reembed_started", "re-embedding started");
        let this = self.clone();
        let rid = request_id.to_string();
        tokio::spawn(async move {
            let run = this.run_reembed(&rec, &copy, &tracker, &rid);
            let outcome = this.table.follow_job(&tracker, run, || async {}).await;
            if outcome.is_err() {
                this.drop_copy(&copy, &rid).await;
            }
            this.finish_reembed(&tracker, outcome).await;
        });
        Ok(recorded)
    }

    /// Creates the copy: the collection's shape with the new model's identity and dimension.
    async fn create_copy(
        &self,
        rec: &CollectionRecord,
        stored_name: &str,
        identity: &attest_embed::EmbedderIdentity,
        request_id: &str,
    ) -> Result<CollectionRecord, RouterError> {
        let spec = pb::CollectionSpec {
            dimension: identity.dimension,
            index: Some(rec.index.to_proto()),
            seal_threshold: rec.seal_threshold,
            embedder: identity.model.clone(),
            embedder_identity: identity_to_proto(identity),
        };
        let created = self
            .shared
            .view
            .meta()
            .create_collection(pb::MetaCreateCollectionRequest {
                name: stored_name.to_string(),
                shards: rec.shards,
                replication: rec.replication,
                spec: Some(spec),
                chunking_json: rec
                    .chunking
                    .as_ref()
                    .and_then(|c| serde_json::to_string(c).ok())
                    .unwrap_or_default(),
                thresholds_json: rec
                    .thresholds
                    .as_ref()
                    .map(|t| t.to_stored())
                    .unwrap_or_default(),
                ..Default::default()
            })
            .await
            .map_err(RouterError::from_meta_write)?;
        Ok(self.shared.ensure_replicas(&created, request_id).await)
    }

    /// The job's work: copy, compare until nothing is left to repair, switch.
    async fn run_reembed(
        &self,
        old: &CollectionRecord,
        copy: &CollectionRecord,
        tracker: &ReembedTracker,
        request_id: &str,
    ) -> Result<(), RouterError> {
        // Passes after the first repair only what mirroring missed; a collection written faster than it can be
        // compared would never settle, so the passes are bounded and the last one's repairs are kept.
        const MAX_PASSES: u32 = 5;
        for pass in 1..=MAX_PASSES {
            let mut repaired = 0;
            for shard in 0..old.shards {
                repaired += self
                    .copy_shard(old, copy, shard, pass, tracker, request_id)
                    .await?;
            }
            tracker.update(|j| {
                j.passes = pass;
                j.phase = ReembedPhase::Comparing;
            });
            if pass > 1 && repaired == 0 {
                break;
            }
        }
        if tracker.is_cancelled() {
            return Err(cancelled());
        }
        tracker.update(|j| j.phase = ReembedPhase::Switching);
        // Past this point the job is past cancelling: the switch is one meta command.
        let switched = self
            .shared
            .view
            .meta()
            .switch_collection(&old.name, &copy.stored_name)
            .await;
        // An answer lost (a timeout after meta committed it) is read back: the name resolves to the copy or not.
        let refreshed = self.shared.view.refresh(true).await;
        let resolves_to_copy = self
            .shared
            .view
            .get(&old.name)
            .is_ok_and(|rec| rec.stored_name == copy.stored_name);
        if let Err(e) = switched {
            if !resolves_to_copy {
                return Err(RouterError::from_meta_write(e));
            }
        }
        if let Err(e) = refreshed {
            warn!(error = %e, event = "meta_refresh_failed", "the switch is applied; the view follows it by its watch");
        }
        self.shared.drop_replicas(old, request_id).await;
        info!(collection = %old.name, copy = %copy.stored_name, event = "reembed_switched",
            "re-embedded collection switched to its copy");
        Ok(())
    }

    /// Removes a copy that will not be switched to (meta first, then its replicas' data).
    async fn drop_copy(&self, copy: &CollectionRecord, request_id: &str) {
        if let Err(e) = self
            .shared
            .view
            .meta()
            .drop_collection(&copy.stored_name)
            .await
        {
            warn!(copy = %copy.stored_name, error = %e, event = "reembed_copy_drop_failed",
                "the copy of an ended re-embedding could not be dropped; drop the collection's copy by re-embedding again");
            return;
        }
        self.shared.view.remove_copy(&copy.stored_name);
        self.shared.drop_replicas(copy, request_id).await;
    }

    /// Records how the job ended (retried: a job left `running` would be failed by the next reader).
    async fn finish_reembed(&self, tracker: &ReembedTracker, outcome: Result<(), RouterError>) {
        let mut job = tracker.snapshot();
        job.phase = ReembedPhase::Ended;
        match outcome {
            Ok(()) => job.state = JobState::Succeeded,
            Err(_) if tracker.is_cancelled() => job.state = JobState::Cancelled,
            Err(e) => (job.state, job.error) = (JobState::Failed, Some(e.to_string())),
        }
        info!(job = %job.id, state = ?job.state, error = job.error.as_deref().unwrap_or(""),
            event = "reembed_finished", "re-embedding finished");
        self.table.record_job_end(&job).await;
    }

    /// A re-embedding job as meta holds it; one whose router fell silent is recorded failed first.
    pub async fn job(&self, id: &str) -> Result<ReembedJob, RouterError> {
        if !is_reembed_job(id) {
            return Err(no_job(id));
        }
        let read = self.table.read_job(id, |s| job_error(id, s)).await?;
        Ok(self.settled(read).await)
    }

    pub async fn jobs(&self) -> Result<Vec<ReembedJob>, RouterError> {
        let mut jobs = Vec::new();
        for read in self.table.list_jobs(is_reembed_job).await? {
            jobs.push(self.settled(read).await);
        }
        Ok(jobs)
    }

    /// Asks the job's router to stop it (before its switch); answers the job as it stands.
    pub async fn cancel(&self, id: &str) -> Result<ReembedJob, RouterError> {
        if !is_reembed_job(id) {
            return Err(no_job(id));
        }
        self.table.cancel_job(id, |s| job_error(id, s)).await
    }

    /// A job as read; when this router has just recorded it failed (its router fell silent), its copy is
    /// dropped first (the collection it was made from serves on).
    async fn settled(&self, (job, failed_here): (ReembedJob, bool)) -> ReembedJob {
        if failed_here {
            if let Some(copy) = self.shared.view.copy_of(&job.collection) {
                if copy.stored_name == job.copy {
                    self.drop_copy(&copy, "").await;
                }
            }
        }
        job
    }
}

fn cancelled() -> RouterError {
    RouterError::Callee(attest_proto::ApiError::new(
        attest_proto::ErrorCode::Cancelled,
        "the re-embedding was cancelled; its copy is dropped and the collection serves as before",
    ))
}

fn no_job(id: &str) -> RouterError {
    RouterError::NotFound(format!("no re-embedding job `{id}`"))
}

/// Meta's answer about job `id` (meta keeps re-embeddings in its snapshot-job table: its "not found" would name
/// a snapshot job).
fn job_error(id: &str, status: tonic::Status) -> RouterError {
    match RouterError::from_status(status) {
        e if e.code() == attest_proto::ErrorCode::NotFound => no_job(id),
        e => e,
    }
}

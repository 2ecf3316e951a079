//! Snapshot jobs: `snapshot create` and `restore` run as jobs recorded in meta ([`crate::meta_jobs`]), not
//! inside the HTTP request that starts them (a replica transfer may take hours).
//!
//! The job lists one entry per replica transfer. While it runs, its router asks the shard nodes every second how
//! far their transfers have come (`TransferProgress`). A cancelled job stops its transfers, removes what it left
//! behind (a create's partial files, a restore's staged replicas) and records `cancelled`; once a restore starts
//! creating collections it is past cancelling. A job whose router stopped is recorded `failed`: a snapshot
//! started again re-uses the files already in the destination (content-addressed), so nothing is resumed in
//! place.

use std::sync::Arc;

use attest_proto::v1 as pb;
use serde::{Deserialize, Serialize};
use tracing::info;

use crate::error::RouterError;
pub use crate::meta_jobs::JobState;
use crate::meta_jobs::{MetaJob, Tracker, PROGRESS_INTERVAL};
use crate::replicas::ShardCall;
use crate::snapshots::{
    ClusterManifest, CreateSnapshot, RestoreSnapshot, RestoredCollection, Snapshots,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Create,
    Restore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferState {
    Pending,
    Running,
    Done,
    Failed,
    /// Not finished when its job was cancelled.
    Cancelled,
}

/// One replica's upload (create) or download into a node's staging area (restore).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ShardTransfer {
    pub collection: String,
    pub shard: u32,
    /// The node moving the files (0 until a create picks the replica).
    pub node_id: u64,
    pub state: TransferState,
    /// Bytes moved so far.
    pub bytes: u64,
    /// Bytes not sent because the destination already held them (an earlier snapshot's files).
    pub skipped_bytes: u64,
    /// The replica's bytes in all (0 until its transfer starts).
    pub total_bytes: u64,
}

/// A snapshot job (`GET /v1/snapshots/jobs/{id}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SnapshotJob {
    pub id: String,
    pub kind: JobKind,
    /// The snapshot's id.
    pub snapshot: String,
    /// The destination (create) or source (restore).
    pub location: String,
    pub state: JobState,
    pub cancel_requested: bool,
    /// The router running it.
    pub router: String,
    /// Unix ms, meta's clock.
    pub created_ms: u64,
    pub updated_ms: u64,
    pub transfers: Vec<ShardTransfer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A finished create's manifest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<ClusterManifest>,
    /// A finished restore's collections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<Vec<RestoredCollection>>,
}

/// `GET /v1/snapshots/jobs`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SnapshotJobList {
    /// Oldest first.
    pub jobs: Vec<SnapshotJob>,
}

impl MetaJob for SnapshotJob {
    const NOUN: &'static str = "snapshot job";
    const EVENT: &'static str = "snapshot_job";

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
        self.error = Some(format!(
            "{why}; start it again: a snapshot re-uses the files the destination already holds"
        ));
        self.router = router.to_string();
        settle_transfers(self);
    }
}

/// The running snapshot job as its work sees it: transfers to report, and the cancellation to watch.
pub type JobTracker = Tracker<SnapshotJob>;

impl JobTracker {
    /// Lists a transfer (create: one per shard; restore: one per replica of the new placement).
    pub fn plan(&self, collection: &str, shard: u32, node_id: u64) {
        self.update(|job| {
            job.transfers.push(ShardTransfer {
                collection: collection.to_string(),
                shard,
                node_id,
                state: TransferState::Pending,
                bytes: 0,
                skipped_bytes: 0,
                total_bytes: 0,
            })
        });
    }

    fn update_transfer(
        &self,
        collection: &str,
        shard: u32,
        node_id: Option<u64>,
        f: impl FnOnce(&mut ShardTransfer),
    ) {
        self.update(|job| {
            let found = job.transfers.iter_mut().find(|t| {
                t.collection == collection
                    && t.shard == shard
                    && node_id.is_none_or(|n| t.node_id == n)
            });
            if let Some(t) = found {
                f(t);
            }
        });
    }

    /// A create's transfer of `shard` started on `node_id` (a retry on another replica moves it).
    pub fn started(&self, collection: &str, shard: u32, node_id: u64) {
        self.update_transfer(collection, shard, None, |t| {
            t.node_id = node_id;
            t.state = TransferState::Running;
        });
    }

    /// A restore's download onto `node_id` started.
    pub fn started_on(&self, collection: &str, shard: u32, node_id: u64) {
        self.update_transfer(collection, shard, Some(node_id), |t| {
            t.state = TransferState::Running
        });
    }

    pub fn finished(&self, collection: &str, shard: u32, node_id: u64, ok: bool, sent: (u64, u64)) {
        self.update_transfer(collection, shard, Some(node_id), |t| {
            t.state = if ok {
                TransferState::Done
            } else {
                TransferState::Failed
            };
            if ok {
                (t.bytes, t.skipped_bytes) = sent;
                t.total_bytes = t.total_bytes.max(sent.0 + sent.1);
            }
        });
    }
}

/// A job that ended leaves no transfer pending or running: those it did not finish ended with it (failed, or
/// cancelled with a cancelled job).
fn settle_transfers(job: &mut SnapshotJob) {
    let ended = match job.state {
        JobState::Running | JobState::Succeeded => return,
        JobState::Failed => TransferState::Failed,
        JobState::Cancelled => TransferState::Cancelled,
    };
    for t in &mut job.transfers {
        if matches!(t.state, TransferState::Pending | TransferState::Running) {
            t.state = ended;
        }
    }
}

/// What a job's work returns.
pub enum JobResult {
    Created(ClusterManifest),
    Restored(Vec<RestoredCollection>),
}

impl Snapshots {
    /// Checks a snapshot request and starts its job in a task of this router; answers the job as recorded.
    pub async fn start_create(
        &self,
        req: CreateSnapshot,
        request_id: String,
    ) -> Result<SnapshotJob, RouterError> {
        let destination = req.destination.clone();
        let plan = self.plan_create(req).await?;
        let id = plan.id.clone();
        self.start_job(
            JobKind::Create,
            &id,
            &destination,
            |s, tracker| async move {
                s.run_create(plan, &tracker, &request_id)
                    .await
                    .map(JobResult::Created)
            },
        )
        .await
    }

    /// Checks a restore request and starts its job in a task of this router; answers the job as recorded.
    pub async fn start_restore(
        &self,
        req: RestoreSnapshot,
        request_id: String,
    ) -> Result<SnapshotJob, RouterError> {
        let (id, source) = (req.id.clone(), req.source.clone());
        let plan = self.plan_restore(req).await?;
        self.start_job(JobKind::Restore, &id, &source, |s, tracker| async move {
            s.run_restore(plan, &tracker, &request_id)
                .await
                .map(JobResult::Restored)
        })
        .await
    }

    /// Records a job of `kind` in meta and runs `work` in a task of this router; returns the job as recorded.
    async fn start_job<F, Fut>(
        &self,
        kind: JobKind,
        snapshot: &str,
        location: &str,
        work: F,
    ) -> Result<SnapshotJob, RouterError>
    where
        F: FnOnce(Snapshots, Arc<JobTracker>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<JobResult, RouterError>> + Send + 'static,
    {
        let job = SnapshotJob {
            id: format!("job-{}", uuid::Uuid::new_v4().simple()),
            kind,
            snapshot: snapshot.to_string(),
            location: location.to_string(),
            state: JobState::Running,
            cancel_requested: false,
            router: self.shared.instance.clone(),
            created_ms: attest_core::clock::unix_ms(),
            updated_ms: attest_core::clock::unix_ms(),
            transfers: Vec::new(),
            error: None,
            manifest: None,
            restored: None,
        };
        let (recorded, tracker) = self.table.record_job(&job).await?;
        info!(job = %job.id, snapshot, kind = ?kind, event = "snapshot_job_started", "snapshot job started");
        let this = self.clone();
        tokio::spawn(async move {
            let run = work(this.clone(), Arc::clone(&tracker));
            let outcome = this
                .table
                .follow_job(&tracker, run, || this.poll_transfers(&tracker))
                .await;
            this.finish_job(&tracker, outcome).await;
        });
        Ok(recorded)
    }

    /// Asks each node with a running transfer how far it has come.
    async fn poll_transfers(&self, tracker: &JobTracker) {
        let running: Vec<ShardTransfer> = tracker
            .snapshot()
            .transfers
            .into_iter()
            .filter(|t| t.state == TransferState::Running)
            .collect();
        // All at once: one silent node costs one timeout, not one per transfer.
        let asks = running.into_iter().map(|t| async move {
            let (endpoint, _) = self.shared.view.endpoint(t.node_id)?;
            // Transfers are listed by the collection's name; its node knows it by its stored name.
            let stored_name = self
                .shared
                .view
                .get(&t.collection)
                .map_or_else(|_| t.collection.clone(), |rec| rec.stored_name);
            let call = ShardCall::TransferProgress {
                request_id: String::new(),
                req: pb::TransferProgressRequest {
                    collection: stored_name,
                    shard: t.shard,
                },
            };
            // Bounded: a node that does not answer (stopped, partitioned) must not hold up the job's reports.
            let answer = tokio::time::timeout(PROGRESS_INTERVAL, endpoint.call(call)).await;
            let p = answer
                .ok()?
                .and_then(pb::TransferProgressResponse::try_from)
                .ok()?;
            Some((t, p))
        });
        for (t, p) in futures::future::join_all(asks).await.into_iter().flatten() {
            if p.active {
                tracker.update_transfer(&t.collection, t.shard, Some(t.node_id), |t| {
                    if t.state == TransferState::Running {
                        (t.bytes, t.skipped_bytes, t.total_bytes) =
                            (p.bytes_done, p.bytes_skipped, p.bytes_total);
                    }
                });
            }
        }
    }

    /// Records how the job ended (retried: a job left `running` would be failed by the next reader).
    async fn finish_job(&self, tracker: &JobTracker, outcome: Result<JobResult, RouterError>) {
        let mut job = tracker.snapshot();
        match outcome {
            Ok(JobResult::Created(m)) => (job.state, job.manifest) = (JobState::Succeeded, Some(m)),
            Ok(JobResult::Restored(r)) => {
                (job.state, job.restored) = (JobState::Succeeded, Some(r))
            }
            Err(_) if tracker.is_cancelled() => job.state = JobState::Cancelled,
            Err(e) => (job.state, job.error) = (JobState::Failed, Some(e.to_string())),
        }
        settle_transfers(&mut job);
        info!(job = %job.id, state = ?job.state, error = job.error.as_deref().unwrap_or(""),
            event = "snapshot_job_finished", "snapshot job finished");
        self.table.record_job_end(&job).await;
    }

    /// A job as meta holds it; one whose router fell silent is recorded failed first.
    pub async fn job(&self, id: &str) -> Result<SnapshotJob, RouterError> {
        if crate::reembed::is_reembed_job(id) {
            return Err(RouterError::NotFound(format!(
                "`{id}` is a re-embedding job: GET /v1/reembed/jobs/{id}"
            )));
        }
        let (job, _) = self.table.read_job(id, RouterError::from_status).await?;
        Ok(job)
    }

    pub async fn jobs(&self) -> Result<Vec<SnapshotJob>, RouterError> {
        // The job table holds re-embeddings too ([`crate::reembed`]); they are listed on their own.
        let jobs = self
            .table
            .list_jobs(|id| !crate::reembed::is_reembed_job(id))
            .await?;
        Ok(jobs.into_iter().map(|(job, _)| job).collect())
    }

    /// Asks the job's router to stop it; answers the job as it stands.
    pub async fn cancel_job(&self, id: &str) -> Result<SnapshotJob, RouterError> {
        if crate::reembed::is_reembed_job(id) {
            return Err(RouterError::NotFound(format!(
                "`{id}` is a re-embedding job: POST /v1/reembed/jobs/{id}/cancel"
            )));
        }
        self.table.cancel_job(id, RouterError::from_status).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(state: JobState) -> SnapshotJob {
        let transfer = |state| ShardTransfer {
            collection: "docs".into(),
            shard: 0,
            node_id: 1,
            state,
            bytes: 0,
            skipped_bytes: 0,
            total_bytes: 0,
        };
        SnapshotJob {
            id: "job-1".into(),
            kind: JobKind::Create,
            snapshot: "s1".into(),
            location: "/backups".into(),
            state,
            cancel_requested: false,
            router: String::new(),
            created_ms: 0,
            updated_ms: 0,
            transfers: [
                TransferState::Pending,
                TransferState::Running,
                TransferState::Done,
                TransferState::Failed,
            ]
            .into_iter()
            .map(transfer)
            .collect(),
            error: None,
            manifest: None,
            restored: None,
        }
    }

    fn states(job: &SnapshotJob) -> Vec<TransferState> {
        job.transfers.iter().map(|t| t.state).collect()
    }

    #[test]
    fn an_ended_job_leaves_no_transfer_running() {
        use TransferState::*;
        let mut failed = job(JobState::Failed);
        settle_transfers(&mut failed);
        assert_eq!(states(&failed), [Failed, Failed, Done, Failed]);
        let mut cancelled = job(JobState::Cancelled);
        settle_transfers(&mut cancelled);
        assert_eq!(states(&cancelled), [Cancelled, Cancelled, Done, Failed]);
        let mut running = job(JobState::Running);
        settle_transfers(&mut running);
        assert_eq!(states(&running), [Pending, Running, Done, Failed]);
    }
}

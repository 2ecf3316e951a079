//! Snapshot jobs: `snapshot create` and `restore` run as jobs recorded in meta, not inside the HTTP request
//! that starts them (a replica transfer may take hours).
//!
//! The router that accepts the request checks it, records the job in meta (state `running`, one entry per
//! replica transfer) and answers at once; a task of that router then does the work, and every second asks the
//! shard nodes how far their transfers have come (`TransferProgress`) and puts the job back to meta when it
//! changed (at least every [`HEARTBEAT`] as a sign of life). Each put answers the stored job, which is how the
//! task learns of a cancellation: it stops its transfers, removes what it left behind (a create's partial files,
//! a restore's staged replicas) and records `cancelled`. Once a restore starts creating collections it is past
//! cancelling. Any router reads any job from meta. A job whose router stopped (no put for [`SILENT_LIMIT`]) is
//! recorded `failed` by the next router that reads it: a snapshot started again re-uses the files already in the
//! destination (content-addressed), so nothing is resumed in place.

use std::sync::Arc;
use std::time::Duration;

use attest_proto::v1 as pb;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::error::RouterError;
use crate::replicas::ShardCall;
use crate::router::Router;
use crate::snapshots::{ClusterManifest, RestoredCollection};

/// How often the running job asks the shard nodes for their transfers' progress.
const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// The longest the running job goes without putting itself to meta, changed or not.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// A job not put for this long is taken to have lost its router.
pub const SILENT_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobKind {
    Create,
    Restore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Succeeded,
    Failed,
    Cancelled,
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

impl SnapshotJob {
    fn from_info(info: &pb::SnapshotJobInfo) -> Result<SnapshotJob, RouterError> {
        let mut job: SnapshotJob = serde_json::from_str(&info.body_json).map_err(|e| {
            RouterError::Internal(format!("snapshot job {} is unreadable: {e}", info.id))
        })?;
        job.cancel_requested = info.cancel_requested;
        job.created_ms = info.created_ms;
        job.updated_ms = info.updated_ms;
        job.router = info.owner.clone();
        Ok(job)
    }

    fn to_info(&self) -> pb::SnapshotJobInfo {
        pb::SnapshotJobInfo {
            id: self.id.clone(),
            owner: self.router.clone(),
            body_json: serde_json::to_string(self).expect("a job serialises"),
            finished: self.state != JobState::Running,
            ..Default::default()
        }
    }
}

/// The running job as its work sees it: transfers to report, and the cancellation to watch.
pub struct JobTracker {
    job: Mutex<SnapshotJob>,
    cancel: watch::Sender<bool>,
}

impl JobTracker {
    /// Lists a transfer (create: one per shard; restore: one per replica of the new placement).
    pub fn plan(&self, collection: &str, shard: u32, node_id: u64) {
        self.job.lock().transfers.push(ShardTransfer {
            collection: collection.to_string(),
            shard,
            node_id,
            state: TransferState::Pending,
            bytes: 0,
            skipped_bytes: 0,
            total_bytes: 0,
        });
    }

    fn update(
        &self,
        collection: &str,
        shard: u32,
        node_id: Option<u64>,
        f: impl FnOnce(&mut ShardTransfer),
    ) {
        let mut job = self.job.lock();
        let found = job.transfers.iter_mut().find(|t| {
            t.collection == collection && t.shard == shard && node_id.is_none_or(|n| t.node_id == n)
        });
        if let Some(t) = found {
            f(t);
        }
    }

    /// A create's transfer of `shard` started on `node_id` (a retry on another replica moves it).
    pub fn started(&self, collection: &str, shard: u32, node_id: u64) {
        self.update(collection, shard, None, |t| {
            t.node_id = node_id;
            t.state = TransferState::Running;
        });
    }

    /// A restore's download onto `node_id` started.
    pub fn started_on(&self, collection: &str, shard: u32, node_id: u64) {
        self.update(collection, shard, Some(node_id), |t| {
            t.state = TransferState::Running
        });
    }

    pub fn finished(&self, collection: &str, shard: u32, node_id: u64, ok: bool, sent: (u64, u64)) {
        self.update(collection, shard, Some(node_id), |t| {
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

    /// The job's id.
    pub fn id(&self) -> String {
        self.job.lock().id.clone()
    }

    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Resolves once the job is asked to stop.
    pub async fn cancelled(&self) {
        let mut rx = self.cancel.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    fn snapshot(&self) -> SnapshotJob {
        self.job.lock().clone()
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

impl Router {
    /// Records a job of `kind` in meta and runs `work` in a task of this router; returns the job as recorded.
    pub async fn start_snapshot_job<F, Fut>(
        self: &Arc<Self>,
        kind: JobKind,
        snapshot: &str,
        location: &str,
        work: F,
    ) -> Result<SnapshotJob, RouterError>
    where
        F: FnOnce(Arc<Router>, Arc<JobTracker>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<JobResult, RouterError>> + Send + 'static,
    {
        let job = SnapshotJob {
            id: format!("job-{}", uuid::Uuid::new_v4().simple()),
            kind,
            snapshot: snapshot.to_string(),
            location: location.to_string(),
            state: JobState::Running,
            cancel_requested: false,
            router: self.instance.clone(),
            created_ms: attest_core::clock::unix_ms(),
            updated_ms: attest_core::clock::unix_ms(),
            transfers: Vec::new(),
            error: None,
            manifest: None,
            restored: None,
        };
        let stored = self
            .view
            .meta()
            .put_snapshot_job(job.to_info(), true, 0)
            .await
            .map_err(RouterError::from_status)?;
        let recorded = SnapshotJob::from_info(&stored)?;
        let tracker = Arc::new(JobTracker {
            job: Mutex::new(recorded.clone()),
            cancel: watch::channel(false).0,
        });
        info!(job = %job.id, snapshot, kind = ?kind, event = "snapshot_job_started", "snapshot job started");
        let router = Arc::clone(self);
        tokio::spawn(async move {
            let run = work(Arc::clone(&router), Arc::clone(&tracker));
            let outcome = router.follow_job(&tracker, run).await;
            router.finish_job(&tracker, outcome).await;
        });
        Ok(recorded)
    }

    /// Runs the work, reporting progress to meta until it ends.
    ///
    /// The reporter runs beside the work in one `select!`, never in a branch body: a branch body that awaits (a
    /// stopped node's progress call takes its whole timeout) would leave the work unpolled, and a cancelled job
    /// whose clean-up needs several polls could then sit `running` for as long as the node stays silent.
    async fn follow_job(
        &self,
        tracker: &JobTracker,
        run: impl std::future::Future<Output = Result<JobResult, RouterError>>,
    ) -> Result<JobResult, RouterError> {
        let report = async {
            let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_put = (tracker.snapshot(), tokio::time::Instant::now());
            loop {
                tick.tick().await;
                self.poll_transfers(tracker).await;
                let now = tracker.snapshot();
                if now != last_put.0 || last_put.1.elapsed() >= HEARTBEAT {
                    self.put_progress(tracker, &now).await;
                    last_put = (now, tokio::time::Instant::now());
                }
            }
        };
        tokio::select! {
            biased;
            outcome = run => outcome,
            never = report => never,
        }
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
            let (endpoint, _) = self.view.endpoint(t.node_id)?;
            // Transfers are listed by the collection's name; its node knows it by its stored name.
            let stored_name = self
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
                tracker.update(&t.collection, t.shard, Some(t.node_id), |t| {
                    if t.state == TransferState::Running {
                        (t.bytes, t.skipped_bytes, t.total_bytes) =
                            (p.bytes_done, p.bytes_skipped, p.bytes_total);
                    }
                });
            }
        }
    }

    async fn put_progress(&self, tracker: &JobTracker, job: &SnapshotJob) {
        match self
            .view
            .meta()
            .put_snapshot_job(job.to_info(), false, 0)
            .await
        {
            Ok(stored) if stored.cancel_requested && !tracker.is_cancelled() => {
                info!(job = %job.id, event = "snapshot_job_cancelling", "snapshot job asked to stop");
                tracker.job.lock().cancel_requested = true;
                tracker.cancel.send_replace(true);
            }
            Ok(_) => {}
            Err(e) => warn!(job = %job.id, error = %e, event = "snapshot_job_put_failed",
                "could not record the job's progress in meta; it goes on"),
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
        for attempt in 0..10u32 {
            match self
                .view
                .meta()
                .put_snapshot_job(job.to_info(), false, 0)
                .await
            {
                Ok(_) => return,
                Err(e) => {
                    warn!(job = %job.id, attempt, error = %e, event = "snapshot_job_put_failed",
                        "could not record the job's end in meta; retrying");
                    tokio::time::sleep(Duration::from_millis(500 * (1 << attempt.min(4)))).await;
                }
            }
        }
    }

    /// A job as meta holds it; one whose router fell silent is recorded failed first.
    pub async fn snapshot_job(&self, id: &str) -> Result<SnapshotJob, RouterError> {
        if crate::reembed::is_reembed_job(id) {
            return Err(RouterError::NotFound(format!(
                "`{id}` is a re-embedding job: GET /v1/reembed/jobs/{id}"
            )));
        }
        let info = self
            .view
            .meta()
            .snapshot_job(id)
            .await
            .map_err(RouterError::from_status)?;
        self.settle_silent(SnapshotJob::from_info(&info)?).await
    }

    pub async fn snapshot_jobs(&self) -> Result<Vec<SnapshotJob>, RouterError> {
        let infos = self
            .view
            .meta()
            .snapshot_jobs()
            .await
            .map_err(RouterError::from_status)?;
        let mut jobs = Vec::with_capacity(infos.len());
        // The job table holds re-embeddings too ([`crate::reembed`]); they are listed on their own.
        for info in infos
            .iter()
            .filter(|i| !crate::reembed::is_reembed_job(&i.id))
        {
            jobs.push(self.settle_silent(SnapshotJob::from_info(info)?).await?);
        }
        Ok(jobs)
    }

    /// Asks the job's router to stop it; answers the job as it stands.
    pub async fn cancel_snapshot_job(&self, id: &str) -> Result<SnapshotJob, RouterError> {
        if crate::reembed::is_reembed_job(id) {
            return Err(RouterError::NotFound(format!(
                "`{id}` is a re-embedding job: POST /v1/reembed/jobs/{id}/cancel"
            )));
        }
        let info = self
            .view
            .meta()
            .cancel_snapshot_job(id)
            .await
            .map_err(RouterError::from_status)?;
        SnapshotJob::from_info(&info)
    }

    /// `job`, or — when it is running and its router has not put it for [`SILENT_LIMIT`] — the job recorded
    /// failed (meta checks the silence on its own clock, so a router whose clock is ahead cannot fail a live job).
    async fn settle_silent(&self, job: SnapshotJob) -> Result<SnapshotJob, RouterError> {
        let silent_ms = attest_core::clock::unix_ms().saturating_sub(job.updated_ms);
        if job.state != JobState::Running || silent_ms <= SILENT_LIMIT.as_millis() as u64 {
            return Ok(job);
        }
        let mut failed = job.clone();
        failed.state = JobState::Failed;
        failed.error = Some(format!(
            "the router running it ({}) stopped reporting {} s ago; start it again: a snapshot re-uses the \
             files the destination already holds",
            job.router,
            silent_ms / 1000
        ));
        failed.router = self.instance.clone();
        settle_transfers(&mut failed);
        let put = self
            .view
            .meta()
            .put_snapshot_job(failed.to_info(), false, SILENT_LIMIT.as_millis() as u64)
            .await;
        match put {
            Ok(stored) => {
                warn!(job = %job.id, owner = %job.router, event = "snapshot_job_orphaned",
                    "a snapshot job's router stopped; recorded failed");
                SnapshotJob::from_info(&stored)
            }
            // Its router put it meanwhile, or another reader settled it: read what is there now.
            Err(_) => {
                let info = self
                    .view
                    .meta()
                    .snapshot_job(&job.id)
                    .await
                    .map_err(RouterError::from_status)?;
                SnapshotJob::from_info(&info)
            }
        }
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

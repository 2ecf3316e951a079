//! A job recorded in meta and run by one router, whatever its work: snapshot create and restore
//! ([`crate::snapshot_jobs`]) and re-embedding ([`crate::reembed`]) share meta's job table and this life cycle.
//!
//! The router that accepts the request records the job (state `running`) and answers at once; a task of that
//! router does the work while a reporter beside it puts the job back to meta every [`PROGRESS_INTERVAL`] when it
//! changed, and at least every [`HEARTBEAT`] as a sign of life. Each put answers the stored job, which is how the
//! task learns of a cancellation. The end is put with retries: a job left `running` would be failed by the next
//! reader. Any router reads any job from meta; one whose router stopped (no put for [`SILENT_LIMIT`]) is recorded
//! `failed` by the next router that reads it (meta checks the silence on its own clock, so a router whose clock is
//! ahead cannot fail a live job).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use attest_proto::v1 as pb;
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::error::RouterError;
use crate::shared::Shared;

/// How often the running job reports (and a snapshot job asks the shard nodes how far their transfers are).
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// The longest the running job goes without putting itself to meta, changed or not.
const HEARTBEAT: Duration = Duration::from_secs(5);
/// A job not put for this long is taken to have lost its router.
pub const SILENT_LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

/// A kind of job kept in meta's job table: its body is the JSON of the job; meta stamps its owner, times and
/// cancellation on each put.
pub trait MetaJob:
    Clone + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// How it is named in messages ("snapshot job").
    const NOUN: &'static str;
    /// The prefix of its log events (`<prefix>_cancelling`, `_put_failed`, `_orphaned`).
    const EVENT: &'static str;

    fn id(&self) -> &str;
    fn state(&self) -> JobState;
    /// The router running it.
    fn owner(&self) -> &str;
    /// When meta last stored it (Unix ms, meta's clock).
    fn updated_ms(&self) -> u64;
    /// Takes what meta stamped on the stored job.
    fn stamp(&mut self, info: &pb::SnapshotJobInfo);
    fn mark_cancel_requested(&mut self);
    /// Records it failed by `router` for `why` (and ends whatever of it was still under way).
    fn fail(&mut self, why: String, router: &str);
}

/// The job meta holds in `info`.
pub fn read<J: MetaJob>(info: &pb::SnapshotJobInfo) -> Result<J, RouterError> {
    let mut job: J = serde_json::from_str(&info.body_json).map_err(|e| {
        RouterError::Internal(format!("{} {} is unreadable: {e}", J::NOUN, info.id))
    })?;
    job.stamp(info);
    Ok(job)
}

/// `job` as meta stores it.
pub fn record<J: MetaJob>(job: &J) -> pb::SnapshotJobInfo {
    pb::SnapshotJobInfo {
        id: job.id().to_string(),
        owner: job.owner().to_string(),
        body_json: serde_json::to_string(job).expect("a job serialises"),
        finished: job.state() != JobState::Running,
        ..Default::default()
    }
}

/// The running job as its work sees it: the progress to report, and the cancellation to watch.
pub struct Tracker<J> {
    job: Mutex<J>,
    cancel: watch::Sender<bool>,
}

impl<J: MetaJob> Tracker<J> {
    fn new(job: J) -> Self {
        Tracker {
            job: Mutex::new(job),
            cancel: watch::channel(false).0,
        }
    }

    /// Changes the job as its work goes on (reported at the next tick).
    pub fn update<T>(&self, f: impl FnOnce(&mut J) -> T) -> T {
        f(&mut self.job.lock())
    }

    /// The job's id.
    pub fn id(&self) -> String {
        self.job.lock().id().to_string()
    }

    pub fn is_cancelled(&self) -> bool {
        *self.cancel.borrow()
    }

    /// Resolves once the job is asked to stop.
    pub async fn cancelled(&self) {
        let mut rx = self.cancel.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// The job as it stands.
    pub fn snapshot(&self) -> J {
        self.job.lock().clone()
    }
}

/// Meta's job table as the services that run jobs (snapshots, re-embedding) use it.
#[derive(Clone)]
pub struct JobTable {
    shared: Arc<Shared>,
}

impl JobTable {
    pub(crate) fn new(shared: &Arc<Shared>) -> Self {
        JobTable {
            shared: Arc::clone(shared),
        }
    }

    fn meta(&self) -> &attest_proto::MetaClient {
        self.shared.view.meta()
    }

    /// Records a new `job` in meta; answers it as stored and the tracker its work reports through.
    pub(crate) async fn record_job<J: MetaJob>(
        &self,
        job: &J,
    ) -> Result<(J, Arc<Tracker<J>>), RouterError> {
        let stored = self
            .meta()
            .put_snapshot_job(record(job), true, 0)
            .await
            .map_err(RouterError::from_status)?;
        let recorded: J = read(&stored)?;
        let tracker = Arc::new(Tracker::new(recorded.clone()));
        Ok((recorded, tracker))
    }

    /// Runs the work, reporting progress to meta until it ends; `poll` runs before each report (a snapshot
    /// job's transfers asked of their nodes).
    ///
    /// The reporter runs beside the work in one `select!`, never in a branch body: a branch body that awaits (a
    /// stopped node's progress call takes its whole timeout) would leave the work unpolled, and a cancelled job
    /// whose clean-up needs several polls could then sit `running` for as long as the node stays silent.
    pub(crate) async fn follow_job<J: MetaJob, T, P: Future<Output = ()>>(
        &self,
        tracker: &Tracker<J>,
        run: impl Future<Output = Result<T, RouterError>>,
        mut poll: impl FnMut() -> P,
    ) -> Result<T, RouterError> {
        let report = async {
            let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut last_put = (tracker.snapshot(), tokio::time::Instant::now());
            loop {
                tick.tick().await;
                poll().await;
                let now = tracker.snapshot();
                if now != last_put.0 || last_put.1.elapsed() >= HEARTBEAT {
                    self.put_job_progress(tracker, &now).await;
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

    async fn put_job_progress<J: MetaJob>(&self, tracker: &Tracker<J>, job: &J) {
        match self.meta().put_snapshot_job(record(job), false, 0).await {
            Ok(stored) if stored.cancel_requested && !tracker.is_cancelled() => {
                info!(job = %job.id(), event = %format!("{}_cancelling", J::EVENT),
                    "{} asked to stop", J::NOUN);
                tracker.update(|j| j.mark_cancel_requested());
                tracker.cancel.send_replace(true);
            }
            Ok(_) => {}
            Err(e) => {
                warn!(job = %job.id(), error = %e, event = %format!("{}_put_failed", J::EVENT),
                "could not record the {}'s progress in meta; it goes on", J::NOUN)
            }
        }
    }

    /// Puts the ended `job` (retried: a job left `running` would be failed by the next reader).
    pub(crate) async fn record_job_end<J: MetaJob>(&self, job: &J) {
        for attempt in 0..10u32 {
            match self.meta().put_snapshot_job(record(job), false, 0).await {
                Ok(_) => return,
                Err(e) => {
                    warn!(job = %job.id(), attempt, error = %e, event = %format!("{}_put_failed", J::EVENT),
                        "could not record the {}'s end in meta; retrying", J::NOUN);
                    tokio::time::sleep(Duration::from_millis(500 * (1 << attempt.min(4)))).await;
                }
            }
        }
    }

    /// Job `id` as meta holds it (meta's errors as `error` maps them), settled when its router fell silent.
    pub(crate) async fn read_job<J: MetaJob>(
        &self,
        id: &str,
        error: impl FnOnce(tonic::Status) -> RouterError,
    ) -> Result<(J, bool), RouterError> {
        let info = self.meta().snapshot_job(id).await.map_err(error)?;
        self.settle_silent_job(read(&info)?).await
    }

    /// Every job of the table that `wanted` keeps, oldest first, each settled when its router fell silent.
    pub(crate) async fn list_jobs<J: MetaJob>(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<Vec<(J, bool)>, RouterError> {
        let infos = self
            .meta()
            .snapshot_jobs()
            .await
            .map_err(RouterError::from_status)?;
        let mut jobs = Vec::with_capacity(infos.len());
        for info in infos.iter().filter(|i| wanted(&i.id)) {
            jobs.push(self.settle_silent_job(read(info)?).await?);
        }
        Ok(jobs)
    }

    /// Asks job `id`'s router to stop it; answers the job as it stands.
    pub(crate) async fn cancel_job<J: MetaJob>(
        &self,
        id: &str,
        error: impl FnOnce(tonic::Status) -> RouterError,
    ) -> Result<J, RouterError> {
        let info = self.meta().cancel_snapshot_job(id).await.map_err(error)?;
        read(&info)
    }

    /// `job`, or — when it is running and its router has not put it for [`SILENT_LIMIT`] — the job recorded
    /// failed; `true` when this router recorded that (its caller cleans up what the job left).
    async fn settle_silent_job<J: MetaJob>(&self, job: J) -> Result<(J, bool), RouterError> {
        let silent_ms = attest_core::clock::unix_ms().saturating_sub(job.updated_ms());
        if job.state() != JobState::Running || silent_ms <= SILENT_LIMIT.as_millis() as u64 {
            return Ok((job, false));
        }
        let mut failed = job.clone();
        failed.fail(
            format!(
                "the router running it ({}) stopped reporting {} s ago",
                job.owner(),
                silent_ms / 1000
            ),
            &self.shared.instance,
        );
        let put = self
            .meta()
            .put_snapshot_job(record(&failed), false, SILENT_LIMIT.as_millis() as u64)
            .await;
        match put {
            Ok(stored) => {
                warn!(job = %job.id(), owner = %job.owner(), event = %format!("{}_orphaned", J::EVENT),
                    "a {}'s router stopped; recorded failed", J::NOUN);
                Ok((read(&stored)?, true))
            }
            // Its router put it meanwhile, or another reader settled it: read what is there now.
            Err(_) => {
                let info = self
                    .meta()
                    .snapshot_job(job.id())
                    .await
                    .map_err(RouterError::from_status)?;
                Ok((read(&info)?, false))
            }
        }
    }
}

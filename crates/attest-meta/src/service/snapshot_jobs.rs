//! The snapshot jobs' calls ([`crate::jobs`]): puts and cancellations proposed on the leader, reads linearizable.

use std::sync::Arc;

use attest_proto::v1 as pb;
use tokio::time::Instant;

use crate::error::{MetaError, StateError};
use crate::jobs;
use crate::route::{now_ms, Core};
use crate::state::{Command, Output};

pub(super) async fn put_snapshot_job(
    core: Arc<Core>,
    req: pb::PutSnapshotJobRequest,
    deadline: Instant,
) -> Result<pb::SnapshotJobInfo, MetaError> {
    let job = req
        .job
        .map(jobs::job_from_pb)
        .ok_or_else(|| MetaError::InvalidArgument("job is required".into()))?;
    let cmd = Command::PutSnapshotJob(jobs::JobPut {
        job,
        create: req.create,
        take_over_after_ms: req.take_over_after_ms,
        now_ms: now_ms(),
    });
    job_output(core.propose(cmd, deadline).await?)
}

pub(super) async fn cancel_snapshot_job(
    core: Arc<Core>,
    req: pb::GetSnapshotJobRequest,
    deadline: Instant,
) -> Result<pb::SnapshotJobInfo, MetaError> {
    job_output(
        core.propose(Command::CancelSnapshotJob { id: req.id }, deadline)
            .await?,
    )
}

fn job_output(out: Output) -> Result<pb::SnapshotJobInfo, MetaError> {
    match out {
        Output::Job(j) => Ok(jobs::job_to_pb(&j)),
        other => Err(MetaError::Codec(format!(
            "a job command returned {other:?}"
        ))),
    }
}

/// A linearizable read of the jobs (ReadIndex on the leader): a job just put is seen by the next read.
pub(super) async fn get_snapshot_job(
    core: Arc<Core>,
    req: pb::GetSnapshotJobRequest,
    deadline: Instant,
) -> Result<pb::SnapshotJobInfo, MetaError> {
    core.read_index(deadline).await?;
    let applied = core.shared.applied.read();
    applied
        .state
        .snapshot_jobs
        .get(&req.id)
        .map(jobs::job_to_pb)
        .ok_or_else(|| StateError::NotFound(format!("snapshot job {}", req.id)).into())
}

pub(super) async fn list_snapshot_jobs(
    core: Arc<Core>,
    _req: pb::ListSnapshotJobsRequest,
    deadline: Instant,
) -> Result<pb::ListSnapshotJobsResponse, MetaError> {
    core.read_index(deadline).await?;
    let applied = core.shared.applied.read();
    Ok(pb::ListSnapshotJobsResponse {
        jobs: applied
            .state
            .snapshot_jobs_by_age()
            .into_iter()
            .map(jobs::job_to_pb)
            .collect(),
    })
}

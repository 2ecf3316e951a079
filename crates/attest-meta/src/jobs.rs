//! Snapshot jobs in the replicated state: a cluster snapshot or restore a router runs, recorded so that it
//! outlives the HTTP request that started it and the router running it, and so that any router can report it.
//!
//! Meta stores each job's description (`body_json`, the router's JSON) as it is and enforces only who may
//! change it: the owner, while the job is unfinished, or another router once the owner has not put it for the
//! caller's `take_over_after_ms` (the owner died). A cancellation is a flag the owner sees in the answer to its
//! next put; puts never clear it. Finished jobs are final, and only the newest [`FINISHED_JOBS_KEPT`] of them
//! are kept. Times come from the leader's clock, in the command (the state machine reads no clock).

use serde::{Deserialize, Serialize};

use attest_proto::v1 as pb;

use crate::error::StateError;
use crate::records::RecordKey;
use crate::state::{Output, StateMachine};

/// Finished jobs kept (the oldest beyond are forgotten when another finishes).
pub const FINISHED_JOBS_KEPT: usize = 200;
/// The largest job description meta stores.
pub const MAX_JOB_BODY_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotJobRecord {
    pub id: String,
    pub owner: String,
    pub body_json: String,
    pub finished: bool,
    pub cancel_requested: bool,
    pub created_ms: u64,
    pub updated_ms: u64,
}

/// A put of a job, as the leader proposes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobPut {
    pub job: SnapshotJobRecord,
    pub create: bool,
    pub take_over_after_ms: u64,
    /// The leader's clock.
    pub now_ms: u64,
}

impl StateMachine {
    pub(crate) fn put_snapshot_job(&mut self, put: &JobPut) -> Result<Output, StateError> {
        let new = &put.job;
        if let Some(problem) = attest_core::limits::job_id_problem(&new.id) {
            return Err(StateError::InvalidArgument(problem));
        }
        if new.body_json.len() > MAX_JOB_BODY_BYTES {
            return Err(StateError::InvalidArgument(format!(
                "job description of {} bytes (at most {MAX_JOB_BODY_BYTES})",
                new.body_json.len()
            )));
        }
        let stored = match (self.snapshot_jobs.get(&new.id), put.create) {
            (Some(_), true) => {
                return Err(StateError::AlreadyExists(format!("job {}", new.id)));
            }
            (None, true) => SnapshotJobRecord {
                created_ms: put.now_ms,
                cancel_requested: false,
                ..new.clone()
            },
            (None, false) => return Err(StateError::NotFound(format!("job {}", new.id))),
            (Some(old), false) => {
                if old.finished {
                    return Err(StateError::FailedPrecondition(format!(
                        "job {} is finished",
                        new.id
                    )));
                }
                let silent_ms = put.now_ms.saturating_sub(old.updated_ms);
                let taken_over = put.take_over_after_ms > 0 && silent_ms > put.take_over_after_ms;
                if old.owner != new.owner && !taken_over {
                    return Err(StateError::FailedPrecondition(format!(
                        "job {} is run by {}, not {}",
                        new.id, old.owner, new.owner
                    )));
                }
                SnapshotJobRecord {
                    created_ms: old.created_ms,
                    cancel_requested: old.cancel_requested,
                    ..new.clone()
                }
            }
        };
        let stored = SnapshotJobRecord {
            updated_ms: put.now_ms,
            ..stored
        };
        self.snapshot_jobs.insert(stored.id.clone(), stored.clone());
        self.changes
            .insert(RecordKey::SnapshotJob(stored.id.clone()));
        if stored.finished {
            self.forget_old_jobs();
        }
        Ok(Output::Job(stored))
    }

    pub(crate) fn cancel_snapshot_job(&mut self, id: &str) -> Result<Output, StateError> {
        let job = self
            .snapshot_jobs
            .get_mut(id)
            .ok_or_else(|| StateError::NotFound(format!("job {id}")))?;
        if !job.finished && !job.cancel_requested {
            job.cancel_requested = true;
            self.changes.insert(RecordKey::SnapshotJob(id.to_string()));
        }
        Ok(Output::Job(job.clone()))
    }

    fn forget_old_jobs(&mut self) {
        let mut finished: Vec<(u64, String)> = self
            .snapshot_jobs
            .values()
            .filter(|j| j.finished)
            .map(|j| (j.created_ms, j.id.clone()))
            .collect();
        if finished.len() <= FINISHED_JOBS_KEPT {
            return;
        }
        finished.sort();
        for (_, id) in &finished[..finished.len() - FINISHED_JOBS_KEPT] {
            self.snapshot_jobs.remove(id);
            self.changes.insert(RecordKey::SnapshotJob(id.clone()));
        }
    }

    /// Every job, oldest first.
    pub fn snapshot_jobs_by_age(&self) -> Vec<&SnapshotJobRecord> {
        let mut jobs: Vec<_> = self.snapshot_jobs.values().collect();
        jobs.sort_by_key(|j| (j.created_ms, j.id.clone()));
        jobs
    }
}

pub fn job_to_pb(j: &SnapshotJobRecord) -> pb::SnapshotJobInfo {
    pb::SnapshotJobInfo {
        id: j.id.clone(),
        owner: j.owner.clone(),
        body_json: j.body_json.clone(),
        finished: j.finished,
        cancel_requested: j.cancel_requested,
        created_ms: j.created_ms,
        updated_ms: j.updated_ms,
    }
}

/// The job a put carries (the times and the cancellation are meta's to set).
pub fn job_from_pb(j: pb::SnapshotJobInfo) -> SnapshotJobRecord {
    SnapshotJobRecord {
        id: j.id,
        owner: j.owner,
        body_json: j.body_json,
        finished: j.finished,
        cancel_requested: false,
        created_ms: 0,
        updated_ms: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: &str, owner: &str, finished: bool) -> SnapshotJobRecord {
        SnapshotJobRecord {
            id: id.into(),
            owner: owner.into(),
            body_json: "{}".into(),
            finished,
            cancel_requested: false,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    fn put(
        s: &mut StateMachine,
        j: SnapshotJobRecord,
        create: bool,
        now_ms: u64,
    ) -> Result<SnapshotJobRecord, StateError> {
        let put = JobPut {
            job: j,
            create,
            take_over_after_ms: 30_000,
            now_ms,
        };
        match s.put_snapshot_job(&put)? {
            Output::Job(j) => Ok(j),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn only_the_owner_changes_a_running_job_until_it_falls_silent() {
        let mut s = StateMachine::default();
        let created = put(&mut s, job("j1", "router-a", false), true, 1_000).unwrap();
        assert_eq!((created.created_ms, created.updated_ms), (1_000, 1_000));
        assert!(matches!(
            put(&mut s, job("j1", "router-a", false), true, 1_001),
            Err(StateError::AlreadyExists(_))
        ));
        assert!(matches!(
            put(&mut s, job("j1", "router-b", false), false, 2_000),
            Err(StateError::FailedPrecondition(_))
        ));
        put(&mut s, job("j1", "router-a", false), false, 5_000).unwrap();
        // Silent for more than the take-over time: another router may record what became of it.
        let taken = put(&mut s, job("j1", "router-b", true), false, 40_000).unwrap();
        assert_eq!(
            (taken.owner.as_str(), taken.created_ms),
            ("router-b", 1_000)
        );
        assert!(matches!(
            put(&mut s, job("j1", "router-b", false), false, 40_001),
            Err(StateError::FailedPrecondition(_))
        ));
        assert!(matches!(
            put(&mut s, job("nope", "a", false), false, 1),
            Err(StateError::NotFound(_))
        ));
        assert!(matches!(
            put(&mut s, job("a/b", "a", false), true, 1),
            Err(StateError::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_cancellation_survives_the_owners_puts_and_leaves_finished_jobs_alone() {
        let mut s = StateMachine::default();
        put(&mut s, job("j1", "r", false), true, 1).unwrap();
        s.cancel_snapshot_job("j1").unwrap();
        let after = put(&mut s, job("j1", "r", false), false, 2).unwrap();
        assert!(
            after.cancel_requested,
            "a put does not clear the cancellation"
        );
        put(&mut s, job("j2", "r", true), true, 3).unwrap();
        let Output::Job(done) = s.cancel_snapshot_job("j2").unwrap() else {
            panic!()
        };
        assert!(!done.cancel_requested);
        assert!(s.cancel_snapshot_job("j3").is_err());
    }

    #[test]
    fn only_the_newest_finished_jobs_are_kept() {
        let mut s = StateMachine::default();
        put(&mut s, job("running", "r", false), true, 0).unwrap();
        for i in 0..FINISHED_JOBS_KEPT + 5 {
            put(&mut s, job(&format!("f{i}"), "r", true), true, 1 + i as u64).unwrap();
        }
        assert_eq!(s.snapshot_jobs.len(), FINISHED_JOBS_KEPT + 1);
        assert!(s.snapshot_jobs.contains_key("running"));
        assert!(!s.snapshot_jobs.contains_key("f4") && s.snapshot_jobs.contains_key("f5"));
    }
}

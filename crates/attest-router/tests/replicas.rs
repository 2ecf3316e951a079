//! The replica-call middleware against fake replicas behind `ShardClient::Local`: each fake can answer after a
//! delay, fail with a given code, hold a call open until released, and counts the calls it received and the ones
//! it finished. Every wait is bounded (the policy's deadline, or `bounded` below), and delays are small and real.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use attest_proto::v1 as pb;
use attest_proto::v1::shard_service_server::ShardService;
use attest_router::replicas::{
    call_all, call_any, ReplicaEndpoint, ReplicaPolicy, ShardCall, ShardResponse,
};
use attest_router::ShardClient;
use tokio::sync::Semaphore;
use tonic::{Code, Request, Response, Status};

/// A fake shard replica.
#[derive(Default)]
struct Fake {
    /// Answer after this long.
    delay: Duration,
    /// Fail with this code instead of answering.
    fail: Option<Code>,
    /// Hold every call until a permit is added here.
    gate: Option<Arc<Semaphore>>,
    /// Calls received.
    calls: AtomicUsize,
    /// Calls that ran to the end (not cancelled on the way).
    completed: AtomicUsize,
    /// The `x-request-id` of the last call.
    request_id: Mutex<Option<String>>,
}

impl Fake {
    fn ok() -> Arc<Fake> {
        Arc::new(Fake::default())
    }
    fn slow(ms: u64) -> Arc<Fake> {
        Arc::new(Fake {
            delay: Duration::from_millis(ms),
            ..Default::default()
        })
    }
    fn failing(code: Code) -> Arc<Fake> {
        Arc::new(Fake {
            fail: Some(code),
            ..Default::default()
        })
    }
    fn held(gate: &Arc<Semaphore>) -> Arc<Fake> {
        Arc::new(Fake {
            gate: Some(gate.clone()),
            ..Default::default()
        })
    }
    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
    fn completed(&self) -> usize {
        self.completed.load(Ordering::SeqCst)
    }

    async fn serve<Req, Resp: Default>(&self, req: Request<Req>) -> Result<Response<Resp>, Status> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let id = req
            .metadata()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        *self.request_id.lock().unwrap() = id;
        if let Some(gate) = &self.gate {
            gate.acquire().await.expect("gate open").forget();
        }
        tokio::time::sleep(self.delay).await;
        self.completed.fetch_add(1, Ordering::SeqCst);
        match self.fail {
            Some(code) => Err(Status::new(code, "injected failure")),
            None => Ok(Response::new(Resp::default())),
        }
    }
}

#[tonic::async_trait]
impl ShardService for Fake {
    async fn ensure_shard(
        &self,
        r: Request<pb::EnsureShardRequest>,
    ) -> Result<Response<pb::EnsureShardResponse>, Status> {
        self.serve(r).await
    }
    async fn drop_shard(
        &self,
        r: Request<pb::DropShardRequest>,
    ) -> Result<Response<pb::DropShardResponse>, Status> {
        self.serve(r).await
    }
    async fn upsert(
        &self,
        r: Request<pb::UpsertRequest>,
    ) -> Result<Response<pb::UpsertResponse>, Status> {
        self.serve(r).await
    }
    async fn delete(
        &self,
        r: Request<pb::DeleteRequest>,
    ) -> Result<Response<pb::DeleteResponse>, Status> {
        self.serve(r).await
    }
    async fn search(
        &self,
        r: Request<pb::ShardSearchRequest>,
    ) -> Result<Response<pb::ShardSearchResponse>, Status> {
        self.serve(r).await
    }
    async fn search_batch(
        &self,
        r: Request<pb::ShardSearchBatchRequest>,
    ) -> Result<Response<pb::ShardSearchBatchResponse>, Status> {
        self.serve(r).await
    }
    async fn fetch_chunks(
        &self,
        r: Request<pb::FetchChunksRequest>,
    ) -> Result<Response<pb::FetchChunksResponse>, Status> {
        self.serve(r).await
    }
    async fn stats(
        &self,
        r: Request<pb::ShardStatsRequest>,
    ) -> Result<Response<pb::ShardStatsResponse>, Status> {
        self.serve(r).await
    }
    async fn maintain(
        &self,
        r: Request<pb::MaintainRequest>,
    ) -> Result<Response<pb::MaintainResponse>, Status> {
        self.serve(r).await
    }
    async fn near_duplicates(
        &self,
        r: Request<pb::NearDuplicatesRequest>,
    ) -> Result<Response<pb::NearDuplicatesResponse>, Status> {
        self.serve(r).await
    }
    async fn doc_versions(
        &self,
        r: Request<pb::DocVersionsRequest>,
    ) -> Result<Response<pb::DocVersionsResponse>, Status> {
        self.serve(r).await
    }
    async fn fetch_documents(
        &self,
        r: Request<pb::FetchDocumentsRequest>,
    ) -> Result<Response<pb::FetchDocumentsResponse>, Status> {
        self.serve(r).await
    }
    async fn snapshot_shard(
        &self,
        r: Request<pb::SnapshotShardRequest>,
    ) -> Result<Response<pb::SnapshotShardResponse>, Status> {
        self.serve(r).await
    }
    async fn stage_restore(
        &self,
        r: Request<pb::StageRestoreRequest>,
    ) -> Result<Response<pb::StageRestoreResponse>, Status> {
        self.serve(r).await
    }
    async fn discard_restore(
        &self,
        r: Request<pb::DiscardRestoreRequest>,
    ) -> Result<Response<pb::DiscardRestoreResponse>, Status> {
        self.serve(r).await
    }
    async fn transfer_progress(
        &self,
        r: Request<pb::TransferProgressRequest>,
    ) -> Result<Response<pb::TransferProgressResponse>, Status> {
        self.serve(r).await
    }
}

/// Endpoints for `fakes`, node ids 1, 2, ...
fn endpoints(fakes: &[&Arc<Fake>], policy: &ReplicaPolicy) -> Vec<ReplicaEndpoint> {
    fakes
        .iter()
        .enumerate()
        .map(|(i, fake)| {
            let node = i as u64 + 1;
            let client = ShardClient::Local((*fake).clone());
            ReplicaEndpoint::new(node, format!("fake-{node}"), client, policy)
        })
        .collect()
}

fn search() -> ShardCall {
    ShardCall::Search {
        request_id: "req-replicas".into(),
        req: pb::ShardSearchRequest::default(),
    }
}

fn upsert() -> ShardCall {
    ShardCall::Upsert {
        request_id: "req-replicas".into(),
        req: pb::UpsertRequest::default(),
    }
}

fn no_hedge() -> ReplicaPolicy {
    ReplicaPolicy {
        hedge_after_ms: 0,
        ..Default::default()
    }
}

/// Awaits `fut`, failing the test after 5 s.
async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(5), fut)
        .await
        .expect("test step took over 5 s")
}

/// Waits (at most 2 s) until `cond` holds.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(started.elapsed() < Duration::from_secs(2), "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn unavailable_replica_is_retried_on_the_next_one() {
    let (down, up) = (Fake::failing(Code::Unavailable), Fake::ok());
    let policy = no_hedge();
    let eps = endpoints(&[&down, &up], &policy);
    let (response, node) = bounded(call_any(&eps, search(), &policy)).await.unwrap();
    assert!(matches!(response, ShardResponse::Search(_)));
    assert_eq!(node, 2);
    assert_eq!((down.calls(), up.calls()), (1, 1));
    let id = up.request_id.lock().unwrap().clone();
    assert_eq!(id.as_deref(), Some("req-replicas"));
}

#[tokio::test]
async fn invalid_argument_is_returned_without_retry() {
    let (bad, up) = (Fake::failing(Code::InvalidArgument), Fake::ok());
    let policy = no_hedge();
    let eps = endpoints(&[&bad, &up], &policy);
    let err = bounded(call_any(&eps, search(), &policy))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "injected failure");
    assert_eq!(up.calls(), 0);
}

#[tokio::test]
async fn every_replica_failing_returns_the_last_error() {
    let fakes = [
        Fake::failing(Code::Unavailable),
        Fake::failing(Code::Internal),
        Fake::failing(Code::Unavailable),
        Fake::ok(),
    ];
    let policy = ReplicaPolicy {
        max_attempts: 3,
        ..no_hedge()
    };
    let eps = endpoints(&fakes.iter().collect::<Vec<_>>(), &policy);
    let err = bounded(call_any(&eps, search(), &policy))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.message().contains("node 3"), "{}", err.message());
    assert_eq!(fakes[3].calls(), 0, "max_attempts caps the replicas tried");
}

#[tokio::test]
async fn slow_replica_is_hedged_and_the_loser_cancelled() {
    let (slow, fast) = (Fake::slow(500), Fake::ok());
    let policy = ReplicaPolicy::default();
    let eps = endpoints(&[&slow, &fast], &policy);
    let started = Instant::now();
    let (_, node) = bounded(call_any(&eps, search(), &policy)).await.unwrap();
    let took = started.elapsed();
    assert_eq!(node, 2);
    assert!(
        took >= Duration::from_millis(50),
        "hedged before 50 ms: {took:?}"
    );
    assert!(
        took < Duration::from_millis(300),
        "hedge too late: {took:?}"
    );
    assert_eq!(slow.calls(), 1);
    tokio::time::sleep(Duration::from_millis(550)).await;
    assert_eq!(slow.completed(), 0, "the losing attempt is dropped");
}

#[tokio::test]
async fn without_hedging_the_first_replica_is_awaited() {
    let (slow, fast) = (Fake::slow(200), Fake::ok());
    let policy = no_hedge();
    let eps = endpoints(&[&slow, &fast], &policy);
    let started = Instant::now();
    let (_, node) = bounded(call_any(&eps, search(), &policy)).await.unwrap();
    assert_eq!(node, 1);
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(fast.calls(), 0);
}

#[tokio::test]
async fn attempt_timeout_moves_on_to_the_next_replica() {
    let (slow, fast) = (Fake::slow(1000), Fake::ok());
    let policy = ReplicaPolicy {
        attempt_timeout_ms: 100,
        ..no_hedge()
    };
    let eps = endpoints(&[&slow, &fast], &policy);
    let started = Instant::now();
    let (_, node) = bounded(call_any(&eps, search(), &policy)).await.unwrap();
    assert_eq!(node, 2);
    assert!(started.elapsed() < Duration::from_millis(500));
}

#[tokio::test]
async fn deadline_bounds_a_read_when_every_replica_hangs() {
    let gate = Arc::new(Semaphore::new(0));
    let (a, b) = (Fake::held(&gate), Fake::held(&gate));
    let policy = ReplicaPolicy {
        deadline_ms: 200,
        ..Default::default()
    };
    let eps = endpoints(&[&a, &b], &policy);
    let started = Instant::now();
    let err = bounded(call_any(&eps, search(), &policy))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(900),
        "{took:?}"
    );
    assert_eq!(
        (a.calls(), b.calls()),
        (1, 1),
        "the hedge went out before the deadline"
    );
}

#[tokio::test]
async fn saturated_node_sheds_and_the_read_moves_on() {
    let gate = Arc::new(Semaphore::new(0));
    let (busy, other) = (Fake::held(&gate), Fake::ok());
    let policy = ReplicaPolicy {
        concurrency_limit: 1,
        ..no_hedge()
    };
    let eps = endpoints(&[&busy, &other], &policy);

    // Holds node 1's only permit, through a clone of its endpoint: the limit is shared by clones.
    let holder = {
        let eps = eps.clone();
        let policy = policy.clone();
        tokio::spawn(async move { call_any(&eps[..1], search(), &policy).await })
    };
    eventually("node 1 holds a call", || busy.calls() == 1).await;

    let started = Instant::now();
    let (_, node) = bounded(call_any(&eps, search(), &policy)).await.unwrap();
    assert_eq!(node, 2);
    assert!(started.elapsed() < Duration::from_millis(100));
    assert_eq!(busy.calls(), 1, "a shed call never reaches the node");

    // A single, saturated replica: fails fast instead of queueing until the deadline.
    let started = Instant::now();
    let err = bounded(call_any(&eps[..1], search(), &policy))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted);
    assert!(started.elapsed() < Duration::from_millis(100));

    gate.add_permits(1);
    let (_, node) = bounded(holder).await.unwrap().unwrap();
    assert_eq!(node, 1);
}

#[tokio::test]
async fn without_load_shedding_a_saturated_node_queues() {
    let gate = Arc::new(Semaphore::new(0));
    let busy = Fake::held(&gate);
    let policy = ReplicaPolicy {
        concurrency_limit: 1,
        load_shed: false,
        deadline_ms: 200,
        ..no_hedge()
    };
    let eps = endpoints(&[&busy], &policy);
    // The holder outlives the queued call's deadline, so its permit is never freed meanwhile.
    let holder = {
        let eps = eps.clone();
        let policy = ReplicaPolicy {
            deadline_ms: 2000,
            ..policy.clone()
        };
        tokio::spawn(async move { call_any(&eps, search(), &policy).await })
    };
    eventually("node 1 holds a call", || busy.calls() == 1).await;
    let started = Instant::now();
    let err = bounded(call_any(&eps, search(), &policy))
        .await
        .unwrap_err();
    assert_eq!(
        err.code(),
        Code::DeadlineExceeded,
        "queued until the deadline"
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert_eq!(busy.calls(), 1);
    gate.add_permits(1);
    let (_, node) = bounded(holder).await.unwrap().unwrap();
    assert_eq!(node, 1);
}

#[tokio::test]
async fn write_returns_on_quorum_and_slow_replicas_still_get_it() {
    let (fast, slow) = (Fake::ok(), Fake::slow(200));
    let policy = ReplicaPolicy::default();
    let eps = endpoints(&[&fast, &slow], &policy);
    let started = Instant::now();
    let outcome = bounded(call_all(&eps, upsert(), 1, &policy)).await;
    assert!(started.elapsed() < Duration::from_millis(150));
    assert!(outcome.is_ok(), "{:?}", outcome.error);
    assert_eq!(outcome.acked, vec![1]);
    assert_eq!(outcome.pending, vec![2]);
    assert!(matches!(outcome.response, Some(ShardResponse::Upsert(_))));
    assert_eq!((slow.calls(), slow.completed()), (1, 0));
    eventually("the slow replica applies the write", || {
        slow.completed() == 1
    })
    .await;
}

#[tokio::test]
async fn write_fails_when_quorum_is_out_of_reach() {
    let (up, down) = (Fake::ok(), Fake::failing(Code::Unavailable));
    let policy = ReplicaPolicy::default();
    let eps = endpoints(&[&up, &down], &policy);
    let outcome = bounded(call_all(&eps, upsert(), 2, &policy)).await;
    let err = outcome.error.as_ref().expect("quorum 2 of 2 with one down");
    assert_eq!(err.code(), Code::Unavailable);
    assert!(err.message().contains("node 2"), "{}", err.message());
    assert_eq!(outcome.acked, vec![1]);
    assert_eq!(outcome.failed.len(), 1);
    assert_eq!(outcome.failed[0].0, 2);
    assert!(outcome.into_result().is_err());
}

#[tokio::test]
async fn write_fails_at_once_on_invalid_argument() {
    let (slow, bad) = (Fake::slow(300), Fake::failing(Code::InvalidArgument));
    let policy = ReplicaPolicy::default();
    let eps = endpoints(&[&slow, &bad], &policy);
    let started = Instant::now();
    let outcome = bounded(call_all(&eps, upsert(), 1, &policy)).await;
    assert!(started.elapsed() < Duration::from_millis(150));
    assert_eq!(outcome.error.map(|s| s.code()), Some(Code::InvalidArgument));
    assert_eq!(outcome.pending, vec![1]);
}

#[tokio::test]
async fn write_deadline_and_impossible_quorum() {
    let gate = Arc::new(Semaphore::new(0));
    let (up, hung) = (Fake::ok(), Fake::held(&gate));
    let policy = ReplicaPolicy {
        write_deadline_ms: 200,
        ..Default::default()
    };
    let eps = endpoints(&[&up, &hung], &policy);
    let outcome = bounded(call_all(&eps, upsert(), 2, &policy)).await;
    assert_eq!(
        outcome.error.as_ref().map(|s| s.code()),
        Some(Code::DeadlineExceeded)
    );
    assert_eq!((outcome.acked, outcome.pending), (vec![1], vec![2]));

    let outcome = bounded(call_all(&eps, upsert(), 3, &policy)).await;
    assert_eq!(outcome.error.map(|s| s.code()), Some(Code::Unavailable));
    assert_eq!(up.calls(), 1, "an impossible quorum sends nothing");
    gate.add_permits(1);
}

/// A write slower than a read attempt's timeout still lands: writes are sent once and bounded by the write
/// deadline alone (cut short at the attempt timeout, a bulk batch on a busy node was re-sent whole).
#[tokio::test]
async fn a_write_is_not_cut_short_by_the_read_attempt_timeout() {
    let (a, b) = (Fake::slow(150), Fake::slow(150));
    let policy = ReplicaPolicy {
        attempt_timeout_ms: 50,
        write_deadline_ms: 2000,
        ..no_hedge()
    };
    let eps = endpoints(&[&a, &b], &policy);
    let outcome = bounded(call_all(&eps, upsert(), 2, &policy)).await;
    assert!(outcome.error.is_none(), "{:?}", outcome.error);
    assert_eq!(outcome.acked.len(), 2);
    // A read of the same slowness is still cut at its attempt timeout.
    let err = bounded(call_any(&eps[..1], search(), &policy))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
}

/// Reads and writes of one node draw on the same permits: a write holding the only one sheds a read.
#[tokio::test]
async fn reads_and_writes_share_a_node_s_concurrency_limit() {
    let gate = Arc::new(Semaphore::new(0));
    let busy = Fake::held(&gate);
    let policy = ReplicaPolicy {
        concurrency_limit: 1,
        ..no_hedge()
    };
    let eps = endpoints(&[&busy], &policy);
    let writer = {
        let (eps, policy) = (eps.clone(), policy.clone());
        tokio::spawn(async move { call_all(&eps, upsert(), 1, &policy).await })
    };
    eventually("the write holds the permit", || busy.calls() == 1).await;
    let err = bounded(call_any(&eps, search(), &policy))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    gate.add_permits(1);
    assert!(bounded(writer).await.unwrap().error.is_none());
}

//! Replica calls: every call the router makes to a shard replica goes through the tower middleware here
//! (SPEC, router: "deadline, retry on another replica, hedged request after a latency threshold, concurrency
//! limit, load shedding").
//!
//! Per node, two tower stacks are built once per [`ReplicaEndpoint`] and cloned for each call:
//! `LoadShed → ConcurrencyLimit → Timeout → ShardCallService`, one with the read attempt's timeout and one with
//! the write deadline, over one `Arc<Semaphore>`: tower 0.4's `Clone` for `ConcurrencyLimit` copies the
//! semaphore and starts without a permit, so every caller of a node, reads and writes alike, draws on the same
//! permits without a `Buffer` task in front. The permit moves into the response future, so it is
//! released when the attempt answers, times out or is dropped (a losing hedge). `LoadShed` turns "no permit
//! free" into an immediate `Overloaded` error instead of a wait; [`status_from_tower`] maps it and the attempt
//! timeout to gRPC codes.
//!
//! Across replicas, [`call_any`] (reads: first success from one replica) and [`call_all`] (writes: every
//! replica, acknowledged on a quorum) are plain async functions that drive the per-node stacks. Not tower's
//! `Retry` and `Hedge`: both re-send to the *same* inner service (`Retry` clones the request for the service
//! it wraps; `Hedge` fires after a latency percentile learned from a rotating histogram and needs warm-up
//! data), whereas here each new attempt must go to a *different* replica after a fixed delay. A `Service`
//! over the replica set would only wrap this same loop in a boxed future; as a function, the order of events
//! (first attempt, hedge, retry, first success wins, deadline) reads top to bottom.
//!
//! The call types (`ShardCall`, `ShardResponse`, `ShardCallService`) are in [`call`].

pub mod call;

use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_proto::{ApiError, ErrorCode};
use futures::stream::{FuturesUnordered, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;
use tonic::{Code, Status};
use tower::limit::{ConcurrencyLimit, GlobalConcurrencyLimitLayer};
use tower::load_shed::error::Overloaded;
use tower::load_shed::{LoadShed, LoadShedLayer};
use tower::timeout::error::Elapsed;
use tower::timeout::Timeout;
use tower::util::Either;
use tower::{BoxError, ServiceBuilder, ServiceExt};
use tracing::{debug, warn, Instrument};

use crate::client::ShardClient;
pub use call::{ShardCall, ShardCallService, ShardResponse};

/// Reads retried on another replica after a retryable failure.
pub const REPLICA_RETRY_TOTAL: &str = "router_replica_retry_total";
/// Reads also sent to the next replica after `hedge_after_ms` without an answer.
pub const REPLICA_HEDGE_TOTAL: &str = "router_replica_hedge_total";
/// Calls refused at once because the node's concurrency limit was saturated.
pub const REPLICA_SHED_TOTAL: &str = "router_replica_shed_total";
/// Latency of one attempt at one replica, labels `call` (the RPC) and `outcome` (ok, error, timeout, shed).
pub const REPLICA_CALL_SECONDS: &str = "router_replica_call_seconds";
/// Bytes of the responses replicas sent (their protobuf size), label `call`.
pub const REPLICA_RESPONSE_BYTES_TOTAL: &str = "router_replica_response_bytes_total";

/// How calls to shard replicas are bounded, retried and hedged. Sits in the router config; every field has a
/// default, so a config may name only what it changes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReplicaPolicy {
    /// Bound on a whole call, retries and hedges included (ms).
    pub deadline_ms: u64,
    /// Bound on one attempt at one replica (ms); 0: only the deadline bounds it. Reads only: a read cut short
    /// is tried on another replica.
    pub attempt_timeout_ms: u64,
    /// Bound on a replicated write (ms). A write is sent once to every replica and not retried, so it has no
    /// shorter per-attempt timeout: one cut short would be re-sent whole by its caller (doubling the work on
    /// a busy node) and left to replica catch-up.
    pub write_deadline_ms: u64,
    /// A read with no answer after this long is also sent to the next replica (ms); 0: no hedging.
    pub hedge_after_ms: u64,
    /// Distinct replicas a read tries at most (first attempt, retries and hedges together); 0 counts as 1.
    pub max_attempts: usize,
    /// Calls in flight per replica node, shared by every caller of that node; 0 counts as 1.
    pub concurrency_limit: usize,
    /// When a node is at its concurrency limit, fail at once with `ResourceExhausted` (a read then moves on to
    /// another replica) instead of queueing for a permit.
    pub load_shed: bool,
    /// Which live replica of a shard a read tries first (the others answer its retries and hedges).
    pub read_from: ReadFrom,
}

/// Which live replica of a shard a read tries first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFrom {
    /// Each read of a shard starts on the next live replica in turn: every replica's CPU serves, and every
    /// replica's serving files are paged in.
    #[default]
    Spread,
    /// Always the first live replica of the shard's placement. Meta places each shard's first replica on the
    /// least loaded node, so the first replicas of a collection spread over the nodes as evenly as its replicas
    /// do, and the page cache has to hold one copy of each shard's serving files, not one per replica — for nodes
    /// whose memory holds one copy and not two. At 10M vectors on this project's 3-node VM it made no difference
    /// that stood out of the runs' spread (docs/bench/history.md, "10M, settled").
    First,
}

impl Default for ReplicaPolicy {
    fn default() -> Self {
        ReplicaPolicy {
            deadline_ms: 2000,
            attempt_timeout_ms: 1000,
            write_deadline_ms: 10_000,
            hedge_after_ms: 50,
            max_attempts: 3,
            concurrency_limit: 64,
            load_shed: true,
            read_from: ReadFrom::default(),
        }
    }
}

impl ReplicaPolicy {
    pub fn deadline(&self) -> Duration {
        Duration::from_millis(self.deadline_ms)
    }

    pub fn write_deadline(&self) -> Duration {
        Duration::from_millis(self.write_deadline_ms)
    }

    pub fn attempt_timeout(&self) -> Duration {
        match self.attempt_timeout_ms {
            0 => self.deadline(),
            ms => Duration::from_millis(ms),
        }
    }

    /// `None` when hedging is off.
    pub fn hedge_after(&self) -> Option<Duration> {
        (self.hedge_after_ms > 0).then(|| Duration::from_millis(self.hedge_after_ms))
    }
}

/// The per-node stack below the load-shed switch: a shared concurrency limit around a per-attempt timeout.
type Limited = ConcurrencyLimit<Timeout<ShardCallService>>;

/// One node's tower stack, with or without load shedding (`ReplicaPolicy::load_shed`).
pub type ReplicaStack = Either<LoadShed<Limited>, Limited>;

/// One replica node with the tower stack every call to it goes through. Cheap to clone; clones share the
/// node's concurrency limit, so build one per node and keep it (not one per request).
#[derive(Clone)]
pub struct ReplicaEndpoint {
    /// The node's id in the shard map; reported back by [`call_any`] and [`call_all`].
    pub node_id: u64,
    /// Where the node listens, for logs.
    pub address: String,
    /// Built once in [`ReplicaEndpoint::new`]; private so that every caller shares the same limit.
    stack: ReplicaStack,
    /// The same, with the write deadline as its timeout, on the same permits.
    write_stack: ReplicaStack,
    /// The node's client without the stack, for long operations the per-attempt timeout would cut short.
    client: ShardClient,
}

impl std::fmt::Debug for ReplicaEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplicaEndpoint")
            .field("node_id", &self.node_id)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl ReplicaEndpoint {
    pub fn new(
        node_id: u64,
        address: impl Into<String>,
        client: ShardClient,
        policy: &ReplicaPolicy,
    ) -> Self {
        let permits = Arc::new(Semaphore::new(policy.concurrency_limit.max(1)));
        let stack = |timeout: Duration| {
            ServiceBuilder::new()
                .option_layer(policy.load_shed.then(LoadShedLayer::new))
                .layer(GlobalConcurrencyLimitLayer::with_semaphore(Arc::clone(
                    &permits,
                )))
                .timeout(timeout)
                .service(ShardCallService::new(client.clone()))
        };
        ReplicaEndpoint {
            node_id,
            address: address.into(),
            stack: stack(policy.attempt_timeout()),
            write_stack: stack(policy.write_deadline()),
            client,
        }
    }

    /// One call that may run for minutes (a replica snapshot or restore): outside the stack's concurrency
    /// limit and per-attempt timeout, bounded by `limit` instead.
    pub async fn call_long(
        &self,
        call: ShardCall,
        limit: Duration,
    ) -> Result<ShardResponse, Status> {
        let name = call.name();
        match tokio::time::timeout(
            limit,
            ShardCallService::new(self.client.clone()).oneshot(call),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(Status::deadline_exceeded(format!(
                "replica node {} ({}): {name} did not finish within {} s",
                self.node_id,
                self.address,
                limit.as_secs()
            ))),
        }
    }

    /// One attempt at this replica through its stack: no retry, no hedge. Records the attempt's latency and
    /// logs its failure.
    pub async fn call(&self, call: ShardCall) -> Result<ShardResponse, Status> {
        self.attempt(&self.stack, call).await
    }

    /// A write to this replica, bounded by the write deadline rather than a read attempt's timeout.
    pub async fn call_write(&self, call: ShardCall) -> Result<ShardResponse, Status> {
        self.attempt(&self.write_stack, call).await
    }

    async fn attempt(
        &self,
        stack: &ReplicaStack,
        call: ShardCall,
    ) -> Result<ShardResponse, Status> {
        let name = call.name();
        let started = Instant::now();
        // One span per attempt: the trace shows which replica each shard's answer came from and how long it took.
        let span = tracing::info_span!("shard_call", rpc = name, node = self.node_id, address = %self.address);
        let result = stack.clone().oneshot(call).instrument(span).await;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) if e.is::<Overloaded>() => "shed",
            Err(e) if e.is::<Elapsed>() => "timeout",
            Err(_) => "error",
        };
        metrics::histogram!(REPLICA_CALL_SECONDS, "call" => name, "outcome" => outcome)
            .record(started.elapsed().as_secs_f64());
        if outcome == "shed" {
            metrics::counter!(REPLICA_SHED_TOTAL, "call" => name).increment(1);
        }
        if let Ok(response) = &result {
            metrics::counter!(REPLICA_RESPONSE_BYTES_TOTAL, "call" => name)
                .increment(response.encoded_len() as u64);
        }
        result.map_err(|e| {
            let status = status_from_tower(self.node_id, e);
            // Back-pressure (this node's concurrency limit, a replica's full backlog) is expected under load and
            // counted above (`outcome` shed or error); a 10M ingest logged it ~3,700 times at WARN. Its caller
            // reports what it did about it (another replica, or the client's 429).
            if status.code() == Code::ResourceExhausted {
                debug!(node = self.node_id, call = name, error = %status.message(), event = "replica_busy", "replica call refused: busy");
            } else {
                warn!(
                    node = self.node_id,
                    address = %self.address,
                    call = name,
                    code = ?status.code(),
                    error = %status.message(),
                    event = "replica_call_failed",
                    "replica call failed"
                );
            }
            status
        })
    }
}

/// The one place where a replica stack's error becomes a gRPC status: the shard's own status as it is, the
/// attempt timeout as `DeadlineExceeded`, a shed call as `ResourceExhausted`, anything else as `Unavailable`.
pub fn status_from_tower(node_id: u64, err: BoxError) -> Status {
    let err = match err.downcast::<Status>() {
        Ok(status) => return *status,
        Err(err) => err,
    };
    if err.is::<Elapsed>() {
        Status::deadline_exceeded(format!("replica node {node_id}: attempt timed out"))
    } else if err.is::<Overloaded>() {
        Status::resource_exhausted(format!(
            "replica node {node_id} overloaded: concurrency limit reached"
        ))
    } else {
        Status::unavailable(format!("replica node {node_id}: {err}"))
    }
}

/// Whether another replica may succeed where this one failed. Argument, lookup and permission errors would
/// fail the same way everywhere, so they are returned at once. Transport errors reach us as `Unavailable`
/// or `Unknown`.
pub fn is_retryable(status: &Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable
            | Code::DeadlineExceeded
            | Code::ResourceExhausted
            | Code::Unknown
            | Code::Internal
            | Code::Cancelled
    )
}

/// Read path: `call` to one replica of `replicas` (ordered, preferred first), the first success wins.
///
/// Starts with the first replica. A retryable failure moves on to the next one; a non-retryable one is
/// returned at once. After `hedge_after_ms` without an answer the same call also goes to the next replica, and
/// the first success is taken (the other attempts are dropped, which cancels them). At most `max_attempts`
/// distinct replicas are tried, and `deadline_ms` bounds everything. Returns the answer and the node that gave it.
pub async fn call_any(
    replicas: &[ReplicaEndpoint],
    call: ShardCall,
    policy: &ReplicaPolicy,
) -> Result<(ShardResponse, u64), Status> {
    match tokio::time::timeout(policy.deadline(), read(replicas, call, policy)).await {
        Ok(result) => result,
        Err(_) => Err(Status::deadline_exceeded(format!(
            "no replica answered within the {} ms deadline",
            policy.deadline_ms
        ))),
    }
}

async fn read(
    replicas: &[ReplicaEndpoint],
    call: ShardCall,
    policy: &ReplicaPolicy,
) -> Result<(ShardResponse, u64), Status> {
    let tries = replicas.len().min(policy.max_attempts.max(1));
    if tries == 0 {
        return Err(Status::unavailable("no replica to call"));
    }
    let name = call.name();
    let hedge_after = policy.hedge_after();
    let start = |i: usize| {
        let endpoint = &replicas[i];
        let call = call.clone();
        async move { (endpoint.node_id, endpoint.call(call).await) }
    };
    let mut in_flight = FuturesUnordered::new();
    in_flight.push(start(0));
    let mut next = 1;
    // Re-armed whenever an attempt starts: the hedge waits on the newest attempt.
    let hedge = tokio::time::sleep(hedge_after.unwrap_or_default());
    tokio::pin!(hedge);
    let mut last_error: Option<(u64, Status)> = None;
    loop {
        let may_hedge = hedge_after.is_some() && next < tries;
        tokio::select! {
            Some((node, result)) = in_flight.next() => match result {
                Ok(response) => return Ok((response, node)),
                Err(status) if !is_retryable(&status) => return Err(status),
                Err(status) => {
                    last_error = Some((node, status));
                    if next < tries {
                        metrics::counter!(REPLICA_RETRY_TOTAL, "call" => name).increment(1);
                        debug!(node = replicas[next].node_id, call = name, event = "replica_call_retried", "retrying on another replica");
                        in_flight.push(start(next));
                        next += 1;
                        if let Some(after) = hedge_after {
                            hedge.as_mut().reset(tokio::time::Instant::now() + after);
                        }
                    } else if in_flight.is_empty() {
                        break;
                    }
                }
            },
            () = &mut hedge, if may_hedge => {
                metrics::counter!(REPLICA_HEDGE_TOTAL, "call" => name).increment(1);
                debug!(node = replicas[next].node_id, call = name, event = "replica_call_hedged", "hedging on another replica");
                in_flight.push(start(next));
                next += 1;
                if let Some(after) = hedge_after {
                    hedge.as_mut().reset(tokio::time::Instant::now() + after);
                }
            },
            else => break,
        }
    }
    Err(match last_error {
        Some((node, status)) => Status::new(
            status.code(),
            format!(
                "{tries} replica(s) tried, all failed; last, node {node}: {}",
                status.message()
            ),
        ),
        None => Status::internal("replica read ended without an attempt"),
    })
}

/// What a replicated write did. `error` is `None` when a quorum acknowledged; the lists describe the moment
/// the outcome was decided (writes still `pending` then go on in the background).
#[derive(Debug, Default)]
pub struct WriteOutcome {
    /// Nodes that acknowledged, in order of acknowledgement.
    pub acked: Vec<u64>,
    /// Nodes that failed, with their error.
    pub failed: Vec<(u64, Status)>,
    /// Nodes whose write was still in flight; it keeps going (bounded by the deadline) after the return.
    pub pending: Vec<u64>,
    /// The first successful response.
    pub response: Option<ShardResponse>,
    /// Why the write failed: quorum impossible, deadline passed, or a replica's non-retryable error.
    pub error: Option<Status>,
}

impl WriteOutcome {
    pub fn is_ok(&self) -> bool {
        self.error.is_none()
    }

    /// The first successful response, or the error.
    pub fn into_result(self) -> Result<ShardResponse, Status> {
        match (self.error, self.response) {
            (Some(status), _) => Err(status),
            (None, Some(response)) => Ok(response),
            (None, None) => Err(Status::internal("write acknowledged without a response")),
        }
    }

    /// Why the quorum is out of reach. When every failed replica shed the write as busy (its unsealed backlog
    /// or concurrency limit), the answer is `ResourceExhausted` (HTTP 429): the client should back off and
    /// resend, not fail over as from an outage. Any other failure among them makes it `Unavailable`.
    ///
    /// When a replica refused because its disk is below the free-space reserve and every other failure was
    /// a disk or a shed write, the answer is that replica's disk-full error (HTTP 507, `DISK_FULL`): the
    /// operator must free space, and no retry or failover helps until then.
    fn quorum_lost(&self, quorum: usize, replicas: usize) -> Status {
        let disk_full = |s: &Status| ApiError::from_status(s).code == ErrorCode::DiskFull;
        if let Some((node, full)) = self.failed.iter().find(|(_, s)| disk_full(s)) {
            if self
                .failed
                .iter()
                .all(|(_, s)| s.code() == Code::ResourceExhausted)
            {
                let others = self.failed.len() - 1;
                let mut message = format!("node {node}: {}", full.message());
                if others > 0 {
                    message.push_str(&format!(
                        " (write quorum {quorum} of {replicas} replica(s) out of reach: {})",
                        self.failures()
                    ));
                }
                return ApiError::new(ErrorCode::DiskFull, message).to_status();
            }
        }
        let message = format!(
            "write quorum {quorum} of {replicas} replica(s) is out of reach: {}",
            self.failures()
        );
        let all_busy = !self.failed.is_empty()
            && self
                .failed
                .iter()
                .all(|(_, s)| s.code() == Code::ResourceExhausted);
        if all_busy {
            Status::resource_exhausted(message)
        } else {
            Status::unavailable(message)
        }
    }

    fn failures(&self) -> String {
        let parts: Vec<String> = self
            .failed
            .iter()
            .map(|(node, s)| format!("node {node}: {:?} {}", s.code(), s.message()))
            .collect();
        parts.join("; ")
    }
}

/// Write path: `call` to every replica at once, each through its node's write stack and within
/// `write_deadline_ms`.
/// Returns as soon as `quorum` replicas acknowledged (0 counts as 1); the other sends are spawned tasks and are
/// not cancelled, so slow replicas still get the write. Fails when so many replicas failed that the quorum is
/// out of reach, when the deadline passes first, or at once with a replica's non-retryable error (the same
/// write would be refused everywhere). A write is sent once per replica: a replica that misses it (shed, timed
/// out) is brought up to date by replica catch-up, not here.
pub async fn call_all(
    replicas: &[ReplicaEndpoint],
    call: ShardCall,
    quorum: usize,
    policy: &ReplicaPolicy,
) -> WriteOutcome {
    let quorum = quorum.max(1);
    let mut outcome = WriteOutcome::default();
    if quorum > replicas.len() {
        outcome.error = Some(Status::unavailable(format!(
            "write quorum {quorum} is impossible with {} replica(s)",
            replicas.len()
        )));
        return outcome;
    }
    let name = call.name();
    let deadline = tokio::time::Instant::now() + policy.write_deadline();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for endpoint in replicas {
        outcome.pending.push(endpoint.node_id);
        let (endpoint, call, tx) = (endpoint.clone(), call.clone(), tx.clone());
        let within = tracing::Span::current();
        tokio::spawn(
            async move {
                let result =
                    match tokio::time::timeout_at(deadline, endpoint.call_write(call)).await {
                        Ok(result) => result,
                        Err(_) => Err(Status::deadline_exceeded(format!(
                            "replica node {}: write deadline passed",
                            endpoint.node_id
                        ))),
                    };
                if tx.send((endpoint.node_id, result)).is_err() {
                    debug!(
                        node = endpoint.node_id,
                        call = name,
                        event = "replica_write_late",
                        "replica write finished after its outcome"
                    );
                }
            }
            .instrument(within),
        );
    }
    drop(tx);
    let max_failures = replicas.len() - quorum;
    loop {
        let (node, result) = match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(event)) => event,
            Ok(None) => {
                outcome.error = Some(Status::internal("replica writes ended without an outcome"));
                return outcome;
            }
            Err(_) => {
                outcome.error = Some(Status::deadline_exceeded(format!(
                    "write acknowledged by {} of {} replica(s), quorum {quorum}, within the {} ms deadline",
                    outcome.acked.len(),
                    replicas.len(),
                    policy.write_deadline_ms
                )));
                return outcome;
            }
        };
        if let Some(i) = outcome.pending.iter().position(|n| *n == node) {
            outcome.pending.remove(i);
        }
        match result {
            Ok(response) => {
                outcome.acked.push(node);
                outcome.response.get_or_insert(response);
                if outcome.acked.len() >= quorum {
                    return outcome;
                }
            }
            Err(status) if !is_retryable(&status) => {
                outcome.failed.push((node, status.clone()));
                outcome.error = Some(status);
                return outcome;
            }
            Err(status) => {
                outcome.failed.push((node, status));
                if outcome.failed.len() > max_failures {
                    outcome.error = Some(outcome.quorum_lost(quorum, replicas.len()));
                    return outcome;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_partial_config() {
        let p = ReplicaPolicy::default();
        assert_eq!(
            (
                p.deadline_ms,
                p.attempt_timeout_ms,
                p.write_deadline_ms,
                p.hedge_after_ms,
                p.max_attempts,
                p.concurrency_limit,
                p.load_shed
            ),
            (2000, 1000, 10_000, 50, 3, 64, true)
        );
        let p: ReplicaPolicy =
            serde_json::from_str(r#"{"hedge_after_ms": 0, "attempt_timeout_ms": 0}"#).unwrap();
        assert_eq!(p.hedge_after(), None);
        assert_eq!(p.attempt_timeout(), Duration::from_millis(2000));
        assert_eq!(p.max_attempts, 3);
    }

    #[test]
    fn tower_errors_become_statuses() {
        let shard: BoxError = Box::new(Status::not_found("no such shard"));
        let s = status_from_tower(7, shard);
        assert_eq!((s.code(), s.message()), (Code::NotFound, "no such shard"));
        let s = status_from_tower(7, Box::new(Elapsed::new()));
        assert_eq!(s.code(), Code::DeadlineExceeded);
        assert!(s.message().contains("node 7"));
        let s = status_from_tower(7, Box::new(Overloaded::new()));
        assert_eq!(s.code(), Code::ResourceExhausted);
        let s = status_from_tower(7, "channel closed".into());
        assert_eq!(s.code(), Code::Unavailable);
    }

    #[test]
    fn only_transient_codes_are_retried() {
        for code in [
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::ResourceExhausted,
            Code::Unknown,
            Code::Internal,
            Code::Cancelled,
        ] {
            assert!(is_retryable(&Status::new(code, "")), "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::NotFound,
            Code::PermissionDenied,
            Code::AlreadyExists,
        ] {
            assert!(!is_retryable(&Status::new(code, "")), "{code:?}");
        }
    }

    #[test]
    fn write_outcome_result() {
        let ok = WriteOutcome {
            acked: vec![1],
            response: Some(ShardResponse::Delete(Default::default())),
            ..Default::default()
        };
        assert!(ok.is_ok());
        assert!(matches!(ok.into_result(), Ok(ShardResponse::Delete(_))));
        let failed = WriteOutcome {
            failed: vec![(2, Status::unavailable("down"))],
            error: Some(Status::unavailable("quorum")),
            ..Default::default()
        };
        assert_eq!(failed.failures(), "node 2: Unavailable down");
        assert_eq!(failed.quorum_lost(1, 2).code(), Code::Unavailable);
        assert_eq!(failed.into_result().unwrap_err().code(), Code::Unavailable);
    }

    #[test]
    fn a_quorum_lost_to_busy_replicas_only_is_resource_exhausted() {
        let busy = |node| (node, Status::resource_exhausted("unsealed backlog full"));
        let outcome = WriteOutcome {
            failed: vec![busy(1), busy(2)],
            ..Default::default()
        };
        let status = outcome.quorum_lost(1, 2);
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert!(status
            .message()
            .contains("node 1: ResourceExhausted unsealed backlog full"));
        let mixed = WriteOutcome {
            failed: vec![busy(1), (2, Status::unavailable("connection refused"))],
            ..Default::default()
        };
        assert_eq!(mixed.quorum_lost(1, 2).code(), Code::Unavailable);
    }

    /// A replica whose disk is below its reserve is why the write failed: the caller hears `DISK_FULL` (HTTP
    /// 507) with the replica's message naming its data directory, not that a quorum is out of reach.
    #[test]
    fn a_quorum_lost_to_a_full_disk_is_disk_full() {
        let full = || {
            ApiError::new(
                ErrorCode::DiskFull,
                "disk full: data directory /d/shard-node-0 has 1 bytes free",
            )
            .to_status()
        };
        let alone = WriteOutcome {
            failed: vec![(1, full())],
            ..Default::default()
        };
        let seen = ApiError::from_status(&alone.quorum_lost(1, 1));
        assert_eq!(seen.code, ErrorCode::DiskFull);
        assert!(seen
            .message
            .starts_with("node 1: disk full: data directory /d/shard-node-0"));
        assert!(!seen.message.contains("quorum"), "{}", seen.message);
        let with_busy = WriteOutcome {
            failed: vec![
                (1, Status::resource_exhausted("unsealed backlog full")),
                (2, full()),
            ],
            ..Default::default()
        };
        let seen = ApiError::from_status(&with_busy.quorum_lost(2, 2));
        assert_eq!(seen.code, ErrorCode::DiskFull);
        assert_eq!(
            crate::error::RouterError::from_status(with_busy.quorum_lost(2, 2)).code(),
            ErrorCode::DiskFull
        );
        let with_down = WriteOutcome {
            failed: vec![(1, Status::unavailable("connection refused")), (2, full())],
            ..Default::default()
        };
        assert_eq!(with_down.quorum_lost(2, 2).code(), Code::Unavailable);
    }
}

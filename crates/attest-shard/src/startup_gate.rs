//! While a shard node starts (its first reconcile pass: replicas created, what it missed while down copied from
//! its peers), its gRPC listener answers its peers' catch-up reads and holds every other call until the node is
//! ready.
//!
//! Why the catch-up reads pass: nodes restarted together (a rollout, a power cut, a benchmark's restart) each ask
//! their peers for what they missed before they serve. A node that answered nothing until it was ready kept its
//! peers' first passes waiting on it while it waited on them: every replica's pass to every peer ran to
//! `peer_timeout_ms` (30 s), one replica after another, so a node with four replicas served two minutes late and
//! copied nothing in its first pass (a restarted 10M cluster, docs/decisions/read-ahead.md). The reads are safe
//! from a node that has not caught up itself: catch-up copies only versions newer than the asker's own, and what
//! the starting node copies later has later log positions, which the asker's next incremental listing holds.
//!
//! Everything else (searches, writes, health, snapshots) waits here as it waited in the listen backlog before:
//! a replica that may lack writes never answers a search, and the router's per-call deadlines apply unchanged.

use std::task::{Context, Poll};

use attest_proto::v1::shard_service_server::ShardServiceServer;
use tokio::sync::watch;
use tonic::codegen::http;
use tonic::server::NamedService;
use tower::{Layer, Service};

use crate::service::ShardServiceImpl;

/// The calls a starting node answers at once: the two reads of catch-up ([`crate::catchup`]).
const ANSWERED_WHILE_STARTING: [&str; 2] = ["DocVersions", "FetchDocuments"];

/// Opens the gate once the node is ready ([`StartupGate::open`]).
pub struct StartupGate(watch::Sender<bool>);

/// The tower layer a starting node's gRPC server is built with.
#[derive(Clone)]
pub struct GateLayer(watch::Receiver<bool>);

impl StartupGate {
    /// A closed gate and the layer it opens.
    pub fn closed() -> (StartupGate, GateLayer) {
        let (tx, rx) = watch::channel(false);
        (StartupGate(tx), GateLayer(rx))
    }

    /// A layer whose gate is open from the start (a node that does not join a cluster is ready once open).
    pub fn open_layer() -> GateLayer {
        let (gate, layer) = Self::closed();
        gate.open();
        layer
    }

    /// Lets every call through, held ones first.
    pub fn open(&self) {
        self.0.send_replace(true);
    }
}

/// Whether a call to `path` (`/package.Service/Method`) is answered while the node starts.
fn answered_while_starting(path: &str) -> bool {
    let Some(method) = path
        .strip_prefix('/')
        .and_then(|p| p.strip_prefix(<ShardServiceServer<ShardServiceImpl> as NamedService>::NAME))
        .and_then(|p| p.strip_prefix('/'))
    else {
        return false;
    };
    ANSWERED_WHILE_STARTING.contains(&method)
}

impl<S> Layer<S> for GateLayer {
    type Service = Gated<S>;

    fn layer(&self, inner: S) -> Gated<S> {
        Gated {
            inner,
            open: self.0.clone(),
        }
    }
}

/// A service behind the startup gate.
#[derive(Clone)]
pub struct Gated<S> {
    inner: S,
    open: watch::Receiver<bool>,
}

impl<S, B> Service<http::Request<B>> for Gated<S>
where
    S: Service<http::Request<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<S::Response, S::Error>> + Send + 'static>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The clone that was polled ready serves this call; the fresh one stays for the next.
        let fresh = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, fresh);
        // Once open (every call of a running node), nothing is parsed or cloned for the gate.
        let waits = !*self.open.borrow() && !answered_while_starting(request.uri().path());
        let mut open = waits.then(|| self.open.clone());
        Box::pin(async move {
            if let Some(open) = open.as_mut() {
                // A gate dropped unopened belongs to a node that stopped before it was ready, and is going
                // away: its held calls go through to the shutdown.
                let _ = open.wait_for(|open| *open).await;
            }
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_catch_up_reads_pass_while_starting() {
        assert!(answered_while_starting(
            "/attest.v1.ShardService/DocVersions"
        ));
        assert!(answered_while_starting(
            "/attest.v1.ShardService/FetchDocuments"
        ));
        for held in [
            "/attest.v1.ShardService/Search",
            "/attest.v1.ShardService/Upsert",
            "/attest.v1.ShardService/DocVersionsX",
            "/grpc.health.v1.Health/Check",
            "/other.Service/DocVersions",
            "DocVersions",
            "",
        ] {
            assert!(!answered_while_starting(held), "{held}");
        }
    }
}

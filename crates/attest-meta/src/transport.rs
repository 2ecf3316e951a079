//! Sending Raft messages to the other meta nodes, and the fault-injection [`Filter`] in front of it.
//!
//! The Raft loop calls [`Transport::send`], which never blocks: the gRPC transport hands each message to a
//! per-peer sender task through a bounded queue and drops it when the queue is full (Raft retransmits), so a
//! dead or slow peer never stalls the loop. The sender task reports snapshot results and unreachable peers
//! back to the loop (`report_snapshot` / `report_unreachable`).
//!
//! [`Filter`] (TiKV style) sits in front of the transport and also guards incoming messages and forwarded
//! requests: tests use it to partition or isolate a node over real sockets.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use attest_proto::credential::ClusterCredential;
use attest_proto::meta_client::meta_service_client as meta_client;
use attest_proto::v1 as pb;
use parking_lot::{Mutex, RwLock};
use protobuf::Message as PbMessage;
use raft::prelude::{Message, MessageType};
use tokio::sync::mpsc;

/// Messages queued per peer before new ones are dropped.
const PEER_QUEUE: usize = 256;

/// What a sender task tells the Raft loop about a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerReport {
    /// A `MsgSnapshot` was delivered (`ok`) or lost.
    Snapshot { to: u64, ok: bool },
    /// A message could not be delivered.
    Unreachable { to: u64 },
}

/// Where the transport sends its reports (into the Raft loop's inbox).
pub type Reporter = Arc<dyn Fn(PeerReport) + Send + Sync>;

/// Sends Raft messages to peers. Implementations must not block.
pub trait Transport: Send {
    fn send(&self, msg: Message);
    /// The addresses of the peers (voter map plus bootstrap hints); called when they change.
    fn set_peers(&self, peers: &BTreeMap<u64, String>);
}

#[derive(Debug, Default)]
struct Rules {
    /// Drop all traffic with every other meta node.
    isolated: bool,
    /// Drop all traffic with these nodes.
    blocked: BTreeSet<u64>,
}

/// Drops traffic between this node and given peers, both ways: outgoing Raft messages, incoming Raft
/// messages, and writes forwarded to or from them. Empty by default (everything passes).
#[derive(Debug, Default)]
pub struct Filter {
    rules: RwLock<Rules>,
}

impl Filter {
    /// Cuts this node off from every other meta node.
    pub fn isolate(&self) {
        self.rules.write().isolated = true;
    }

    /// Cuts the link between this node and `peer`.
    pub fn block(&self, peer: u64) {
        self.rules.write().blocked.insert(peer);
    }

    /// Removes every rule.
    pub fn heal(&self) {
        *self.rules.write() = Rules::default();
    }

    /// Whether traffic with `peer` passes.
    pub fn allows(&self, peer: u64) -> bool {
        let rules = self.rules.read();
        !rules.isolated && !rules.blocked.contains(&peer)
    }
}

/// A transport behind a [`Filter`].
pub struct Filtered<T> {
    inner: T,
    filter: Arc<Filter>,
    report: Reporter,
}

impl<T> Filtered<T> {
    pub fn new(inner: T, filter: Arc<Filter>, report: Reporter) -> Self {
        Filtered {
            inner,
            filter,
            report,
        }
    }
}

impl<T: Transport> Transport for Filtered<T> {
    fn send(&self, msg: Message) {
        if self.filter.allows(msg.to) {
            self.inner.send(msg);
        } else if msg.get_msg_type() == MessageType::MsgSnapshot {
            (self.report)(PeerReport::Snapshot {
                to: msg.to,
                ok: false,
            });
        }
    }

    fn set_peers(&self, peers: &BTreeMap<u64, String>) {
        self.inner.set_peers(peers);
    }
}

struct PeerSender {
    address: String,
    queue: mpsc::Sender<Message>,
}

/// Raft messages over `MetaService/Raft`, one sender task per peer.
pub struct GrpcTransport {
    runtime: tokio::runtime::Handle,
    report: Reporter,
    /// What this node presents to its peers.
    credential: ClusterCredential,
    addresses: RwLock<BTreeMap<u64, String>>,
    senders: Mutex<HashMap<u64, PeerSender>>,
}

impl GrpcTransport {
    pub fn new(
        runtime: tokio::runtime::Handle,
        report: Reporter,
        credential: ClusterCredential,
    ) -> Self {
        GrpcTransport {
            runtime,
            report,
            credential,
            addresses: RwLock::new(BTreeMap::new()),
            senders: Mutex::new(HashMap::new()),
        }
    }

    fn drop_message(&self, msg: &Message) {
        if msg.get_msg_type() == MessageType::MsgSnapshot {
            (self.report)(PeerReport::Snapshot {
                to: msg.to,
                ok: false,
            });
        }
    }
}

impl Transport for GrpcTransport {
    fn send(&self, msg: Message) {
        let to = msg.to;
        let Some(address) = self.addresses.read().get(&to).cloned() else {
            tracing::debug!(to, "no address for raft peer; message dropped");
            self.drop_message(&msg);
            return;
        };
        let mut senders = self.senders.lock();
        let stale = senders.get(&to).is_some_and(|s| s.address != address);
        if stale || !senders.contains_key(&to) {
            let (queue, rx) = mpsc::channel(PEER_QUEUE);
            self.runtime.spawn(run_peer(
                to,
                address.clone(),
                rx,
                self.report.clone(),
                self.credential.clone(),
            ));
            senders.insert(to, PeerSender { address, queue });
        }
        let sender = &senders[&to];
        if let Err(e) = sender.queue.try_send(msg) {
            let msg = match e {
                mpsc::error::TrySendError::Full(m) | mpsc::error::TrySendError::Closed(m) => m,
            };
            self.drop_message(&msg);
        }
    }

    fn set_peers(&self, peers: &BTreeMap<u64, String>) {
        *self.addresses.write() = peers.clone();
        // Dropping a sender ends its task once its queue is drained.
        self.senders.lock().retain(|id, _| peers.contains_key(id));
    }
}

async fn run_peer(
    to: u64,
    address: String,
    mut rx: mpsc::Receiver<Message>,
    report: Reporter,
    credential: ClusterCredential,
) {
    let mut client = match meta_client(&address, &credential) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(to, %address, error = %e, "bad raft peer address");
            while let Some(msg) = rx.recv().await {
                if msg.get_msg_type() == MessageType::MsgSnapshot {
                    report(PeerReport::Snapshot { to, ok: false });
                }
            }
            return;
        }
    };
    let mut last_unreachable: Option<Instant> = None;
    while let Some(msg) = rx.recv().await {
        let is_snapshot = msg.get_msg_type() == MessageType::MsgSnapshot;
        let bytes = match msg.write_to_bytes() {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(to, error = %e, "raft message does not encode");
                continue;
            }
        };
        let mut request = tonic::Request::new(pb::RaftEnvelope { message: bytes });
        request.set_timeout(Duration::from_secs(5));
        let ok = match client.raft(request).await {
            Ok(_) => true,
            Err(status) => {
                tracing::debug!(to, error = %status, "raft message not delivered");
                false
            }
        };
        if is_snapshot {
            report(PeerReport::Snapshot { to, ok });
        }
        if !ok && last_unreachable.is_none_or(|t| t.elapsed() > Duration::from_secs(1)) {
            last_unreachable = Some(Instant::now());
            report(PeerReport::Unreachable { to });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Recorder(Arc<Mutex<Vec<u64>>>);

    impl Transport for Recorder {
        fn send(&self, msg: Message) {
            self.0.lock().push(msg.to);
        }
        fn set_peers(&self, _: &BTreeMap<u64, String>) {}
    }

    fn msg(to: u64, t: MessageType) -> Message {
        let mut m = Message {
            to,
            ..Default::default()
        };
        m.set_msg_type(t);
        m
    }

    #[test]
    fn filter_drops_blocked_peers_and_reports_lost_snapshots() {
        let sent = Arc::new(Mutex::new(vec![]));
        let reports = Arc::new(Mutex::new(vec![]));
        let r = reports.clone();
        let filter = Arc::new(Filter::default());
        let t = Filtered::new(
            Recorder(sent.clone()),
            filter.clone(),
            Arc::new(move |p: PeerReport| r.lock().push(p)),
        );
        t.send(msg(2, MessageType::MsgAppend));
        filter.block(2);
        t.send(msg(2, MessageType::MsgSnapshot));
        t.send(msg(3, MessageType::MsgAppend));
        filter.isolate();
        t.send(msg(3, MessageType::MsgAppend));
        assert!(!filter.allows(3));
        filter.heal();
        assert!(filter.allows(2) && filter.allows(3));
        assert_eq!(*sent.lock(), vec![2, 3]);
        assert_eq!(
            *reports.lock(),
            vec![PeerReport::Snapshot { to: 2, ok: false }]
        );
    }
}

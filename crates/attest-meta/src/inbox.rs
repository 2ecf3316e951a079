//! The Raft loop's inbox: one bounded queue of [`Input`]s from the gRPC service (Raft messages from peers,
//! proposals, reads), the transport (delivery reports) and the node itself (peer addresses, shutdown).
//!
//! Bounded, so a flood of peer messages or requests cannot grow memory without end while the loop is busy (an
//! fsync, a snapshot). What does not fit is refused at once, never queued: a Raft message or a transport report
//! is dropped (Raft tolerates lost messages: heartbeats come again, a rejected append is resent, an election
//! times out and runs again), and a request is refused with [`MetaError::InboxFull`] (`UNAVAILABLE`) for its
//! caller to retry. Each refusal is counted in `attest_meta_inbox_dropped_total{meta_id, input}` and logged
//! (the first, then every 1,000th). Inputs that must arrive — shutdown, peer addresses — wait for room instead:
//! the loop drains up to 1,024 inputs a round, so the wait is short.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use crate::error::MetaError;
use crate::metrics;
use crate::node::Input;

/// Inputs the inbox holds before it refuses more: four rounds of the loop's draining.
pub(crate) const INBOX_CAPACITY: usize = 4096;

/// The sending side of the inbox of meta node `meta_id`, and the loop's receiving side.
pub(crate) fn inbox(meta_id: u64, capacity: usize) -> (Inbox, Receiver<Input>) {
    let (tx, rx) = sync_channel(capacity);
    let inbox = Inbox {
        tx,
        meta_id,
        dropped: Arc::new(AtomicU64::new(0)),
    };
    (inbox, rx)
}

/// Hands inputs to the Raft loop (cheap to clone; every clone feeds the same queue).
#[derive(Clone)]
pub(crate) struct Inbox {
    tx: SyncSender<Input>,
    meta_id: u64,
    /// Inputs refused because the inbox was full, over every clone.
    dropped: Arc<AtomicU64>,
}

impl Inbox {
    /// Hands `input` to the loop: at once, or refused when the inbox is full; shutdown and peer addresses wait
    /// for room. `MetaError::Shutdown` once the loop has stopped.
    pub fn send(&self, input: Input) -> Result<(), MetaError> {
        if must_arrive(&input) {
            return self.tx.send(input).map_err(|_| MetaError::Shutdown);
        }
        match self.tx.try_send(input) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(input)) => {
                let kind = kind(&input);
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                metrics::record_inbox_dropped(self.meta_id, kind);
                if dropped == 1 || dropped.is_multiple_of(1000) {
                    tracing::warn!(
                        meta_id = self.meta_id,
                        input = kind,
                        dropped_total = dropped,
                        "raft inbox full; input refused"
                    );
                }
                Err(MetaError::InboxFull)
            }
            Err(TrySendError::Disconnected(_)) => Err(MetaError::Shutdown),
        }
    }

    /// Inputs refused so far because the inbox was full.
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// Inputs that are never refused: losing them would leave a node running or without its peers' addresses.
fn must_arrive(input: &Input) -> bool {
    matches!(input, Input::Shutdown | Input::PeerHints(_))
}

/// The `input` label of the refusal counter.
fn kind(input: &Input) -> &'static str {
    match input {
        Input::Propose { .. } => "propose",
        Input::ConfChange { .. } => "conf_change",
        Input::ReadIndex { .. } => "read_index",
        Input::TransferLeader { .. } => "transfer_leader",
        Input::Raft(_) => "raft",
        Input::Report(_) => "report",
        Input::PeerHints(_) => "peer_hints",
        Input::Shutdown => "shutdown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::PeerReport;
    use std::time::Duration;

    fn raft() -> Input {
        Input::Raft(Box::default())
    }

    #[test]
    fn a_full_inbox_refuses_and_counts_instead_of_growing() {
        let (inbox, rx) = inbox(1, 2);
        inbox.send(raft()).unwrap();
        inbox
            .send(Input::Report(PeerReport::Unreachable { to: 2 }))
            .unwrap();
        assert!(matches!(inbox.send(raft()), Err(MetaError::InboxFull)));
        let (reply, _rx) = tokio::sync::oneshot::channel();
        let refused = inbox.clone().send(Input::ReadIndex { reply });
        assert!(matches!(refused, Err(MetaError::InboxFull)));
        assert_eq!(inbox.dropped(), 2, "counted over every clone");

        // The loop takes one: there is room again, and the queue holds what was accepted, in order.
        assert!(matches!(rx.try_recv(), Ok(Input::Raft(_))));
        inbox.send(raft()).unwrap();
        assert!(matches!(rx.try_recv(), Ok(Input::Report(_))));
        assert!(matches!(rx.try_recv(), Ok(Input::Raft(_))));
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn shutdown_waits_for_room_and_a_stopped_loop_is_shutdown() {
        let (inbox, rx) = inbox(1, 1);
        inbox.send(raft()).unwrap();
        let drain = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            let first = rx.recv().unwrap();
            let second = rx.recv().unwrap();
            (
                matches!(first, Input::Raft(_)),
                matches!(second, Input::Shutdown),
            )
        });
        inbox.send(Input::Shutdown).unwrap();
        assert_eq!(drain.join().unwrap(), (true, true));
        assert_eq!(inbox.dropped(), 0);
        assert!(matches!(inbox.send(raft()), Err(MetaError::Shutdown)));
    }
}

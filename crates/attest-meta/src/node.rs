//! The Raft loop: one OS thread that owns the `RawNode` and its RocksDB storage.
//!
//! It is fed through one channel ([`Input`]): proposals and conf changes (each with a reply resolved when
//! its entry is APPLIED, with the apply result), ReadIndex requests (answered once a read state came back
//! and the applied index reached it), incoming Raft messages, transport reports, and a tick every
//! `tick_ms`. Each round handles the ready state in the order raft-rs asks for: send messages → install a
//! snapshot → apply committed entries → append entries and hard state → send persisted messages → advance
//! (and the same for the light ready) → compact the log when it grew past `snapshot_threshold`.
//!
//! What the rest of the crate reads (state machine, role, term, leader) is published in [`Shared`].

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use protobuf::Message as PbMessage;
use raft::prelude::*;
use raft::{RawNode, StateRole};
use tokio::sync::oneshot;

use crate::config::MetaConfig;
use crate::error::MetaError;
use crate::metrics;
use crate::state::{Command, Output, StateMachine};
use crate::storage::RocksStorage;
use crate::transport::{Filter, PeerReport, Transport};

/// A request to the Raft loop.
pub(crate) enum Input {
    Propose {
        cmd: Command,
        reply: oneshot::Sender<Result<Output, MetaError>>,
    },
    ConfChange {
        change: ConfChange,
        reply: oneshot::Sender<Result<(), MetaError>>,
    },
    /// Answered with the read index once the local state has applied it.
    ReadIndex {
        reply: oneshot::Sender<Result<u64, MetaError>>,
    },
    TransferLeader {
        to: u64,
    },
    Raft(Box<Message>),
    Report(PeerReport),
    /// Addresses learnt outside the replicated state (initial peers, `AddMetaNode` answers).
    PeerHints(BTreeMap<u64, String>),
    Shutdown,
}

/// The state machine with the index it reflects.
#[derive(Debug, Clone, Default)]
pub(crate) struct Applied {
    pub index: u64,
    pub state: StateMachine,
}

/// Raft soft state, published after every loop round.
#[derive(Debug, Clone, Default)]
pub(crate) struct RaftStatus {
    pub leader_id: u64,
    pub term: u64,
    pub commit: u64,
    pub role: &'static str,
    /// When this node last became leader (`None` when it is not leader).
    pub leader_since: Option<Instant>,
    /// Matched log index per voter, when leader (to pick a leadership transferee).
    pub matched: BTreeMap<u64, u64>,
}

/// What the loop publishes and the service reads.
pub(crate) struct Shared {
    pub id: u64,
    pub applied: RwLock<Applied>,
    pub status: RwLock<RaftStatus>,
    /// Every term in which this node was leader (split-brain checks in tests).
    pub terms_led: Mutex<Vec<u64>>,
    /// Snapshots received from a leader and installed (lagging-follower checks).
    pub snapshots_installed: AtomicU64,
    pub filter: Arc<Filter>,
    /// The applied index, published after each applied batch is persisted (what held watches wait on).
    pub versions: tokio::sync::watch::Sender<u64>,
    /// The records recent batches changed (what watch deltas are made of).
    pub changelog: Mutex<crate::watch::ChangeLog>,
}

impl Shared {
    pub fn new(id: u64, applied: Applied, filter: Arc<Filter>) -> Self {
        Shared {
            id,
            versions: tokio::sync::watch::Sender::new(applied.index),
            changelog: Mutex::new(crate::watch::ChangeLog::starting_at(applied.index)),
            applied: RwLock::new(applied),
            status: RwLock::new(RaftStatus {
                role: "follower",
                ..Default::default()
            }),
            terms_led: Mutex::new(Vec::new()),
            snapshots_installed: AtomicU64::new(0),
            filter,
        }
    }

    pub fn is_leader(&self) -> bool {
        self.status.read().role == "leader"
    }
}

pub(crate) fn role_name(role: StateRole) -> &'static str {
    match role {
        StateRole::Leader => "leader",
        StateRole::Follower => "follower",
        StateRole::Candidate => "candidate",
        StateRole::PreCandidate => "pre_candidate",
    }
}

enum Reply {
    Command(oneshot::Sender<Result<Output, MetaError>>),
    Conf(oneshot::Sender<Result<(), MetaError>>),
}

impl Reply {
    fn is_closed(&self) -> bool {
        match self {
            Reply::Command(tx) => tx.is_closed(),
            Reply::Conf(tx) => tx.is_closed(),
        }
    }

    fn fail(self, e: MetaError) {
        match self {
            Reply::Command(tx) => drop(tx.send(Err(e))),
            Reply::Conf(tx) => drop(tx.send(Err(e))),
        }
    }
}

/// A proposal waiting for its entry to be applied.
struct Pending {
    term: u64,
    reply: Reply,
}

/// What applying one entry produced.
enum Effect {
    Command(Result<Output, MetaError>),
    Conf(Result<(), MetaError>),
    /// An empty entry (new leader's no-op, or a conf change raft-rs refused and blanked).
    Empty,
}

struct PendingRead {
    reply: oneshot::Sender<Result<u64, MetaError>>,
    issued: Instant,
}

/// The loop's state; lives on its own thread.
pub(crate) struct RaftLoop {
    raw: RawNode<RocksStorage>,
    shared: Arc<Shared>,
    transport: Box<dyn Transport>,
    inbox: Receiver<Input>,
    tick: Duration,
    snapshot_threshold: u64,
    proposals: BTreeMap<u64, Pending>,
    /// ReadIndex requests by context, waiting for their read state.
    reads: HashMap<u64, PendingRead>,
    /// ReadIndex requests that arrived before the leader committed an entry of its term.
    deferred_reads: Vec<oneshot::Sender<Result<u64, MetaError>>>,
    /// Reads with a known read index, waiting for the applied index to reach it.
    awaiting_apply: Vec<(u64, oneshot::Sender<Result<u64, MetaError>>)>,
    next_read_ctx: u64,
    hints: BTreeMap<u64, String>,
    last_led_term: u64,
    last_metrics: (u64, u64, u64, u64),
}

/// The slog logger raft-rs wants, forwarding to `tracing` (target `raft`).
fn raft_logger(id: u64) -> slog::Logger {
    slog::Logger::root(crate::rlog::TracingDrain, slog::o!("meta_id" => id))
}

impl RaftLoop {
    pub fn new(
        config: &MetaConfig,
        storage: RocksStorage,
        shared: Arc<Shared>,
        transport: Box<dyn Transport>,
        inbox: Receiver<Input>,
        hints: BTreeMap<u64, String>,
    ) -> Result<Self, MetaError> {
        let raft_config = Config {
            id: config.id,
            election_tick: config.election_tick,
            heartbeat_tick: config.heartbeat_tick,
            applied: storage.applied_index(),
            max_size_per_msg: 1024 * 1024,
            max_inflight_msgs: 256,
            check_quorum: true,
            pre_vote: true,
            ..Default::default()
        };
        raft_config.validate()?;
        let raw = RawNode::new(&raft_config, storage, &raft_logger(config.id))?;
        let mut this = RaftLoop {
            raw,
            shared,
            transport,
            inbox,
            tick: config.tick(),
            snapshot_threshold: config.snapshot_threshold.max(1),
            proposals: BTreeMap::new(),
            reads: HashMap::new(),
            deferred_reads: Vec::new(),
            awaiting_apply: Vec::new(),
            next_read_ctx: 1,
            hints,
            last_led_term: 0,
            last_metrics: (u64::MAX, u64::MAX, u64::MAX, u64::MAX),
        };
        this.update_peers();
        // A group whose only voter is this node (`attest dev`, a one-node meta) needs no election timeout to
        // find that out: campaign now, so it serves writes within a tick of starting instead of 1–2 s later.
        let voters = this.raw.raft.prs().conf().voters().ids();
        if voters.len() == 1 && voters.contains(config.id) {
            this.raw.campaign()?;
        }
        this.publish();
        Ok(this)
    }

    /// Runs until `Input::Shutdown` or until every sender is gone.
    pub fn run(mut self) {
        let mut next_tick = Instant::now() + self.tick;
        'run: loop {
            let wait = next_tick.saturating_duration_since(Instant::now());
            match self.inbox.recv_timeout(wait) {
                Ok(Input::Shutdown) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(input) => {
                    self.handle(input);
                    for _ in 0..1024 {
                        match self.inbox.try_recv() {
                            Ok(Input::Shutdown) => break 'run,
                            Ok(input) => self.handle(input),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() >= next_tick {
                self.raw.tick();
                next_tick = Instant::now() + self.tick;
                self.on_tick();
            }
            // Handling one ready can make another (new commits after persisting): drain them, bounded.
            for _ in 0..8 {
                if !self.raw.has_ready() {
                    break;
                }
                if let Err(e) = self.on_ready() {
                    // A storage failure leaves Raft in an unknown state: stop rather than diverge.
                    tracing::error!(meta_id = self.shared.id, error = %e, "raft loop stopped");
                    break 'run;
                }
            }
            self.publish();
        }
        self.shared.status.write().role = "stopped";
        for (_, p) in std::mem::take(&mut self.proposals) {
            p.reply.fail(MetaError::Shutdown);
        }
    }

    fn is_leader(&self) -> bool {
        self.raw.raft.state == StateRole::Leader
    }

    fn not_leader(&self) -> MetaError {
        MetaError::NotLeader {
            leader_id: self.raw.raft.leader_id,
        }
    }

    fn handle(&mut self, input: Input) {
        match input {
            Input::Propose { cmd, reply } => {
                if !self.is_leader() {
                    drop(reply.send(Err(self.not_leader())));
                    return;
                }
                let before = self.raw.raft.raft_log.last_index();
                let result = self.raw.propose(vec![], cmd.encode());
                metrics::record_proposal(self.shared.id);
                self.track(before, result, Reply::Command(reply));
            }
            Input::ConfChange { change, reply } => {
                if !self.is_leader() {
                    drop(reply.send(Err(self.not_leader())));
                    return;
                }
                let before = self.raw.raft.raft_log.last_index();
                let result = self.raw.propose_conf_change(vec![], change);
                metrics::record_proposal(self.shared.id);
                self.track(before, result, Reply::Conf(reply));
            }
            Input::ReadIndex { reply } => {
                if !self.is_leader() {
                    drop(reply.send(Err(self.not_leader())));
                } else if !self.raw.raft.commit_to_current_term() {
                    self.deferred_reads.push(reply);
                } else {
                    self.issue_read(reply);
                }
            }
            Input::TransferLeader { to } => self.raw.transfer_leader(to),
            Input::Raft(msg) => {
                if let Err(e) = self.raw.step(*msg) {
                    tracing::debug!(meta_id = self.shared.id, error = %e, "raft message not stepped");
                }
            }
            Input::Report(PeerReport::Snapshot { to, ok }) => {
                let status = if ok {
                    SnapshotStatus::Finish
                } else {
                    SnapshotStatus::Failure
                };
                self.raw.report_snapshot(to, status);
            }
            Input::Report(PeerReport::Unreachable { to }) => self.raw.report_unreachable(to),
            Input::PeerHints(hints) => {
                self.hints.extend(hints);
                self.update_peers();
            }
            Input::Shutdown => {}
        }
    }

    /// Remembers a proposal by the index and term of the entry it became.
    fn track(&mut self, before: u64, result: raft::Result<()>, reply: Reply) {
        let index = self.raw.raft.raft_log.last_index();
        match result {
            Ok(()) if index > before => {
                let term = self.raw.raft.term;
                self.proposals.insert(index, Pending { term, reply });
            }
            Ok(()) => reply.fail(MetaError::Dropped("not appended".into())),
            Err(e) => reply.fail(MetaError::Dropped(e.to_string())),
        }
    }

    fn issue_read(&mut self, reply: oneshot::Sender<Result<u64, MetaError>>) {
        let ctx = self.next_read_ctx;
        self.next_read_ctx += 1;
        self.raw.read_index(ctx.to_be_bytes().to_vec());
        self.reads.insert(
            ctx,
            PendingRead {
                reply,
                issued: Instant::now(),
            },
        );
    }

    fn on_tick(&mut self) {
        self.proposals.retain(|_, p| !p.reply.is_closed());
        if !self.is_leader() {
            let err = || MetaError::NotLeader { leader_id: 0 };
            for (_, r) in self.reads.drain() {
                drop(r.reply.send(Err(err())));
            }
            for r in self.deferred_reads.drain(..) {
                drop(r.send(Err(err())));
            }
            for (_, r) in self.awaiting_apply.drain(..) {
                drop(r.send(Err(err())));
            }
            return;
        }
        if self.raw.raft.commit_to_current_term() {
            for reply in std::mem::take(&mut self.deferred_reads) {
                self.issue_read(reply);
            }
        }
        // A read whose heartbeat round was lost is issued again under a fresh context.
        let stale: Vec<u64> = self
            .reads
            .iter()
            .filter(|(_, r)| r.issued.elapsed() > self.tick * 5)
            .map(|(ctx, _)| *ctx)
            .collect();
        for ctx in stale {
            if let Some(r) = self.reads.remove(&ctx) {
                if !r.reply.is_closed() {
                    self.issue_read(r.reply);
                }
            }
        }
    }

    fn send(&self, msgs: Vec<Message>) {
        for m in msgs {
            self.transport.send(m);
        }
    }

    fn on_ready(&mut self) -> Result<(), MetaError> {
        if !self.raw.has_ready() {
            return Ok(());
        }
        let mut ready = self.raw.ready();
        if !ready.messages().is_empty() {
            self.send(ready.take_messages());
        }
        if !ready.snapshot().is_empty() {
            self.install_snapshot(ready.snapshot().clone())?;
        }
        for rs in ready.take_read_states() {
            let ctx = <[u8; 8]>::try_from(rs.request_ctx.as_slice())
                .map(u64::from_be_bytes)
                .unwrap_or(0);
            if let Some(r) = self.reads.remove(&ctx) {
                self.awaiting_apply.push((rs.index, r.reply));
            }
        }
        self.apply(ready.take_committed_entries())?;
        self.raw.store().append(ready.entries(), ready.hs())?;
        if !ready.persisted_messages().is_empty() {
            self.send(ready.take_persisted_messages());
        }
        let mut light = self.raw.advance(ready);
        if let Some(commit) = light.commit_index() {
            self.raw.store().set_commit(commit)?;
        }
        self.send(light.take_messages());
        self.apply(light.take_committed_entries())?;
        self.raw.advance_apply();
        self.maybe_compact()?;
        self.resolve_reads();
        Ok(())
    }

    fn install_snapshot(&mut self, snapshot: Snapshot) -> Result<(), MetaError> {
        let index = snapshot.get_metadata().index;
        let state = self.raw.store().apply_snapshot(snapshot)?;
        {
            // The log restarts at the snapshot: what it replaced is not known change by change. (The state's
            // lock first, then the log's, as everywhere.)
            let mut applied = self.shared.applied.write();
            *applied = Applied { index, state };
            *self.shared.changelog.lock() = crate::watch::ChangeLog::starting_at(index);
        }
        self.shared.versions.send_replace(index);
        self.shared
            .snapshots_installed
            .fetch_add(1, Ordering::Relaxed);
        tracing::info!(meta_id = self.shared.id, index, "installed raft snapshot");
        // Proposals at or below the snapshot can no longer be matched with their result.
        let later = self.proposals.split_off(&(index + 1));
        for (_, p) in std::mem::replace(&mut self.proposals, later) {
            p.reply
                .fail(MetaError::Dropped("superseded by a snapshot".into()));
        }
        self.update_peers();
        Ok(())
    }

    fn apply(&mut self, entries: Vec<Entry>) -> Result<(), MetaError> {
        let Some(last) = entries.last().map(|e| e.index) else {
            return Ok(());
        };
        let mut conf_state = None;
        let shared = self.shared.clone();
        let mut applied = shared.applied.write();
        for entry in &entries {
            let effect = match entry.get_entry_type() {
                _ if entry.data.is_empty() => Effect::Empty,
                EntryType::EntryNormal => Effect::Command(
                    Command::decode(&entry.data)
                        .map_err(MetaError::from)
                        .and_then(|cmd| applied.state.apply(&cmd).map_err(MetaError::from)),
                ),
                EntryType::EntryConfChange => {
                    let result = ConfChange::parse_from_bytes(&entry.data)
                        .map_err(MetaError::from)
                        .and_then(|cc| {
                            let cs = self.raw.apply_conf_change(&cc)?;
                            match cc.get_change_type() {
                                ConfChangeType::RemoveNode => {
                                    applied.state.remove_voter(cc.node_id)
                                }
                                _ => applied.state.add_voter(
                                    cc.node_id,
                                    String::from_utf8_lossy(&cc.context).into_owned(),
                                ),
                            }
                            conf_state = Some(cs);
                            Ok(())
                        });
                    Effect::Conf(result)
                }
                EntryType::EntryConfChangeV2 => {
                    Effect::Conf(Err(MetaError::Dropped("conf change v2 is not used".into())))
                }
            };
            applied.index = entry.index;
            self.resolve(entry.index, entry.term, effect);
        }
        // Only the records these entries touched are written. Readers may see the new state while it is
        // being written; this thread is its only writer, so the shared guard keeps it still.
        let changed = applied.state.take_changes();
        // Recorded before readers see the batch: a delta made from this state must know what it changed.
        self.shared.changelog.lock().record(last, &changed);
        let applied = RwLockWriteGuard::downgrade(applied);
        let written = self.raw.store().persist_applied(
            last,
            &applied.state,
            &changed,
            conf_state.as_ref(),
        )?;
        drop(applied);
        self.shared.versions.send_replace(last);
        metrics::record_apply_bytes(self.shared.id, written.bytes);
        if conf_state.is_some() {
            self.update_peers();
        }
        Ok(())
    }

    /// Answers the proposal that became entry `index`, if this node proposed it.
    fn resolve(&mut self, index: u64, term: u64, effect: Effect) {
        // Anything proposed below this index was overwritten by another leader's entries.
        while let Some(entry) = self.proposals.first_entry() {
            if *entry.key() >= index {
                break;
            }
            entry
                .remove()
                .reply
                .fail(MetaError::Dropped("entry replaced by a new leader".into()));
        }
        let Some(p) = self.proposals.remove(&index) else {
            return;
        };
        if p.term != term {
            p.reply
                .fail(MetaError::Dropped("entry replaced by a new leader".into()));
            return;
        }
        match (p.reply, effect) {
            (Reply::Command(tx), Effect::Command(r)) => drop(tx.send(r)),
            (Reply::Conf(tx), Effect::Conf(r)) => drop(tx.send(r)),
            (reply, _) => reply.fail(MetaError::Dropped(
                "another configuration change is in progress".into(),
            )),
        }
    }

    fn resolve_reads(&mut self) {
        let applied = self.shared.applied.read().index;
        let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.awaiting_apply)
            .into_iter()
            .partition(|(index, _)| *index <= applied);
        self.awaiting_apply = waiting;
        for (index, reply) in ready {
            drop(reply.send(Ok(index)));
        }
    }

    fn maybe_compact(&mut self) -> Result<(), MetaError> {
        let first = raft::Storage::first_index(self.raw.store())?;
        let (index, bytes) = {
            let applied = self.shared.applied.read();
            if applied.index <= first || applied.index - first <= self.snapshot_threshold {
                return Ok(());
            }
            (applied.index, applied.state.encode())
        };
        self.raw.store().compact(index, bytes)?;
        tracing::debug!(meta_id = self.shared.id, index, "raft log compacted");
        Ok(())
    }

    /// Gives the transport the voter addresses (replicated) over the hints (local).
    fn update_peers(&mut self) {
        let mut peers = self.hints.clone();
        peers.extend(self.shared.applied.read().state.voters.clone());
        peers.remove(&self.shared.id);
        self.transport.set_peers(&peers);
    }

    fn publish(&mut self) {
        let raft = &self.raw.raft;
        let role = raft.state;
        let term = raft.term;
        let leader = raft.leader_id;
        let commit = raft.raft_log.committed;
        let mut status = self.shared.status.write();
        if role == StateRole::Leader {
            if self.last_led_term != term {
                self.last_led_term = term;
                self.shared.terms_led.lock().push(term);
                status.leader_since = Some(Instant::now());
            }
            status.matched = raft
                .prs()
                .iter()
                .map(|(id, pr)| (*id, pr.matched))
                .collect();
        } else {
            status.leader_since = None;
            status.matched.clear();
        }
        status.role = role_name(role);
        status.term = term;
        status.leader_id = leader;
        status.commit = commit;
        drop(status);
        let applied = self.shared.applied.read().index;
        if self.last_metrics != (term, leader, commit, applied) {
            let new_term = self.last_metrics.0 != term && term > 0;
            self.last_metrics = (term, leader, commit, applied);
            metrics::record_raft(self.shared.id, term, leader, commit, applied, new_term);
        }
    }
}

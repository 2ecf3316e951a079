//! The history checker of the fault-injection suite (`tests/history.rs`): each document id is a register whose
//! values are unique (every write puts a new marker), and a delete makes it absent. Given every client operation
//! with the times it was invoked and completed (as the client saw them) and its outcome, and the value a reader
//! finds for each id once the cluster is healed, it reports what no order of those operations consistent with
//! real time could produce:
//!
//! - a **lost write**: the id is absent, though a write was acknowledged and no delete that could come after it
//!   (one not finished before that write began) exists;
//! - a **resurrected delete**: the value read was written by a write that completed before an acknowledged
//!   delete began;
//! - a **stale read**: the value read was written by a write that completed before another acknowledged write
//!   began (an older version served after a newer one was acknowledged);
//! - a **phantom**: a value no write could have produced (never written, refused for sure, or torn);
//! - **replicas disagreeing** after catch-up ([`compare_replicas`]), or the router serving something else than
//!   what they agree on ([`compare_reads`]).
//!
//! An operation whose outcome is unknown (a timeout, a 5xx: the router may have written a replica before it
//! failed, and catch-up spreads that) may take effect at any time after it was invoked, so it never completes
//! for the checker: it can explain a value or an absence, and nothing it could have done counts against the
//! cluster. A delete answered 404 (nothing to delete) completed: the id was absent when it took effect.
//! Only definite violations are reported, so the checker does not fail a correct run, whatever the timing.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// Microseconds since the run started, on the test's monotonic clock.
pub type Time = u64;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// An upsert of the document with this (unique) value.
    Write(String),
    Delete,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Acknowledged (a write accepted, a delete that deleted).
    Ok,
    /// A delete answered "no such document": it completed, and the id was absent then.
    NotFound,
    /// Refused for sure: nothing was written (a write the router dropped as a near duplicate, a request that
    /// never reached it). An error answer is not that: a replica may have written before another one failed.
    Failed(String),
    /// Unknown: a timeout, a connection lost, a 5xx. It may have taken effect, at any time after its invocation.
    Unknown(String),
}

#[derive(Debug, Clone)]
pub struct Event {
    pub client: usize,
    pub id: String,
    pub op: Op,
    pub invoke: Time,
    pub complete: Time,
    pub outcome: Outcome,
}

impl Event {
    /// Its effect is certain: it must be placed in any explanation of the final state.
    fn acknowledged(&self) -> bool {
        matches!(self.outcome, Outcome::Ok | Outcome::NotFound)
    }

    /// It may have taken effect.
    fn possible(&self) -> bool {
        !matches!(self.outcome, Outcome::Failed(_))
    }

    /// When its effect is known to have happened: never, for an unknown outcome.
    fn done_by(&self) -> Time {
        match self.outcome {
            Outcome::Unknown(_) => Time::MAX,
            _ => self.complete,
        }
    }

    /// It finished before `other` began (real-time order).
    fn precedes(&self, other: &Event) -> bool {
        self.done_by() < other.invoke
    }
}

impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = match &self.op {
            Op::Write(v) => format!("write {v}"),
            Op::Delete => "delete".to_string(),
        };
        let outcome = match &self.outcome {
            Outcome::Ok => "ok".to_string(),
            Outcome::NotFound => "not-found".to_string(),
            Outcome::Failed(why) => format!("failed ({why})"),
            Outcome::Unknown(why) => format!("unknown ({why})"),
        };
        write!(
            f,
            "[{:>10.3}s .. {:>10.3}s] client {} {} {op} -> {outcome}",
            self.invoke as f64 / 1e6,
            self.complete as f64 / 1e6,
            self.client,
            self.id
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    LostWrite {
        reader: String,
        id: String,
        /// The value of the last acknowledged write.
        acknowledged: String,
    },
    ResurrectedDelete {
        reader: String,
        id: String,
        value: String,
    },
    StaleRead {
        reader: String,
        id: String,
        value: String,
        /// A value acknowledged after `value`'s write completed.
        newer: String,
    },
    Phantom {
        reader: String,
        id: String,
        value: String,
    },
    ReplicasDisagree {
        shard: u32,
        id: String,
        /// (replica, value and version it holds; None: absent).
        replicas: Vec<(String, Option<(String, u64)>)>,
    },
    ReadersDisagree {
        id: String,
        /// (reader, value it found; None: absent).
        readers: Vec<(String, Option<String>)>,
    },
}

impl Anomaly {
    pub fn id(&self) -> &str {
        match self {
            Anomaly::LostWrite { id, .. }
            | Anomaly::ResurrectedDelete { id, .. }
            | Anomaly::StaleRead { id, .. }
            | Anomaly::Phantom { id, .. }
            | Anomaly::ReplicasDisagree { id, .. }
            | Anomaly::ReadersDisagree { id, .. } => id,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Anomaly::LostWrite { .. } => "lost-write",
            Anomaly::ResurrectedDelete { .. } => "resurrected-delete",
            Anomaly::StaleRead { .. } => "stale-read",
            Anomaly::Phantom { .. } => "phantom",
            Anomaly::ReplicasDisagree { .. } => "replicas-disagree",
            Anomaly::ReadersDisagree { .. } => "readers-disagree",
        }
    }
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::LostWrite {
                reader,
                id,
                acknowledged,
            } => write!(
                f,
                "lost write: {reader} finds {id} absent; {acknowledged} was acknowledged and no delete can follow it"
            ),
            Anomaly::ResurrectedDelete { reader, id, value } => write!(
                f,
                "resurrected delete: {reader} finds {id} = {value}, written before an acknowledged delete began"
            ),
            Anomaly::StaleRead {
                reader,
                id,
                value,
                newer,
            } => write!(
                f,
                "stale read: {reader} finds {id} = {value}, though {newer} was acknowledged after that write completed"
            ),
            Anomaly::Phantom { reader, id, value } => write!(
                f,
                "phantom: {reader} finds {id} = {value}, which no write that may have happened wrote"
            ),
            Anomaly::ReplicasDisagree { shard, id, replicas } => {
                write!(f, "replicas of shard {shard} disagree on {id}:")?;
                for (replica, held) in replicas {
                    match held {
                        Some((v, version)) => write!(f, " {replica}={v}@{version}")?,
                        None => write!(f, " {replica}=absent")?,
                    }
                }
                Ok(())
            }
            Anomaly::ReadersDisagree { id, readers } => {
                write!(f, "readers disagree on {id}:")?;
                for (reader, read) in readers {
                    write!(f, " {reader}={}", read.as_deref().unwrap_or("absent"))?;
                }
                Ok(())
            }
        }
    }
}

/// Checks what `reader` found (`id` → value, None: absent; every id of the history must be there, and ids no
/// operation touched may be) against the history.
pub fn check(
    history: &[Event],
    finals: &BTreeMap<String, Option<String>>,
    reader: &str,
) -> Vec<Anomaly> {
    let mut by_id: BTreeMap<&str, Vec<&Event>> = BTreeMap::new();
    for e in history {
        by_id.entry(e.id.as_str()).or_default().push(e);
    }
    let mut anomalies = Vec::new();
    for (id, read) in finals {
        let events = by_id.get(id.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        if let Some(a) = check_one(id, events, read.as_deref(), reader) {
            anomalies.push(a);
        }
    }
    for id in by_id.keys() {
        assert!(
            finals.contains_key(*id),
            "the checker got no final read of {id} from {reader}"
        );
    }
    anomalies
}

fn check_one(id: &str, events: &[&Event], read: Option<&str>, reader: &str) -> Option<Anomaly> {
    let acked_writes = || {
        events
            .iter()
            .filter(|e| matches!(e.op, Op::Write(_)) && e.acknowledged())
    };
    let value_of = |e: &Event| match &e.op {
        Op::Write(v) => v.clone(),
        Op::Delete => "absent".to_string(),
    };
    match read {
        Some(value) => {
            let write = events
                .iter()
                .find(|e| e.op == Op::Write(value.to_string()) && e.possible());
            let Some(write) = write else {
                return Some(Anomaly::Phantom {
                    reader: reader.into(),
                    id: id.into(),
                    value: value.into(),
                });
            };
            // The acknowledged operation that began last after this write completed, if any: it took effect
            // after this write did, so the value cannot be the final one.
            let later = events
                .iter()
                .filter(|e| e.acknowledged() && write.precedes(e))
                .max_by_key(|e| (e.invoke, e.complete))?;
            Some(match later.op {
                Op::Write(_) => Anomaly::StaleRead {
                    reader: reader.into(),
                    id: id.into(),
                    value: value.into(),
                    newer: value_of(later),
                },
                Op::Delete => Anomaly::ResurrectedDelete {
                    reader: reader.into(),
                    id: id.into(),
                    value: value.into(),
                },
            })
        }
        None => {
            // Absent: the initial state, if nothing was acknowledged as written; or a delete that may have
            // happened with no acknowledged write beginning after it finished.
            let last_acked_begin = acked_writes().map(|w| w.invoke).max()?;
            let explained = events
                .iter()
                .any(|e| e.op == Op::Delete && e.possible() && e.done_by() >= last_acked_begin);
            if explained {
                return None;
            }
            let last = acked_writes().max_by_key(|w| (w.complete, w.invoke))?;
            Some(Anomaly::LostWrite {
                reader: reader.into(),
                id: id.into(),
                acknowledged: value_of(last),
            })
        }
    }
}

/// What one replica holds: id → (value, version) of each live document.
pub type ReplicaState = BTreeMap<String, (String, u64)>;

/// Every id on which the replicas of `shard` (named) do not hold the same live value at the same version.
pub fn compare_replicas(shard: u32, replicas: &[(String, ReplicaState)]) -> Vec<Anomaly> {
    let ids: BTreeSet<&String> = replicas.iter().flat_map(|(_, s)| s.keys()).collect();
    let mut out = Vec::new();
    for id in ids {
        let held: Vec<(String, Option<(String, u64)>)> = replicas
            .iter()
            .map(|(name, s)| (name.clone(), s.get(id).cloned()))
            .collect();
        if held.iter().any(|(_, h)| *h != held[0].1) {
            out.push(Anomaly::ReplicasDisagree {
                shard,
                id: id.clone(),
                replicas: held,
            });
        }
    }
    out
}

/// Every id on which two readers of the same settled state (the router, and the replicas once they agree) find
/// different values: a read path that serves something else than what is stored.
pub fn compare_reads(
    a: (&str, &BTreeMap<String, Option<String>>),
    b: (&str, &BTreeMap<String, Option<String>>),
) -> Vec<Anomaly> {
    let ids: BTreeSet<&String> = a.1.keys().chain(b.1.keys()).collect();
    ids.into_iter()
        .filter_map(|id| {
            let (x, y) = (
                a.1.get(id).cloned().flatten(),
                b.1.get(id).cloned().flatten(),
            );
            (x != y).then(|| Anomaly::ReadersDisagree {
                id: id.clone(),
                readers: vec![(a.0.to_string(), x), (b.0.to_string(), y)],
            })
        })
        .collect()
}

/// The operations on the anomaly's id that explain it, in invocation order, one per line: from a little before
/// the first write of a value it names (or the last 20) on, at most 40 lines.
pub fn excerpt(history: &[Event], anomaly: &Anomaly) -> String {
    let mut events: Vec<&Event> = history.iter().filter(|e| e.id == anomaly.id()).collect();
    events.sort_by_key(|e| (e.invoke, e.complete));
    let named: Vec<&str> = match anomaly {
        Anomaly::LostWrite { acknowledged, .. } => vec![acknowledged],
        Anomaly::ResurrectedDelete { value, .. } | Anomaly::Phantom { value, .. } => vec![value],
        Anomaly::StaleRead { value, newer, .. } => vec![value, newer],
        Anomaly::ReplicasDisagree { replicas, .. } => replicas
            .iter()
            .filter_map(|(_, h)| h.as_ref().map(|(v, _)| v.as_str()))
            .collect(),
        Anomaly::ReadersDisagree { readers, .. } => {
            readers.iter().filter_map(|(_, r)| r.as_deref()).collect()
        }
    };
    let first = events
        .iter()
        .position(|e| matches!(&e.op, Op::Write(v) if named.contains(&v.as_str())));
    let start = match first {
        Some(i) => i.saturating_sub(3),
        None => events.len().saturating_sub(20),
    };
    let shown = &events[start..events.len().min(start + 40)];
    let mut out = String::new();
    if start > 0 {
        out.push_str(&format!("  ... {start} earlier operations\n"));
    }
    for e in shown {
        out.push_str(&format!("  {e}\n"));
    }
    let after = events.len() - start - shown.len();
    if after > 0 {
        out.push_str(&format!(
            "  ... {after} later operations (history.txt has them all)\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(client: usize, op: Op, invoke: Time, complete: Time, outcome: Outcome) -> Event {
        Event {
            client,
            id: "a".into(),
            op,
            invoke,
            complete,
            outcome,
        }
    }
    fn w(v: &str) -> Op {
        Op::Write(v.into())
    }
    fn unknown() -> Outcome {
        Outcome::Unknown("timeout".into())
    }
    fn read(v: Option<&str>) -> BTreeMap<String, Option<String>> {
        BTreeMap::from([("a".to_string(), v.map(str::to_string))])
    }
    fn kinds(history: &[Event], v: Option<&str>) -> Vec<&'static str> {
        check(history, &read(v), "test")
            .iter()
            .map(Anomaly::kind)
            .collect()
    }

    #[test]
    fn a_clean_history_with_concurrency_and_unknown_outcomes_passes() {
        let history = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            // Concurrent writes: either may win.
            ev(0, w("2"), 20, 40, Outcome::Ok),
            ev(1, w("3"), 25, 35, Outcome::Ok),
            // Refused for sure, and an unknown one that may land at any time.
            ev(2, w("4"), 50, 60, Outcome::Failed("400".into())),
            ev(1, w("5"), 50, 55, unknown()),
        ];
        assert!(kinds(&history, Some("2")).is_empty());
        assert!(kinds(&history, Some("3")).is_empty());
        assert!(
            kinds(&history, Some("5")).is_empty(),
            "the unknown write may land last"
        );
        let mut deleted = history.clone();
        deleted.push(ev(3, Op::Delete, 70, 80, Outcome::Ok));
        assert!(kinds(&deleted, None).is_empty());
        // A write begun before the delete completed may still come after it.
        deleted.push(ev(0, w("6"), 75, 90, Outcome::Ok));
        assert!(kinds(&deleted, Some("6")).is_empty());
        assert!(kinds(&deleted, None).is_empty());
        // Nothing acknowledged: absent is the initial state; an id never touched may be absent.
        let only_unknown = vec![ev(0, w("1"), 0, 10, unknown())];
        assert!(kinds(&only_unknown, None).is_empty());
        assert!(kinds(&[], None).is_empty());
        // A delete answered "not found" completed: the id was absent when it took effect.
        let not_found = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, Op::Delete, 20, 30, Outcome::NotFound),
        ];
        assert!(kinds(&not_found, None).is_empty());
    }

    #[test]
    fn a_lost_write_is_detected() {
        let history = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, Op::Delete, 20, 30, Outcome::Ok),
            ev(0, w("2"), 40, 50, Outcome::Ok),
        ];
        let found = check(&history, &read(None), "router");
        let shown = excerpt(&history, &found[0]);
        assert!(shown.contains("write 2 -> ok"), "{shown}");
        assert_eq!(
            found,
            vec![Anomaly::LostWrite {
                reader: "router".into(),
                id: "a".into(),
                acknowledged: "2".into()
            }]
        );
        // A delete that failed for sure explains nothing.
        let mut failed_delete = history.clone();
        failed_delete.push(ev(1, Op::Delete, 60, 70, Outcome::Failed("400".into())));
        assert_eq!(kinds(&failed_delete, None), ["lost-write"]);
        // A delete whose outcome is unknown may have landed after the write: absence explained.
        let mut unknown_delete = history;
        unknown_delete.push(ev(1, Op::Delete, 5, 8, unknown()));
        assert!(kinds(&unknown_delete, None).is_empty());
    }

    #[test]
    fn a_resurrected_delete_is_detected() {
        let history = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, Op::Delete, 20, 30, Outcome::Ok),
        ];
        assert_eq!(kinds(&history, Some("1")), ["resurrected-delete"]);
        // A delete answered "not found" after the write completed also means the write is gone.
        let not_found = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, Op::Delete, 20, 30, Outcome::NotFound),
        ];
        assert_eq!(kinds(&not_found, Some("1")), ["resurrected-delete"]);
        // Concurrent with the delete, the write may come last.
        let concurrent = vec![
            ev(0, w("1"), 0, 25, Outcome::Ok),
            ev(1, Op::Delete, 20, 30, Outcome::Ok),
        ];
        assert!(kinds(&concurrent, Some("1")).is_empty());
    }

    #[test]
    fn a_stale_read_is_detected() {
        let history = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, w("2"), 20, 30, Outcome::Ok),
        ];
        let found = check(&history, &read(Some("1")), "shard 0 on node 2");
        assert_eq!(
            found,
            vec![Anomaly::StaleRead {
                reader: "shard 0 on node 2".into(),
                id: "a".into(),
                value: "1".into(),
                newer: "2".into()
            }]
        );
        // The older write's outcome unknown: it may have landed last.
        let unknown_old = vec![
            ev(0, w("1"), 0, 10, unknown()),
            ev(1, w("2"), 20, 30, Outcome::Ok),
        ];
        assert!(kinds(&unknown_old, Some("1")).is_empty());
        // A newer write that failed for sure supersedes nothing.
        let failed_new = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, w("2"), 20, 30, Outcome::Failed("duplicate".into())),
        ];
        assert!(kinds(&failed_new, Some("1")).is_empty());
    }

    #[test]
    fn a_value_nobody_wrote_is_a_phantom() {
        let history = vec![
            ev(0, w("1"), 0, 10, Outcome::Ok),
            ev(1, w("2"), 20, 30, Outcome::Failed("400".into())),
        ];
        assert_eq!(kinds(&history, Some("9")), ["phantom"]);
        assert_eq!(kinds(&history, Some("2")), ["phantom"]);
        assert_eq!(kinds(&[], Some("1")), ["phantom"]);
    }

    #[test]
    fn replicas_that_disagree_are_detected() {
        let a: ReplicaState = BTreeMap::from([
            ("x".to_string(), ("1".to_string(), 7)),
            ("y".to_string(), ("2".to_string(), 9)),
        ]);
        assert!(
            compare_replicas(0, &[("n1".into(), a.clone()), ("n2".into(), a.clone())]).is_empty()
        );
        let mut b = a.clone();
        b.remove("x");
        b.insert("y".into(), ("3".into(), 11));
        let found = compare_replicas(2, &[("n1".into(), a), ("n2".into(), b)]);
        let ids: Vec<&str> = found.iter().map(Anomaly::id).collect();
        assert_eq!(ids, ["x", "y"]);
        assert!(found.iter().all(|a| a.kind() == "replicas-disagree"));
        assert!(found[0].to_string().contains("n2=absent"), "{}", found[0]);
    }

    #[test]
    fn a_router_serving_what_the_replicas_do_not_hold_is_detected() {
        let replicas = BTreeMap::from([
            ("x".to_string(), Some("1".to_string())),
            ("y".to_string(), None),
        ]);
        assert!(compare_reads(("router", &replicas), ("replicas", &replicas)).is_empty());
        let router = BTreeMap::from([
            ("x".to_string(), Some("0".to_string())),
            ("y".to_string(), None),
        ]);
        let found = compare_reads(("router", &router), ("replicas", &replicas));
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].id(), found[0].kind()), ("x", "readers-disagree"));
    }
}

//! Collection aliases and the switch of a collection's name to a copy: what re-embedding a collection online
//! rests on.
//!
//! A re-embedding of collection `docs` builds a copy, an ordinary collection record stored under
//! `docs~<tag>` (`attest_core::limits::stored_collection_name`) with a placement of its own. When the copy is
//! complete, [`Command::SwitchCollection`](crate::state::Command::SwitchCollection) points the name `docs` at
//! it (the alias `docs → docs~<tag>`) and drops the collection the name resolved to, in one command: a reader
//! of the cluster state sees the old collection or the new one under `docs`, never neither.
//!
//! What holds after every command, so that a copy can always be told apart and is never left behind:
//! - a name is an alias or a collection record, never both (create refuses an alias's name);
//! - an alias `name → stored` always has `stored` = `name~tag`, an existing record (the switch sets only
//!   such aliases, the record is dropped only with its name, and a drop by its stored name is refused);
//! - a record `name~tag` exists only while `name` does (as a record or an alias): create refuses an orphan
//!   copy, and dropping `name` drops its copies.
//!
//! So a record `name~tag` that no alias names is the copy a re-embedding of `name` is building.

use attest_core::limits::{owner_of_stored_name, STORED_NAME_SEPARATOR};

use crate::error::StateError;
use crate::records::RecordKey;
use crate::state::{validate_collection_name, CollectionRecord, StateMachine};

impl StateMachine {
    /// The stored name `name` resolves to: the alias's target when `name` is an alias, else `name` itself.
    pub fn resolve_collection<'a>(&'a self, name: &'a str) -> &'a str {
        self.aliases.get(name).map_or(name, String::as_str)
    }

    /// What a new collection record's name must satisfy besides being free as a record: it is no alias, and a
    /// copy's `name~tag` belongs to a collection that exists.
    pub(crate) fn check_new_stored_name(&self, stored: &str) -> Result<(), StateError> {
        if let Some(target) = self.aliases.get(stored) {
            return Err(StateError::AlreadyExists(format!(
                "collection {stored:?} (it resolves to {target:?})"
            )));
        }
        let owner = owner_of_stored_name(stored);
        if owner != stored
            && !self.collections.contains_key(owner)
            && !self.aliases.contains_key(owner)
        {
            return Err(StateError::FailedPrecondition(format!(
                "collection {owner:?} does not exist"
            )));
        }
        Ok(())
    }

    /// Drops a collection; returns whether anything existed.
    ///
    /// - A collection's name (`docs`, an alias or a record): the record it resolves to, the alias, and every
    ///   copy `docs~*` being built — nothing of `docs` remains.
    /// - A stored name `docs~tag`: that record alone (an abandoned copy). It is refused when it is what `docs`
    ///   resolves to: a re-embedding that lost the answer to its switch drops its copy by this name, and must
    ///   not drop the collection the copy became.
    pub(crate) fn drop_collection(&mut self, name: &str) -> Result<bool, StateError> {
        let owner = owner_of_stored_name(name).to_string();
        if owner != name {
            if self.aliases.get(&owner).is_some_and(|t| t == name) {
                return Err(StateError::FailedPrecondition(format!(
                    "{name:?} is what collection {owner:?} resolves to; drop {owner:?}"
                )));
            }
            return Ok(self.remove_collection_record(name));
        }
        let mut gone: Vec<String> = self
            .collections
            .keys()
            .filter(|stored| owner_of_stored_name(stored) == owner)
            .cloned()
            .collect();
        // An alias always names a copy of its own name (listed above); its target is named too, so that a
        // drop of the name removes what it resolves to whatever that is.
        gone.extend(self.aliases.get(&owner).cloned());
        let mut dropped = self.remove_alias(&owner);
        for stored in gone {
            dropped |= self.remove_collection_record(&stored);
        }
        Ok(dropped)
    }

    /// Points `name` at its copy `to` and drops the collection `name` resolved to (see the module header):
    /// the copy keeps its placement and takes the old collection's thresholds. Returns the copy's record.
    pub(crate) fn switch_collection(
        &mut self,
        name: &str,
        to: &str,
    ) -> Result<CollectionRecord, StateError> {
        if let Some(problem) = attest_core::limits::collection_name_problem(name) {
            return Err(StateError::InvalidArgument(format!(
                "collection name {name:?}: {problem}"
            )));
        }
        validate_collection_name(to)?;
        if !to.contains(STORED_NAME_SEPARATOR) || owner_of_stored_name(to) != name {
            return Err(StateError::InvalidArgument(format!(
                "{to:?} is not a copy of collection {name:?} ({name}{STORED_NAME_SEPARATOR}tag)"
            )));
        }
        let old = self.resolve_collection(name).to_string();
        let thresholds_json = self
            .collections
            .get(&old)
            .ok_or_else(|| StateError::NotFound(format!("collection {name:?}")))?
            .thresholds_json
            .clone();
        if old == to {
            // A retry of a switch that was applied (its answer lost): the same outcome, nothing changed.
            return Ok(self.collections[to].clone());
        }
        let copy = self.collections.get_mut(to).ok_or_else(|| {
            StateError::FailedPrecondition(format!("collection {to:?} does not exist"))
        })?;
        copy.thresholds_json = thresholds_json;
        let record = copy.clone();
        self.changes.insert(RecordKey::Collection(to.to_string()));
        self.aliases.insert(name.to_string(), to.to_string());
        self.changes.insert(RecordKey::Alias(name.to_string()));
        self.remove_collection_record(&old);
        Ok(record)
    }

    /// Removes one collection record and its manifests, marking them; returns whether the record existed.
    /// An alias that pointed at it goes too (an alias always names an existing record).
    fn remove_collection_record(&mut self, stored: &str) -> bool {
        let existed = self.collections.remove(stored).is_some();
        if existed {
            self.changes
                .insert(RecordKey::Collection(stored.to_string()));
        }
        let owner = owner_of_stored_name(stored).to_string();
        if self.aliases.get(&owner).is_some_and(|t| t == stored) {
            self.remove_alias(&owner);
        }
        self.remove_manifests(|(c, _, _)| c == stored);
        existed
    }

    fn remove_alias(&mut self, name: &str) -> bool {
        let existed = self.aliases.remove(name).is_some();
        if existed {
            self.changes.insert(RecordKey::Alias(name.to_string()));
        }
        existed
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::state::{CollectionDef, Command, ManifestRecord, NodeRole, Output};

    const THRESHOLDS: &str = r#"{"min_score":0.5}"#;

    /// Three shard nodes, `docs` (2 shards, thresholds set) with a manifest, and nothing else.
    fn cluster() -> StateMachine {
        let mut s = StateMachine::default();
        for n in ["a", "b", "c"] {
            s.apply(&Command::RegisterNode {
                name: n.into(),
                address: format!("http://{n}"),
                role: NodeRole::Shard,
                zone: String::new(),
            })
            .unwrap();
        }
        create(&mut s, "docs").unwrap();
        s.apply(&Command::SetThresholds {
            collection: "docs".into(),
            thresholds_json: THRESHOLDS.into(),
        })
        .unwrap();
        report(&mut s, "docs");
        s.take_changes();
        s
    }

    fn create(s: &mut StateMachine, name: &str) -> Result<CollectionRecord, StateError> {
        let out = s.apply(&Command::CreateCollection {
            def: CollectionDef {
                name: name.into(),
                shards: 2,
                replication: 2,
                spec: None,
                chunking_json: String::new(),
                thresholds_json: String::new(),
            },
            live_nodes: vec![1, 2, 3],
            created_ms: 1,
        })?;
        match out {
            Output::Collection(c) => Ok(c),
            other => panic!("{other:?}"),
        }
    }

    /// A manifest of shard 0 of `collection` on node 1.
    fn report(s: &mut StateMachine, collection: &str) {
        s.apply(&Command::ReportManifests {
            manifests: vec![ManifestRecord {
                collection: collection.into(),
                shard: 0,
                node_id: 1,
                segments: vec!["seg-1".into()],
                live_documents: 3,
            }],
        })
        .unwrap();
    }

    fn switch(s: &mut StateMachine, name: &str, to: &str) -> Result<CollectionRecord, StateError> {
        match s.apply(&Command::SwitchCollection {
            name: name.into(),
            to: to.into(),
        })? {
            Output::Collection(c) => Ok(c),
            other => panic!("{other:?}"),
        }
    }

    fn drop_collection(s: &mut StateMachine, name: &str) -> bool {
        match s.apply(&Command::DropCollection { name: name.into() }) {
            Ok(Output::Dropped(dropped)) => dropped,
            other => panic!("{other:?}"),
        }
    }

    fn names(s: &StateMachine) -> Vec<&str> {
        s.collections.keys().map(String::as_str).collect()
    }

    fn manifest_collections(s: &StateMachine) -> BTreeSet<&str> {
        s.manifests.keys().map(|(c, _, _)| c.as_str()).collect()
    }

    #[test]
    fn a_switch_moves_the_name_to_the_copy_and_drops_the_old_collection() {
        let mut s = cluster();
        let copy = create(&mut s, "docs~r1").unwrap();
        report(&mut s, "docs~r1");
        s.take_changes();

        let switched = switch(&mut s, "docs", "docs~r1").unwrap();
        assert_eq!(switched.name, "docs~r1");
        assert_eq!(
            switched.placement, copy.placement,
            "the copy keeps its placement"
        );
        assert_eq!(
            switched.thresholds_json, THRESHOLDS,
            "and takes the thresholds"
        );
        assert_eq!(s.collections["docs~r1"], switched);
        assert_eq!(names(&s), ["docs~r1"]);
        assert_eq!(s.aliases["docs"], "docs~r1");
        assert_eq!(s.resolve_collection("docs"), "docs~r1");
        assert_eq!(manifest_collections(&s), BTreeSet::from(["docs~r1"]));
        assert_eq!(
            s.take_changes(),
            BTreeSet::from([
                RecordKey::Collection("docs".into()),
                RecordKey::Collection("docs~r1".into()),
                RecordKey::Alias("docs".into()),
                RecordKey::Manifest("docs".into(), 0, 1),
            ])
        );
        // The name still refers to the collection: thresholds set through it land on the copy.
        s.apply(&Command::SetThresholds {
            collection: "docs".into(),
            thresholds_json: "{}".into(),
        })
        .unwrap();
        assert_eq!(s.collections["docs~r1"].thresholds_json, "{}");
    }

    #[test]
    fn a_second_switch_moves_the_alias_and_drops_the_first_copy() {
        let mut s = cluster();
        create(&mut s, "docs~r1").unwrap();
        switch(&mut s, "docs", "docs~r1").unwrap();
        report(&mut s, "docs~r1");
        // A copy of a name that is an alias is a copy of the collection it resolves to.
        create(&mut s, "docs~r2").unwrap();
        s.take_changes();

        let switched = switch(&mut s, "docs", "docs~r2").unwrap();
        assert_eq!(switched.thresholds_json, THRESHOLDS);
        assert_eq!(names(&s), ["docs~r2"]);
        assert_eq!(s.aliases["docs"], "docs~r2");
        assert!(
            s.manifests.is_empty(),
            "the first copy's manifests went with it"
        );
        assert_eq!(
            s.take_changes(),
            BTreeSet::from([
                RecordKey::Collection("docs~r1".into()),
                RecordKey::Collection("docs~r2".into()),
                RecordKey::Alias("docs".into()),
                RecordKey::Manifest("docs~r1".into(), 0, 1),
            ])
        );
    }

    #[test]
    fn a_switch_refuses_what_is_not_a_copy_of_the_name() {
        let mut s = cluster();
        create(&mut s, "docs~r1").unwrap();
        create(&mut s, "other").unwrap();
        create(&mut s, "other~r1").unwrap();
        s.take_changes();
        let before = s.clone();
        let refusals = [
            ("nope", "nope~r1", "unknown name"),
            ("docs", "docs~r9", "no such copy"),
            ("docs", "other~r1", "another collection's copy"),
            ("docs", "other", "not a copy"),
            (
                "docs~r1",
                "docs~r1",
                "a stored name is not a collection's name",
            ),
            ("docs", "docs~R1", "not a stored name"),
        ];
        for (name, to, why) in refusals {
            let err = switch(&mut s, name, to).unwrap_err();
            let expected = match why {
                "unknown name" => matches!(err, StateError::NotFound(_)),
                "no such copy" => matches!(err, StateError::FailedPrecondition(_)),
                _ => matches!(err, StateError::InvalidArgument(_)),
            };
            assert!(expected, "{why}: {err:?}");
            assert_eq!(s, before, "{why}: a refused switch changes nothing");
            assert!(s.take_changes().is_empty(), "{why}");
        }
        switch(&mut s, "docs", "docs~r1").unwrap();
        let switched = s.clone();
        s.take_changes();
        assert_eq!(
            switch(&mut s, "docs", "docs~r1").unwrap().name,
            "docs~r1",
            "a retried switch answers as the first did"
        );
        assert_eq!(
            s, switched,
            "switching again to the same copy changes nothing"
        );
        assert!(s.take_changes().is_empty());
    }

    #[test]
    fn create_refuses_an_alias_name_and_an_orphan_copy() {
        let mut s = cluster();
        create(&mut s, "docs~r1").unwrap();
        switch(&mut s, "docs", "docs~r1").unwrap();
        s.take_changes();
        let before = s.clone();
        assert!(matches!(
            create(&mut s, "docs"),
            Err(StateError::AlreadyExists(_))
        ));
        assert!(matches!(
            create(&mut s, "docs~r1"),
            Err(StateError::AlreadyExists(_))
        ));
        assert!(matches!(
            create(&mut s, "nope~r1"),
            Err(StateError::FailedPrecondition(_))
        ));
        assert!(matches!(
            create(&mut s, "docs~"),
            Err(StateError::InvalidArgument(_))
        ));
        assert_eq!(s, before);
        // The same rules hold for a placed create.
        let placement = before.collections["docs~r1"].placement.clone();
        let placed = |name: &str| Command::CreateCollectionPlaced {
            def: CollectionDef {
                name: name.into(),
                shards: 2,
                replication: 2,
                spec: None,
                chunking_json: String::new(),
                thresholds_json: String::new(),
            },
            placement: placement.clone(),
            created_ms: 1,
        };
        assert!(matches!(
            s.apply(&placed("docs")),
            Err(StateError::AlreadyExists(_))
        ));
        assert!(matches!(
            s.apply(&placed("nope~r1")),
            Err(StateError::FailedPrecondition(_))
        ));
        assert!(s.apply(&placed("docs~r2")).is_ok());
    }

    #[test]
    fn dropping_the_name_drops_the_alias_its_collection_and_copies() {
        let mut s = cluster();
        create(&mut s, "docs~r1").unwrap();
        switch(&mut s, "docs", "docs~r1").unwrap();
        create(&mut s, "docs~r2").unwrap();
        create(&mut s, "docs_v2").unwrap();
        report(&mut s, "docs~r1");
        report(&mut s, "docs~r2");
        report(&mut s, "docs_v2");
        s.take_changes();

        assert!(drop_collection(&mut s, "docs"));
        assert_eq!(names(&s), ["docs_v2"], "another collection is left alone");
        assert!(s.aliases.is_empty());
        assert_eq!(manifest_collections(&s), BTreeSet::from(["docs_v2"]));
        assert_eq!(
            s.take_changes(),
            BTreeSet::from([
                RecordKey::Collection("docs~r1".into()),
                RecordKey::Collection("docs~r2".into()),
                RecordKey::Alias("docs".into()),
                RecordKey::Manifest("docs~r1".into(), 0, 1),
                RecordKey::Manifest("docs~r2".into(), 0, 1),
            ])
        );
        assert!(!drop_collection(&mut s, "docs"), "nothing left to drop");
        // The name is free again, for a collection that has no copy.
        create(&mut s, "docs").unwrap();

        // Without an alias, a collection's copies go with it as well.
        create(&mut s, "docs~r3").unwrap();
        assert!(drop_collection(&mut s, "docs"));
        assert_eq!(names(&s), ["docs_v2"]);
    }

    #[test]
    fn dropping_a_copy_leaves_the_collection() {
        let mut s = cluster();
        create(&mut s, "docs~r1").unwrap();
        report(&mut s, "docs~r1");
        s.take_changes();
        assert!(drop_collection(&mut s, "docs~r1"));
        assert_eq!(names(&s), ["docs"]);
        assert_eq!(manifest_collections(&s), BTreeSet::from(["docs"]));
        assert_eq!(
            s.take_changes(),
            BTreeSet::from([
                RecordKey::Collection("docs~r1".into()),
                RecordKey::Manifest("docs~r1".into(), 0, 1),
            ])
        );
        assert!(!drop_collection(&mut s, "docs~r1"));

        // Also when the name is an alias of another copy.
        create(&mut s, "docs~r1").unwrap();
        switch(&mut s, "docs", "docs~r1").unwrap();
        create(&mut s, "docs~r2").unwrap();
        assert!(drop_collection(&mut s, "docs~r2"));
        assert_eq!(names(&s), ["docs~r1"]);
        assert_eq!(s.aliases["docs"], "docs~r1");
    }

    #[test]
    fn what_the_name_resolves_to_is_not_dropped_by_its_stored_name() {
        let mut s = cluster();
        create(&mut s, "docs~r1").unwrap();
        switch(&mut s, "docs", "docs~r1").unwrap();
        s.take_changes();
        let before = s.clone();
        assert!(matches!(
            s.apply(&Command::DropCollection {
                name: "docs~r1".into()
            }),
            Err(StateError::FailedPrecondition(_))
        ));
        assert_eq!(s, before, "the collection the copy became stays");
        assert!(s.take_changes().is_empty());
    }
}

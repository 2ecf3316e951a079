//! Step 7 of SPEC "answer", the cut after reranking: keep the top `passages` (16–20) by rank — there is no
//! absolute score cutoff, rerank scores are not comparable across questions — then add per-kind reserves, so a
//! reranker that favours one kind of text (chatty prose over terse entries) cannot starve the answer of another:
//! at least `per_kind` of each reserved kind survive when the pool has them. Forced passages (structural lookup,
//! curated pins) always survive.

/// What the cut needs to know about one ranked candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item<'a> {
    pub kind: Option<&'a str>,
    pub forced: bool,
}

/// Indices into `ranked` (best first) of the candidates kept, in rank order: every forced one, the best ones up
/// to `passages` in all, then the best not yet kept of each kind in `reserve_kinds` until it has `per_kind`.
pub fn select(
    ranked: &[Item<'_>],
    passages: usize,
    reserve_kinds: &[String],
    per_kind: usize,
) -> Vec<usize> {
    let mut kept = vec![false; ranked.len()];
    let mut count = 0;
    for (i, item) in ranked.iter().enumerate() {
        if item.forced {
            kept[i] = true;
            count += 1;
        }
    }
    for slot in kept.iter_mut() {
        if count >= passages {
            break;
        }
        if !*slot {
            *slot = true;
            count += 1;
        }
    }
    for kind in reserve_kinds {
        let of_kind = |i: usize| ranked[i].kind == Some(kind.as_str());
        let mut have = (0..ranked.len()).filter(|&i| kept[i] && of_kind(i)).count();
        for (i, slot) in kept.iter_mut().enumerate() {
            if have >= per_kind {
                break;
            }
            if !*slot && of_kind(i) {
                *slot = true;
                have += 1;
            }
        }
    }
    (0..ranked.len()).filter(|&i| kept[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn item(kind: Option<&str>, forced: bool) -> Item<'_> {
        Item { kind, forced }
    }

    #[test]
    fn top_then_reserves_then_forced() {
        let ranked = vec![
            item(Some("prose"), false),
            item(Some("prose"), false),
            item(Some("prose"), false),
            item(Some("verse"), false),
            item(None, true),
            item(Some("verse"), false),
            item(Some("verse"), false),
        ];
        let verse = vec!["verse".to_string()];
        assert_eq!(select(&ranked, 3, &[], 2), vec![0, 1, 4]);
        assert_eq!(select(&ranked, 3, &verse, 2), vec![0, 1, 3, 4, 5]);
        // A kind the pool lacks reserves nothing; a reserve already met adds nothing.
        assert_eq!(
            select(&ranked, 5, &["glossary".into()], 2),
            vec![0, 1, 2, 3, 4]
        );
        assert_eq!(select(&ranked, 5, &verse, 1), vec![0, 1, 2, 3, 4]);
        assert!(select(&[], 16, &verse, 2).is_empty());
    }

    const KINDS: &[&str] = &["a", "b", "c"];

    proptest! {
        #[test]
        fn the_cut_keeps_what_it_promises(
            raw in prop::collection::vec((0usize..4, prop::bool::weighted(0.1)), 0..60),
            passages in 0usize..20,
            per_kind in 0usize..4,
            reserve in prop::collection::vec(0usize..3, 0..3),
        ) {
            let ranked: Vec<Item> = raw
                .iter()
                .map(|&(k, forced)| Item { kind: KINDS.get(k).copied(), forced })
                .collect();
            let kinds: Vec<String> = reserve.iter().map(|&k| KINDS[k].to_string()).collect();
            let kept = select(&ranked, passages, &kinds, per_kind);
            // Rank order, no repeats.
            prop_assert!(kept.windows(2).all(|w| w[0] < w[1]));
            // Every forced candidate.
            let forced = ranked.iter().filter(|i| i.forced).count();
            for (i, item) in ranked.iter().enumerate() {
                if item.forced {
                    prop_assert!(kept.contains(&i));
                }
            }
            // The best ones: the first `passages - forced` by rank are always kept.
            for i in 0..passages.saturating_sub(forced).min(ranked.len()) {
                prop_assert!(kept.contains(&i));
            }
            // At least `passages` when the pool has them; the reserves add at most per_kind each.
            prop_assert!(kept.len() >= passages.min(ranked.len()));
            let mut distinct = kinds.clone();
            distinct.sort();
            distinct.dedup();
            prop_assert!(kept.len() <= passages.max(forced) + per_kind * distinct.len());
            // Each reserved kind has min(per_kind, available).
            for kind in &kinds {
                let available = ranked.iter().filter(|i| i.kind == Some(kind.as_str())).count();
                let have = kept.iter().filter(|&&i| ranked[i].kind == Some(kind.as_str())).count();
                prop_assert!(have >= per_kind.min(available));
            }
        }
    }
}

//! Footnotes minted per turn: the passages of one answer are numbered `1..=n` in the order the model sees them.
//! The model's context holds only these numbers and the passage text; the mapping back to chunk and document
//! ids stays here, so an id can never be invented by the model, only a number, and numbers are checked.

use std::collections::HashSet;

use attest_proto::v1 as pb;

/// What the reader made of one sentence of a passage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SentenceRead {
    /// Does it answer the question: the readers' probabilities combined by `reader.ensemble_rule`.
    pub answerability: f64,
    /// The `;` part of the sentence ([`attest_text::text::semicolon_parts`]) where the main reader's best answer span
    /// starts: the part the composer quotes.
    pub answer_part: usize,
    /// What `answerability` was made of, so that other bars and rules can be tried on the same reading
    /// (`attest-lab replay`); all zero for a sentence not read.
    pub readings: Readings,
}

/// The readers' answerability of one sentence, before `reader.ensemble_rule` and `reader.overrule_bar` are
/// applied ([`crate::reader::ReaderConfig::answerability`] applies them): every combination the settings can ask
/// for, for any number of readers.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Readings {
    /// The arithmetic mean of the readers' probabilities.
    pub mean: f64,
    /// Their geometric mean.
    pub geometric: f64,
    /// The least of them (every reader at least this sure).
    pub weakest: f64,
    /// Read only because the rules refusing it are overrulable: it counts only where every reader clears
    /// `reader.overrule_bar`.
    pub held: bool,
}

/// A passage retrieved in this turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Passage {
    pub chunk_id: String,
    pub doc_id: String,
    pub title: String,
    pub text: String,
    /// How well the passage answers the question: the reader's best sentence when it was read, else the
    /// reranker score.
    pub score: f64,
    /// The reader's reading of each sentence (`text::sentences` order), when the passage was read.
    pub sentence_reads: Option<Vec<SentenceRead>>,
}

/// A chunk's text without the `"Title\n"` line the chunker puts before it for embedding: the title is not a
/// sentence of the document, so it must never be read, composed from or quoted (a URL title was).
pub fn body(hit: &pb::Hit) -> &str {
    let title = hit.title.trim();
    if title.is_empty() {
        return &hit.text;
    }
    [hit.title.as_str(), title]
        .iter()
        .find_map(|t| hit.text.strip_prefix(t)?.strip_prefix('\n'))
        .unwrap_or(&hit.text)
}

/// The passages of one turn with their footnote numbers (`[1]` is `passages[0]`).
#[derive(Debug, Clone, Default)]
pub struct Footnotes {
    passages: Vec<Passage>,
}

impl Footnotes {
    /// Mints `[1]..[n]` for `passages` in order. A chunk listed twice keeps its first number only.
    pub fn mint(passages: Vec<Passage>) -> Self {
        let mut seen = HashSet::new();
        Footnotes {
            passages: passages
                .into_iter()
                .filter(|p| seen.insert(p.chunk_id.clone()))
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.passages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passages.is_empty()
    }

    /// The passage behind footnote `n`, if `n` was minted.
    pub fn get(&self, n: u32) -> Option<&Passage> {
        (n as usize)
            .checked_sub(1)
            .and_then(|i| self.passages.get(i))
    }

    pub fn is_minted(&self, n: u32) -> bool {
        self.get(n).is_some()
    }

    /// `(n, passage)` in footnote order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Passage)> {
        self.passages
            .iter()
            .enumerate()
            .map(|(i, p)| (i as u32 + 1, p))
    }

    /// The internal ids of this turn that text can be said to leak: chunk ids (always `doc#n`) and document
    /// ids that look like identifiers (a digit or punctuation in them). A document id that is a plain word
    /// (`owl`) cannot be told apart from prose and is not policed.
    pub fn internal_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .passages
            .iter()
            .flat_map(|p| [p.chunk_id.clone(), p.doc_id.clone()])
            .filter(|id| id.chars().any(|c| !c.is_alphabetic()) && id.chars().count() >= 3)
            .collect();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The context block a model sees: `[n] title — text` per passage, no ids.
    pub fn context_block(&self) -> String {
        self.iter()
            .map(|(n, p)| {
                if p.title.is_empty() {
                    format!("[{n}] {}", p.text)
                } else {
                    format!("[{n}] {} — {}", p.title, p.text)
                }
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn passage(chunk: &str) -> Passage {
        Passage {
            chunk_id: chunk.into(),
            doc_id: chunk.split('#').next().unwrap().into(),
            title: "A title".into(),
            text: "Some passage text.".into(),
            score: 1.0,
            sentence_reads: None,
        }
    }

    #[test]
    fn numbers_start_at_one_and_duplicates_keep_the_first() {
        let f = Footnotes::mint(vec![passage("a#0"), passage("b#0"), passage("a#0")]);
        assert_eq!(f.len(), 2);
        assert_eq!(f.get(1).unwrap().chunk_id, "a#0");
        assert_eq!(f.get(2).unwrap().chunk_id, "b#0");
        assert!(f.get(0).is_none() && f.get(3).is_none());
    }

    #[test]
    fn word_like_document_ids_are_not_policed() {
        let f = Footnotes::mint(vec![Passage {
            chunk_id: "owl#0".into(),
            doc_id: "owl".into(),
            title: String::new(),
            text: "The barn owl hunts at night.".into(),
            score: 1.0,
            sentence_reads: None,
        }]);
        assert_eq!(f.internal_ids(), vec!["owl#0"]);
    }

    #[test]
    fn the_context_block_holds_no_internal_id() {
        let f = Footnotes::mint(vec![passage("doc-17#3"), passage("doc-18#0")]);
        let block = f.context_block();
        assert_eq!(
            block,
            "[1] A title — Some passage text.\n\n[2] A title — Some passage text."
        );
        assert!(!block.contains("doc-1"), "{block}");
        assert_eq!(
            f.internal_ids(),
            vec!["doc-17", "doc-17#3", "doc-18", "doc-18#0"]
        );
    }

    #[test]
    fn the_body_drops_the_title_line_and_nothing_else() {
        let hit = |title: &str, text: &str| pb::Hit {
            title: title.into(),
            text: text.into(),
            ..Default::default()
        };
        let url = "https://news.example.com/a.b/c.html";
        assert_eq!(
            body(&hit(url, &format!("{url}\nThe bridge opened."))),
            "The bridge opened."
        );
        assert_eq!(
            body(&hit(" U.S. Dept. ", "U.S. Dept.\nIt ruled.")),
            "It ruled."
        );
        assert_eq!(
            body(&hit("Café «Ö»", "Café «Ö»\nÖffnete 1921…")),
            "Öffnete 1921…"
        );
        // No title line (the chunker drops a title that would starve the body): the text stays whole.
        assert_eq!(
            body(&hit("Tesla", "Tesla lived in New York.")),
            "Tesla lived in New York."
        );
        assert_eq!(body(&hit("", "x\ny")), "x\ny");
    }
}

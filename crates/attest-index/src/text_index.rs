//! The BM25 lane: one tantivy index per segment (in RAM for the growing segment, an mmap directory on disk for
//! sealed ones), searched together with corpus statistics summed over all of them so that scores from different
//! segments of a shard are comparable and stay the same when compaction merges segments.

use std::collections::hash_map::{Entry, HashMap};
use std::path::Path;

use parking_lot::Mutex;
use tantivy::collector::TopDocs;
use tantivy::directory::MmapDirectory;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, FAST, INDEXED, STRING,
};
use tantivy::{doc, Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, Term};

use crate::error::{IndexError, Result};

/// Field handles; the schema is identical for every segment.
#[derive(Clone, Copy)]
struct Fields {
    row: Field,
    tenant: Field,
    title: Field,
    text: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let row = b.add_u64_field("row", INDEXED | FAST);
    let tenant = b.add_text_field("tenant", STRING);
    // English stemming: questions and passages rarely share exact word forms.
    let stemmed = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("en_stem")
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let title = b.add_text_field("title", stemmed.clone());
    let text = b.add_text_field("text", stemmed);
    (
        b.build(),
        Fields {
            row,
            tenant,
            title,
            text,
        },
    )
}

/// One segment's text index.
pub struct TextIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// Present only for the growing (in-RAM) index; sealed indexes are read-only.
    writer: Option<Mutex<IndexWriter>>,
}

const WRITER_HEAP_BYTES: usize = 30_000_000;

impl TextIndex {
    /// A writable index in RAM for the growing segment.
    pub fn in_ram() -> Result<Self> {
        let (schema, fields) = schema();
        let index = Index::create_in_ram(schema);
        let writer = index.writer_with_num_threads(1, WRITER_HEAP_BYTES)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(TextIndex {
            index,
            reader,
            fields,
            writer: Some(Mutex::new(writer)),
        })
    }

    /// Writes a sealed index into `dir` (created) from `(row, tenant, title, text)` rows.
    pub fn build_on_disk<'a>(
        dir: &Path,
        rows: impl Iterator<Item = (u64, &'a str, &'a str, &'a str)>,
    ) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        let (schema, f) = schema();
        let index = Index::create_in_dir(dir, schema)?;
        let mut writer: IndexWriter = index.writer_with_num_threads(1, WRITER_HEAP_BYTES)?;
        for (row, tenant, title, text) in rows {
            writer.add_document(
                doc!(f.row => row, f.tenant => tenant, f.title => title, f.text => text),
            )?;
        }
        writer.commit()?;
        writer.wait_merging_threads()?;
        Ok(())
    }

    /// Opens a sealed index through tantivy's mmap directory. Missing or damaged files are reported as corrupt.
    pub fn open_mmap(dir: &Path) -> Result<Self> {
        let open = || -> tantivy::Result<(Index, IndexReader)> {
            let directory = MmapDirectory::open(dir)?;
            let index = Index::open(directory)?;
            let reader = index
                .reader_builder()
                .reload_policy(ReloadPolicy::Manual)
                .try_into()?;
            // Touch every segment's postings once so that damage shows up now, not in the middle of a query.
            let searcher = reader.searcher();
            for seg in searcher.segment_readers() {
                seg.inverted_index(schema().1.text)?;
                seg.fast_fields().u64("row")?;
            }
            Ok((index, reader))
        };
        let (index, reader) = open().map_err(|e| IndexError::corrupt(dir, e.to_string()))?;
        Ok(TextIndex {
            index,
            reader,
            fields: schema().1,
            writer: None,
        })
    }

    /// Adds one row to the growing index; visible after the next `commit`.
    pub fn add(&self, row: u64, tenant: &str, title: &str, text: &str) -> Result<()> {
        let f = self.fields;
        let writer = self
            .writer
            .as_ref()
            .ok_or_else(|| IndexError::Tantivy("sealed index is read-only".into()))?;
        writer.lock().add_document(
            doc!(f.row => row, f.tenant => tenant, f.title => title, f.text => text),
        )?;
        Ok(())
    }

    /// Commits pending rows and makes them searchable.
    pub fn commit(&self) -> Result<()> {
        if let Some(w) = &self.writer {
            w.lock().commit()?;
            self.reader.reload()?;
        }
        Ok(())
    }

    pub fn searcher(&self) -> Searcher {
        self.reader.searcher()
    }

    /// The user's words as plain terms (no query syntax: quotes, colons and AND are just text), each a SHOULD
    /// clause on title and text, under a MUST clause on the tenant.
    fn query(&self, query_text: &str, tenant: &str) -> Result<Box<dyn Query>> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for field in [self.fields.title, self.fields.text] {
            let mut analyzer = self.index.tokenizer_for_field(field)?;
            let mut stream = analyzer.token_stream(query_text);
            while let Some(token) = stream.next() {
                if seen.insert((field, token.text.clone())) {
                    let term = Term::from_field_text(field, &token.text);
                    clauses.push((
                        Occur::Should,
                        Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs)),
                    ));
                }
            }
        }
        let words: Box<dyn Query> = Box::new(BooleanQuery::new(clauses));
        let tenant_query = TermQuery::new(
            Term::from_field_text(self.fields.tenant, tenant),
            IndexRecordOption::Basic,
        );
        Ok(Box::new(BooleanQuery::new(vec![
            (Occur::Must, Box::new(tenant_query)),
            (Occur::Must, words),
        ])))
    }
}

/// Corpus statistics summed over every segment of a shard.
struct CombinedStats {
    searchers: Vec<Searcher>,
}

impl Bm25StatisticsProvider for CombinedStats {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.searchers
            .iter()
            .map(|s| s.total_num_tokens(field))
            .sum()
    }
    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.searchers.iter().map(|s| s.total_num_docs()).sum()
    }
    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searchers.iter().map(|s| s.doc_freq(term)).sum()
    }
}

/// BM25 top-`limit` rows of each index for `query_text` within `tenant`, best first: `(row, score)` per index.
pub fn bm25_search(
    indexes: &[&TextIndex],
    query_text: &str,
    tenant: &str,
    limit: usize,
) -> Result<Vec<Vec<(u64, f32)>>> {
    if limit == 0 || query_text.trim().is_empty() {
        return Ok(vec![Vec::new(); indexes.len()]);
    }
    let stats = CombinedStats {
        searchers: indexes.iter().map(|i| i.searcher()).collect(),
    };
    let mut out = Vec::with_capacity(indexes.len());
    for (idx, searcher) in indexes.iter().zip(&stats.searchers) {
        let query = idx.query(query_text, tenant)?;
        let top = searcher.search_with_statistics_provider(
            &*query,
            &TopDocs::with_limit(limit),
            &stats,
        )?;
        let mut hits = Vec::with_capacity(top.len());
        // Opening a fast-field column looks its name up in the segment's column dictionary: once per segment,
        // not once per hit (it was a fifth of a small shard's search time).
        let mut rows_by_segment = HashMap::new();
        for (score, addr) in top {
            let column = match rows_by_segment.entry(addr.segment_ord) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(
                    searcher
                        .segment_reader(addr.segment_ord)
                        .fast_fields()
                        .u64("row")?,
                ),
            };
            if let Some(row) = column.first(addr.doc_id) {
                hits.push((row, score));
            }
        }
        out.push(hits);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_is_enforced_and_scores_are_comparable_across_indexes() {
        let a = TextIndex::in_ram().unwrap();
        a.add(0, "t1", "Rivers", "the nile is the longest river")
            .unwrap();
        a.add(1, "t2", "Rivers", "the nile flows north").unwrap();
        a.commit().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let rows = [(7u64, "t1", "Rivers", "the nile is the longest river")];
        TextIndex::build_on_disk(
            dir.path(),
            rows.iter().map(|(r, t, ti, x)| (*r, *t, *ti, *x)),
        )
        .unwrap();
        let b = TextIndex::open_mmap(dir.path()).unwrap();
        let hits = bm25_search(&[&a, &b], "nile river", "t1", 10).unwrap();
        assert_eq!(hits[0].len(), 1, "tenant t2's row must not be returned");
        assert_eq!(hits[0][0].0, 0);
        assert_eq!(hits[1][0].0, 7);
        // Same text, same global statistics → same score in both segments.
        assert!((hits[0][0].1 - hits[1][0].1).abs() < 1e-5);
        assert!(bm25_search(&[&a], "nile", "nobody", 10).unwrap()[0].is_empty());
    }

    #[test]
    fn syntax_characters_in_queries_are_not_errors() {
        let a = TextIndex::in_ram().unwrap();
        a.add(0, "t", "", "what is \"rust\": a language").unwrap();
        a.commit().unwrap();
        let hits = bm25_search(&[&a], "what: is \"rust (AND", "t", 5).unwrap();
        assert_eq!(hits[0].len(), 1);
    }

    #[test]
    fn damaged_directory_is_reported_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        TextIndex::build_on_disk(dir.path(), std::iter::once((0u64, "t", "a", "b"))).unwrap();
        std::fs::write(dir.path().join("meta.json"), b"{ not json").unwrap();
        assert!(matches!(
            TextIndex::open_mmap(dir.path()),
            Err(IndexError::Corrupt { .. })
        ));
    }
}

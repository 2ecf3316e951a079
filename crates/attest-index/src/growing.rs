//! The growing segment: rows written since the last seal, searched exactly (brute force over their vectors)
//! and through an in-RAM tantivy index committed after every write, so new chunks are searchable at once.

use crate::chunk_store::StoredChunk;
use crate::error::Result;
use crate::text_index::TextIndex;

pub struct GrowingSegment {
    pub dim: usize,
    /// Row number = position; the tantivy index stores the same number.
    pub rows: Vec<StoredChunk>,
    /// `rows.len() × dim`, row-major.
    pub vectors: Vec<f32>,
    pub text: TextIndex,
}

impl GrowingSegment {
    pub fn new(dim: usize) -> Result<Self> {
        Ok(GrowingSegment {
            dim,
            rows: Vec::new(),
            vectors: Vec::new(),
            text: TextIndex::in_ram()?,
        })
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Appends rows (not yet visible to BM25 until `commit`).
    pub fn push(&mut self, chunk: StoredChunk, vector: &[f32]) -> Result<()> {
        debug_assert_eq!(vector.len(), self.dim);
        let row = self.rows.len() as u64;
        self.text
            .add(row, &chunk.tenant, &chunk.title, &chunk.text)?;
        self.vectors.extend_from_slice(vector);
        self.rows.push(chunk);
        Ok(())
    }

    pub fn commit(&self) -> Result<()> {
        self.text.commit()
    }

    pub fn vector(&self, row: usize) -> &[f32] {
        &self.vectors[row * self.dim..(row + 1) * self.dim]
    }
}

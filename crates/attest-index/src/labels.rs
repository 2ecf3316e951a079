//! Rewrites the labels (ids) held by an IVF_PQ index file FAISS has just written, so that a merged segment's
//! index returns its row numbers (issue 18).
//!
//! A merge moves its inputs' inverted lists into one index (FAISS `merge_from`); their entries keep the labels
//! they had, and after dead rows are dropped and rows sorted those are no longer the merged segment's rows. A
//! search then had to find each candidate's row by its id — 18% of a 10M search, most of it scattered reads of a
//! memory-mapped id file. Mapping the labels to rows once, as the merged file is written, makes every search's
//! lookup an index.
//!
//! FAISS's C API reads a list's ids but cannot change them, so they are changed in the file. FAISS writes an
//! IVF_PQ index's `ArrayInvertedLists` last: each non-empty list as its codes then its ids, lists in order
//! (`write_InvertedLists`, faiss/impl/index_write.cpp). Every list's ids in the file are compared with the ids
//! FAISS holds in memory before they are replaced, so any other layout is refused, not damaged.

use std::fs::OpenOptions;
use std::path::Path;

use faiss::index::IndexImpl;
use faiss::Index;
use memmap2::MmapMut;

use crate::error::{IndexError, Result};

/// Replaces every label `l` of the inverted lists in `file` (written from `index` a moment ago, nothing after
/// it) with `rows[l]`. Every label of the index must be below `rows.len()`, appear once and map to a row
/// (`rows[l] >= 0`), and `rows` may map no two labels to one row.
pub(crate) fn relabel_written(
    file: &Path,
    index: &IndexImpl,
    code_size: usize,
    rows: &[i64],
) -> Result<()> {
    let layout = |reason: String| {
        IndexError::invalid(
            "relabel",
            format!(
                "{}: {reason} (not FAISS's ArrayInvertedLists layout)",
                file.display()
            ),
        )
    };
    // SAFETY: `index` is a live FAISS index for the whole function; the cast is null (checked) for anything
    // that is not an IndexIVF, and list numbers stay below its nlist.
    let ivf = unsafe { faiss_sys::faiss_IndexIVF_cast(index.inner_ptr()) };
    if ivf.is_null() {
        return Err(IndexError::invalid("relabel", "not an IVF index"));
    }
    let nlist = unsafe { faiss_sys::faiss_IndexIVF_nlist(ivf) };
    let sizes: Vec<usize> = (0..nlist)
        .map(|list| unsafe { faiss_sys::faiss_IndexIVF_get_list_size(ivf, list) })
        .collect();
    let entries: usize = sizes.iter().sum();
    if entries as u64 != index.ntotal() {
        return Err(layout(format!(
            "lists hold {entries} entries, the index {}",
            index.ntotal()
        )));
    }
    let out = OpenOptions::new().read(true).write(true).open(file)?;
    // SAFETY: the file is the caller's temporary file, not yet renamed into place: nothing else maps it.
    let mut map = unsafe { MmapMut::map_mut(&out)? };
    let tail = entries * (code_size + 8);
    let mut at = map
        .len()
        .checked_sub(tail)
        .ok_or_else(|| layout(format!("{} bytes cannot hold {tail} of lists", map.len())))?;
    let mut targets: Vec<i64> = rows.iter().copied().filter(|&r| r >= 0).collect();
    targets.sort_unstable();
    if let Some(twice) = targets.windows(2).find(|w| w[0] == w[1]) {
        return Err(IndexError::invalid(
            "relabel",
            format!("two labels map to row {}", twice[0]),
        ));
    }
    let mut held = Vec::new();
    let mut seen = vec![false; rows.len()];
    for (list, &n) in sizes.iter().enumerate() {
        if n == 0 {
            continue;
        }
        held.resize(n, 0i64);
        // SAFETY: `held` has room for the list's `n` ids.
        unsafe { faiss_sys::faiss_IndexIVF_invlists_get_ids(ivf, list, held.as_mut_ptr()) };
        at += n * code_size;
        let ids = &mut map[at..at + n * 8];
        for (slot, &label) in ids.chunks_exact_mut(8).zip(&held) {
            if i64::from_le_bytes(slot.try_into().expect("8 bytes")) != label {
                return Err(layout(format!("list {list} holds other ids in the file")));
            }
            let row = usize::try_from(label)
                .ok()
                .filter(|&l| l < seen.len() && !std::mem::replace(&mut seen[l], true))
                .map(|l| rows[l])
                .filter(|&r| r >= 0)
                .ok_or_else(|| {
                    IndexError::invalid(
                        "relabel",
                        format!("label {label} maps to no row, or twice"),
                    )
                })?;
            slot.copy_from_slice(&row.to_le_bytes());
        }
        at += n * 8;
    }
    map.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::ivfpq::tests::unit_vectors;
    use crate::ivfpq::{IvfPqBuilder, IvfPqIndex, IvfPqParams};

    fn params() -> IvfPqParams {
        IvfPqParams {
            nlist: 8,
            m: 4,
            nbits: 6,
            nprobe: 8,
        }
    }

    /// Labels 1000 + 7i written as a permutation of the rows: every search returns exactly the relabelled hits,
    /// scores unchanged.
    #[test]
    fn written_labels_are_the_mapped_rows() {
        let dim = 16;
        let data = unit_vectors(500, dim, 11);
        let labels: Vec<i64> = (0..500).map(|i| 1000 + 7 * i).collect();
        let mut rows = vec![-1i64; 1000 + 7 * 500];
        for (i, &l) in labels.iter().enumerate() {
            rows[l as usize] = (i * 13 % 500) as i64; // 13 and 500 are coprime: a permutation
        }
        let dir = tempfile::tempdir().unwrap();
        let (plain, relabelled) = (dir.path().join("plain"), dir.path().join("relabelled"));
        let mut builder = IvfPqBuilder::train(dim, &params(), &data).unwrap();
        builder.add(&data, &labels).unwrap();
        builder.try_clone().unwrap().write(&plain).unwrap();
        builder.write_relabelled(&relabelled, Some(&rows)).unwrap();
        let (plain, relabelled) = (
            IvfPqIndex::open_mmap_with_handles(&plain, 1).unwrap(),
            IvfPqIndex::open_mmap_with_handles(&relabelled, 1).unwrap(),
        );
        for q in unit_vectors(20, dim, 5).chunks(dim) {
            let want: Vec<(i64, f32)> = plain
                .search(q, 25, 8)
                .unwrap()
                .into_iter()
                .map(|(l, s)| (rows[l as usize], s))
                .collect();
            assert_eq!(relabelled.search(q, 25, 8).unwrap(), want);
        }
    }

    #[test]
    fn a_label_without_a_row_is_refused() {
        let dim = 16;
        let data = unit_vectors(300, dim, 3);
        let labels: Vec<i64> = (0..300).collect();
        let mut builder = IvfPqBuilder::train(dim, &params(), &data).unwrap();
        builder.add(&data, &labels).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index");
        let mut rows: Vec<i64> = (0..300).collect();
        rows[17] = -1;
        let err = builder
            .try_clone()
            .unwrap()
            .write_relabelled(&path, Some(&rows));
        assert!(err.unwrap_err().to_string().contains("label 17"));
        let err = builder
            .try_clone()
            .unwrap()
            .write_relabelled(&path, Some(&rows[..200]));
        assert!(err.unwrap_err().to_string().contains("maps to no row"));
        let mut twice: Vec<i64> = (0..300).collect();
        twice[40] = 41;
        let err = builder.write_relabelled(&path, Some(&twice));
        assert!(err
            .unwrap_err()
            .to_string()
            .contains("two labels map to row 41"));
        assert!(!path.exists(), "nothing is left behind");
    }
}

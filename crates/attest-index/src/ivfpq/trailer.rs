//! The 48-byte trailer after the FAISS bytes of an index file (the format is in the parent module's header):
//! its length and checksum are verified before FAISS, whose readers are not hardened against damaged input,
//! is given the file.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::Path;

use super::IvfPqParams;
use crate::error::{IndexError, Result};

const TRAILER_MAGIC: &[u8; 4] = b"ATPQ";
const TRAILER_VERSION: u32 = 1;
pub(super) const TRAILER_LEN: usize = 48;
/// Trailer bytes covered by the checksum (everything before the crc field).
const TRAILER_HEAD_LEN: usize = 40;

/// What the trailer records of the index before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Trailer {
    /// Bytes of FAISS data before the trailer (0 until [`append_trailer`] measures them).
    pub(super) faiss_len: u64,
    pub(crate) count: u64,
    pub(crate) dim: u32,
    pub(crate) params: IvfPqParams,
}

impl Trailer {
    fn head(&self) -> [u8; TRAILER_HEAD_LEN] {
        let mut b = [0u8; TRAILER_HEAD_LEN];
        b[0..8].copy_from_slice(&self.faiss_len.to_le_bytes());
        b[8..16].copy_from_slice(&self.count.to_le_bytes());
        let words = [
            self.dim,
            self.params.nlist,
            self.params.m,
            self.params.nbits,
            self.params.nprobe,
            TRAILER_VERSION,
        ];
        for (i, w) in words.iter().enumerate() {
            b[16 + 4 * i..20 + 4 * i].copy_from_slice(&w.to_le_bytes());
        }
        b
    }

    fn parse(b: &[u8]) -> std::result::Result<(Trailer, u32), String> {
        debug_assert_eq!(b.len(), TRAILER_LEN);
        if &b[44..48] != TRAILER_MAGIC {
            return Err("missing trailer (not an Attest IVF_PQ file, or truncated)".into());
        }
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let version = u32_at(36);
        if version != TRAILER_VERSION {
            return Err(format!("unsupported trailer version {version}"));
        }
        let params = IvfPqParams {
            nlist: u32_at(20),
            m: u32_at(24),
            nbits: u32_at(28),
            nprobe: u32_at(32),
        };
        let trailer = Trailer {
            faiss_len: u64_at(0),
            count: u64_at(8),
            dim: u32_at(16),
            params,
        };
        Ok((trailer, u32_at(40)))
    }
}

/// Appends the trailer to the FAISS file FAISS just wrote at `tmp`, checksumming what it wrote.
pub(super) fn append_trailer(tmp: &Path, mut trailer: Trailer) -> Result<()> {
    let mut hasher = crc32fast::Hasher::new();
    let mut file = File::open(tmp)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut faiss_len = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        faiss_len += n as u64;
    }
    trailer.faiss_len = faiss_len;
    let head = trailer.head();
    hasher.update(&head);
    let mut out = OpenOptions::new().append(true).open(tmp)?;
    out.write_all(&head)?;
    out.write_all(&hasher.finalize().to_le_bytes())?;
    out.write_all(TRAILER_MAGIC)?;
    Ok(())
}

/// Checks length, trailer and checksum of an index file without letting FAISS near it.
pub(crate) fn verify_file(path: &Path) -> Result<Trailer> {
    let file = File::open(path)?;
    // SAFETY: sealed segment files are written once (tmp + rename) and never modified in place. The map is
    // only read here and dropped before FAISS maps the file itself.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let corrupt = |reason: String| IndexError::corrupt(path, reason);
    if map.len() <= TRAILER_LEN {
        return Err(corrupt(format!(
            "{} bytes is too short for an index",
            map.len()
        )));
    }
    let body_len = map.len() - TRAILER_LEN;
    let (trailer, stored_crc) = Trailer::parse(&map[body_len..]).map_err(corrupt)?;
    if trailer.faiss_len != body_len as u64 {
        return Err(corrupt(format!(
            "trailer says {} index bytes, file holds {body_len}",
            trailer.faiss_len
        )));
    }
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&map[..body_len]);
    hasher.update(&map[body_len..body_len + TRAILER_HEAD_LEN]);
    let crc = hasher.finalize();
    if crc != stored_crc {
        return Err(corrupt(format!(
            "checksum {crc:08x}, trailer says {stored_crc:08x}"
        )));
    }
    let p = trailer.params;
    if trailer.dim == 0 || p.validate().is_err() || p.nprobe > p.nlist {
        return Err(corrupt(format!(
            "implausible trailer: dim {} params {p:?}",
            trailer.dim
        )));
    }
    Ok(trailer)
}

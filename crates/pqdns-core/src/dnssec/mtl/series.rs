//! The durable state of an MTL series: what a signer must remember to append to a series
//! after a restart instead of starting a new one (draft-harvey-cfrg-mtl-mode §5: a series is
//! one growing node set; §8.2: a signer may sign a new ladder as leaves are added).
//!
//! A series is kept as its leaves (hash and randomizer per index, 32 bytes each); the internal
//! nodes are recomputed when it resumes ([`super::NodeSet::from_leaves`]). The one rule that
//! keeps a series secure is that a leaf index is never used for two messages: two trees of
//! one series ID would let ladders and paths of one be mixed with the other's. So a signer
//! saves the series with its new leaves ([`SeriesStore::save`]) *before* it signs the ladder or
//! hands out any signature of them; a signer killed before the save has published nothing
//! of the leaves it lost, and one killed after it resumes past them.
//!
//! [`SeriesFiles`] keeps one file per key in a directory (`<zone>+<alg>+<tag>.mtlseries`,
//! written atomically, [`crate::atomic_file`]) and holds an exclusive lock on the directory's
//! `<zone>.mtlseries.lock` while it is open, so two signers (a server and `pqdns-zone sign`)
//! never append to one series at once.
//!
//! File layout (big-endian): `"pqdns-mtl-series\n"` | version u8 (1) | key ID (32: SHA-256
//! over the algorithm name, a 0 byte and the DNSKEY public key) | series ID length u8 |
//! series ID | leaf count u64 | leaves {hash n, randomizer n} | SHA-256 of everything before.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::node_set::N;
use super::wire::{SeriesId, SERIES_ID_LEN_2026};
use crate::atomic_file::{write_atomic, FileMode};
use crate::dnssec::keyfile::ZoneKey;
use crate::dnssec::Algorithm;

const MAGIC: &[u8] = b"pqdns-mtl-series\n";
const VERSION: u8 = 1;

/// Most leaves pqdns puts in one series before it starts a new one, by default: 2^14. Every
/// doubling of a series adds up to one sibling hash (16 bytes) to the condensed signatures of
/// its oldest leaves, so a series is bounded by answer size, not by the 2^32 the wire allows.
pub const DEFAULT_CAPACITY: u64 = 1 << 14;

/// Largest capacity accepted, and the most leaves a saved series may hold: 2^24 (a 512 MiB
/// file; condensed signatures of up to 24 sibling hashes).
pub const MAX_CAPACITY: u64 = 1 << 24;

/// The identity of an MTL key for its series: SHA-256 over the algorithm's name, a 0 byte and
/// the DNSKEY public-key field. A series belongs to one key; another key starts a new one.
pub fn key_id(algorithm: Algorithm, public_key: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(algorithm.name().as_bytes());
    h.update([0]);
    h.update(public_key);
    h.finalize().into()
}

/// A series as saved: whose it is, its ID, and its leaves in index order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedSeries {
    /// [`key_id`] of the key whose series it is.
    pub key_id: [u8; 32],
    /// The series ID.
    pub series: SeriesId,
    /// Leaf hash and randomizer of each leaf, by index.
    pub leaves: Vec<([u8; N], [u8; N])>,
}

/// Why a saved series cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SeriesError {
    /// Another process (or another open store of this one) holds the lock.
    #[error(
        "{}: MTL series in use by another signer (a running pqdns-server or pqdns-zone); \
         two signers appending to one series would reuse leaf indexes",
        path.display()
    )]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// Reading, writing or locking failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        error: std::io::Error,
    },
    /// The file is not a saved series, or is damaged.
    #[error(
        "{}: not a usable MTL series file ({reason}); move it away to start a new series",
        path.display()
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: &'static str,
    },
}

impl SavedSeries {
    /// The file form (see the module documentation).
    pub fn to_bytes(&self) -> Vec<u8> {
        let id = self.series.as_bytes();
        let mut out = Vec::with_capacity(MAGIC.len() + 50 + id.len() + self.leaves.len() * 2 * N);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        out.extend_from_slice(&self.key_id);
        out.push(id.len() as u8);
        out.extend_from_slice(id);
        out.extend_from_slice(&(self.leaves.len() as u64).to_be_bytes());
        for (leaf, randomizer) in &self.leaves {
            out.extend_from_slice(leaf);
            out.extend_from_slice(randomizer);
        }
        let digest = Sha256::digest(&out);
        out.extend_from_slice(&digest);
        out
    }

    /// Parses the file form (at most [`MAX_CAPACITY`] leaves).
    ///
    /// # Errors
    /// The reason, for any other input.
    pub fn parse(bytes: &[u8]) -> Result<SavedSeries, &'static str> {
        let body_len = bytes
            .len()
            .checked_sub(32)
            .ok_or("shorter than its checksum")?;
        let (body, digest) = bytes.split_at(body_len);
        if Sha256::digest(body).as_slice() != digest {
            return Err("checksum mismatch");
        }
        let mut r = body;
        let mut take = |n: usize| -> Result<&[u8], &'static str> {
            if r.len() < n {
                return Err("truncated");
            }
            let (head, rest) = r.split_at(n);
            r = rest;
            Ok(head)
        };
        if take(MAGIC.len())? != MAGIC {
            return Err("no pqdns-mtl-series header");
        }
        if take(1)?[0] != VERSION {
            return Err("unknown version");
        }
        let key_id: [u8; 32] = take(32)?.try_into().map_err(|_| "truncated")?;
        let id_len = usize::from(take(1)?[0]);
        if id_len > SERIES_ID_LEN_2026 {
            return Err("series ID longer than 32 bytes");
        }
        let series = SeriesId::new(take(id_len)?).ok_or("empty series ID")?;
        let count = u64::from_be_bytes(take(8)?.try_into().map_err(|_| "truncated")?);
        if count > MAX_CAPACITY {
            return Err("more leaves than any series may hold");
        }
        let count = usize::try_from(count).map_err(|_| "too many leaves")?;
        if r.len() != count * 2 * N {
            return Err("leaf count and file length disagree");
        }
        let leaves = r
            .chunks_exact(2 * N)
            .map(|c| {
                let mut leaf = [0u8; N];
                let mut randomizer = [0u8; N];
                leaf.copy_from_slice(&c[..N]);
                randomizer.copy_from_slice(&c[N..]);
                (leaf, randomizer)
            })
            .collect();
        Ok(SavedSeries {
            key_id,
            series,
            leaves,
        })
    }
}

/// Where a signer keeps the series of its MTL keys between signings.
pub trait SeriesStore: Sync + std::fmt::Debug {
    /// Most leaves in one series; a signing that would go past it (or a saved series already
    /// past it) starts a new series.
    fn capacity(&self) -> u64;

    /// The series last saved for `key`, if any (a series of another key is not returned).
    ///
    /// # Errors
    /// [`SeriesError`] if it cannot be read or is damaged: starting a new series instead would
    /// hide the problem, so the operator decides.
    fn load(&self, key: &ZoneKey) -> Result<Option<SavedSeries>, SeriesError>;

    /// Saves `series` for `key` durably (written whole or not at all). Called with a series'
    /// new leaves before any signature of them exists.
    ///
    /// # Errors
    /// [`SeriesError::Io`]; the signing then fails.
    fn save(&self, key: &ZoneKey, series: &SavedSeries) -> Result<(), SeriesError>;
}

/// Series files of one zone's keys in a directory (the state directory), locked while open.
#[derive(Debug)]
pub struct SeriesFiles {
    dir: PathBuf,
    stem: String,
    capacity: u64,
    /// Held for the store's lifetime (`flock`; released when dropped or the process ends).
    _lock: File,
}

impl SeriesFiles {
    /// Opens the series files of zone file stem `stem` (see
    /// [`crate::config::zone_file_stem`]) in `dir`, creating the directory, and takes the
    /// lock. `capacity` is clamped to 1..=[`MAX_CAPACITY`].
    ///
    /// # Errors
    /// [`SeriesError::Locked`] if another signer holds it; [`SeriesError::Io`] otherwise.
    pub fn open(dir: &Path, stem: &str, capacity: u64) -> Result<SeriesFiles, SeriesError> {
        let path = dir.join(format!("{stem}.mtlseries.lock"));
        let io = |error| SeriesError::Io {
            path: path.clone(),
            error,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(SeriesError::Locked { path }),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        Ok(SeriesFiles {
            dir: dir.to_path_buf(),
            stem: stem.to_string(),
            capacity: capacity.clamp(1, MAX_CAPACITY),
            _lock: lock,
        })
    }

    /// The file of `key`: `<dir>/<zone>+<alg>+<tag>.mtlseries`, beside the key's own name.
    pub fn path(&self, key: &ZoneKey) -> PathBuf {
        self.dir.join(format!(
            "{}+{:03}+{:05}.mtlseries",
            self.stem,
            key.number.0,
            key.key_tag()
        ))
    }
}

impl SeriesStore for SeriesFiles {
    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn load(&self, key: &ZoneKey) -> Result<Option<SavedSeries>, SeriesError> {
        let path = self.path(key);
        let io = |error| SeriesError::Io {
            path: path.clone(),
            error,
        };
        let file = match File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(e)),
        };
        // Bounded read: no file longer than the largest series is read into memory.
        let limit =
            MAGIC.len() as u64 + 75 + SERIES_ID_LEN_2026 as u64 + MAX_CAPACITY * 2 * N as u64;
        let mut bytes = Vec::new();
        file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
        if bytes.len() as u64 > limit {
            return Err(SeriesError::Malformed {
                path,
                reason: "longer than the largest series",
            });
        }
        let saved = SavedSeries::parse(&bytes).map_err(|reason| SeriesError::Malformed {
            path: path.clone(),
            reason,
        })?;
        let id = key_id(key.key.algorithm(), key.key.public_key());
        Ok((saved.key_id == id).then_some(saved))
    }

    fn save(&self, key: &ZoneKey, series: &SavedSeries) -> Result<(), SeriesError> {
        let path = self.path(key);
        write_atomic(&path, &series.to_bytes(), FileMode::Public)
            .map_err(|error| SeriesError::Io { path, error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(leaves: usize) -> SavedSeries {
        SavedSeries {
            key_id: [7; 32],
            series: SeriesId::new(&[3; 32]).unwrap(),
            leaves: (0..leaves)
                .map(|i| ([i as u8; N], [!(i as u8); N]))
                .collect(),
        }
    }

    #[test]
    fn a_saved_series_reads_back_and_any_damage_is_refused() {
        let s = sample(5);
        let bytes = s.to_bytes();
        assert_eq!(SavedSeries::parse(&bytes), Ok(s));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(SavedSeries::parse(&bad).is_err(), "byte {i}");
        }
        for len in 0..bytes.len() {
            assert!(SavedSeries::parse(&bytes[..len]).is_err(), "length {len}");
        }
    }
}

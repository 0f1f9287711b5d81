//! The MTL node set and its hash functions (draft-harvey-cfrg-mtl-mode §§5–8 with the
//! SPHINCS+-aligned instantiation of §10 and the domain separators of -03 §4.1), exactly as
//! Verisign's SPHINCS+-based MTL library (the one behind its ldns/NSD/unbound forks and the
//! sample zone in `tests/data/mtl-mode-ldns-sha2`) computes them for SPHINCS+-128s "simple",
//! n = 16, with an empty context string:
//!
//! - address `ADRS` (32 bytes): layer 0 | tree address with the series ID in its last 8 bytes |
//!   type u32 (16 message, 17 data, 18 tree) | 0 | left u32 | right u32; the SHA2 family uses
//!   the 22-byte compressed form `ADRSc` of SPHINCS+ (layer 1 byte | series 8 | type 1 | 0 (4) |
//!   left | right).
//! - data value of leaf i: `H_msg_mtl(R, PK.seed, PK.root, 0x80 ‖ 0x00 ‖ ADRS(16, 0, i) ‖ M)`,
//!   where 0x80 is the message separator and 0x00 the length of the empty context string;
//!   SHA2: `MGF1-SHA-256(R ‖ PK.seed ‖ SHA-256(R ‖ PK.seed ‖ PK.root ‖ …), n)`; SHAKE:
//!   `SHAKE256(R ‖ PK.seed ‖ PK.root ‖ …, 8n)`.
//! - leaf `F(ADRS(17, 0, i), value)` and internal node `H(ADRS(18, l, r), left ‖ right)`: SHA2:
//!   the first n bytes of `SHA-256(BlockPad(PK.seed) ‖ ADRSc ‖ data)` (BlockPad to the 64-byte
//!   SHA-256 block as in SPHINCS+); SHAKE: `SHAKE256(PK.seed ‖ ADRS ‖ data, 8n)`.
//!
//! Leaves are appended in order; a complete aligned block of 2^k leaves gets its internal node
//! as soon as its last leaf arrives (Algorithm 4), so appending is O(log n) hashes and the
//! signer keeps every node (about 2n bytes per leaf).

use sha2::{Digest, Sha256};
use sha3::digest::{ExtendableOutput, Update, XofReader};
use sha3::Shake256;

use super::wire::{AuthPath, Ladder, Rung, SeriesId, MAX_DEPTH};

/// Hash length n in bytes (SPHINCS+-128s).
pub const N: usize = 16;

const ADRS_MSG: u32 = 16;
const ADRS_DATA: u32 = 17;
const ADRS_TREE: u32 = 18;

/// Message domain separator and the length of the (empty) context string that precede
/// `ADRS ‖ M` in the data value (draft-harvey-cfrg-mtl-mode-03 §4.1, `MTL_MSG_SEP` = 128).
const MESSAGE_SEPARATOR: [u8; 2] = [0x80, 0x00];

/// Which SPHINCS+ hash family a series uses: algorithm 248 is SHA2, 249 is SHAKE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashFamily {
    /// SHA-256 (SPHINCS+-SHA2-128s-simple).
    Sha2,
    /// SHAKE256 (SPHINCS+-SHAKE-128s-simple).
    Shake,
}

fn adrs(series: SeriesId, kind: u32, left: u32, right: u32) -> [u8; 32] {
    let mut a = [0u8; 32];
    a[8..16].copy_from_slice(&series.0);
    a[16..20].copy_from_slice(&kind.to_be_bytes());
    a[24..28].copy_from_slice(&left.to_be_bytes());
    a[28..32].copy_from_slice(&right.to_be_bytes());
    a
}

fn adrs_compressed(series: SeriesId, kind: u32, left: u32, right: u32) -> [u8; 22] {
    let mut a = [0u8; 22];
    a[1..9].copy_from_slice(&series.0);
    a[9] = kind as u8;
    a[14..18].copy_from_slice(&left.to_be_bytes());
    a[18..22].copy_from_slice(&right.to_be_bytes());
    a
}

fn shake(parts: &[&[u8]]) -> [u8; N] {
    let mut h = Shake256::default();
    for p in parts {
        h.update(p);
    }
    let mut out = [0u8; N];
    h.finalize_xof().read(&mut out);
    out
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    let mut h = Sha256::new();
    for p in parts {
        Digest::update(&mut h, p);
    }
    h.finalize().into()
}

/// F and H of §10: one tree hash under address (kind, left, right).
fn tree_hash(
    family: HashFamily,
    seed: &[u8],
    series: SeriesId,
    kind: u32,
    (left, right): (u32, u32),
    data: &[&[u8]],
) -> [u8; N] {
    match family {
        HashFamily::Sha2 => {
            let mut padded = [0u8; 64];
            padded[..seed.len().min(64)].copy_from_slice(&seed[..seed.len().min(64)]);
            let a = adrs_compressed(series, kind, left, right);
            let mut parts: Vec<&[u8]> = vec![&padded, &a];
            parts.extend_from_slice(data);
            sha256(&parts)[..N].try_into().expect("n")
        }
        HashFamily::Shake => {
            let a = adrs(series, kind, left, right);
            let mut parts: Vec<&[u8]> = vec![seed, &a];
            parts.extend_from_slice(data);
            shake(&parts)
        }
    }
}

/// The leaf hash of `message` at index `leaf` with its randomizer.
pub(crate) fn leaf_hash(
    family: HashFamily,
    seed: &[u8],
    root: &[u8],
    series: SeriesId,
    leaf: u32,
    randomizer: &[u8; N],
    message: &[u8],
) -> [u8; N] {
    let a = adrs(series, ADRS_MSG, 0, leaf);
    let sep = &MESSAGE_SEPARATOR;
    let value = match family {
        HashFamily::Sha2 => {
            let digest = sha256(&[randomizer, seed, root, sep, &a, message]);
            let mut out = [0u8; N];
            // MGF1-SHA-256 with one block suffices for n = 16.
            out.copy_from_slice(&sha256(&[randomizer, seed, &digest, &0u32.to_be_bytes()])[..N]);
            out
        }
        HashFamily::Shake => shake(&[randomizer, seed, root, sep, &a, message]),
    };
    tree_hash(family, seed, series, ADRS_DATA, (0, leaf), &[&value])
}

fn node_hash(
    family: HashFamily,
    seed: &[u8],
    series: SeriesId,
    range: (u32, u32),
    left: &[u8; N],
    right: &[u8; N],
) -> [u8; N] {
    tree_hash(family, seed, series, ADRS_TREE, range, &[left, right])
}

/// Recomputes the path from `message`'s leaf up to `rung` and compares (Algorithm 8).
pub(crate) fn path_reaches_rung(
    family: HashFamily,
    seed: &[u8],
    root: &[u8],
    message: &[u8],
    path: &AuthPath,
    rung: &Rung,
) -> bool {
    let leaf = path.leaf;
    let mut node = leaf_hash(
        family,
        seed,
        root,
        path.series,
        leaf,
        &path.randomizer,
        message,
    );
    if rung.left == leaf && rung.right == leaf {
        return node == rung.hash;
    }
    for (i, sibling) in path.siblings.iter().enumerate() {
        let level = i as u32 + 1;
        let span = 1u64 << level;
        let left = (u64::from(leaf) & !(span - 1)) as u32;
        let right = (u64::from(left) + span - 1) as u32;
        let mid = (u64::from(left) + span / 2) as u32;
        node = if leaf < mid {
            node_hash(family, seed, path.series, (left, right), &node, sibling)
        } else {
            node_hash(family, seed, path.series, (left, right), sibling, &node)
        };
        if left == rung.left && right == rung.right {
            return node == rung.hash;
        }
    }
    false
}

/// The signer's node set of one series: every leaf and every complete internal node.
#[derive(Clone, Debug)]
pub struct NodeSet {
    family: HashFamily,
    seed: [u8; N],
    root: [u8; N],
    series: SeriesId,
    /// `levels[k][j]` is the node over leaves `j·2^k ..= (j+1)·2^k − 1`.
    levels: Vec<Vec<[u8; N]>>,
    randomizers: Vec<[u8; N]>,
}

impl NodeSet {
    /// An empty series `series` under the public key PK.seed ‖ PK.root.
    ///
    /// # Panics
    /// If `public_key` is shorter than 2n bytes (MTL keys are exactly 32).
    pub fn new(family: HashFamily, public_key: &[u8], series: SeriesId) -> NodeSet {
        NodeSet {
            family,
            seed: public_key[..N]
                .try_into()
                .expect("MTL public key is 2n bytes"),
            root: public_key[N..2 * N]
                .try_into()
                .expect("MTL public key is 2n bytes"),
            series,
            levels: vec![Vec::new()],
            randomizers: Vec::new(),
        }
    }

    /// The series identifier.
    pub fn series(&self) -> SeriesId {
        self.series
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// Appends `message` with `randomizer`; returns its leaf index, or `None` when the series is
    /// full (2^32 leaves).
    pub fn append(&mut self, message: &[u8], randomizer: [u8; N]) -> Option<u32> {
        let index = u32::try_from(self.levels[0].len()).ok()?;
        let leaf = leaf_hash(
            self.family,
            &self.seed,
            &self.root,
            self.series,
            index,
            &randomizer,
            message,
        );
        self.levels[0].push(leaf);
        self.randomizers.push(randomizer);
        let mut level = 0;
        let mut j = index as u64;
        while j % 2 == 1 {
            if self.levels.len() == level + 1 {
                self.levels.push(Vec::new());
            }
            let span = 1u64 << (level + 1);
            let left = ((j - 1) << level) as u32;
            let right = (u64::from(left) + span - 1) as u32;
            let node = node_hash(
                self.family,
                &self.seed,
                self.series,
                (left, right),
                &self.levels[level][(j - 1) as usize],
                &self.levels[level][j as usize],
            );
            self.levels[level + 1].push(node);
            level += 1;
            j /= 2;
        }
        Some(index)
    }

    /// The current ladder (Algorithm 6): one rung per set bit of the leaf count, largest first.
    pub fn ladder(&self) -> Ladder {
        let count = self.leaf_count();
        let mut rungs = Vec::new();
        let mut left = 0u64;
        for k in (0..MAX_DEPTH).rev() {
            if count & (1 << k) != 0 {
                rungs.push(Rung {
                    left: left as u32,
                    right: (left + (1 << k) - 1) as u32,
                    hash: self.levels[k][(left >> k) as usize],
                });
                left += 1 << k;
            }
        }
        Ladder {
            flags: 0,
            series: self.series,
            rungs,
        }
    }

    /// The authentication path of leaf `leaf` to the rung covering it in the current ladder
    /// (Algorithm 5), or `None` if there is no such leaf.
    pub fn auth_path(&self, leaf: u32) -> Option<AuthPath> {
        let count = self.leaf_count();
        if u64::from(leaf) >= count {
            return None;
        }
        let ladder = self.ladder();
        let rung = ladder
            .rungs
            .iter()
            .find(|r| r.left <= leaf && leaf <= r.right)?;
        let depth = (u64::from(rung.right - rung.left) + 1).trailing_zeros() as usize;
        let siblings = (0..depth)
            .map(|k| self.levels[k][((u64::from(leaf) >> k) ^ 1) as usize])
            .collect();
        Some(AuthPath {
            randomizer: self.randomizers[leaf as usize],
            flags: 0,
            series: self.series,
            leaf,
            rung_left: rung.left,
            rung_right: rung.right,
            siblings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(family: HashFamily, leaves: u32) -> NodeSet {
        let mut s = NodeSet::new(family, &[0x42; 32], SeriesId([9; 8]));
        for i in 0..leaves {
            assert_eq!(s.append(&i.to_be_bytes(), [i as u8; N]), Some(i));
        }
        s
    }

    #[test]
    fn ladder_rungs_follow_the_bits_of_the_leaf_count() {
        let s = set(HashFamily::Sha2, 10);
        let spans: Vec<(u32, u32)> = s.ladder().rungs.iter().map(|r| (r.left, r.right)).collect();
        assert_eq!(spans, [(0, 7), (8, 9)]);
        assert_eq!(s.auth_path(2).unwrap().siblings.len(), 3);
        assert_eq!(s.auth_path(9).unwrap().siblings.len(), 1);
        assert!(s.auth_path(10).is_none());
    }

    #[test]
    fn every_path_reaches_its_rung_and_nothing_else_does() {
        for family in [HashFamily::Sha2, HashFamily::Shake] {
            let s = set(family, 13);
            let ladder = s.ladder();
            for leaf in 0..13u32 {
                let path = s.auth_path(leaf).unwrap();
                let rung = ladder.rung_for(&path).unwrap();
                let msg = leaf.to_be_bytes();
                assert!(path_reaches_rung(
                    family,
                    &[0x42; 16],
                    &[0x42; 16],
                    &msg,
                    &path,
                    rung
                ));
                assert!(!path_reaches_rung(
                    family,
                    &[0x42; 16],
                    &[0x42; 16],
                    b"other",
                    &path,
                    rung
                ));
                let mut bent = path.clone();
                if let Some(first) = bent.siblings.first_mut() {
                    first[0] ^= 1;
                    assert!(!path_reaches_rung(
                        family,
                        &[0x42; 16],
                        &[0x42; 16],
                        &msg,
                        &bent,
                        rung
                    ));
                }
            }
        }
    }

    #[test]
    fn old_paths_verify_against_new_ladders_only_where_a_rung_survives() {
        let mut s = set(HashFamily::Sha2, 8);
        let old_path = s.auth_path(3).unwrap();
        for i in 8..12u32 {
            s.append(&i.to_be_bytes(), [0; N]);
        }
        let ladder = s.ladder();
        let rung = ladder.rung_for(&old_path).unwrap();
        assert_eq!((rung.left, rung.right), (0, 7));
        assert!(path_reaches_rung(
            HashFamily::Sha2,
            &[0x42; 16],
            &[0x42; 16],
            &3u32.to_be_bytes(),
            &old_path,
            rung
        ));
    }

    #[test]
    fn families_and_series_give_different_trees() {
        let a = set(HashFamily::Sha2, 4).ladder();
        let b = set(HashFamily::Shake, 4).ladder();
        assert_ne!(a.rungs[0].hash, b.rungs[0].hash);
        let mut c = NodeSet::new(HashFamily::Sha2, &[0x42; 32], SeriesId([8; 8]));
        for i in 0..4u32 {
            c.append(&i.to_be_bytes(), [i as u8; N]);
        }
        assert_ne!(a.rungs[0].hash, c.ladder().rungs[0].hash);
    }
}

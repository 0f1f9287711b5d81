//! The MTL node set and its hash functions (draft-harvey-cfrg-mtl-mode §§5–8), in the two
//! instantiations Verisign's implementations have used ([`TreeHash`]).
//!
//! 2025 ([`TreeHash::Spx`], SLH-DSA-MTL 248/249): the SPHINCS+-aligned instantiation of §10 with
//! the domain separators of -03 §4.1, exactly as Verisign's SPHINCS+-based MTL library 1.1
//! (behind its ldns/NSD/unbound forks and the sample zone in `tests/data/mtl-mode-ldns-sha2`)
//! computes them for SPHINCS+-128s "simple", n = 16, with an empty context string:
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
//! 2026 ([`TreeHash::Sid`], ML-DSA-MTL 129, SLH-DSA-MTL 130/131, FL-DSA-MTL 128;
//! draft-kaizer-dnsop-ml-dsa-mtl-dnssec-02 §5.2, as Verisign's MTL library 1.3 demo computes
//! them), n = 16, the 32-byte series ID in every hash and an empty context string for DNSSEC:
//!
//! - leaf `H(SID ‖ R ‖ leaf u64 ‖ 0x00 ‖ M)`, internal node `H(SID ‖ left u64 ‖ right u64 ‖
//!   H_L ‖ H_R)`;
//! - SHAKE: `H` = SHAKE128(…, 8n) (the draft's cSHAKE customization is not applied: Verisign's
//!   code leaves it out until OpenSSL has cSHAKE, and its published data is made without it);
//!   SHA2: the first n bytes of `SHA-256(BlockPad(0x01 0x06 "MTLOID") ‖ …)`.
//!
//! Leaves are appended in order; a complete aligned block of 2^k leaves gets its internal node
//! as soon as its last leaf arrives (Algorithm 4), so appending is O(log n) hashes and the
//! signer keeps every node (about 2n bytes per leaf).

use sha2::{Digest, Sha256};
use sha3::digest::{ExtendableOutput, Update, XofReader};
use sha3::{Shake128, Shake256};

use super::wire::{AuthPath, Format, Ladder, Rung, SeriesId, MAX_DEPTH};

/// Hash length n in bytes (SPHINCS+-128s; the 2026 schemes' n = 16).
pub const N: usize = 16;

const ADRS_MSG: u32 = 16;
const ADRS_DATA: u32 = 17;
const ADRS_TREE: u32 = 18;

/// Message domain separator and the length of the (empty) context string that precede
/// `ADRS ‖ M` in the 2025 data value (draft-harvey-cfrg-mtl-mode-03 §4.1, `MTL_MSG_SEP` = 128).
const MESSAGE_SEPARATOR: [u8; 2] = [0x80, 0x00];

/// Which hash family a series uses: SHA-256 or SHAKE (the algorithm decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HashFamily {
    /// SHA-256 (2025: SPHINCS+-SHA2-128s-simple's; 2026: SHA-256 with the MTL block prefix).
    Sha2,
    /// SHAKE (2025: SHAKE256 as SPHINCS+-SHAKE-128s-simple; 2026: SHAKE128).
    Shake,
}

/// How a series hashes its leaves and internal nodes (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TreeHash {
    /// The 2025 SPHINCS+-aligned hashes, keyed by the DNSKEY's PK.seed and PK.root.
    Spx {
        /// Hash family.
        family: HashFamily,
        /// PK.seed (the first n bytes of the DNSKEY public key).
        seed: [u8; N],
        /// PK.root (the next n bytes).
        root: [u8; N],
    },
    /// The 2026 hashes, keyed by the series ID alone.
    Sid {
        /// Hash family.
        family: HashFamily,
    },
}

impl TreeHash {
    /// The 2025 hashes under an SLH-DSA-MTL DNSKEY public key (PK.seed ‖ PK.root), or `None`
    /// if it is shorter than 2n bytes.
    pub fn spx(family: HashFamily, public_key: &[u8]) -> Option<TreeHash> {
        Some(TreeHash::Spx {
            family,
            seed: public_key.get(..N)?.try_into().ok()?,
            root: public_key.get(N..2 * N)?.try_into().ok()?,
        })
    }

    /// The wire layout that goes with these hashes.
    pub fn format(&self) -> Format {
        match self {
            TreeHash::Spx { .. } => Format::V2025,
            TreeHash::Sid { .. } => Format::V2026,
        }
    }

    /// The leaf hash of `message` at index `leaf` with its randomizer.
    pub fn leaf(
        &self,
        series: SeriesId,
        leaf: u64,
        randomizer: &[u8; N],
        message: &[u8],
    ) -> [u8; N] {
        match *self {
            TreeHash::Spx { family, seed, root } => {
                let a = adrs(series, ADRS_MSG, 0, leaf as u32);
                let sep = &MESSAGE_SEPARATOR;
                let value = match family {
                    HashFamily::Sha2 => {
                        let digest = sha256(&[randomizer, &seed, &root, sep, &a, message]);
                        let mut out = [0u8; N];
                        // MGF1-SHA-256 with one block suffices for n = 16.
                        out.copy_from_slice(
                            &sha256(&[randomizer, &seed, &digest, &0u32.to_be_bytes()])[..N],
                        );
                        out
                    }
                    HashFamily::Shake => shake256(&[randomizer, &seed, &root, sep, &a, message]),
                };
                spx_hash(
                    family,
                    &seed,
                    series,
                    ADRS_DATA,
                    (0, leaf as u32),
                    &[&value],
                )
            }
            TreeHash::Sid { family } => sid_hash(
                family,
                &[
                    series.as_bytes(),
                    randomizer,
                    &leaf.to_be_bytes(),
                    &[0],
                    message,
                ],
            ),
        }
    }

    /// The internal node over leaves `range` with children `left` and `right`.
    pub fn node(
        &self,
        series: SeriesId,
        range: (u64, u64),
        left: &[u8; N],
        right: &[u8; N],
    ) -> [u8; N] {
        match *self {
            TreeHash::Spx { family, seed, .. } => spx_hash(
                family,
                &seed,
                series,
                ADRS_TREE,
                (range.0 as u32, range.1 as u32),
                &[left, right],
            ),
            TreeHash::Sid { family } => sid_hash(
                family,
                &[
                    series.as_bytes(),
                    &range.0.to_be_bytes(),
                    &range.1.to_be_bytes(),
                    left,
                    right,
                ],
            ),
        }
    }

    /// Recomputes the path from `message`'s leaf up to `rung` and compares (Algorithm 8).
    pub fn path_reaches_rung(&self, message: &[u8], path: &AuthPath, rung: &Rung) -> bool {
        let leaf = path.leaf;
        let mut node = self.leaf(path.series, leaf, &path.randomizer, message);
        if rung.left == leaf && rung.right == leaf {
            return node == rung.hash;
        }
        for (i, sibling) in path.siblings.iter().enumerate() {
            let span = 1u64 << (i + 1);
            let left = leaf & !(span - 1);
            let right = left + (span - 1);
            node = if leaf < left + span / 2 {
                self.node(path.series, (left, right), &node, sibling)
            } else {
                self.node(path.series, (left, right), sibling, &node)
            };
            if left == rung.left && right == rung.right {
                return node == rung.hash;
            }
        }
        false
    }
}

fn adrs(series: SeriesId, kind: u32, left: u32, right: u32) -> [u8; 32] {
    let mut a = [0u8; 32];
    let id = series.as_bytes();
    let n = id.len().min(8);
    a[8..8 + n].copy_from_slice(&id[..n]);
    a[16..20].copy_from_slice(&kind.to_be_bytes());
    a[24..28].copy_from_slice(&left.to_be_bytes());
    a[28..32].copy_from_slice(&right.to_be_bytes());
    a
}

fn adrs_compressed(series: SeriesId, kind: u32, left: u32, right: u32) -> [u8; 22] {
    let mut a = [0u8; 22];
    let id = series.as_bytes();
    let n = id.len().min(8);
    a[1..1 + n].copy_from_slice(&id[..n]);
    a[9] = kind as u8;
    a[14..18].copy_from_slice(&left.to_be_bytes());
    a[18..22].copy_from_slice(&right.to_be_bytes());
    a
}

fn shake256(parts: &[&[u8]]) -> [u8; N] {
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

/// The 2026 SHA2 prefix: the customization string `0x01 0x06 "MTLOID"` zero-padded to the
/// 64-byte SHA-256 block (Verisign's MTL library 1.3, `MTL_FIXED_CSTR`).
const SHA2_PREFIX: [u8; 64] = {
    let mut b = [0u8; 64];
    let c = [1u8, 6, b'M', b'T', b'L', b'O', b'I', b'D'];
    let mut i = 0;
    while i < c.len() {
        b[i] = c[i];
        i += 1;
    }
    b
};

/// The 2026 hash `H` (n bytes).
fn sid_hash(family: HashFamily, parts: &[&[u8]]) -> [u8; N] {
    match family {
        HashFamily::Shake => {
            let mut h = Shake128::default();
            for p in parts {
                h.update(p);
            }
            let mut out = [0u8; N];
            h.finalize_xof().read(&mut out);
            out
        }
        HashFamily::Sha2 => {
            let mut all: Vec<&[u8]> = Vec::with_capacity(parts.len() + 1);
            all.push(&SHA2_PREFIX);
            all.extend_from_slice(parts);
            let mut out = [0u8; N];
            out.copy_from_slice(&sha256(&all)[..N]);
            out
        }
    }
}

/// F and H of §10 (2025): one tree hash under address (kind, left, right).
fn spx_hash(
    family: HashFamily,
    seed: &[u8; N],
    series: SeriesId,
    kind: u32,
    (left, right): (u32, u32),
    data: &[&[u8]],
) -> [u8; N] {
    match family {
        HashFamily::Sha2 => {
            let mut padded = [0u8; 64];
            padded[..N].copy_from_slice(seed);
            let a = adrs_compressed(series, kind, left, right);
            let mut parts: Vec<&[u8]> = vec![&padded, &a];
            parts.extend_from_slice(data);
            let mut out = [0u8; N];
            out.copy_from_slice(&sha256(&parts)[..N]);
            out
        }
        HashFamily::Shake => {
            let a = adrs(series, kind, left, right);
            let mut parts: Vec<&[u8]> = vec![seed, &a];
            parts.extend_from_slice(data);
            shake256(&parts)
        }
    }
}

/// The signer's node set of one series: every leaf and every complete internal node.
#[derive(Clone, Debug)]
pub struct NodeSet {
    hash: TreeHash,
    series: SeriesId,
    /// `levels[k][j]` is the node over leaves `j·2^k ..= (j+1)·2^k − 1`.
    levels: Vec<Vec<[u8; N]>>,
    randomizers: Vec<[u8; N]>,
}

impl NodeSet {
    /// An empty series `series` hashed with `hash`.
    pub fn new(hash: TreeHash, series: SeriesId) -> NodeSet {
        NodeSet {
            hash,
            series,
            levels: vec![Vec::new()],
            randomizers: Vec::new(),
        }
    }

    /// A series `series` hashed with `hash` holding `leaves` (leaf hash and randomizer, in
    /// index order), its internal nodes recomputed: how a saved series resumes
    /// ([`super::series`]). `None` past 2^32 leaves.
    pub fn from_leaves(
        hash: TreeHash,
        series: SeriesId,
        leaves: &[([u8; N], [u8; N])],
    ) -> Option<NodeSet> {
        u32::try_from(leaves.len()).ok()?;
        let mut set = NodeSet::new(hash, series);
        for &(leaf, randomizer) in leaves {
            set.push_leaf(leaf, randomizer);
        }
        Some(set)
    }

    /// Leaf `leaf`'s hash and randomizer, if there is such a leaf.
    pub fn leaf(&self, leaf: u64) -> Option<([u8; N], [u8; N])> {
        let i = usize::try_from(leaf).ok()?;
        Some((*self.levels[0].get(i)?, *self.randomizers.get(i)?))
    }

    /// The series identifier.
    pub fn series(&self) -> SeriesId {
        self.series
    }

    /// The hashes of this series.
    pub fn tree_hash(&self) -> &TreeHash {
        &self.hash
    }

    /// Number of leaves.
    pub fn leaf_count(&self) -> u64 {
        self.levels[0].len() as u64
    }

    /// Appends `message` with `randomizer`; returns its leaf index, or `None` when the series is
    /// full (2^32 leaves).
    pub fn append(&mut self, message: &[u8], randomizer: [u8; N]) -> Option<u64> {
        let index = u64::from(u32::try_from(self.levels[0].len()).ok()?);
        let leaf = self.hash.leaf(self.series, index, &randomizer, message);
        self.push_leaf(leaf, randomizer);
        Some(index)
    }

    /// Appends a leaf hash with its randomizer and completes the internal nodes it closes
    /// (Algorithm 4). The caller keeps the count below 2^32.
    fn push_leaf(&mut self, leaf: [u8; N], randomizer: [u8; N]) {
        let index = self.levels[0].len() as u64;
        self.levels[0].push(leaf);
        self.randomizers.push(randomizer);
        let mut level = 0;
        let mut j = index;
        while j % 2 == 1 {
            if self.levels.len() == level + 1 {
                self.levels.push(Vec::new());
            }
            let left = (j - 1) << level;
            let right = left + (1u64 << (level + 1)) - 1;
            let node = self.hash.node(
                self.series,
                (left, right),
                &self.levels[level][(j - 1) as usize],
                &self.levels[level][j as usize],
            );
            self.levels[level + 1].push(node);
            level += 1;
            j /= 2;
        }
    }

    /// The current ladder (Algorithm 6): one rung per set bit of the leaf count, largest first.
    pub fn ladder(&self) -> Ladder {
        let count = self.leaf_count();
        let mut rungs = Vec::new();
        let mut left = 0u64;
        for k in (0..MAX_DEPTH).rev() {
            if count & (1 << k) != 0 {
                rungs.push(Rung {
                    left,
                    right: left + (1 << k) - 1,
                    hash: self.levels[k][(left >> k) as usize],
                });
                left += 1 << k;
            }
        }
        Ladder {
            format: self.hash.format(),
            flags: 0,
            series: self.series,
            rungs,
        }
    }

    /// The authentication path of leaf `leaf` to the rung covering it in the current ladder
    /// (Algorithm 5), or `None` if there is no such leaf.
    pub fn auth_path(&self, leaf: u64) -> Option<AuthPath> {
        if leaf >= self.leaf_count() {
            return None;
        }
        let ladder = self.ladder();
        let rung = ladder
            .rungs
            .iter()
            .find(|r| r.left <= leaf && leaf <= r.right)?;
        let depth = (rung.right - rung.left + 1).trailing_zeros() as usize;
        let siblings = (0..depth)
            .map(|k| self.levels[k][((leaf >> k) ^ 1) as usize])
            .collect();
        Some(AuthPath {
            format: self.hash.format(),
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

    fn spx(family: HashFamily) -> TreeHash {
        TreeHash::spx(family, &[0x42; 32]).unwrap()
    }

    fn set_with(hash: TreeHash, series: &[u8], leaves: u64) -> NodeSet {
        let mut s = NodeSet::new(hash, SeriesId::new(series).unwrap());
        for i in 0..leaves {
            assert_eq!(s.append(&i.to_be_bytes(), [i as u8; N]), Some(i));
        }
        s
    }

    fn set(family: HashFamily, leaves: u64) -> NodeSet {
        set_with(spx(family), &[9; 8], leaves)
    }

    #[test]
    fn ladder_rungs_follow_the_bits_of_the_leaf_count() {
        let s = set(HashFamily::Sha2, 10);
        let spans: Vec<(u64, u64)> = s.ladder().rungs.iter().map(|r| (r.left, r.right)).collect();
        assert_eq!(spans, [(0, 7), (8, 9)]);
        assert_eq!(s.auth_path(2).unwrap().siblings.len(), 3);
        assert_eq!(s.auth_path(9).unwrap().siblings.len(), 1);
        assert!(s.auth_path(10).is_none());
    }

    #[test]
    fn every_path_reaches_its_rung_and_nothing_else_does() {
        let all = [
            set(HashFamily::Sha2, 13),
            set(HashFamily::Shake, 13),
            set_with(
                TreeHash::Sid {
                    family: HashFamily::Sha2,
                },
                &[3; 32],
                13,
            ),
            set_with(
                TreeHash::Sid {
                    family: HashFamily::Shake,
                },
                &[3; 32],
                13,
            ),
        ];
        for s in all {
            let hash = *s.tree_hash();
            let ladder = s.ladder();
            for leaf in 0..13u64 {
                let path = s.auth_path(leaf).unwrap();
                let rung = ladder.rung_for(&path).unwrap();
                let msg = leaf.to_be_bytes();
                assert!(hash.path_reaches_rung(&msg, &path, rung));
                assert!(!hash.path_reaches_rung(b"other", &path, rung));
                let mut bent = path.clone();
                if let Some(first) = bent.siblings.first_mut() {
                    first[0] ^= 1;
                    assert!(!hash.path_reaches_rung(&msg, &bent, rung));
                }
            }
        }
    }

    #[test]
    fn old_paths_verify_against_new_ladders_only_where_a_rung_survives() {
        let mut s = set(HashFamily::Sha2, 8);
        let old_path = s.auth_path(3).unwrap();
        for i in 8..12u64 {
            s.append(&i.to_be_bytes(), [0; N]);
        }
        let ladder = s.ladder();
        let rung = ladder.rung_for(&old_path).unwrap();
        assert_eq!((rung.left, rung.right), (0, 7));
        assert!(s
            .tree_hash()
            .path_reaches_rung(&3u64.to_be_bytes(), &old_path, rung));
    }

    #[test]
    fn families_and_series_give_different_trees() {
        let a = set(HashFamily::Sha2, 4).ladder();
        let b = set(HashFamily::Shake, 4).ladder();
        assert_ne!(a.rungs[0].hash, b.rungs[0].hash);
        let c = set_with(spx(HashFamily::Sha2), &[8; 8], 4).ladder();
        assert_ne!(a.rungs[0].hash, c.rungs[0].hash);
        let d = set_with(
            TreeHash::Sid {
                family: HashFamily::Sha2,
            },
            &[8; 32],
            4,
        )
        .ladder();
        let e = set_with(
            TreeHash::Sid {
                family: HashFamily::Shake,
            },
            &[8; 32],
            4,
        )
        .ladder();
        assert_ne!(d.rungs[0].hash, e.rungs[0].hash);
    }

    fn hex16(s: &str) -> [u8; N] {
        let v: Vec<u8> = (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect();
        v.try_into().unwrap()
    }

    /// Intermediate values printed by Verisign's MTL library demo notebook
    /// (verisign/MTL `examples/demo/mtlmode_demo.ipynb`, commit 3c7f089a, §4.2): leaf 4 of
    /// series 8f5c…b9d0 (SHAKE, n = 16), its internal nodes (4,5), (4,7) and the rung (0,7).
    #[test]
    fn the_2026_shake_hashes_match_verisigns_demo() {
        let sid = hex16("8f5ce818a1df091dfb8288ccad6ff450")
            .into_iter()
            .chain(hex16("99a48c464f540cab05114981736bb9d0"))
            .collect::<Vec<u8>>();
        let series = SeriesId::new(&sid).unwrap();
        let message: Vec<u8> = crate::dnssec::mtl::tests::DEMO_MESSAGE.to_vec();
        let h = TreeHash::Sid {
            family: HashFamily::Shake,
        };
        let leaf = h.leaf(
            series,
            4,
            &hex16("c328bba50c17738b1f081ece4c0db4c7"),
            &message,
        );
        assert_eq!(leaf, hex16("ceb61a79cefafc18be08495d1d9f212d"));
        let n45 = h.node(
            series,
            (4, 5),
            &leaf,
            &hex16("b1a6e1a4db73ce8d9ac4449ab8f337b3"),
        );
        assert_eq!(n45, hex16("439ea68b0bf8c252782ce8934bbedad2"));
        let n47 = h.node(
            series,
            (4, 7),
            &n45,
            &hex16("5c91bf49af54183532cd0584162d7f8a"),
        );
        assert_eq!(n47, hex16("2ef001d158ef395cb7af58bafbeebb31"));
        let n07 = h.node(
            series,
            (0, 7),
            &hex16("d8d1f80104c99e8438acf89a8872237c"),
            &n47,
        );
        assert_eq!(n07, hex16("fc1116c69a14e5ab88ed3680bdac01fc"));
    }
}

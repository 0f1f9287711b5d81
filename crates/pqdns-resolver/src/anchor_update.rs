//! Automated updates of DNSSEC trust anchors (RFC 5011): the state of each key of a zone with
//! a configured trust anchor, as the zone's validated DNSKEY RRset shows it over time, and
//! the anchors that follow from it. No I/O but the state file; the clock is passed in (UNIX
//! seconds), so hold-down times can be stepped through in tests.
//!
//! States (RFC 5011 §4.1), per key, a key being its DNSKEY RDATA with the REVOKE bit clear:
//! - **AddPend**: a new SEP key (Zone Key and SEP flags, not revoked) seen in a DNSKEY RRset
//!   validated with the zone's current anchors (§2.2). It becomes **Valid** when seen again
//!   after the add hold-down, [`ADD_HOLD_DOWN`] (30 days, §2.4.1) — "AddTime" — and is
//!   forgotten if it is missing from an RRset before then ("KeyRem").
//! - **Valid**: a trust anchor. Missing from an RRset: **Missing** (still an anchor, §4.1);
//!   seen again: Valid.
//! - **Revoked**: the key appeared with the REVOKE bit (flag 0x0080, §3) and a signature over
//!   the DNSKEY RRset by that revoked key verified (§2.1: the key tag is computed with the bit
//!   set; "the key MUST also sign the DNSKEY RRset"): never an anchor again. Forgotten once
//!   [`REMOVE_HOLD_DOWN`] (30 days, §2.4.2) has passed and it is no longer published.
//!
//! The first validated RRset of a zone seeds its state: the keys matching the configured
//! anchor (DS or DNSKEY) are Valid, the other SEP keys AddPend. From then on the state, not
//! the configured anchor, is the zone's anchor (as unbound's `auto-trust-anchor-file`). The
//! state is kept in a text file written atomically ([`pqdns_core::atomic_file`]) after every
//! change, and read again at start.
//!
//! Active refresh (§2.3): the DNSKEY RRset is fetched again every
//! max(1 hour, min(15 days, original TTL / 2, signature validity left / 2))
//! ([`query_interval`]), and after a failure every max(1 hour, min(1 day, original TTL / 10,
//! signature validity left / 10)) ([`retry_interval`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use pqdns_core::atomic_file::{write_atomic, FileMode};
use pqdns_core::dnssec::dnskey::{ds_digest, key_tag, DigestType, FLAG_SEP, FLAG_ZONE};
use pqdns_core::wire::rdata::Dnskey;
use pqdns_core::Name;

/// The REVOKE flag of a DNSKEY (RFC 5011 §3: bit 8, 0x0080).
pub const FLAG_REVOKE: u16 = 0x0080;
/// Add hold-down time, seconds (RFC 5011 §2.4.1: 30 days).
pub const ADD_HOLD_DOWN: u64 = 30 * 86_400;
/// Remove hold-down time, seconds (RFC 5011 §2.4.2: 30 days).
pub const REMOVE_HOLD_DOWN: u64 = 30 * 86_400;
/// Shortest interval between active refreshes, seconds (RFC 5011 §2.3: 1 hour).
pub const MIN_QUERY_INTERVAL: u64 = 3600;
/// Longest interval between active refreshes, seconds (RFC 5011 §2.3: 15 days).
pub const MAX_QUERY_INTERVAL: u64 = 15 * 86_400;
/// Longest interval between retries after a failed refresh, seconds (RFC 5011 §2.3: 1 day).
pub const MAX_RETRY_INTERVAL: u64 = 86_400;
/// Most keys whose state is kept per zone; further new keys are ignored (a zone publishing
/// hundreds of SEP keys could otherwise grow the state without bound).
pub const MAX_KEYS_PER_ZONE: usize = 32;
/// First line of the state file.
const HEADER: &str = "; pqdns-resolver trust anchor state (RFC 5011): zone state since dnskey-hex";

/// The state of one key (RFC 5011 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyState {
    /// Seen first at `since` (UNIX seconds); an anchor after [`ADD_HOLD_DOWN`].
    AddPend {
        /// When first seen, UNIX seconds.
        since: u64,
    },
    /// A trust anchor.
    Valid,
    /// A trust anchor missing from the last RRset seen.
    Missing,
    /// Revoked at `since` (UNIX seconds); never an anchor again.
    Revoked {
        /// When the revocation was seen, UNIX seconds.
        since: u64,
    },
}

impl KeyState {
    /// True for the states whose key is a trust anchor (Valid, Missing).
    pub fn is_anchor(self) -> bool {
        matches!(self, KeyState::Valid | KeyState::Missing)
    }

    fn name(self) -> &'static str {
        match self {
            KeyState::AddPend { .. } => "ADDPEND",
            KeyState::Valid => "VALID",
            KeyState::Missing => "MISSING",
            KeyState::Revoked { .. } => "REVOKED",
        }
    }

    fn since(self) -> u64 {
        match self {
            KeyState::AddPend { since } | KeyState::Revoked { since } => since,
            KeyState::Valid | KeyState::Missing => 0,
        }
    }
}

/// One managed key.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Key {
    /// DNSKEY RDATA with the REVOKE bit clear.
    dnskey: Vec<u8>,
    state: KeyState,
}

/// A key's state changed (for logs and tests).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Key tag of the key without the REVOKE bit.
    pub key_tag: u16,
    /// The state before (`None`: a new key).
    pub from: Option<KeyState>,
    /// The state after (`None`: forgotten).
    pub to: Option<KeyState>,
}

/// Why the state file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateFileError {
    /// Reading failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The reason.
        source: std::io::Error,
    },
    /// A line is not `zone state since hex`.
    #[error("{path} line {line}: {message}")]
    Syntax {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// The managed keys of every zone with a trust anchor (RFC 5011).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ManagedAnchors {
    zones: BTreeMap<Name, Vec<Key>>,
}

/// The DNSKEY RDATA `rdata` with the REVOKE bit clear, and whether it was set; `None` when it
/// is not DNSKEY RDATA.
fn without_revoke(rdata: &[u8]) -> Option<(Vec<u8>, bool)> {
    let key = Dnskey::parse(rdata)?;
    let mut plain = rdata.to_vec();
    plain[..2].copy_from_slice(&(key.flags & !FLAG_REVOKE).to_be_bytes());
    Some((plain, key.flags & FLAG_REVOKE != 0))
}

/// True if `rdata` is a zone key with the SEP flag (RFC 5011 §2.2 tracks SEP keys).
fn is_sep_zone_key(rdata: &[u8]) -> bool {
    Dnskey::parse(rdata).is_some_and(|k| k.flags & (FLAG_SEP | FLAG_ZONE) == FLAG_SEP | FLAG_ZONE)
}

/// True if DS RDATA `ds` names the DNSKEY `dnskey` of `zone` (key tag, algorithm, digest).
fn ds_matches(zone: &Name, ds: &[u8], dnskey: &[u8]) -> bool {
    let (Some(key), [t0, t1, alg, digest_type, digest @ ..]) = (Dnskey::parse(dnskey), ds) else {
        return false;
    };
    let Some(digest_type) = DigestType::from_number(*digest_type) else {
        return false;
    };
    u16::from_be_bytes([*t0, *t1]) == key_tag(dnskey)
        && key.algorithm.0 == *alg
        && ds_digest(zone, dnskey, digest_type) == digest
}

impl ManagedAnchors {
    /// No managed keys.
    pub fn new() -> ManagedAnchors {
        ManagedAnchors::default()
    }

    /// True if `zone` has a state (seeded by a validated DNSKEY RRset or read from the file).
    pub fn has_zone(&self, zone: &Name) -> bool {
        self.zones.contains_key(zone)
    }

    /// The zones with a state.
    pub fn zones(&self) -> impl Iterator<Item = &Name> {
        self.zones.keys()
    }

    /// The state of `zone`'s key whose DNSKEY RDATA (REVOKE bit either way) is `dnskey`.
    pub fn state(&self, zone: &Name, dnskey: &[u8]) -> Option<KeyState> {
        let (plain, _) = without_revoke(dnskey)?;
        self.zones
            .get(zone)?
            .iter()
            .find(|k| k.dnskey == plain)
            .map(|k| k.state)
    }

    /// The DS RDATA (SHA-256) of `zone`'s trust anchors (Valid and Missing keys), for the
    /// validator; `None` when the zone has no state (its configured anchor applies). An
    /// empty list (every key revoked) leaves the zone without anchor: Bogus.
    pub fn ds_for(&self, zone: &Name) -> Option<Vec<Vec<u8>>> {
        let keys = self.zones.get(zone)?;
        Some(
            keys.iter()
                .filter(|k| k.state.is_anchor())
                .map(|k| {
                    let Some(key) = Dnskey::parse(&k.dnskey) else {
                        return Vec::new();
                    };
                    let mut ds = key_tag(&k.dnskey).to_be_bytes().to_vec();
                    ds.push(key.algorithm.0);
                    ds.push(DigestType::Sha256.number());
                    ds.extend(ds_digest(zone, &k.dnskey, DigestType::Sha256));
                    ds
                })
                .filter(|ds| !ds.is_empty())
                .collect(),
        )
    }

    /// Applies `zone`'s DNSKEY RRset `rrset` (RDATA), validated at `now` (UNIX seconds) with
    /// the zone's current anchors, to its keys' states; `self_signed_revoked(rdata)` says
    /// whether a signature over the RRset by the revoked key `rdata` (REVOKE bit set)
    /// verified. A zone without state is seeded: keys matching `configured_ds` (DS RDATA of
    /// the configured anchor) Valid, other SEP keys AddPend. Returns the changes.
    pub fn observe(
        &mut self,
        zone: &Name,
        rrset: &[Vec<u8>],
        configured_ds: &[Vec<u8>],
        self_signed_revoked: impl Fn(&[u8]) -> bool,
        now: u64,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        let mut published: Vec<(Vec<u8>, bool)> = Vec::new();
        for rdata in rrset {
            if let Some((plain, revoked)) = without_revoke(rdata) {
                // §2.1: a revocation counts only when the revoked key signed the RRset.
                if !revoked || self_signed_revoked(rdata) {
                    published.push((plain, revoked));
                }
            }
        }
        let keys = match self.zones.get_mut(zone) {
            Some(keys) => keys,
            None => {
                let mut keys = Vec::new();
                for (plain, revoked) in &published {
                    let configured = configured_ds.iter().any(|ds| ds_matches(zone, ds, plain));
                    let state = match (configured, revoked) {
                        (true, false) => KeyState::Valid,
                        (false, false) if is_sep_zone_key(plain) => {
                            KeyState::AddPend { since: now }
                        }
                        _ => continue,
                    };
                    if keys.len() < MAX_KEYS_PER_ZONE {
                        changes.push(Change {
                            key_tag: key_tag(plain),
                            from: None,
                            to: Some(state),
                        });
                        keys.push(Key {
                            dnskey: plain.clone(),
                            state,
                        });
                    }
                }
                self.zones.insert(zone.clone(), keys);
                return changes;
            }
        };
        let mut kept = Vec::with_capacity(keys.len());
        for key in keys.drain(..) {
            let seen = published.iter().find(|(p, _)| *p == key.dnskey);
            let next = match (key.state, seen) {
                (KeyState::Revoked { since }, seen) => {
                    (seen.is_some() || now < since + REMOVE_HOLD_DOWN).then_some(key.state)
                }
                (_, Some((_, true))) if key.state.is_anchor() => {
                    Some(KeyState::Revoked { since: now })
                }
                // An AddPend key revoked before it was trusted: forgotten.
                (KeyState::AddPend { .. }, Some((_, true)) | None) => None,
                (KeyState::AddPend { since }, Some(_)) if now >= since + ADD_HOLD_DOWN => {
                    Some(KeyState::Valid)
                }
                (KeyState::AddPend { .. }, Some(_)) => Some(key.state),
                (KeyState::Valid | KeyState::Missing, None) => Some(KeyState::Missing),
                (KeyState::Valid | KeyState::Missing, Some(_)) => Some(KeyState::Valid),
            };
            if next != Some(key.state) {
                changes.push(Change {
                    key_tag: key_tag(&key.dnskey),
                    from: Some(key.state),
                    to: next,
                });
            }
            if let Some(state) = next {
                kept.push(Key {
                    dnskey: key.dnskey,
                    state,
                });
            }
        }
        for (plain, revoked) in published {
            let known = kept.iter().any(|k| k.dnskey == plain);
            if !known && !revoked && is_sep_zone_key(&plain) && kept.len() < MAX_KEYS_PER_ZONE {
                let state = KeyState::AddPend { since: now };
                changes.push(Change {
                    key_tag: key_tag(&plain),
                    from: None,
                    to: Some(state),
                });
                kept.push(Key {
                    dnskey: plain,
                    state,
                });
            }
        }
        *keys = kept;
        changes
    }

    /// The state file's text: a header line, then one line per key, `zone STATE since hex`.
    pub fn to_text(&self) -> String {
        let mut text = format!("{HEADER}\n");
        for (zone, keys) in &self.zones {
            for k in keys {
                let hex: String = k.dnskey.iter().map(|b| format!("{b:02x}")).collect();
                let _ = writeln!(text, "{zone} {} {} {hex}", k.state.name(), k.state.since());
            }
        }
        text
    }

    /// Parses [`ManagedAnchors::to_text`]'s format; `path` names the file in errors.
    ///
    /// # Errors
    /// [`StateFileError::Syntax`] naming the line.
    pub fn parse(text: &str, path: &str) -> Result<ManagedAnchors, StateFileError> {
        let mut anchors = ManagedAnchors::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with(';') {
                continue;
            }
            let bad = |message: &str| StateFileError::Syntax {
                path: path.to_string(),
                line: i + 1,
                message: message.to_string(),
            };
            let [zone, state, since, hex] = line.split_whitespace().collect::<Vec<_>>()[..] else {
                return Err(bad("expected: zone state since dnskey-hex"));
            };
            let zone: Name = zone.parse().map_err(|_| bad("bad zone name"))?;
            let since: u64 = since.parse().map_err(|_| bad("bad time"))?;
            let state = match state {
                "ADDPEND" => KeyState::AddPend { since },
                "VALID" => KeyState::Valid,
                "MISSING" => KeyState::Missing,
                "REVOKED" => KeyState::Revoked { since },
                _ => return Err(bad("state is not ADDPEND, VALID, MISSING or REVOKED")),
            };
            let dnskey = (0..hex.len())
                .step_by(2)
                .map(|at| {
                    hex.get(at..at + 2)
                        .and_then(|b| u8::from_str_radix(b, 16).ok())
                })
                .collect::<Option<Vec<u8>>>()
                .filter(|k| Dnskey::parse(k).is_some())
                .ok_or_else(|| bad("bad DNSKEY RDATA"))?;
            let keys = anchors.zones.entry(zone).or_default();
            if keys.len() >= MAX_KEYS_PER_ZONE {
                return Err(bad("more keys for the zone than kept"));
            }
            keys.push(Key { dnskey, state });
        }
        Ok(anchors)
    }

    /// Reads the state file at `path`; an absent file is an empty state.
    ///
    /// # Errors
    /// [`StateFileError`] when it cannot be read or parsed.
    pub fn load(path: &Path) -> Result<ManagedAnchors, StateFileError> {
        match std::fs::read_to_string(path) {
            Ok(text) => ManagedAnchors::parse(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ManagedAnchors::new()),
            Err(source) => Err(StateFileError::Io {
                path: path.display().to_string(),
                source,
            }),
        }
    }

    /// Writes the state to `path` atomically (public data: keys and states).
    ///
    /// # Errors
    /// The I/O error.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        write_atomic(path, self.to_text().as_bytes(), FileMode::Public)
    }
}

/// A state file and the state read from it at start: what [`crate::Config::anchor_state`]
/// takes to turn automated updates on.
#[derive(Clone, Debug)]
pub struct StateFile {
    /// Where the state is kept.
    pub path: PathBuf,
    /// The state as read (empty when the file did not exist yet).
    pub anchors: ManagedAnchors,
}

impl StateFile {
    /// Reads the state at `path` ([`ManagedAnchors::load`]).
    ///
    /// # Errors
    /// As [`ManagedAnchors::load`].
    pub fn open(path: &Path) -> Result<StateFile, StateFileError> {
        Ok(StateFile {
            path: path.to_path_buf(),
            anchors: ManagedAnchors::load(path)?,
        })
    }
}

/// Seconds until the next active refresh after a successful one (RFC 5011 §2.3):
/// max(1 hour, min(15 days, `original_ttl` / 2, `signature_left` / 2)), where
/// `signature_left` is the time until the DNSKEY RRset's signatures expire, seconds.
pub fn query_interval(original_ttl: u32, signature_left: u64) -> u64 {
    (u64::from(original_ttl) / 2)
        .min(signature_left / 2)
        .clamp(MIN_QUERY_INTERVAL, MAX_QUERY_INTERVAL)
}

/// Seconds until the next try after a failed refresh (RFC 5011 §2.3):
/// max(1 hour, min(1 day, `original_ttl` / 10, `signature_left` / 10)).
pub fn retry_interval(original_ttl: u32, signature_left: u64) -> u64 {
    (u64::from(original_ttl) / 10)
        .min(signature_left / 10)
        .clamp(MIN_QUERY_INTERVAL, MAX_RETRY_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400;

    fn key(flags: u16, byte: u8) -> Vec<u8> {
        let mut k = flags.to_be_bytes().to_vec();
        k.extend([3, 13]);
        k.extend([byte; 64]);
        k
    }

    fn revoked(k: &[u8]) -> Vec<u8> {
        let mut r = k.to_vec();
        r[1] |= FLAG_REVOKE as u8;
        r
    }

    fn ds(zone: &Name, k: &[u8]) -> Vec<u8> {
        let mut ds = key_tag(k).to_be_bytes().to_vec();
        ds.extend([13, 2]);
        ds.extend(ds_digest(zone, k, DigestType::Sha256));
        ds
    }

    /// A whole KSK roll, day by day (RFC 5011 §6 scenario): publish, hold-down, revoke.
    #[test]
    fn a_ksk_roll_through_every_state() {
        let zone = Name::root();
        let (old, new, zsk) = (key(257, 1), key(257, 2), key(256, 3));
        let mut m = ManagedAnchors::new();
        let all_self_signed = |_: &[u8]| true;
        // Seeded from the configured DS: the old KSK Valid; the ZSK not tracked.
        let c = m.observe(
            &zone,
            &[old.clone(), zsk.clone()],
            &[ds(&zone, &old)],
            all_self_signed,
            0,
        );
        assert_eq!(c.len(), 1);
        assert_eq!(m.state(&zone, &old), Some(KeyState::Valid));
        assert_eq!(m.state(&zone, &zsk), None);
        assert_eq!(m.ds_for(&zone).unwrap(), vec![ds(&zone, &old)]);
        // The new KSK appears on day 1: AddPend, not an anchor.
        let published = [old.clone(), new.clone(), zsk.clone()];
        m.observe(&zone, &published, &[], all_self_signed, DAY);
        assert_eq!(m.state(&zone, &new), Some(KeyState::AddPend { since: DAY }));
        assert_eq!(m.ds_for(&zone).unwrap().len(), 1);
        // One second short of the hold-down: still pending; at 30 days: Valid.
        m.observe(
            &zone,
            &published,
            &[],
            all_self_signed,
            DAY + ADD_HOLD_DOWN - 1,
        );
        assert!(!m.state(&zone, &new).unwrap().is_anchor());
        let c = m.observe(&zone, &published, &[], all_self_signed, DAY + ADD_HOLD_DOWN);
        assert_eq!(
            c,
            [Change {
                key_tag: key_tag(&new),
                from: Some(KeyState::AddPend { since: DAY }),
                to: Some(KeyState::Valid)
            }]
        );
        assert_eq!(
            m.ds_for(&zone).unwrap(),
            vec![ds(&zone, &old), ds(&zone, &new)]
        );
        // The old KSK is revoked (self-signed): Revoked, no longer an anchor.
        let t = 40 * DAY;
        let rolled = [revoked(&old), new.clone(), zsk.clone()];
        m.observe(&zone, &rolled, &[], all_self_signed, t);
        assert_eq!(m.state(&zone, &old), Some(KeyState::Revoked { since: t }));
        assert_eq!(m.ds_for(&zone).unwrap(), vec![ds(&zone, &new)]);
        // Removed from the RRset: kept for the remove hold-down, then forgotten.
        let after = [new.clone(), zsk.clone()];
        m.observe(
            &zone,
            &after,
            &[],
            all_self_signed,
            t + REMOVE_HOLD_DOWN - 1,
        );
        assert!(m.state(&zone, &old).is_some());
        m.observe(&zone, &after, &[], all_self_signed, t + REMOVE_HOLD_DOWN);
        assert_eq!(m.state(&zone, &old), None);
        // The state file round trip.
        let text = m.to_text();
        assert_eq!(ManagedAnchors::parse(&text, "f").unwrap(), m);
    }

    #[test]
    fn revocation_needs_a_self_signature_and_pending_keys_reset() {
        let zone: Name = "example.".parse().unwrap();
        let (old, new) = (key(257, 1), key(257, 2));
        let mut m = ManagedAnchors::new();
        m.observe(
            &zone,
            std::slice::from_ref(&old),
            &[ds(&zone, &old)],
            |_| false,
            0,
        );
        // The REVOKE bit without the revoked key's signature: ignored (§2.1), the key is
        // missing, still an anchor.
        m.observe(&zone, &[revoked(&old)], &[], |_| false, 10);
        assert_eq!(m.state(&zone, &old), Some(KeyState::Missing));
        assert_eq!(m.ds_for(&zone).unwrap().len(), 1);
        m.observe(&zone, std::slice::from_ref(&old), &[], |_| false, 20);
        assert_eq!(m.state(&zone, &old), Some(KeyState::Valid));
        // A pending key that disappears starts over (KeyRem).
        m.observe(&zone, &[old.clone(), new.clone()], &[], |_| false, 100);
        m.observe(&zone, std::slice::from_ref(&old), &[], |_| false, 200);
        assert_eq!(m.state(&zone, &new), None);
        m.observe(&zone, &[old.clone(), new.clone()], &[], |_| false, 300);
        m.observe(
            &zone,
            &[old.clone(), new.clone()],
            &[],
            |_| false,
            100 + ADD_HOLD_DOWN,
        );
        assert_eq!(m.state(&zone, &new), Some(KeyState::AddPend { since: 300 }));
    }

    #[test]
    fn intervals_follow_section_2_3() {
        assert_eq!(query_interval(172_800, 10 * DAY), DAY);
        assert_eq!(query_interval(3600, 10 * DAY), 3600, "at least an hour");
        assert_eq!(
            query_interval(u32::MAX, 100 * DAY),
            15 * DAY,
            "at most 15 days"
        );
        assert_eq!(
            query_interval(172_800, 4 * 3600),
            2 * 3600,
            "half the validity left"
        );
        assert_eq!(retry_interval(172_800, 10 * DAY), 17_280);
        assert_eq!(retry_interval(600, 10 * DAY), 3600);
        assert_eq!(retry_interval(u32::MAX, 100 * DAY), DAY);
    }

    #[test]
    fn bad_state_lines_are_named() {
        let err =
            ManagedAnchors::parse("; c\n. VALID 0 0101030d00\n. GONE 0 0101\n", "s").unwrap_err();
        assert!(err.to_string().contains("s line 3"), "{err}");
        assert!(ManagedAnchors::parse(". VALID x 0101030d\n", "s").is_err());
        assert!(
            ManagedAnchors::parse(". VALID 0 01\n", "s").is_err(),
            "not DNSKEY RDATA"
        );
    }
}

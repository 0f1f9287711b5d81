//! Algorithm rollovers (RFC 6781 §4.1.4, the conservative approach; timing after RFC 7583
//! §3.3 and §5): the state of each DNSSEC algorithm of a zone, persisted beside its keys, and
//! the steps that take a zone from one set of algorithms to another (ECDSAP256SHA256 →
//! ML-DSA-44, or → dual ECDSAP256SHA256 + ML-DSA-44) without a moment in which a validator
//! holding cached DS, DNSKEY or data RRsets would find them Bogus.
//!
//! An incoming algorithm goes through
//! 1. [`Phase::Signing`]: its keys sign every RRset, its DNSKEYs are not published. Validators
//!    that insist on a signature of every algorithm in the DNSKEY RRset (RFC 4035 §2.2 read
//!    strictly; RFC 6840 §5.11 asks them not to) then find one on every cached RRset by the
//!    time the DNSKEYs appear: the phase lasts the zone's largest TTL plus the propagation
//!    delay.
//! 2. [`Phase::Published`]: DNSKEYs published; lasts the DNSKEY TTL plus the propagation
//!    delay, so that every cached DNSKEY RRset holds the new keys before a DS points to them.
//! 3. [`Phase::Submitted`]: the DS set the zone asks its parent for (CDS/CDNSKEY, RFC 7344,
//!    and the `.ds` file) includes it. At the same moment every outgoing algorithm becomes
//!    [`Phase::Withdrawn`]: no longer in the requested DS set, still published and signing.
//! 4. Once the operator says the parent's DS RRset equals the request
//!    ([`KeyState::confirm_ds`], `pqdns-zone rollover --ds-published`), and the parent's DS TTL
//!    plus its propagation delay have passed, incoming algorithms become [`Phase::Active`] and
//!    outgoing ones [`Phase::Unpublished`]: DNSKEYs removed, still signing, for the DNSKEY TTL
//!    plus the propagation delay (cached DNSKEY RRsets that still list them expire), after
//!    which the algorithm is gone from the zone.
//!
//! Adding an algorithm (dual signing) is the incoming half alone; removing one is the outgoing
//! half alone, allowed only while another algorithm is in the requested DS set.
//!
//! Within an active algorithm, keys are replaced when they reach their lifetime (`ksk_lifetime`,
//! `zsk_lifetime`), one role at a time, and only while no algorithm rollover runs ([`KeyPhase`]):
//! - a ZSK by **pre-publication** (RFC 7583 §3.2.1): the new ZSK is published without signing
//!   for the DNSKEY TTL plus the propagation delay, then signs while the old one stays
//!   published, unused, for the zone's largest TTL plus the propagation delay (cached
//!   signatures by it expire), then goes;
//! - a KSK by **double-DS** (RFC 7583 §3.3.2): the new KSK's DS joins the requested DS set
//!   before its DNSKEY is published; once the parent's DS RRset is confirmed and its TTL has
//!   passed, the new KSK replaces the old one in the DNSKEY RRset, and the old DS stays
//!   requested for the DNSKEY TTL plus the propagation delay.
//!
//! Times are UNIX seconds from the caller, so tests drive a rollover at any speed.

use std::fmt;
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::algorithm::SecAlg;
use crate::atomic_file::{write_atomic, FileMode};

/// Where an algorithm stands in the zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// Incoming: signing every RRset, DNSKEYs not published.
    Signing,
    /// Incoming: signing and published, not yet in the requested DS set.
    Published,
    /// Incoming: in the requested DS set, waiting for the parent.
    Submitted,
    /// Steady state: signing, published, in the DS set.
    Active,
    /// Outgoing: signing and published, left out of the requested DS set.
    Withdrawn,
    /// Outgoing: signing, DNSKEYs removed.
    Unpublished,
}

impl Phase {
    /// Whether the algorithm's DNSKEYs are in the apex DNSKEY RRset.
    pub fn is_published(self) -> bool {
        !matches!(self, Phase::Signing | Phase::Unpublished)
    }

    /// Whether the parent's DS RRset is to point to the algorithm's key-signing keys.
    pub fn in_ds_set(self) -> bool {
        matches!(self, Phase::Submitted | Phase::Active)
    }

    /// Whether the phase ends when the parent's DS RRset is confirmed.
    fn waits_for_parent(self) -> bool {
        matches!(self, Phase::Submitted | Phase::Withdrawn)
    }

    /// The phase's name in the state file and in logs (`signing`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Signing => "signing",
            Phase::Published => "published",
            Phase::Submitted => "submitted",
            Phase::Active => "active",
            Phase::Withdrawn => "withdrawn",
            Phase::Unpublished => "unpublished",
        }
    }
}

/// One algorithm of the zone and its phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlgorithmState {
    /// The algorithm number under the zone's profile (RFC 4034 §2.1.3).
    pub number: u8,
    /// Its name, for people reading the file (`ML-DSA-44`).
    pub name: String,
    /// Its phase.
    pub phase: Phase,
    /// When it entered the phase, UNIX seconds.
    pub since: u64,
}

/// Where one key stands within its algorithm (RFC 7583 §3.2.1 and §3.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyPhase {
    /// A new ZSK published ahead of use, not signing (pre-publication).
    Prepublished,
    /// A new KSK whose DS is asked of the parent before its DNSKEY is published (double-DS).
    Submitted,
    /// In use: signs, is published, and a KSK's DS is requested.
    Active,
    /// Replaced: a ZSK stays published, not signing, until its signatures are out of caches;
    /// a KSK's DS stays requested, its DNSKEY gone, until its DNSKEY is out of caches.
    Retired,
}

impl KeyPhase {
    /// The phase's name in the state file and in logs (`prepublished`).
    pub fn name(self) -> &'static str {
        match self {
            KeyPhase::Prepublished => "prepublished",
            KeyPhase::Submitted => "submitted",
            KeyPhase::Active => "active",
            KeyPhase::Retired => "retired",
        }
    }
}

/// One key of the zone and its phase, named by algorithm, key tag and flags.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyEntry {
    /// Algorithm number (RFC 4034 §2.1.3).
    pub algorithm: u8,
    /// Key tag (RFC 4034 Appendix B).
    pub tag: u16,
    /// DNSKEY flags: 257 for a KSK (SEP), 256 for a ZSK.
    pub flags: u16,
    /// Its phase.
    pub phase: KeyPhase,
    /// When it entered the phase, UNIX seconds.
    pub since: u64,
}

impl KeyEntry {
    fn is_sep(&self) -> bool {
        self.flags & 1 == 1
    }

    fn is(&self, algorithm: u8, tag: u16, flags: u16) -> bool {
        (self.algorithm, self.tag, self.flags) == (algorithm, tag, flags)
    }
}

/// What a key does in the zone now ([`KeyState::usage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// It signs RRsets (its role's: the DNSKEY RRset for a KSK, the rest for a ZSK).
    pub signs: bool,
    /// Its DNSKEY is in the apex DNSKEY RRset.
    pub published: bool,
    /// The parent's DS RRset is to point to it (CDS/CDNSKEY, the `.ds` file).
    pub in_ds_set: bool,
}

/// The waits between steps, in seconds (RFC 7583 §3.3 names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// TTL of the DNSKEY RRset ("TTLkey").
    pub dnskey_ttl: u64,
    /// The largest TTL of any RRset in the zone ("TTLsig").
    pub max_ttl: u64,
    /// Time for a change to reach every secondary ("Dprp").
    pub propagation_delay: u64,
    /// TTL of the DS RRset at the parent ("TTLds").
    pub parent_ds_ttl: u64,
    /// Time for a DS change to reach every server of the parent ("Dreg" after submission).
    pub parent_propagation_delay: u64,
    /// How long a KSK is active before it is replaced ("Lksk"); `None`: for ever.
    pub ksk_lifetime: Option<u64>,
    /// How long a ZSK is active before it is replaced ("Lzsk"); `None`: for ever.
    pub zsk_lifetime: Option<u64>,
}

impl Timings {
    /// How long `phase` lasts when it ends by time alone (`None` for the phases that end
    /// with the parent, or not at all).
    fn duration(&self, phase: Phase) -> Option<u64> {
        match phase {
            Phase::Signing => Some(self.max_ttl + self.propagation_delay),
            Phase::Published | Phase::Unpublished => Some(self.dnskey_ttl + self.propagation_delay),
            Phase::Submitted | Phase::Active | Phase::Withdrawn => None,
        }
    }

    /// How long after the parent's DS change is confirmed the waiting phases end.
    fn after_parent(&self) -> u64 {
        self.parent_ds_ttl + self.parent_propagation_delay
    }

    /// How long `key`'s phase lasts when it ends by time alone.
    fn key_duration(&self, key: &KeyEntry) -> Option<u64> {
        match (key.phase, key.is_sep()) {
            (KeyPhase::Prepublished, _) | (KeyPhase::Retired, true) => {
                Some(self.dnskey_ttl + self.propagation_delay)
            }
            (KeyPhase::Retired, false) => Some(self.max_ttl + self.propagation_delay),
            (KeyPhase::Submitted | KeyPhase::Active, _) => None,
        }
    }

    fn lifetime(&self, key: &KeyEntry) -> Option<u64> {
        if key.is_sep() {
            self.ksk_lifetime
        } else {
            self.zsk_lifetime
        }
    }
}

/// A zone's algorithms and where each stands: the file `<key_dir>/<zone>.keystate` (TOML),
/// written atomically by the server, read by `pqdns-zone rollover`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyState {
    /// When the parent's DS RRset was last confirmed to equal the requested DS set, UNIX
    /// seconds; cleared when the request changes.
    #[serde(default)]
    pub ds_confirmed_at: Option<u64>,
    /// The algorithms, in the order they entered the zone.
    #[serde(default, rename = "algorithm")]
    pub algorithms: Vec<AlgorithmState>,
    /// The keys of those algorithms.
    #[serde(default, rename = "key")]
    pub keys: Vec<KeyEntry>,
}

/// A change [`KeyState::advance`] made, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The algorithm's name, or for a key its algorithm, role and key tag
    /// (`ECDSAP256SHA256 ZSK 12345`).
    pub subject: String,
    /// The phase left (`None`: new).
    pub from: Option<&'static str>,
    /// The phase entered (`None`: it left the zone).
    pub to: Option<&'static str>,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} → {}",
            self.subject,
            self.from.unwrap_or("(new)"),
            self.to.unwrap_or("removed")
        )
    }
}

/// What the rollover waits for next ([`KeyState::next`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing: every algorithm is active.
    Settled,
    /// These steps at this time (UNIX seconds).
    At(u64, Vec<Step>),
    /// The operator: the parent's DS RRset must equal the requested DS set, then
    /// [`KeyState::confirm_ds`].
    ParentDs,
}

/// Why the key-state file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyStateError {
    /// Reading or writing it failed.
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        error: io::Error,
    },
    /// It is not a key-state file.
    #[error("{path}: {error}")]
    Syntax {
        /// The file.
        path: String,
        /// The TOML error (with line and column).
        error: toml::de::Error,
    },
}

impl KeyState {
    /// The state of a zone first signed with `wanted` (number and name of each algorithm):
    /// every algorithm active since `now`, as if its DS were at the parent.
    pub fn initial(wanted: &[(SecAlg, String)], now: u64) -> KeyState {
        KeyState {
            ds_confirmed_at: None,
            keys: Vec::new(),
            algorithms: wanted
                .iter()
                .map(|(number, name)| AlgorithmState {
                    number: number.0,
                    name: name.clone(),
                    phase: Phase::Active,
                    since: now,
                })
                .collect(),
        }
    }

    /// The state of a zone whose state file is gone while its key directory still holds keys
    /// of `leftover` algorithms that are not `wanted`: an algorithm rollover was under way.
    /// The leftover algorithms are [`Phase::Active`] (published, signing, in the DS set) and
    /// the wanted ones [`Phase::Published`] (published and signing, asked of the parent only
    /// after the usual waits), so the zone validates whichever of their DS records the parent
    /// holds, and the rollover goes on from there instead of dropping the old algorithm at
    /// once. Without leftovers, [`KeyState::initial`].
    pub fn recovered(
        wanted: &[(SecAlg, String)],
        leftover: &[(SecAlg, String)],
        now: u64,
    ) -> KeyState {
        let mut state = KeyState::initial(leftover, now);
        let phase = if leftover.is_empty() {
            Phase::Active
        } else {
            Phase::Published
        };
        state
            .algorithms
            .extend(wanted.iter().map(|(number, name)| AlgorithmState {
                number: number.0,
                name: name.clone(),
                phase,
                since: now,
            }));
        state
    }

    /// Reads `path`; `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// [`KeyStateError`] for I/O errors or a malformed file.
    pub fn read(path: &Path) -> Result<Option<KeyState>, KeyStateError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(error) => {
                return Err(KeyStateError::Io {
                    path: path.display().to_string(),
                    error,
                })
            }
        };
        toml::from_str(&text)
            .map(Some)
            .map_err(|error| KeyStateError::Syntax {
                path: path.display().to_string(),
                error,
            })
    }

    /// Writes `path` atomically (temporary file and rename; mode 0644, it holds no secret).
    ///
    /// # Errors
    /// [`KeyStateError::Io`].
    pub fn write(&self, path: &Path) -> Result<(), KeyStateError> {
        let body = toml::to_string(self).expect("key state serialises");
        let text = format!(
            "# Algorithm rollover state of this zone, written by pqdns-server.\n\
             # Show it with `pqdns-zone rollover ZONE.toml`; do not edit it by hand.\n{body}"
        );
        write_atomic(path, text.as_bytes(), FileMode::Public).map_err(|error| KeyStateError::Io {
            path: path.display().to_string(),
            error,
        })
    }

    /// Algorithm numbers whose keys sign (every algorithm in the state).
    pub fn signing(&self) -> Vec<SecAlg> {
        self.algorithms.iter().map(|a| SecAlg(a.number)).collect()
    }

    /// Algorithm numbers the parent's DS RRset is to point to (CDS/CDNSKEY, the `.ds` file).
    pub fn ds_set(&self) -> Vec<SecAlg> {
        self.algorithms
            .iter()
            .filter(|a| a.phase.in_ds_set())
            .map(|a| SecAlg(a.number))
            .collect()
    }

    /// What the key with this algorithm, key tag and flags does now; nothing for a key the
    /// state does not name.
    pub fn usage(&self, algorithm: SecAlg, tag: u16, flags: u16) -> Usage {
        let alg = self.algorithms.iter().find(|a| a.number == algorithm.0);
        let key = self.keys.iter().find(|k| k.is(algorithm.0, tag, flags));
        let (Some(alg), Some(key)) = (alg, key) else {
            return Usage::default();
        };
        let sep = key.is_sep();
        Usage {
            signs: key.phase == KeyPhase::Active,
            published: alg.phase.is_published()
                && match key.phase {
                    KeyPhase::Active | KeyPhase::Prepublished => true,
                    KeyPhase::Retired => !sep,
                    KeyPhase::Submitted => false,
                },
            in_ds_set: sep && alg.phase.in_ds_set() && key.phase != KeyPhase::Prepublished,
        }
    }

    /// Names the keys `found` (algorithm, key tag, flags) of every algorithm whose keys the
    /// state does not name yet (a new algorithm, or a state written before keys were tracked),
    /// as active since `now`.
    pub fn register(&mut self, found: &[(SecAlg, u16, u16)], now: u64) {
        for a in &self.algorithms {
            if self.keys.iter().any(|k| k.algorithm == a.number) {
                continue;
            }
            let new = found.iter().filter(|(alg, _, _)| alg.0 == a.number);
            self.keys.extend(new.map(|&(alg, tag, flags)| KeyEntry {
                algorithm: alg.0,
                tag,
                flags,
                phase: KeyPhase::Active,
                since: now,
            }));
        }
        self.keys
            .sort_by_key(|k| (k.algorithm, std::cmp::Reverse(k.flags)));
    }

    /// The keys (algorithm and flags) that have reached their lifetime at `now` and are to
    /// be replaced: none while an algorithm rollover runs or another key of the same
    /// algorithm and role is being replaced.
    pub fn rolls_due(&self, timings: &Timings, now: u64) -> Vec<(SecAlg, u16)> {
        if self.algorithms.iter().any(|a| a.phase != Phase::Active) {
            return Vec::new();
        }
        let busy = |k: &KeyEntry| {
            self.keys.iter().any(|o| {
                o.algorithm == k.algorithm && o.flags == k.flags && o.phase != KeyPhase::Active
            })
        };
        let mut due: Vec<(SecAlg, u16)> = self
            .keys
            .iter()
            .filter(|k| k.phase == KeyPhase::Active && !busy(k))
            .filter(|k| timings.lifetime(k).is_some_and(|l| now >= k.since + l))
            .map(|k| (SecAlg(k.algorithm), k.flags))
            .collect();
        due.dedup();
        due
    }

    /// Starts replacing the active key of `algorithm` and `flags` with the key of tag `tag`:
    /// a ZSK is pre-published, a KSK's DS submitted.
    pub fn start_roll(&mut self, algorithm: SecAlg, flags: u16, tag: u16, now: u64) -> Step {
        let key = KeyEntry {
            algorithm: algorithm.0,
            tag,
            flags,
            phase: if flags & 1 == 1 {
                KeyPhase::Submitted
            } else {
                KeyPhase::Prepublished
            },
            since: now,
        };
        if key.phase == KeyPhase::Submitted {
            self.ds_confirmed_at = None;
        }
        let step = Step {
            subject: self.label(&key),
            from: None,
            to: Some(key.phase.name()),
        };
        self.keys.push(key);
        step
    }

    /// How `key` is named in logs: algorithm, role and key tag (`ECDSAP256SHA256 KSK 12345`).
    pub fn label(&self, key: &KeyEntry) -> String {
        format!("{} {}", self.role_label(key), key.tag)
    }

    /// `ECDSAP256SHA256 KSK`.
    fn role_label(&self, key: &KeyEntry) -> String {
        let name = self
            .algorithms
            .iter()
            .find(|a| a.number == key.algorithm)
            .map_or_else(|| key.algorithm.to_string(), |a| a.name.clone());
        let role = if key.is_sep() { "KSK" } else { "ZSK" };
        format!("{name} {role}")
    }

    fn waits_for_parent(&self) -> bool {
        self.algorithms.iter().any(|a| a.phase.waits_for_parent())
            || self.keys.iter().any(|k| k.phase == KeyPhase::Submitted)
    }

    /// Records that the parent's DS RRset now equals the requested DS set. Returns `false`
    /// (and changes nothing) when nothing waits for the parent.
    pub fn confirm_ds(&mut self, now: u64) -> bool {
        if !self.waits_for_parent() {
            return false;
        }
        self.ds_confirmed_at = Some(now);
        true
    }

    /// Takes every step due at `now` towards the algorithm set `wanted` (the configuration),
    /// repeatedly, and returns them in order; an empty list means nothing changed.
    pub fn advance(
        &mut self,
        wanted: &[(SecAlg, String)],
        timings: &Timings,
        now: u64,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        for (number, name) in wanted {
            if !self.algorithms.iter().any(|a| a.number == number.0) {
                self.algorithms.push(AlgorithmState {
                    number: number.0,
                    name: name.clone(),
                    phase: Phase::Signing,
                    since: now,
                });
                steps.push(Step {
                    subject: name.clone(),
                    from: None,
                    to: Some(Phase::Signing.name()),
                });
            }
        }
        loop {
            let taken = match self.step(wanted, timings, now) {
                Some(step) => vec![step],
                None => self.key_steps(timings, now),
            };
            if taken.is_empty() {
                return steps;
            }
            steps.extend(taken);
        }
    }

    /// The first key step due at `now`, taken: a new key becoming active (the key it
    /// replaces retires with it), or a retired key leaving.
    fn key_steps(&mut self, timings: &Timings, now: u64) -> Vec<Step> {
        let parent_done = self
            .ds_confirmed_at
            .is_some_and(|c| now >= c + timings.after_parent());
        let Some(i) = self.keys.iter().position(|k| {
            let due = timings.key_duration(k).is_some_and(|d| now >= k.since + d);
            match k.phase {
                KeyPhase::Prepublished | KeyPhase::Retired => due,
                KeyPhase::Submitted => parent_done,
                KeyPhase::Active => false,
            }
        }) else {
            return Vec::new();
        };
        let key = self.keys[i].clone();
        let mut steps = Vec::new();
        if key.phase == KeyPhase::Retired {
            steps.push(Step {
                subject: self.label(&key),
                from: Some(key.phase.name()),
                to: None,
            });
            self.keys.remove(i);
            return steps;
        }
        for j in 0..self.keys.len() {
            let k = &self.keys[j];
            let replaced =
                k.algorithm == key.algorithm && k.flags == key.flags && k.phase == KeyPhase::Active;
            let (from, to) = if j == i {
                (key.phase, KeyPhase::Active)
            } else if replaced {
                (KeyPhase::Active, KeyPhase::Retired)
            } else {
                continue;
            };
            steps.push(Step {
                subject: self.label(k),
                from: Some(from.name()),
                to: Some(to.name()),
            });
            let k = &mut self.keys[j];
            k.phase = to;
            k.since = now;
        }
        steps
    }

    /// The first step due at `now`, taken.
    fn step(&mut self, wanted: &[(SecAlg, String)], timings: &Timings, now: u64) -> Option<Step> {
        let is_wanted = |n: u8| wanted.iter().any(|(w, _)| w.0 == n);
        let incoming = |phase: Phase| {
            self.algorithms
                .iter()
                .any(|a| is_wanted(a.number) && a.phase == phase)
        };
        let (signing, published) = (incoming(Phase::Signing), incoming(Phase::Published));
        let another_in_ds = |n: u8| {
            self.algorithms
                .iter()
                .any(|a| a.number != n && is_wanted(a.number) && a.phase.in_ds_set())
        };
        let parent_done = self
            .ds_confirmed_at
            .is_some_and(|c| now >= c + timings.after_parent());
        // `Some(None)`: the algorithm leaves the zone.
        let (index, to) = self.algorithms.iter().enumerate().find_map(|(i, a)| {
            let due = timings
                .duration(a.phase)
                .is_some_and(|d| now >= a.since + d);
            let to = match (is_wanted(a.number), a.phase) {
                (true, Phase::Signing) if due => Some(Phase::Published),
                // All incoming algorithms enter the DS set together, and the outgoing ones
                // leave it then, so the requested DS set changes once.
                (true, Phase::Published) if due && !signing => Some(Phase::Submitted),
                (true, Phase::Submitted) if parent_done => Some(Phase::Active),
                (true, Phase::Withdrawn) => Some(Phase::Submitted),
                (true, Phase::Unpublished) => Some(Phase::Published),
                // Never published: its signatures name a key no validator has.
                (false, Phase::Signing) => return Some((i, None)),
                (false, Phase::Published) => Some(Phase::Unpublished),
                (false, Phase::Active | Phase::Submitted)
                    if !signing && !published && another_in_ds(a.number) =>
                {
                    Some(Phase::Withdrawn)
                }
                (false, Phase::Withdrawn) if parent_done => Some(Phase::Unpublished),
                (false, Phase::Unpublished) if due => return Some((i, None)),
                _ => None,
            };
            to.map(|to| (i, Some(to)))
        })?;
        let from = self.algorithms[index].phase;
        let name = self.algorithms[index].name.clone();
        let number = self.algorithms[index].number;
        match to {
            Some(phase) => {
                let a = &mut self.algorithms[index];
                a.phase = phase;
                a.since = now;
                if phase.waits_for_parent() {
                    self.ds_confirmed_at = None;
                }
            }
            None => {
                self.algorithms.remove(index);
                self.keys.retain(|k| k.algorithm != number);
            }
        }
        Some(Step {
            subject: name,
            from: Some(from.name()),
            to: to.map(Phase::name),
        })
    }

    /// The next steps after `now` towards `wanted` under `timings`, and when they are due;
    /// [`Next::ParentDs`] when the rollover waits for the operator instead. `self` is taken to
    /// be advanced to `now` already. A key reaching its lifetime shows as a step into
    /// `prepublished` (ZSK) or `submitted` (KSK) of a key yet to be made.
    pub fn next(&self, wanted: &[(SecAlg, String)], timings: &Timings, now: u64) -> Next {
        // Between these times nothing changes, so the first at which advancing does anything
        // is the next step.
        let algorithms = self
            .algorithms
            .iter()
            .filter_map(|a| timings.duration(a.phase).map(|d| a.since + d));
        let keys = self.keys.iter().filter_map(|k| {
            let end = timings.key_duration(k).or(match k.phase {
                KeyPhase::Active => timings.lifetime(k),
                _ => None,
            });
            end.map(|d| k.since + d)
        });
        let mut times: Vec<u64> = algorithms
            .chain(keys)
            .chain(self.ds_confirmed_at.map(|c| c + timings.after_parent()))
            .filter(|&t| t > now)
            .collect();
        times.sort_unstable();
        for t in times {
            let mut ahead = self.clone();
            let mut steps = ahead.advance(wanted, timings, t);
            for (alg, flags) in ahead.rolls_due(timings, t) {
                let new = KeyEntry {
                    algorithm: alg.0,
                    tag: 0,
                    flags,
                    phase: KeyPhase::Active,
                    since: t,
                };
                let phase = if flags & 1 == 1 {
                    KeyPhase::Submitted
                } else {
                    KeyPhase::Prepublished
                };
                steps.push(Step {
                    subject: format!("{} (new key)", ahead.role_label(&new)),
                    from: None,
                    to: Some(phase.name()),
                });
            }
            if !steps.is_empty() {
                return Next::At(t, steps);
            }
        }
        if self.ds_confirmed_at.is_none() && self.waits_for_parent() {
            Next::ParentDs
        } else {
            Next::Settled
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timings = Timings {
        dnskey_ttl: 300,
        max_ttl: 600,
        propagation_delay: 60,
        parent_ds_ttl: 900,
        parent_propagation_delay: 120,
        ksk_lifetime: None,
        zsk_lifetime: None,
    };

    fn alg(n: u8) -> (SecAlg, String) {
        (SecAlg(n), format!("alg{n}"))
    }

    /// A time and the phases then.
    type Seen = (u64, Vec<(u8, Phase)>);

    fn phases(s: &KeyState) -> Vec<(u8, Phase)> {
        s.algorithms.iter().map(|a| (a.number, a.phase)).collect()
    }

    /// Drives `state` towards `wanted` from `now`, confirming the parent's DS as soon as it
    /// is asked for, and returns the phases after each change and the time it settled.
    fn drive(state: &mut KeyState, wanted: &[(SecAlg, String)], mut now: u64) -> (Vec<Seen>, u64) {
        let mut seen = Vec::new();
        state.advance(wanted, &T, now);
        seen.push((now, phases(state)));
        for _ in 0..20 {
            match state.next(wanted, &T, now) {
                Next::Settled => return (seen, now),
                Next::ParentDs => {
                    assert!(state.confirm_ds(now));
                    assert!(state.advance(wanted, &T, now).is_empty());
                }
                Next::At(at, steps) => {
                    assert!(at > now);
                    // Nothing happens before the announced time, then exactly what was said.
                    assert!(state.clone().advance(wanted, &T, at - 1).is_empty());
                    now = at;
                    assert_eq!(state.advance(wanted, &T, now), steps);
                    seen.push((now, phases(state)));
                }
            }
        }
        panic!("no end: {state:?}");
    }

    #[test]
    fn algorithm_rollover_walks_every_step_with_its_waits() {
        let mut state = KeyState::initial(&[alg(13)], 1000);
        let (seen, end) = drive(&mut state, &[alg(18)], 5000);
        use Phase::*;
        let expected = vec![
            (5000, vec![(13, Active), (18, Signing)]),
            // max TTL + propagation
            (5660, vec![(13, Active), (18, Published)]),
            // DNSKEY TTL + propagation; the DS set swaps in one step
            (6020, vec![(13, Withdrawn), (18, Submitted)]),
            // confirmed at once, then the parent's DS TTL + its propagation delay
            (7040, vec![(13, Unpublished), (18, Active)]),
            // DNSKEY TTL + propagation
            (7400, vec![(18, Active)]),
        ];
        assert_eq!(seen, expected);
        assert_eq!(end, 7400);
    }

    #[test]
    fn the_requested_ds_set_is_never_empty_and_keys_are_published_before_it_names_them() {
        use Phase::*;
        for (from, to) in [
            (vec![13], vec![18]),
            (vec![13], vec![13, 18]),
            (vec![13, 18], vec![18]),
            (vec![8, 13], vec![18, 19]),
        ] {
            let wanted: Vec<_> = to.iter().map(|&n| alg(n)).collect();
            let initial: Vec<_> = from.iter().map(|&n| alg(n)).collect();
            let mut state = KeyState::initial(&initial, 0);
            let (seen, _) = drive(&mut state, &wanted, 100);
            let mut published_since = std::collections::HashMap::new();
            for (t, phases) in &seen {
                let ds: Vec<u8> = phases
                    .iter()
                    .filter(|p| p.1.in_ds_set())
                    .map(|p| p.0)
                    .collect();
                assert!(!ds.is_empty(), "{from:?} → {to:?} at {t}: {phases:?}");
                for (n, p) in phases {
                    if p.is_published() {
                        published_since.entry(*n).or_insert(*t);
                    }
                    if *p == Submitted {
                        // Published for a whole DNSKEY TTL (plus propagation) first.
                        assert!(t - published_since[n] >= T.dnskey_ttl + T.propagation_delay);
                    }
                }
            }
            let end: Vec<_> = seen.last().unwrap().1.clone();
            assert_eq!(end, to.iter().map(|&n| (n, Active)).collect::<Vec<_>>());
        }
    }

    #[test]
    fn the_parent_gates_the_removal_and_the_state_file_round_trips() {
        let mut state = KeyState::initial(&[alg(13), alg(18)], 0);
        let wanted = [alg(18)];
        state.advance(&wanted, &T, 10);
        assert_eq!(state.ds_set(), vec![SecAlg(18)]);
        assert_eq!(state.next(&wanted, &T, 10), Next::ParentDs);
        // Without the confirmation nothing moves, however long it waits.
        assert!(state.advance(&wanted, &T, 10_000_000).is_empty());
        assert!(state.confirm_ds(20));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.keystate");
        assert_eq!(KeyState::read(&path).unwrap(), None);
        state.write(&path).unwrap();
        assert_eq!(KeyState::read(&path).unwrap(), Some(state.clone()));
        let Next::At(at, steps) = state.next(&wanted, &T, 20) else {
            panic!()
        };
        assert_eq!((at, steps[0].to), (20 + 900 + 120, Some("unpublished")));
        assert!(!KeyState::default().confirm_ds(5));
        std::fs::write(&path, "algorithm = 3\n").unwrap();
        let err = KeyState::read(&path).unwrap_err().to_string();
        assert!(
            err.contains("z.keystate") && err.contains("line 1"),
            "{err}"
        );
    }

    #[test]
    fn an_aborted_rollover_goes_back_safely() {
        use Phase::*;
        let mut state = KeyState::initial(&[alg(13)], 0);
        state.advance(&[alg(18)], &T, 10);
        assert_eq!(phases(&state), vec![(13, Active), (18, Signing)]);
        // Back to 13 alone before 18 was published: 18 leaves at once.
        state.advance(&[alg(13)], &T, 20);
        assert_eq!(phases(&state), vec![(13, Active)]);
        state.advance(&[alg(18)], &T, 30);
        state.advance(&[alg(18)], &T, 30 + 660);
        assert_eq!(phases(&state), vec![(13, Active), (18, Published)]);
        // After publication it is unpublished first, for a DNSKEY TTL.
        state.advance(&[alg(13)], &T, 700);
        assert_eq!(phases(&state), vec![(13, Active), (18, Unpublished)]);
        assert!(!state.algorithms[1].phase.is_published());
        assert_eq!(state.signing(), vec![SecAlg(13), SecAlg(18)]);
        state.advance(&[alg(13)], &T, 700 + 360);
        assert_eq!(phases(&state), vec![(13, Active)]);
    }

    /// An ECDSA (13) zone with KSK 100 and ZSK 200, active since 0, and [`T`] with the
    /// given KSK and ZSK lifetimes.
    fn keyed(ksk_lifetime: Option<u64>, zsk_lifetime: Option<u64>) -> (KeyState, Timings) {
        let mut state = KeyState::initial(&[alg(13)], 0);
        state.register(&[(SecAlg(13), 100, 257), (SecAlg(13), 200, 256)], 0);
        let t = Timings {
            ksk_lifetime,
            zsk_lifetime,
            ..T
        };
        (state, t)
    }

    fn usage(state: &KeyState, tag: u16, flags: u16) -> (bool, bool, bool) {
        let u = state.usage(SecAlg(13), tag, flags);
        (u.signs, u.published, u.in_ds_set)
    }

    #[test]
    fn a_zsk_is_replaced_by_pre_publication() {
        let (mut state, t) = keyed(None, Some(1000));
        assert_eq!(
            state.next(&[alg(13)], &t, 10),
            Next::At(
                1000,
                vec![Step {
                    subject: "alg13 ZSK (new key)".into(),
                    from: None,
                    to: Some("prepublished")
                }]
            )
        );
        assert!(state.rolls_due(&t, 999).is_empty());
        assert_eq!(state.rolls_due(&t, 1000), [(SecAlg(13), 256)]);
        state.start_roll(SecAlg(13), 256, 300, 1000);
        // Only one replacement at a time.
        assert!(state.rolls_due(&t, 5000).is_empty());
        // (signs, published, in DS set)
        assert_eq!(usage(&state, 300, 256), (false, true, false));
        assert_eq!(usage(&state, 200, 256), (true, true, false));
        assert!(state.advance(&[alg(13)], &t, 1000 + 359).is_empty());
        let steps: Vec<String> = state
            .advance(&[alg(13)], &t, 1360)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            steps,
            [
                "alg13 ZSK 200: active → retired",
                "alg13 ZSK 300: prepublished → active"
            ]
        );
        assert_eq!(usage(&state, 300, 256), (true, true, false));
        assert_eq!(usage(&state, 200, 256), (false, true, false));
        // The old ZSK's signatures may be cached for the largest TTL.
        assert!(state.advance(&[alg(13)], &t, 1360 + 659).is_empty());
        assert_eq!(state.advance(&[alg(13)], &t, 1360 + 660).len(), 1);
        assert_eq!(usage(&state, 200, 256), (false, false, false));
        assert_eq!(usage(&state, 100, 257), (true, true, true));
        assert_eq!(state.rolls_due(&t, 1360 + 1000), [(SecAlg(13), 256)]);
    }

    #[test]
    fn a_ksk_is_replaced_by_double_ds() {
        let (mut state, t) = keyed(Some(1000), None);
        assert_eq!(state.rolls_due(&t, 1000), [(SecAlg(13), 257)]);
        state.start_roll(SecAlg(13), 257, 101, 1000);
        // The new KSK's DS is asked for before its DNSKEY appears.
        assert_eq!(usage(&state, 101, 257), (false, false, true));
        assert_eq!(usage(&state, 100, 257), (true, true, true));
        assert_eq!(state.next(&[alg(13)], &t, 1000), Next::ParentDs);
        assert!(state.advance(&[alg(13)], &t, 9_000_000).is_empty());
        assert!(state.confirm_ds(1100));
        let Next::At(at, steps) = state.next(&[alg(13)], &t, 1100) else {
            panic!()
        };
        assert_eq!(at, 1100 + 900 + 120);
        assert_eq!(steps.len(), 2);
        state.advance(&[alg(13)], &t, at);
        assert_eq!(usage(&state, 101, 257), (true, true, true));
        // The old DS stays asked for while the old DNSKEY may be cached.
        assert_eq!(usage(&state, 100, 257), (false, false, true));
        assert!(state.advance(&[alg(13)], &t, at + 359).is_empty());
        state.advance(&[alg(13)], &t, at + 360);
        assert_eq!(usage(&state, 100, 257), (false, false, false));
        assert_eq!(state.keys.len(), 2);
    }

    #[test]
    fn keys_wait_while_an_algorithm_rollover_runs_and_leave_with_their_algorithm() {
        let (mut state, t) = keyed(Some(10), Some(10));
        state.advance(&[alg(18)], &t, 100);
        state.register(&[(SecAlg(18), 7, 257), (SecAlg(18), 8, 256)], 100);
        assert!(state.rolls_due(&t, 200).is_empty());
        // The new algorithm's keys sign, unpublished.
        let u = state.usage(SecAlg(18), 8, 256);
        assert!(u.signs && !u.published);
        let (_, end) = drive(&mut state, &[alg(18)], 100);
        assert!(state.keys.iter().all(|k| k.algorithm == 18), "{state:?}");
        assert!(!state.rolls_due(&t, end).is_empty());
    }
}

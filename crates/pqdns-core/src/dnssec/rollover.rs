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
//! half alone, allowed only while another algorithm is in the requested DS set. Times are UNIX
//! seconds from the caller, so tests drive a rollover at any speed.

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
}

/// A change [`KeyState::advance`] made, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The algorithm's name.
    pub name: String,
    /// The phase left (`None`: the algorithm is new).
    pub from: Option<Phase>,
    /// The phase entered (`None`: the algorithm left the zone).
    pub to: Option<Phase>,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let phase = |p: Option<Phase>, none: &'static str| match p {
            Some(p) => format!("{p:?}").to_lowercase(),
            None => none.to_string(),
        };
        write!(
            f,
            "{}: {} → {}",
            self.name,
            phase(self.from, "(new)"),
            phase(self.to, "removed")
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

    /// Algorithm numbers whose keys sign without their DNSKEYs being published.
    pub fn unpublished(&self) -> Vec<SecAlg> {
        self.numbers(|p| !p.is_published())
    }

    /// Algorithm numbers the parent's DS RRset is to point to (CDS/CDNSKEY, the `.ds` file).
    pub fn ds_set(&self) -> Vec<SecAlg> {
        self.numbers(Phase::in_ds_set)
    }

    fn numbers(&self, pick: impl Fn(Phase) -> bool) -> Vec<SecAlg> {
        self.algorithms
            .iter()
            .filter(|a| pick(a.phase))
            .map(|a| SecAlg(a.number))
            .collect()
    }

    /// Records that the parent's DS RRset now equals the requested DS set. Returns `false`
    /// (and changes nothing) when no algorithm waits for the parent.
    pub fn confirm_ds(&mut self, now: u64) -> bool {
        if !self.algorithms.iter().any(|a| a.phase.waits_for_parent()) {
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
                    name: name.clone(),
                    from: None,
                    to: Some(Phase::Signing),
                });
            }
        }
        while let Some(step) = self.step(wanted, timings, now) {
            steps.push(step);
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
            }
        }
        Some(Step {
            name,
            from: Some(from),
            to,
        })
    }

    /// The next steps after `now` towards `wanted` under `timings`, and when they are due;
    /// [`Next::ParentDs`] when the rollover waits for the operator instead. `self` is taken to
    /// be advanced to `now` already.
    pub fn next(&self, wanted: &[(SecAlg, String)], timings: &Timings, now: u64) -> Next {
        // Between these times nothing changes, so the first at which advancing does anything
        // is the next step.
        let mut times: Vec<u64> = self
            .algorithms
            .iter()
            .filter_map(|a| timings.duration(a.phase).map(|d| a.since + d))
            .chain(self.ds_confirmed_at.map(|c| c + timings.after_parent()))
            .filter(|&t| t > now)
            .collect();
        times.sort_unstable();
        for t in times {
            let steps = self.clone().advance(wanted, timings, t);
            if !steps.is_empty() {
                return Next::At(t, steps);
            }
        }
        if self.ds_confirmed_at.is_none()
            && self.algorithms.iter().any(|a| a.phase.waits_for_parent())
        {
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
        assert_eq!(
            (at, steps[0].to),
            (20 + 900 + 120, Some(Phase::Unpublished))
        );
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
        assert_eq!(state.unpublished(), vec![SecAlg(18)]);
        assert_eq!(state.signing(), vec![SecAlg(13), SecAlg(18)]);
        state.advance(&[alg(13)], &T, 700 + 360);
        assert_eq!(phases(&state), vec![(13, Active)]);
    }
}

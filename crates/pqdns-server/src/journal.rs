//! The IXFR journal (RFC 1995 §4): the differences between successive versions of a served
//! zone, so that a secondary at an older serial receives only what changed instead of the whole
//! zone (AXFR). An ML-DSA-44 signature is 2420 bytes: re-transferring a whole signed zone for a
//! one-record change costs megabytes where the difference costs a few kilobytes.
//!
//! - **Differences** ([`Change::between`]) are computed record by record, RRSIGs included, over
//!   the name tree and the NSEC3 tree of two versions of a zone: what a reload or a re-signing
//!   changed. The apex SOA is not part of them: it frames each difference (RFC 1995 §4: old SOA,
//!   deletions, new SOA, additions).
//! - **Continuity**: a [`Journal`] holds a chain of differences, each starting at the serial the
//!   one before ended at. A change whose data differs while the serial does not (serial policy
//!   `keep`, or an unsigned zone reloaded without a new serial) cannot be told apart by a
//!   secondary, so it empties the journal: IXFR falls back to the whole zone.
//! - **Bound**: at most [`DEFAULT_MAX_BYTES`] of records (uncompressed wire size) per zone; the
//!   oldest differences are dropped first, and a request from before the oldest one kept gets
//!   the whole zone (RFC 1995 §4).
//!
//! - **On disk**: pqdns-server writes the journal (master-file text, each difference in IXFR
//!   order) and the signed zone it leads to beside the zone's keys after every load
//!   (`crate::zones`, atomically), and starts from them: after a restart, secondaries keep
//!   transferring incrementally and unchanged signatures are kept.

use std::collections::BTreeMap;
use std::sync::Arc;

use pqdns_core::difference;
use pqdns_core::serial::Serial;
use pqdns_core::zone::Node;
use pqdns_core::{Class, Record, RrType, Zone};

/// The default bound of one zone's journal: 64 MiB of records in uncompressed wire form.
pub const DEFAULT_MAX_BYTES: usize = 64 << 20;

/// The difference between two versions of a zone, in IXFR order.
#[derive(Debug)]
pub struct Change {
    /// SOA serial of the older version.
    pub from: u32,
    /// SOA serial of the newer version.
    pub to: u32,
    /// The old SOA, the records deleted, the new SOA, the records added (RFC 1995 §4).
    records: Vec<Record>,
    /// How many records were deleted.
    deleted: usize,
    /// Uncompressed wire size of `records`, bytes.
    bytes: usize,
}

impl Change {
    /// A difference from its records in IXFR order (old SOA, deletions, new SOA, additions),
    /// as [`Change::records`] gives them; `None` unless exactly the first record and one
    /// later one are SOA records.
    pub fn from_records(records: Vec<Record>) -> Option<Change> {
        let serial = |r: &Record| {
            let at = r.rdata.len().checked_sub(20)?;
            Some(u32::from_be_bytes(r.rdata[at..at + 4].try_into().ok()?))
        };
        let soas: Vec<usize> = (0..records.len())
            .filter(|&i| records[i].rtype == RrType::SOA)
            .collect();
        let [0, second] = soas[..] else {
            return None;
        };
        let bytes = records
            .iter()
            .map(|r| r.owner.wire_len() + 10 + r.rdata.len())
            .sum();
        Some(Change {
            from: serial(&records[0])?,
            to: serial(&records[second])?,
            deleted: second,
            bytes,
            records,
        })
    }

    /// What changed from `old` to `new` (two versions of the same zone): every record (RRSIGs
    /// included) of `old` that `new` lacks is deleted, every record of `new` that `old` lacks is
    /// added; a TTL change deletes and adds the RRset. The apex SOAs frame the difference.
    pub fn between(old: &Zone, new: &Zone) -> Change {
        let mut deleted = vec![apex_soa(old)];
        let mut added = vec![apex_soa(new)];
        let apex = &new.origin;
        let empty = Node::new();
        for (name, before, after) in side_by_side(&old.nodes, &new.nodes) {
            let (before, after) = (before.unwrap_or(&empty), after.unwrap_or(&empty));
            for (&rtype, b, a) in side_by_side(before, after) {
                let soa_data = name == apex && rtype == RrType::SOA;
                difference::rrset(name, rtype, b, a, soa_data, &mut deleted, &mut added);
            }
        }
        for (name, b, a) in side_by_side(&old.nsec3, &new.nsec3) {
            difference::rrset(name, RrType::NSEC3, b, a, false, &mut deleted, &mut added);
        }
        let count = deleted.len();
        deleted.extend(added);
        let bytes = deleted
            .iter()
            .map(|r| r.owner.wire_len() + 10 + r.rdata.len())
            .sum();
        Change {
            from: old.soa_serial(),
            to: new.soa_serial(),
            records: deleted,
            deleted: count,
            bytes,
        }
    }

    /// The records in IXFR order: old SOA, deletions, new SOA, additions.
    pub fn records(&self) -> &[Record] {
        &self.records
    }

    /// Records deleted (the old SOA not counted).
    pub fn deleted(&self) -> usize {
        self.deleted - 1
    }

    /// Records added (the new SOA not counted).
    pub fn added(&self) -> usize {
        self.records.len() - self.deleted - 1
    }

    /// Whether nothing but the SOA changed (not even its serial).
    pub fn is_empty(&self) -> bool {
        self.records.len() == 2 && self.records[0] == self.records[1]
    }

    /// Uncompressed wire size of the records, SOAs included, bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Applies this change to `zone`, the version at serial `from`: removes each deleted record
    /// (the old SOA first), then adds each added one (the new SOA first). Returns false when a
    /// record to delete is not there (the zone was not at `from`); `zone` is then half changed.
    pub fn replay(&self, zone: &mut Zone) -> bool {
        let (deleted, added) = self.records.split_at(self.deleted);
        for r in deleted {
            if !zone.remove(r) {
                return false;
            }
        }
        added.iter().all(|r| zone.insert(r.clone()).is_ok())
    }
}

/// The keys of two maps in order, each with its value in either map: one pass over both, one
/// key comparison per step (canonical name comparisons are what a zone-sized difference
/// costs).
fn side_by_side<'m, K: Ord, V>(
    a: &'m BTreeMap<K, V>,
    b: &'m BTreeMap<K, V>,
) -> impl Iterator<Item = (&'m K, Option<&'m V>, Option<&'m V>)> + 'm {
    let (mut a, mut b) = (a.iter().peekable(), b.iter().peekable());
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (None, None) => None,
        (Some(_), None) => a.next().map(|(k, v)| (k, Some(v), None)),
        (None, Some(_)) => b.next().map(|(k, v)| (k, None, Some(v))),
        (Some((ka, _)), Some((kb, _))) => match ka.cmp(kb) {
            std::cmp::Ordering::Less => a.next().map(|(k, v)| (k, Some(v), None)),
            std::cmp::Ordering::Greater => b.next().map(|(k, v)| (k, None, Some(v))),
            std::cmp::Ordering::Equal => {
                let (k, va) = a.next()?;
                b.next().map(|(_, vb)| (k, Some(va), Some(vb)))
            }
        },
    })
}

/// The SOA record at the apex of `zone` (empty RDATA if it has none, which a loaded zone
/// always has).
fn apex_soa(zone: &Zone) -> Record {
    Record {
        owner: zone.origin.clone(),
        rtype: RrType::SOA,
        class: Class::IN,
        ttl: zone.soa_ttl(),
        rdata: zone.soa().to_vec(),
    }
}

/// A chain of [`Change`]s of one zone, oldest first, bounded in bytes. Cloning is cheap (the
/// changes are shared).
#[derive(Clone, Debug)]
pub struct Journal {
    changes: Vec<Arc<Change>>,
    bytes: usize,
    max_bytes: usize,
}

impl Default for Journal {
    fn default() -> Journal {
        Journal::new(DEFAULT_MAX_BYTES)
    }
}

impl Journal {
    /// An empty journal holding at most `max_bytes` of records.
    pub fn new(max_bytes: usize) -> Journal {
        Journal {
            changes: Vec::new(),
            bytes: 0,
            max_bytes,
        }
    }

    /// This journal with `change` appended. The oldest changes are dropped to stay within the
    /// bound; the result is empty when `change` alone exceeds it, when it does not start where
    /// the last change ended, or when it changes data without a newer serial.
    pub fn with(&self, change: Change) -> Journal {
        if change.is_empty() {
            return self.clone();
        }
        let continues = self
            .changes
            .last()
            .is_none_or(|last| last.to == change.from);
        let newer = Serial(change.to) > Serial(change.from);
        if !continues || !newer || change.bytes > self.max_bytes {
            return Journal::new(self.max_bytes);
        }
        let mut changes = self.changes.clone();
        let mut bytes = self.bytes + change.bytes;
        changes.push(Arc::new(change));
        let mut first = 0;
        while bytes > self.max_bytes {
            bytes -= changes[first].bytes;
            first += 1;
        }
        changes.drain(..first);
        Journal {
            changes,
            bytes,
            max_bytes: self.max_bytes,
        }
    }

    /// The changes that lead from `serial` to the current version, oldest first; `None` when
    /// the journal does not reach back to `serial`.
    pub fn since(&self, serial: u32) -> Option<&[Arc<Change>]> {
        let first = self.changes.iter().position(|c| c.from == serial)?;
        Some(&self.changes[first..])
    }

    /// The changes held, oldest first.
    pub fn changes(&self) -> &[Arc<Change>] {
        &self.changes
    }

    /// Uncompressed wire size of all records held, bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Writes the changes, oldest first, as master-file text: each change's records in IXFR
    /// order, after a comment line with its serials.
    ///
    /// # Errors
    /// The writer's I/O errors.
    pub fn write_text(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        for change in &self.changes {
            writeln!(out, "; change {} -> {}", change.from, change.to)?;
            for r in &change.records {
                writeln!(out, "{r}")?;
            }
        }
        Ok(())
    }

    /// A journal (bound `max_bytes`) from records as [`Journal::write_text`] wrote them: split
    /// into changes at every second SOA record, chained as [`Journal::with`] does; `None` when
    /// they do not form changes.
    pub fn from_records(records: Vec<Record>, max_bytes: usize) -> Option<Journal> {
        let mut journal = Journal::new(max_bytes);
        let mut current = Vec::new();
        let mut soas = 0;
        for r in records {
            if r.rtype == RrType::SOA {
                soas += 1;
                if soas % 2 == 1 && !current.is_empty() {
                    journal = journal.with(Change::from_records(std::mem::take(&mut current))?);
                }
            }
            current.push(r);
        }
        if !current.is_empty() {
            journal = journal.with(Change::from_records(current)?);
        }
        Some(journal)
    }
}

#[cfg(test)]
mod tests {
    use pqdns_core::zonefile::ZoneFileReader;
    use pqdns_core::Name;

    use super::*;

    fn zone(serial: u32, extra: &str) -> Zone {
        let origin: Name = "j.test.".parse().unwrap();
        let text = format!("@ SOA ns hm {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{extra}");
        let records = ZoneFileReader::new(Some(origin.clone()), Some(60))
            .read_str(&text, "t")
            .unwrap();
        Zone::from_records(origin, records).unwrap()
    }

    #[test]
    fn a_change_lists_deletions_and_additions_between_the_soas() {
        let old = zone(1, "a A 192.0.2.2\nb TXT x\n");
        let new = zone(2, "a A 192.0.2.3\nb 120 TXT x\nc AAAA ::1\n");
        let change = Change::between(&old, &new);
        let shown: Vec<String> = change.records().iter().map(|r| r.to_string()).collect();
        // a: one A replaced; b: a TTL change deletes and adds; c: added.
        assert_eq!((change.deleted(), change.added()), (2, 3), "{shown:#?}");
        assert_eq!((change.from, change.to), (1, 2));
        assert!(
            shown[0].contains("SOA") && shown[0].contains(" 1 "),
            "{shown:#?}"
        );
        assert!(
            shown[3].contains("SOA") && shown[3].contains(" 2 "),
            "{shown:#?}"
        );
        assert!(shown[1..3].iter().any(|r| r.contains("192.0.2.2")));
        assert!(shown[4..].iter().any(|r| r.contains("192.0.2.3")));
        assert!(
            shown[4..].iter().any(|r| r.starts_with("b.j.test.\t120")),
            "{shown:#?}"
        );
        assert!(Change::between(&old, &old).is_empty());
    }

    #[test]
    fn the_journal_chains_versions_drops_the_oldest_and_resets_on_a_gap() {
        let v: Vec<Zone> = (1..=4).map(|i| zone(i, &format!("a TXT v{i}\n"))).collect();
        let one = Change::between(&v[0], &v[1]);
        let bound = one.bytes() * 2;
        let j = Journal::new(bound)
            .with(one)
            .with(Change::between(&v[1], &v[2]));
        assert_eq!(j.since(1).map(<[_]>::len), Some(2));
        assert_eq!(j.since(2).map(<[_]>::len), Some(1));
        assert!(j.since(3).is_none(), "the current serial needs no change");
        // A third change exceeds the bound: the oldest goes.
        let j = j.with(Change::between(&v[2], &v[3]));
        assert!(j.since(1).is_none());
        assert_eq!(j.since(2).map(<[_]>::len), Some(2));
        assert!(j.bytes() <= bound);
        // Data changed under the same serial, or a change that skips a version: reset.
        let same_serial = zone(4, "a TXT other\n");
        assert!(j
            .with(Change::between(&v[3], &same_serial))
            .changes()
            .is_empty());
        assert!(j.with(Change::between(&v[0], &v[1])).changes().is_empty());
        // An unchanged reload keeps the journal.
        assert_eq!(j.with(Change::between(&v[3], &v[3])).changes().len(), 2);
    }

    #[test]
    fn the_journal_survives_its_text_form() {
        let v: Vec<Zone> = (1..=3)
            .map(|i| zone(i, &format!("a TXT v{i}\nb{i} A 192.0.2.9\n")))
            .collect();
        let j = Journal::default()
            .with(Change::between(&v[0], &v[1]))
            .with(Change::between(&v[1], &v[2]));
        let mut text = Vec::new();
        j.write_text(&mut text).unwrap();
        let records = ZoneFileReader::new(Some(v[0].origin.clone()), None)
            .read_str(std::str::from_utf8(&text).unwrap(), "journal")
            .unwrap();
        let back = Journal::from_records(records, DEFAULT_MAX_BYTES).unwrap();
        assert_eq!(back.changes().len(), 2);
        for (a, b) in j.changes().iter().zip(back.changes()) {
            assert_eq!(
                (a.from, a.to, a.deleted, a.bytes),
                (b.from, b.to, b.deleted, b.bytes)
            );
            assert_eq!(a.records(), b.records());
        }
        assert_eq!(back.since(1).map(<[_]>::len), Some(2));
        // Records that are not changes: no SOA first.
        let ns = v[0].rrset(&v[0].origin, RrType::NS).unwrap().rdatas[0].clone();
        let stray = Record {
            owner: v[0].origin.clone(),
            rtype: RrType::NS,
            class: Class::IN,
            ttl: 60,
            rdata: ns,
        };
        assert!(Journal::from_records(vec![stray], DEFAULT_MAX_BYTES).is_none());
        assert_eq!(
            Journal::from_records(Vec::new(), 10).map(|j| j.changes().len()),
            Some(0)
        );
    }
}

//! The IXFR journal on disk (`<state_dir>/<zone>.journal`): the changes of [`crate::journal`]
//! as master-file text, one entry per change (RFC 1995 §4 order: old SOA, deletions, new SOA,
//! additions), written whole beside the served version (`<zone>.served`) at each load and
//! appended to, one fsync'd entry per change, between loads.
//!
//! ```text
//! ; change 41 -> 42
//! example. 3600 IN SOA ns hm 41 …
//! …records…
//! ; end 41 -> 42 sha256 <hex digest of the record lines>
//! ; snapshot 42
//! ```
//!
//! - A whole write ends with `; snapshot S`: the served version written with it has serial S.
//!   An entry is appended only when the file ends at the change's first serial (its last line
//!   is that `snapshot` or the `end` of the change before), so the file is always one chain.
//! - An entry counts only with its `end` line and a matching SHA-256 of its record lines: an
//!   entry cut short by a crash (an append is not atomic) is dropped with everything after it,
//!   so a version is either wholly in the file or not at all. A change is answered only after
//!   its entry is on disk ([`append`] syncs the file), and no later entry exists without it.
//! - Files written before these markers existed (a change after a `; change` comment, no
//!   `end` lines) are read as they were written: the records split at every second SOA.

use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::Name;
use sha2::{Digest, Sha256};

use crate::crash_point::{self, CrashPoint};
use crate::journal::{Change, Journal};

/// Bytes read from the end of the file to find its last line (an `end` or `snapshot` line is
/// well under this).
const TAIL: u64 = 512;

/// The text of one entry: the comment naming the change, its records, the `end` line.
fn entry(change: &Change) -> String {
    let mut records = String::new();
    for r in change.records() {
        // Writing to a String does not fail.
        let _ = writeln!(records, "{r}");
    }
    let digest = hex(&Sha256::digest(records.as_bytes()));
    format!(
        "; change {from} -> {to}\n{records}; end {from} -> {to} sha256 {digest}\n",
        from = change.from,
        to = change.to
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes `journal` whole, then the `snapshot` line for the served version at `snapshot`.
///
/// # Errors
/// The writer's I/O errors.
pub(crate) fn write(out: &mut impl Write, journal: &Journal, snapshot: u32) -> std::io::Result<()> {
    for change in journal.changes() {
        out.write_all(entry(change).as_bytes())?;
    }
    writeln!(out, "; snapshot {snapshot}")
}

/// Appends `change` to the file at `path` and syncs it, if the file ends at `change.from`;
/// returns the bytes written, or `None` (nothing written) when it does not, or does not exist:
/// the caller writes the zone and journal whole instead.
///
/// # Errors
/// The I/O errors of reading the end of the file, writing and syncing.
pub(crate) fn append(path: &Path, change: &Change) -> std::io::Result<Option<u64>> {
    let mut file = match std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL)))?;
    let mut tail = Vec::new();
    file.read_to_end(&mut tail)?;
    let tail = String::from_utf8_lossy(&tail);
    let last = tail.strip_suffix('\n').and_then(|t| t.rsplit('\n').next());
    if last.and_then(ends_at) != Some(change.from) {
        return Ok(None);
    }
    let text = entry(change);
    crash_point::reached_after(CrashPoint::JournalTorn, || {
        let _ = file.write_all(&text.as_bytes()[..text.len() / 2]);
    });
    file.write_all(text.as_bytes())?;
    crash_point::reached(CrashPoint::JournalWritten);
    file.sync_data()?;
    Ok(Some(text.len() as u64))
}

/// The serial a file whose last line is `line` ends at: the `to` of an `end` line, the serial
/// of a `snapshot` line.
fn ends_at(line: &str) -> Option<u32> {
    if let Some(rest) = line.strip_prefix("; snapshot ") {
        return rest.trim().parse().ok();
    }
    let rest = line.strip_prefix("; end ")?;
    let mut words = rest.split_whitespace();
    let (_from, arrow, to) = (words.next()?, words.next()?, words.next()?);
    (arrow == "->").then_some(())?;
    to.parse().ok()
}

/// What [`read`] found.
#[derive(Debug)]
pub(crate) struct Entries {
    /// The complete entries, in file order.
    pub changes: Vec<Change>,
    /// Whether an incomplete or damaged entry at the end was dropped (a crash while appending).
    pub torn: bool,
}

/// Reads the journal file at `path` of the zone `origin`.
///
/// # Errors
/// A message for a file that cannot be read or whose complete entries do not parse as changes.
pub(crate) fn read(path: &Path, origin: &Name) -> Result<Entries, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let parse = |body: &str| {
        ZoneFileReader::new(Some(origin.clone()), None)
            .read_str(body, &path.display().to_string())
            .map_err(|e| e.to_string())
    };
    let marked = text
        .lines()
        .any(|l| l.starts_with("; end ") || l.starts_with("; snapshot "));
    if !marked {
        let records = parse(&text)?;
        let journal = Journal::from_records(records, usize::MAX).ok_or("not a chain of changes")?;
        let changes = journal
            .changes()
            .iter()
            .map(|c| Change::from_records(c.records().to_vec()))
            .collect::<Option<Vec<Change>>>()
            .ok_or("not a chain of changes")?;
        return Ok(Entries {
            changes,
            torn: false,
        });
    }
    let mut changes = Vec::new();
    let mut body: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let complete = line.ends_with('\n');
        let line_text = line.trim_end_matches('\n');
        if line_text.starts_with("; change ") && complete {
            if body.is_some() {
                // A change without its end: cut short, and nothing after it counts.
                return Ok(Entries {
                    changes,
                    torn: true,
                });
            }
            body = Some(String::new());
        } else if let Some(rest) = line_text.strip_prefix("; end ").filter(|_| complete) {
            let Some(records) = body.take() else {
                return Ok(Entries {
                    changes,
                    torn: true,
                });
            };
            let digest = rest.rsplit(' ').next().unwrap_or_default();
            if hex(&Sha256::digest(records.as_bytes())) != digest {
                return Ok(Entries {
                    changes,
                    torn: true,
                });
            }
            let change = Change::from_records(parse(&records)?)
                .ok_or_else(|| format!("entry {rest:?} is not a change"))?;
            changes.push(change);
        } else if let Some(records) = body.as_mut() {
            if !complete {
                break;
            }
            records.push_str(line);
        } else if line_text.starts_with("; snapshot ") && complete {
        } else if !line_text.trim().is_empty() {
            return Ok(Entries {
                changes,
                torn: true,
            });
        }
    }
    let torn = body.is_some() || (!text.is_empty() && !text.ends_with('\n'));
    Ok(Entries { changes, torn })
}

#[cfg(test)]
mod tests {
    use pqdns_core::Zone;

    use super::*;

    fn zone(serial: u32, extra: &str) -> Zone {
        let origin: Name = "j.test.".parse().unwrap();
        let text = format!("@ SOA ns hm {serial} 2 3 4 5\n@ NS ns\nns A 192.0.2.1\n{extra}");
        let records = ZoneFileReader::new(Some(origin.clone()), Some(60))
            .read_str(&text, "t")
            .unwrap();
        Zone::from_records(origin, records).unwrap()
    }

    /// A whole write, appends that continue it (and one that does not, refused), a torn last
    /// entry (cut anywhere, or with a damaged record) dropped with nothing else lost, and a
    /// file in the old form without markers.
    #[test]
    fn appends_continue_the_chain_and_a_torn_entry_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.journal");
        let origin: Name = "j.test.".parse().unwrap();
        let v: Vec<Zone> = (1..=4).map(|i| zone(i, &format!("a TXT v{i}\n"))).collect();
        let journal = Journal::default().with(Change::between(&v[0], &v[1]));
        let mut file = Vec::new();
        write(&mut file, &journal, 2).unwrap();
        std::fs::write(&path, &file).unwrap();
        assert!(append(&path, &Change::between(&v[2], &v[3]))
            .unwrap()
            .is_none());
        assert!(append(&path, &Change::between(&v[1], &v[2]))
            .unwrap()
            .is_some());
        assert!(append(&path, &Change::between(&v[2], &v[3]))
            .unwrap()
            .is_some());
        let read_back = read(&path, &origin).unwrap();
        let serials: Vec<(u32, u32)> = read_back.changes.iter().map(|c| (c.from, c.to)).collect();
        assert_eq!(serials, [(1, 2), (2, 3), (3, 4)]);
        assert!(!read_back.torn);
        let whole = std::fs::read(&path).unwrap();
        let last_entry = whole.len() - entry(&Change::between(&v[2], &v[3])).len();
        // Cut at every byte of the last entry: the first two changes stay, the third goes.
        for cut in (last_entry + 1..whole.len()).step_by(7) {
            std::fs::write(&path, &whole[..cut]).unwrap();
            let r = read(&path, &origin).unwrap();
            assert_eq!(r.changes.len(), 2, "cut at {cut}");
            assert!(r.torn, "cut at {cut}");
        }
        // A damaged record in the last entry: its digest fails.
        let mut damaged = whole.clone();
        let at = last_entry + 30;
        damaged[at] = if damaged[at] == b'9' { b'8' } else { b'9' };
        std::fs::write(&path, &damaged).unwrap();
        let r = read(&path, &origin).unwrap();
        assert_eq!((r.changes.len(), r.torn), (2, true));
        // The old form: the records after comments, no markers.
        let mut old = Vec::new();
        journal.write_text(&mut old).unwrap();
        std::fs::write(&path, &old).unwrap();
        let r = read(&path, &origin).unwrap();
        assert_eq!((r.changes.len(), r.torn), (1, false));
        assert!(append(&path, &Change::between(&v[1], &v[2]))
            .unwrap()
            .is_none());
    }
}

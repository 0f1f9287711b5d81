//! RFC 1035 §5 master files: `$ORIGIN`, `$TTL` (RFC 2308 §4), `$INCLUDE` (with an origin),
//! BIND's `$GENERATE` (bounded by [`MAX_GENERATE_RECORDS`]), relative names, parentheses,
//! quoted strings, comments, RFC 3597 unknown types, and pre-signed data (DNSKEY, RRSIG,
//! NSEC, NSEC3, DS with any algorithm number).
//!
//! Errors carry the file and line, and say what was expected.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::name::Name;
use crate::rdata::{self, Token};
use crate::rr::{Class, Record, RrType};
use crate::zone::Zone;

mod generate;
pub use generate::MAX_GENERATE_RECORDS;

/// The most records all `$GENERATE` directives of one read (included files too) may make:
/// each directive is bounded by [`MAX_GENERATE_RECORDS`], and a file of many directives is
/// bounded by this.
pub const MAX_GENERATED_PER_READ: u64 = 16 * MAX_GENERATE_RECORDS;

/// How deep `$INCLUDE` may nest before the file is rejected (guards against include loops).
pub const MAX_INCLUDE_DEPTH: usize = 16;

/// A master-file error, located by file and line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}:{line}: {message}", file.display())]
pub struct ZoneFileError {
    /// The file being read (or a label such as `<inline>` for text).
    pub file: PathBuf,
    /// 1-based line where the faulty entry starts.
    pub line: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

/// One logical entry: tokens possibly spanning lines inside parentheses.
struct Entry {
    line: usize,
    /// True if the first line started with blank space (owner omitted, RFC 1035 §5.1).
    blank_owner: bool,
    tokens: Vec<Token>,
}

fn lex(text: &str, file: &Path) -> Result<Vec<Entry>, ZoneFileError> {
    let err = |line, message: &str| ZoneFileError {
        file: file.to_path_buf(),
        line,
        message: message.to_string(),
    };
    let mut entries = Vec::new();
    let mut current: Option<Entry> = None;
    let mut depth = 0usize;
    for (idx, line) in text.lines().enumerate() {
        let lineno = idx + 1;
        let bytes = line.as_bytes();
        if current.is_none() {
            current = Some(Entry {
                line: lineno,
                blank_owner: bytes.first().is_some_and(|b| *b == b' ' || *b == b'\t'),
                tokens: Vec::new(),
            });
        }
        let entry = current.as_mut().expect("set above");
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b' ' | b'\t' | b'\r' => i += 1,
                b';' => break,
                b'(' => {
                    depth += 1;
                    i += 1;
                }
                b')' => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| err(lineno, "')' without matching '('"))?;
                    i += 1;
                }
                b'"' => {
                    let start = i + 1;
                    let mut j = start;
                    while j < bytes.len() && bytes[j] != b'"' {
                        j += if bytes[j] == b'\\' { 2 } else { 1 };
                    }
                    if j >= bytes.len() {
                        return Err(err(lineno, "unterminated quoted string"));
                    }
                    entry.tokens.push(Token {
                        text: line[start..j].to_string(),
                        quoted: true,
                    });
                    i = j + 1;
                }
                _ => {
                    let start = i;
                    while i < bytes.len() && !b" \t\r;()\"".contains(&bytes[i]) {
                        i += if bytes[i] == b'\\' { 2 } else { 1 };
                    }
                    let end = i.min(bytes.len());
                    entry.tokens.push(Token {
                        text: line[start..end].to_string(),
                        quoted: false,
                    });
                }
            }
        }
        if depth == 0 {
            let done = current.take().expect("set above");
            if !done.tokens.is_empty() {
                entries.push(done);
            }
        }
    }
    if let Some(open) = current {
        if depth > 0 {
            return Err(err(open.line, "'(' not closed before end of file"));
        }
    }
    Ok(entries)
}

/// Parses a TTL: seconds, or BIND-style units (`1h30m`, `2d`, `1w`).
pub fn parse_ttl(text: &str) -> Option<u32> {
    if let Ok(v) = text.parse::<u32>() {
        return Some(v);
    }
    let mut total: u64 = 0;
    let mut num: u64 = 0;
    let mut have_digit = false;
    for c in text.chars() {
        if let Some(d) = c.to_digit(10) {
            num = num.checked_mul(10)?.checked_add(u64::from(d))?;
            have_digit = true;
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return None,
        };
        if !have_digit {
            return None;
        }
        total = total.checked_add(num.checked_mul(unit)?)?;
        num = 0;
        have_digit = false;
    }
    if text.is_empty() {
        return None;
    }
    if have_digit {
        total = total.checked_add(num)?;
    }
    u32::try_from(total).ok()
}

/// The largest TTL a zone may carry: 2³¹ − 1 seconds. RFC 2181 §8: "values received with the
/// most significant bit set" are treated as zero; the reader does the same for master files
/// (as BIND does), with a warning naming file and line.
pub const MAX_TTL: u32 = 0x7fff_ffff;

/// Reads master files into records, or straight into a [`Zone`] with its content rules
/// checked record by record (so every error has a file and line).
///
/// `$INCLUDE` names are taken relative to the including file's directory and must stay inside
/// the include directory: by default the directory of the file given to
/// [`ZoneFileReader::read_file`] (as NSD and Knot confine includes to their zone directory),
/// or the one set with [`ZoneFileReader::with_include_dir`]. Text read with
/// [`ZoneFileReader::read_str`] may include files only when an include directory is set.
#[derive(Debug, Clone)]
pub struct ZoneFileReader {
    origin: Option<Name>,
    default_ttl: Option<u32>,
    include_dir: Option<PathBuf>,
}

struct State {
    origin: Option<Name>,
    default_ttl: Option<u32>,
    last_owner: Option<Name>,
    last_ttl: Option<u32>,
    /// Records made by `$GENERATE` so far in this read (bounded by
    /// [`MAX_GENERATED_PER_READ`]).
    generated: u64,
    /// Canonical directory every included file must lie in (`None`: no includes).
    include_root: Option<PathBuf>,
}

/// Where parsed records go, with the file and line they came from.
type Sink<'a> = dyn FnMut(Record, &Path, usize) -> Result<(), ZoneFileError> + 'a;

/// A zone-rule error from [`Zone::insert_checked`], at the record's file and line.
fn insert_located(
    zone: &mut Zone,
    r: Record,
    file: &Path,
    line: usize,
) -> Result<(), ZoneFileError> {
    zone.insert_checked(r).map_err(|e| ZoneFileError {
        file: file.to_path_buf(),
        line,
        message: e.to_string(),
    })
}

impl ZoneFileReader {
    /// A reader with an initial origin (as `$ORIGIN`) and default TTL (as `$TTL`), both optional.
    pub fn new(origin: Option<Name>, default_ttl: Option<u32>) -> ZoneFileReader {
        ZoneFileReader {
            origin,
            default_ttl,
            include_dir: None,
        }
    }

    /// Confines `$INCLUDE` to files under `dir` (after resolving symbolic links), and makes
    /// relative `$INCLUDE` names in text read with [`ZoneFileReader::read_str`] relative to it.
    #[must_use]
    pub fn with_include_dir(mut self, dir: impl Into<PathBuf>) -> ZoneFileReader {
        let dir: PathBuf = dir.into();
        self.include_dir = Some(if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        });
        self
    }

    /// Reads a master file from disk, following `$INCLUDE` (see the type documentation).
    ///
    /// # Errors
    /// [`ZoneFileError`] with the file and line of the first problem (including I/O errors).
    pub fn read_file(&self, path: &Path) -> Result<Vec<Record>, ZoneFileError> {
        let mut out = Vec::new();
        self.read_file_with(path, &mut |r, _, _| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }

    /// Reads a master file as a new zone, checked as by [`ZoneFileReader::read_file_into`] and
    /// [`Zone::check_apex`]. The zone's origin is the reader's origin or, without one, the
    /// owner of the first SOA record.
    ///
    /// # Errors
    /// [`ZoneFileError`] with the file and line of the first problem; line 0 if the file has
    /// no SOA (without an origin) or not exactly one SOA at the apex.
    pub fn read_zone(&self, path: &Path) -> Result<Zone, ZoneFileError> {
        let mut zone = self.origin.clone().map(Zone::new);
        // Records before the first SOA wait for it when the origin comes from the SOA.
        let mut waiting: Vec<(Record, PathBuf, usize)> = Vec::new();
        self.read_file_with(path, &mut |r, file, line| {
            if let Some(zone) = &mut zone {
                return insert_located(zone, r, file, line);
            }
            if r.rtype != RrType::SOA {
                waiting.push((r, file.to_path_buf(), line));
                return Ok(());
            }
            let z = zone.insert(Zone::new(r.owner.clone()));
            for (w, wfile, wline) in waiting.drain(..) {
                insert_located(z, w, &wfile, wline)?;
            }
            insert_located(z, r, file, line)
        })?;
        let whole_file = |message: String| ZoneFileError {
            file: path.to_path_buf(),
            line: 0,
            message,
        };
        let zone = zone.ok_or_else(|| whole_file("no SOA record; give the origin".into()))?;
        zone.check_apex().map_err(|e| whole_file(e.to_string()))?;
        Ok(zone)
    }

    /// Reads a master file into `zone` with [`Zone::insert_checked`], so records that break
    /// the zone's rules (CNAME beside other data, SOA below the apex, data below a DNAME…)
    /// are reported with their file and line. Call [`Zone::check_apex`] when all data is in.
    ///
    /// # Errors
    /// [`ZoneFileError`] with the file and line of the first problem.
    pub fn read_file_into(&self, path: &Path, zone: &mut Zone) -> Result<(), ZoneFileError> {
        self.read_file_with(path, &mut |r, file, line| {
            insert_located(zone, r, file, line)
        })
    }

    /// Parses master-file text; `label` names it in errors. `$INCLUDE` needs an include
    /// directory ([`ZoneFileReader::with_include_dir`]).
    ///
    /// # Errors
    /// [`ZoneFileError`] with the line of the first problem.
    pub fn read_str(&self, text: &str, label: &str) -> Result<Vec<Record>, ZoneFileError> {
        let mut out = Vec::new();
        self.read_str_with(text, label, &mut |r, _, _| {
            out.push(r);
            Ok(())
        })?;
        Ok(out)
    }

    /// Parses master-file text into `zone`, as [`ZoneFileReader::read_file_into`].
    ///
    /// # Errors
    /// [`ZoneFileError`] with the line of the first problem.
    pub fn read_str_into(
        &self,
        text: &str,
        label: &str,
        zone: &mut Zone,
    ) -> Result<(), ZoneFileError> {
        self.read_str_with(text, label, &mut |r, file, line| {
            insert_located(zone, r, file, line)
        })
    }

    fn read_file_with(&self, path: &Path, sink: &mut Sink<'_>) -> Result<(), ZoneFileError> {
        let dir = parent_dir(path);
        let root = self.include_dir.as_deref().unwrap_or(dir);
        let mut state = self.state(std::fs::canonicalize(root).ok());
        let text = std::fs::read_to_string(path).map_err(|e| ZoneFileError {
            file: path.to_path_buf(),
            line: 0,
            message: format!("cannot read: {e}"),
        })?;
        parse_text(&text, path, dir, &mut state, sink, 0)
    }

    fn read_str_with(
        &self,
        text: &str,
        label: &str,
        sink: &mut Sink<'_>,
    ) -> Result<(), ZoneFileError> {
        let root = self
            .include_dir
            .as_deref()
            .and_then(|d| std::fs::canonicalize(d).ok());
        let mut state = self.state(root);
        let dir = self.include_dir.as_deref().unwrap_or(Path::new("."));
        parse_text(text, Path::new(label), dir, &mut state, sink, 0)
    }

    fn state(&self, include_root: Option<PathBuf>) -> State {
        State {
            origin: self.origin.clone(),
            default_ttl: self.default_ttl,
            last_owner: None,
            last_ttl: None,
            generated: 0,
            include_root,
        }
    }
}

fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Resolves an `$INCLUDE` target and checks it lies inside the include root.
fn include_target(arg: &str, dir: &Path, state: &State) -> Result<PathBuf, String> {
    let Some(root) = &state.include_root else {
        return Err(format!(
            "$INCLUDE {arg}: includes are not allowed here (no include directory)"
        ));
    };
    let target = std::fs::canonicalize(dir.join(arg))
        .map_err(|e| format!("$INCLUDE {arg}: cannot read: {e}"))?;
    if !target.starts_with(root) {
        return Err(format!(
            "$INCLUDE {arg}: {} is outside the include directory {}",
            target.display(),
            root.display()
        ));
    }
    Ok(target)
}

fn parse_text(
    text: &str,
    file: &Path,
    dir: &Path,
    state: &mut State,
    sink: &mut Sink<'_>,
    depth: usize,
) -> Result<(), ZoneFileError> {
    // An included file is shown in errors only once it has proved to be a zone file: a
    // `$INCLUDE /etc/shadow` must not print the secret it failed to parse.
    let mut shown = depth == 0;
    for entry in lex(text, file)? {
        let first = &entry.tokens[0];
        let is_directive = !entry.blank_owner && !first.quoted && first.text.starts_with('$');
        // A known directive is zone-file syntax: from here on errors may quote the file.
        shown |= is_directive
            && ["$ORIGIN", "$TTL", "$INCLUDE", "$GENERATE"]
                .iter()
                .any(|d| first.text.eq_ignore_ascii_case(d));
        let located = |message: String| ZoneFileError {
            file: file.to_path_buf(),
            line: entry.line,
            message,
        };
        let err = |message: String| {
            located(if shown {
                message
            } else {
                "not a zone file: its first entry does not parse (content not shown)".into()
            })
        };
        if is_directive {
            let arg = entry.tokens.get(1).map(|t| t.text.as_str());
            match first.text.to_ascii_uppercase().as_str() {
                "$ORIGIN" => {
                    let arg = arg.ok_or_else(|| err("$ORIGIN needs a domain name".into()))?;
                    let name = Name::parse(arg, state.origin.as_ref())
                        .map_err(|e| err(format!("bad $ORIGIN {arg:?}: {e}")))?;
                    state.origin = Some(name);
                }
                "$TTL" => {
                    let arg = arg.ok_or_else(|| err("$TTL needs a TTL".into()))?;
                    let ttl = parse_ttl(arg).ok_or_else(|| err(format!("bad $TTL {arg:?}")))?;
                    state.default_ttl = Some(limit_ttl(ttl, file, entry.line));
                }
                "$INCLUDE" => {
                    let arg = arg.ok_or_else(|| err("$INCLUDE needs a file name".into()))?;
                    if depth + 1 > MAX_INCLUDE_DEPTH {
                        return Err(err(format!(
                            "$INCLUDE nested deeper than {MAX_INCLUDE_DEPTH}"
                        )));
                    }
                    let target = include_target(arg, dir, state).map_err(err)?;
                    let saved_origin = state.origin.clone();
                    if let Some(o) = entry.tokens.get(2) {
                        state.origin = Some(
                            Name::parse(&o.text, state.origin.as_ref())
                                .map_err(|e| err(format!("bad $INCLUDE origin: {e}")))?,
                        );
                    }
                    let included = std::fs::read_to_string(&target)
                        .map_err(|e| err(format!("$INCLUDE {arg}: cannot read: {e}")))?;
                    let shown_name = dir.join(arg);
                    parse_text(
                        &included,
                        &shown_name,
                        parent_dir(&shown_name),
                        state,
                        sink,
                        depth + 1,
                    )?;
                    // RFC 1035 §5.1: the origin reverts after the included file.
                    state.origin = saved_origin;
                }
                "$GENERATE" => {
                    let generate = generate::Generate::parse(&entry.tokens[1..]).map_err(err)?;
                    state.generated += generate.count();
                    if state.generated > MAX_GENERATED_PER_READ {
                        return Err(err(format!(
                            "$GENERATE directives make more than {MAX_GENERATED_PER_READ} \
                             records in all"
                        )));
                    }
                    for line in generate.lines() {
                        let line = line.map_err(err)?;
                        let made = lex(&line, file)
                            .map_err(|e| err(format!("$GENERATE made {line:?}: {}", e.message)))?;
                        let [made] = made.as_slice() else {
                            return Err(err(format!("$GENERATE made {line:?}: not one record")));
                        };
                        let record = parse_record(made, state)
                            .map_err(|e| err(format!("$GENERATE made {line:?}: {e}")))?;
                        sink(record, file, entry.line)?;
                    }
                }
                other => return Err(err(format!("unknown directive {other}"))),
            }
            continue;
        }
        let mut record = parse_record(&entry, state).map_err(err)?;
        if record.ttl > MAX_TTL {
            record.ttl = limit_ttl(record.ttl, file, entry.line);
            state.last_ttl = Some(record.ttl);
        }
        sink(record, file, entry.line)?;
        shown = true;
    }
    Ok(())
}

/// RFC 2181 §8: a TTL with the top bit set counts as zero; warn with the location.
fn limit_ttl(ttl: u32, file: &Path, line: usize) -> u32 {
    if ttl <= MAX_TTL {
        return ttl;
    }
    tracing::warn!(
        file = %file.display(),
        line,
        ttl,
        "TTL above 2^31-1 is treated as 0 (RFC 2181 §8)"
    );
    0
}

fn parse_record(entry: &Entry, state: &mut State) -> Result<Record, String> {
    let mut tokens = entry.tokens.as_slice();
    let owner = if entry.blank_owner {
        state
            .last_owner
            .clone()
            .ok_or("record without an owner name and no previous owner")?
    } else {
        let (tok, rest) = tokens.split_first().ok_or("empty entry")?;
        tokens = rest;
        Name::parse(&tok.text, state.origin.as_ref())
            .map_err(|e| format!("bad owner name {:?}: {e}", tok.text))?
    };
    let mut ttl = None;
    let mut class = None;
    let rtype = loop {
        let (tok, rest) = tokens
            .split_first()
            .ok_or("expected TTL, class or RR type")?;
        tokens = rest;
        if ttl.is_none() && tok.text.starts_with(|c: char| c.is_ascii_digit()) {
            ttl = Some(parse_ttl(&tok.text).ok_or_else(|| format!("bad TTL {:?}", tok.text))?);
        } else if let (None, Some(c)) = (class, Class::from_mnemonic(&tok.text)) {
            class = Some(c);
        } else if let Some(t) = RrType::from_mnemonic(&tok.text) {
            break t;
        } else {
            return Err(format!(
                "expected TTL, class or RR type, found {:?}",
                tok.text
            ));
        }
    };
    let class = class.unwrap_or(Class::IN);
    let ttl = ttl
        .or(state.default_ttl)
        .or(state.last_ttl)
        .ok_or("no TTL given and no $TTL in effect")?;
    let rdata = rdata::parse_presentation(rtype, tokens, state.origin.as_ref())
        .map_err(|e| format!("{rtype} record: {e}"))?;
    state.last_owner = Some(owner.clone());
    state.last_ttl = Some(ttl);
    Ok(Record {
        owner,
        rtype,
        class,
        ttl,
        rdata,
    })
}

/// Writes records as a master file, one per line.
pub fn write_records(out: &mut impl fmt::Write, records: &[Record]) -> fmt::Result {
    for r in records {
        writeln!(out, "{r}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<Record>, ZoneFileError> {
        ZoneFileReader::new(None, None).read_str(text, "test.zone")
    }

    #[test]
    fn directives_relative_names_and_parentheses() {
        let zone = "$ORIGIN example.com.\n$TTL 1h\n\
            @ IN SOA ns1 hostmaster ( 2024010101 ; serial\n 7200 3600\n 1209600 300 )\n\
            \tNS ns1\n\
            www 300 A 192.0.2.1\n\
            \tIN 60 TXT \"hello world\" \"a\\\"b\"\n\
            *.wild A 192.0.2.2\n\
            sub TYPE65000 \\# 2 ABCD\n";
        let records = read(zone).unwrap();
        assert_eq!(records.len(), 6);
        assert_eq!(records[0].rtype, RrType::SOA);
        assert_eq!(records[0].ttl, 3600);
        assert_eq!(records[1].owner, "example.com.".parse().unwrap());
        assert_eq!(records[2].ttl, 300);
        assert_eq!(records[3].owner, "www.example.com.".parse().unwrap());
        assert_eq!(records[3].ttl, 60);
        assert_eq!(
            records[3].to_string(),
            "www.example.com.\t60\tIN\tTXT\t\"hello world\" \"a\\\"b\""
        );
        assert!(records[4].owner.is_wildcard());
        assert_eq!(records[5].rdata, vec![0xab, 0xcd]);
    }

    #[test]
    fn presigned_records_with_any_algorithm_parse() {
        let zone = "example. 3600 IN DNSKEY 257 3 250 AQID\n\
            example. 3600 IN RRSIG DNSKEY 250 1 3600 20300101000000 20200101000000 1 example. AQID\n\
            example. 3600 IN NSEC a.example. NS SOA RRSIG NSEC DNSKEY\n\
            a.example. 3600 IN DS 1 250 2 00112233\n";
        let records = read(zone).unwrap();
        assert_eq!(records[0].rdata[3], 250);
        assert_eq!(records[1].covered_type(), Some(RrType::DNSKEY));
    }

    #[test]
    fn errors_name_file_and_line() {
        let err = read("$ORIGIN example.\n$TTL 60\nwww A 192.0.2.300\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert_eq!(err.file, PathBuf::from("test.zone"));
        assert!(err.message.contains("IPv4"), "{}", err.message);
        let err = read("$ORIGIN example.\nwww A 192.0.2.1\n").unwrap_err();
        assert!(err.message.contains("no TTL"), "{err}");
        let err = read("$ORIGIN example.\n$TTL 5\nwww ( A\n 192.0.2.1\n").unwrap_err();
        assert_eq!(err.line, 3);
        let err = read("$TTL 5\nwww A 192.0.2.1\n").unwrap_err();
        assert!(err.message.contains("owner"), "{err}");
        let err = read("$TTL 5\nwww. BOGUS x\n").unwrap_err();
        assert!(err.message.contains("RR type"), "{err}");
        assert_eq!(
            err.to_string(),
            "test.zone:2: expected TTL, class or RR type, found \"BOGUS\""
        );
    }

    #[test]
    fn include_is_relative_and_restores_origin() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("inc")).unwrap();
        std::fs::write(dir.path().join("inc/hosts.inc"), "mail A 192.0.2.25\n").unwrap();
        std::fs::write(
            dir.path().join("main.zone"),
            "$TTL 60\n$ORIGIN example.\n$INCLUDE inc/hosts.inc sub.example.\nwww A 192.0.2.80\n",
        )
        .unwrap();
        let records = ZoneFileReader::new(None, None)
            .read_file(&dir.path().join("main.zone"))
            .unwrap();
        assert_eq!(records[0].owner, "mail.sub.example.".parse().unwrap());
        assert_eq!(records[1].owner, "www.example.".parse().unwrap());
        std::fs::write(dir.path().join("loop.zone"), "$INCLUDE loop.zone\n").unwrap();
        let err = ZoneFileReader::new(None, None)
            .read_file(&dir.path().join("loop.zone"))
            .unwrap_err();
        assert!(err.message.contains("nested"), "{err}");
    }

    #[test]
    fn include_stays_in_the_zone_directory_and_errors_point_at_the_include_line() {
        let top = tempfile::tempdir().unwrap();
        let zones = top.path().join("zones");
        std::fs::create_dir(&zones).unwrap();
        std::fs::write(
            top.path().join("secret"),
            "root:$y$j9T$hunter2:19000:0:99999:7:::\n",
        )
        .unwrap();
        let main = zones.join("main.zone");
        let read = |text: &str| {
            std::fs::write(&main, text).unwrap();
            ZoneFileReader::new(Some("example.".parse().unwrap()), Some(60)).read_file(&main)
        };
        // Outside the zone file's directory: refused at the $INCLUDE line.
        let err = read("www A 192.0.2.1\n$INCLUDE ../secret\n").unwrap_err();
        assert_eq!((err.file.clone(), err.line), (main.clone(), 2), "{err}");
        assert!(
            err.message.contains("outside the include directory"),
            "{err}"
        );
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = read("$INCLUDE /etc/passwd\n").unwrap_err();
        assert!(err.message.contains("outside"), "{err}");
        // A missing file is reported where it is included, not as `missing.inc:0`.
        let err = read("\n\n$INCLUDE missing.inc\n").unwrap_err();
        assert_eq!((err.file.clone(), err.line), (main.clone(), 3), "{err}");
        assert!(err.message.contains("missing.inc"), "{err}");
        // Allowed by configuration, a non-zone file still does not have its content echoed.
        let err = ZoneFileReader::new(Some("example.".parse().unwrap()), Some(60))
            .with_include_dir(top.path())
            .read_str("$INCLUDE secret\n", "inline")
            .unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.message.contains("not a zone file"), "{err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        // Errors later in a real included zone file are shown in full.
        std::fs::write(zones.join("hosts.inc"), "a A 192.0.2.1\nb A 192.0.2.999\n").unwrap();
        let err = read("$INCLUDE hosts.inc\n").unwrap_err();
        assert_eq!((err.file.clone(), err.line), (zones.join("hosts.inc"), 2));
        assert!(err.message.contains("IPv4"), "{err}");
        // Text without an include directory cannot include at all.
        let err = ZoneFileReader::new(None, Some(60))
            .read_str("$INCLUDE hosts.inc\n", "inline")
            .unwrap_err();
        assert!(err.message.contains("not allowed"), "{err}");
    }

    #[test]
    fn ttls_with_the_top_bit_set_become_zero() {
        let records = read(
            "$ORIGIN example.\n$TTL 2147483648\na A 192.0.2.1\nb 4294967295 A 192.0.2.2\n\
             c 2147483647 A 192.0.2.3\nd A 192.0.2.4\n",
        )
        .unwrap();
        let ttls: Vec<u32> = records.iter().map(|r| r.ttl).collect();
        assert_eq!(ttls, [0, 0, MAX_TTL, 0]);
    }

    #[test]
    fn zone_rules_are_reported_at_the_breaking_line() {
        let into = |text: &str| {
            let mut zone = Zone::new("example.".parse().unwrap());
            ZoneFileReader::new(Some("example.".parse().unwrap()), Some(60))
                .read_str_into(text, "z", &mut zone)
                .map(|()| zone)
        };
        let soa = "@ SOA ns hm 1 2 3 4 5\n";
        for (body, line, what) in [
            ("w CNAME a\nw CNAME b\n", 3, "more than one CNAME"),
            ("w A 192.0.2.1\nw CNAME a\n", 3, "CNAME and other data"),
            ("w CNAME a\nw MX 10 a\n", 3, "CNAME and other data"),
            ("sub SOA ns hm 1 2 3 4 5\n", 2, "SOA record below the apex"),
            ("@ SOA ns hm 2 2 3 4 5\n", 2, "exactly one SOA"),
            ("d DNAME other.\na.d A 192.0.2.1\n", 3, "below the DNAME"),
            ("x.d A 192.0.2.1\nd DNAME other.\n", 3, "below the DNAME"),
            ("d DNAME a.\nd DNAME b.\n", 3, "more than one DNAME"),
        ] {
            let err = into(&format!("{soa}{body}")).unwrap_err();
            assert_eq!(err.line, line, "{body}: {err}");
            assert!(err.message.contains(what), "{body}: {err}");
        }
        let zone = into(&format!(
            "{soa}w CNAME a\nw NSEC x CNAME RRSIG NSEC\nw RRSIG CNAME 13 2 60 20300101000000 \
             20200101000000 1 example. AQID\nd DNAME other.\nd A 192.0.2.1\n"
        ))
        .unwrap();
        assert!(zone.check_apex().is_ok());
    }

    #[test]
    fn generate_makes_records_with_the_ttl_rules_and_errors_at_its_line() {
        let records = read(
            "$ORIGIN example.\n$TTL 300\n\
             $GENERATE 1-3/2 host$ A 192.0.2.$\n\
             $GENERATE 10-11 h${0,3,x} 60 IN CNAME x${1,2,X}.\\$y.${-5,4,o}\n\
             $GENERATE 1-2 n${0,0,n} TXT \"n${0,0,N} $\"\n",
        )
        .unwrap();
        let text: Vec<String> = records.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "host1.example.\t300\tIN\tA\t192.0.2.1",
                "host3.example.\t300\tIN\tA\t192.0.2.3",
                "h00a.example.\t60\tIN\tCNAME\tx0B.\\$y.0005.example.",
                "h00b.example.\t60\tIN\tCNAME\tx0C.\\$y.0006.example.",
                "n1.example.\t300\tIN\tTXT\t\"n1\" \"1\"",
                "n2.example.\t300\tIN\tTXT\t\"n2\" \"2\"",
            ]
        );
        let err =
            read("$ORIGIN example.\n$TTL 1\n\n$GENERATE 250-260 h$ A 192.0.2.$\n").unwrap_err();
        assert_eq!(err.line, 4);
        assert!(err.message.contains("192.0.2.256"), "{err}");
        let err = read("$TTL 1\n$GENERATE 0-100000 h$ A 192.0.2.1\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("more than the 65536"), "{err}");
        // Many directives are bounded in all, before any is expanded past the bound.
        let many = "$GENERATE 0-65535 h$ A 192.0.2.1\n".repeat(17);
        let err = read(&format!("$ORIGIN example.\n$TTL 1\n{many}")).unwrap_err();
        assert_eq!(err.line, 19);
        assert!(err.message.contains("in all"), "{err}");
    }

    #[test]
    fn ttl_units() {
        assert_eq!(parse_ttl("3600"), Some(3600));
        assert_eq!(parse_ttl("1h30m"), Some(5400));
        assert_eq!(parse_ttl("1w"), Some(604_800));
        assert_eq!(parse_ttl("h"), None);
        assert_eq!(parse_ttl("1x"), None);
    }
}

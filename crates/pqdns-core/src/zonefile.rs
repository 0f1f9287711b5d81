//! RFC 1035 §5 master files: `$ORIGIN`, `$TTL` (RFC 2308 §4), `$INCLUDE`, relative names,
//! parentheses, quoted strings, comments, RFC 3597 unknown types, and pre-signed data
//! (DNSKEY, RRSIG, NSEC, NSEC3, DS with any algorithm number).
//!
//! Errors carry the file and line, and say what was expected.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::name::Name;
use crate::rdata::{self, Token};
use crate::rr::{Class, Record, RrType};

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

/// Reads master files into records.
#[derive(Debug, Clone)]
pub struct ZoneFileReader {
    origin: Option<Name>,
    default_ttl: Option<u32>,
}

struct State {
    origin: Option<Name>,
    default_ttl: Option<u32>,
    last_owner: Option<Name>,
    last_ttl: Option<u32>,
}

impl ZoneFileReader {
    /// A reader with an initial origin (as `$ORIGIN`) and default TTL (as `$TTL`), both optional.
    pub fn new(origin: Option<Name>, default_ttl: Option<u32>) -> ZoneFileReader {
        ZoneFileReader {
            origin,
            default_ttl,
        }
    }

    /// Reads a master file from disk, following `$INCLUDE` relative to its directory.
    ///
    /// # Errors
    /// [`ZoneFileError`] with the file and line of the first problem (including I/O errors).
    pub fn read_file(&self, path: &Path) -> Result<Vec<Record>, ZoneFileError> {
        let mut state = self.state();
        let mut out = Vec::new();
        read_file_into(path, &mut state, &mut out, 0)?;
        Ok(out)
    }

    /// Parses master-file text; `label` names it in errors and `$INCLUDE` paths are taken
    /// relative to the current directory.
    ///
    /// # Errors
    /// [`ZoneFileError`] with the line of the first problem.
    pub fn read_str(&self, text: &str, label: &str) -> Result<Vec<Record>, ZoneFileError> {
        let mut state = self.state();
        let mut out = Vec::new();
        parse_text(
            text,
            Path::new(label),
            Path::new("."),
            &mut state,
            &mut out,
            0,
        )?;
        Ok(out)
    }

    fn state(&self) -> State {
        State {
            origin: self.origin.clone(),
            default_ttl: self.default_ttl,
            last_owner: None,
            last_ttl: None,
        }
    }
}

fn read_file_into(
    path: &Path,
    state: &mut State,
    out: &mut Vec<Record>,
    depth: usize,
) -> Result<(), ZoneFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| ZoneFileError {
        file: path.to_path_buf(),
        line: 0,
        message: format!("cannot read: {e}"),
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse_text(&text, path, dir, state, out, depth)
}

fn parse_text(
    text: &str,
    file: &Path,
    dir: &Path,
    state: &mut State,
    out: &mut Vec<Record>,
    depth: usize,
) -> Result<(), ZoneFileError> {
    for entry in lex(text, file)? {
        let err = |message: String| ZoneFileError {
            file: file.to_path_buf(),
            line: entry.line,
            message,
        };
        let first = &entry.tokens[0];
        if !entry.blank_owner && !first.quoted && first.text.starts_with('$') {
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
                    state.default_ttl =
                        Some(parse_ttl(arg).ok_or_else(|| err(format!("bad $TTL {arg:?}")))?);
                }
                "$INCLUDE" => {
                    let arg = arg.ok_or_else(|| err("$INCLUDE needs a file name".into()))?;
                    if depth + 1 > MAX_INCLUDE_DEPTH {
                        return Err(err(format!(
                            "$INCLUDE nested deeper than {MAX_INCLUDE_DEPTH}"
                        )));
                    }
                    let saved_origin = state.origin.clone();
                    if let Some(o) = entry.tokens.get(2) {
                        state.origin = Some(
                            Name::parse(&o.text, state.origin.as_ref())
                                .map_err(|e| err(format!("bad $INCLUDE origin: {e}")))?,
                        );
                    }
                    read_file_into(&dir.join(arg), state, out, depth + 1)?;
                    // RFC 1035 §5.1: the origin reverts after the included file.
                    state.origin = saved_origin;
                }
                other => return Err(err(format!("unknown directive {other}"))),
            }
            continue;
        }
        out.push(parse_record(&entry, state).map_err(err)?);
    }
    Ok(())
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
        std::fs::write(dir.path().join("hosts.inc"), "mail A 192.0.2.25\n").unwrap();
        std::fs::write(
            dir.path().join("main.zone"),
            "$TTL 60\n$ORIGIN example.\n$INCLUDE hosts.inc sub.example.\nwww A 192.0.2.80\n",
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
    fn ttl_units() {
        assert_eq!(parse_ttl("3600"), Some(3600));
        assert_eq!(parse_ttl("1h30m"), Some(5400));
        assert_eq!(parse_ttl("1w"), Some(604_800));
        assert_eq!(parse_ttl("h"), None);
        assert_eq!(parse_ttl("1x"), None);
    }
}

//! TSIG key files in BIND's syntax, the format `tsig-keygen` writes and `named.conf`,
//! `nsd.conf` includes, `knsupdate -k` and `dig -k` read:
//!
//! ```text
//! key "transfer-key" {
//!     algorithm hmac-sha256;
//!     secret "base64…";
//! };
//! ```
//!
//! A file holds any number of `key` clauses; `#` and `//` comments run to the end of the
//! line, `/* … */` comments may span lines; the key name may be quoted or not. Statements other
//! than `algorithm` and `secret` inside a clause, and clauses other than `key`, are errors
//! (with the file and line), as is a key name given twice. Secrets are base64 (RFC 4648 §4)
//! and stay in zeroized memory ([`crate::wire::tsig::Key`]).
//!
//! [`format()`] writes one key the way `tsig-keygen` does; `pqdns-zone tsig-keygen` uses it.

use std::path::Path;

use base64::Engine;
use zeroize::Zeroizing;

use crate::name::Name;
use crate::wire::tsig::{Algorithm, Key};

/// Largest key file read, bytes (a file of thousands of keys is far smaller).
pub const MAX_FILE_LEN: u64 = 1 << 20;

/// What is wrong at a place in a key file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// A different token was needed here.
    #[error("expected {0}")]
    Expected(&'static str),
    /// A quoted string without its closing quote.
    #[error("unterminated string")]
    UnterminatedString,
    /// A `/*` comment without `*/`.
    #[error("unterminated comment")]
    UnterminatedComment,
    /// A clause other than `key`.
    #[error("unknown clause (only `key` clauses are read)")]
    UnknownClause,
    /// A statement other than `algorithm` and `secret` in a key clause.
    #[error("unknown statement in a key clause (only `algorithm` and `secret`)")]
    UnknownStatement,
    /// The key name is not a domain name.
    #[error("bad key name")]
    BadName,
    /// An algorithm other than hmac-sha1/224/256/384/512.
    #[error(
        "unsupported algorithm (hmac-sha256, hmac-sha512; hmac-sha1, -sha224, -sha384 to verify)"
    )]
    UnknownAlgorithm,
    /// The secret is not base64, or empty.
    #[error("the secret is not non-empty base64")]
    BadSecret,
    /// A key clause without `algorithm`.
    #[error("key without an algorithm")]
    MissingAlgorithm,
    /// A key clause without `secret`.
    #[error("key without a secret")]
    MissingSecret,
    /// A statement given twice in one clause.
    #[error("statement given twice")]
    Repeated,
    /// A second key of the same name.
    #[error("a key of this name was defined before")]
    DuplicateKey,
}

/// Why a key file could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// The file could not be read (or is larger than [`MAX_FILE_LEN`]).
    #[error("{file}: {error}")]
    Io {
        /// The file.
        file: String,
        /// What failed.
        error: std::io::Error,
    },
    /// A syntax or content error.
    #[error("{file}:{line}: {problem}")]
    Syntax {
        /// The file.
        file: String,
        /// Line number, from 1.
        line: usize,
        /// What is wrong.
        problem: Problem,
    },
}

#[derive(Debug, PartialEq, Eq)]
enum Token<'t> {
    Word(&'t str),
    Quoted(&'t str),
    Open,
    Close,
    Semicolon,
}

/// Splits `text` into tokens with their line numbers.
fn tokens(text: &str) -> Result<Vec<(Token<'_>, usize)>, (usize, Problem)> {
    let bytes = text.as_bytes();
    let (mut at, mut line) = (0, 1);
    let mut out = Vec::new();
    while at < bytes.len() {
        let b = bytes[at];
        let rest = &bytes[at..];
        if b == b'\n' {
            line += 1;
            at += 1;
        } else if b.is_ascii_whitespace() {
            at += 1;
        } else if b == b'#' || rest.starts_with(b"//") {
            at += rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len());
        } else if rest.starts_with(b"/*") {
            let end = text[at + 2..]
                .find("*/")
                .ok_or((line, Problem::UnterminatedComment))?;
            line += text[at..at + 2 + end].matches('\n').count();
            at += end + 4;
        } else if b == b'"' {
            let end = text[at + 1..]
                .find(['"', '\n'])
                .filter(|&e| bytes[at + 1 + e] == b'"')
                .ok_or((line, Problem::UnterminatedString))?;
            out.push((Token::Quoted(&text[at + 1..at + 1 + end]), line));
            at += end + 2;
        } else if let Some(t) = match b {
            b'{' => Some(Token::Open),
            b'}' => Some(Token::Close),
            b';' => Some(Token::Semicolon),
            _ => None,
        } {
            out.push((t, line));
            at += 1;
        } else {
            let len = rest
                .iter()
                .position(|&c| c.is_ascii_whitespace() || b"{};\"#".contains(&c))
                .unwrap_or(rest.len());
            out.push((Token::Word(&text[at..at + len]), line));
            at += len;
        }
    }
    Ok(out)
}

/// Parses the key clauses of `text`; `file` names it in errors.
///
/// # Errors
/// [`KeyFileError::Syntax`] with the line of the first problem.
pub fn parse(text: &str, file: &str) -> Result<Vec<Key>, KeyFileError> {
    parse_inner(text).map_err(|(line, problem)| KeyFileError::Syntax {
        file: file.to_owned(),
        line,
        problem,
    })
}

fn parse_inner(text: &str) -> Result<Vec<Key>, (usize, Problem)> {
    let toks = tokens(text)?;
    let last_line = toks.last().map_or(1, |t| t.1);
    let mut it = toks.into_iter().peekable();
    let mut next = |what: &'static str| it.next().ok_or((last_line, Problem::Expected(what)));
    let mut keys: Vec<Key> = Vec::new();
    loop {
        let (clause, line) = match next("a key clause") {
            Ok(t) => t,
            Err(_) => return Ok(keys),
        };
        if clause != Token::Word("key") {
            return Err((line, Problem::UnknownClause));
        }
        let (name, line) = match next("a key name")? {
            (Token::Word(n) | Token::Quoted(n), line) => (n, line),
            (_, line) => return Err((line, Problem::Expected("a key name"))),
        };
        let name = Name::parse(name, Some(&Name::root())).map_err(|_| (line, Problem::BadName))?;
        if keys.iter().any(|k| *k.name() == name) {
            return Err((line, Problem::DuplicateKey));
        }
        expect(next("`{`")?, Token::Open, "`{`")?;
        let (mut algorithm, mut secret) = (None, None::<Zeroizing<Vec<u8>>>);
        let close_line = loop {
            let (statement, line) = next("`}`")?;
            let word = match statement {
                Token::Close => break line,
                Token::Word(w) => w,
                _ => return Err((line, Problem::Expected("a statement or `}`"))),
            };
            let (value, vline) = next("a value")?;
            let value = match value {
                Token::Word(v) | Token::Quoted(v) => v,
                _ => return Err((vline, Problem::Expected("a value"))),
            };
            match word {
                "algorithm" if algorithm.is_some() => return Err((line, Problem::Repeated)),
                "algorithm" => {
                    algorithm = Some(
                        Algorithm::from_text(value).ok_or((vline, Problem::UnknownAlgorithm))?,
                    )
                }
                "secret" if secret.is_some() => return Err((line, Problem::Repeated)),
                "secret" => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(value)
                        .ok()
                        .filter(|s| !s.is_empty())
                        .ok_or((vline, Problem::BadSecret))?;
                    secret = Some(Zeroizing::new(decoded));
                }
                _ => return Err((line, Problem::UnknownStatement)),
            }
            expect(next("`;`")?, Token::Semicolon, "`;`")?;
        };
        expect(next("`;` after `}`")?, Token::Semicolon, "`;` after `}`")?;
        let algorithm = algorithm.ok_or((close_line, Problem::MissingAlgorithm))?;
        let secret = secret.ok_or((close_line, Problem::MissingSecret))?;
        let key =
            Key::new(&name, algorithm, &secret).map_err(|_| (close_line, Problem::BadSecret))?;
        keys.push(key);
    }
}

fn expect(
    got: (Token<'_>, usize),
    want: Token<'_>,
    what: &'static str,
) -> Result<(), (usize, Problem)> {
    if got.0 == want {
        Ok(())
    } else {
        Err((got.1, Problem::Expected(what)))
    }
}

/// Reads the key file at `path` (at most [`MAX_FILE_LEN`] bytes).
///
/// # Errors
/// [`KeyFileError`].
pub fn read(path: &Path) -> Result<Vec<Key>, KeyFileError> {
    let file = path.display().to_string();
    let io = |error| KeyFileError::Io {
        file: file.clone(),
        error,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_FILE_LEN {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("larger than {MAX_FILE_LEN} bytes"),
        )));
    }
    let text = Zeroizing::new(std::fs::read_to_string(path).map_err(io)?);
    parse(&text, &file)
}

/// `key` as `tsig-keygen` writes it: the name without its final dot, quoted.
pub fn format(key: &Key) -> Zeroizing<String> {
    let name = key.name().to_string();
    let name = name
        .strip_suffix('.')
        .filter(|n| !n.is_empty())
        .unwrap_or(&name);
    let secret = Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(key.secret()));
    Zeroizing::new(format!(
        "key \"{name}\" {{\n\talgorithm {};\n\tsecret \"{}\";\n}};\n",
        key.algorithm(),
        secret.as_str()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key laid out as BIND 9.18's `tsig-keygen -a hmac-sha512 xfr.example.` prints it (tab
    /// indentation, quoted name without the final dot) and a second key with every comment
    /// style, an unquoted name and statements on one line.
    const FILE: &str = r#"# transfer keys
key "xfr.example" {
	algorithm hmac-sha512;
	secret "HMrLz9O62IaBqo27YZqlFLgWS7POQz9YGW2LVDYYfYm89TLfE2DfZqcuCQ3QgBAs9oUGRLR12k3/vRtwbDrd4w==";
};
/* a second
   key */ key notify-key { // unquoted name
    algorithm HMAC-SHA256.; secret "c2VjcmV0";
};
"#;

    #[test]
    fn reads_tsig_keygen_output_and_comments() {
        let keys = parse(FILE, "keys.conf").unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].name().to_string(), "xfr.example.");
        assert_eq!(keys[0].algorithm(), Algorithm::HmacSha512);
        assert_eq!(keys[0].secret().len(), 64);
        assert_eq!(keys[1].name().to_string(), "notify-key.");
        assert_eq!(keys[1].algorithm(), Algorithm::HmacSha256);
        assert_eq!(keys[1].secret(), b"secret");
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&str, usize, Problem)] = &[
            ("key \"a\" {\n algorithm hmac-md5;\n secret \"AA==\";\n};", 2, Problem::UnknownAlgorithm),
            ("key a {\n algorithm hmac-sha256;\n};", 3, Problem::MissingSecret),
            ("key a {\n secret \"AA==\";\n};", 3, Problem::MissingAlgorithm),
            ("key a {\n algorithm hmac-sha256;\n secret \"not base64!\";\n};", 3, Problem::BadSecret),
            ("key a {\n algorithm hmac-sha256\n secret \"AA==\";\n};", 3, Problem::Expected("`;`")),
            ("options {\n};", 1, Problem::UnknownClause),
            ("key a {\n algorithm hmac-sha256; owner x;\n};", 2, Problem::UnknownStatement),
            ("\n\nkey a { /* open", 3, Problem::UnterminatedComment),
            ("key \"a {\n};", 1, Problem::UnterminatedString),
            ("key a { algorithm hmac-sha256; secret \"AA==\"; };\nkey A { algorithm hmac-sha256; secret \"AA==\"; };", 2, Problem::DuplicateKey),
            ("key a { algorithm hmac-sha256; secret \"AA==\"; }", 1, Problem::Expected("`;` after `}`")),
        ];
        for (text, line, problem) in cases {
            match parse(text, "k.conf") {
                Err(KeyFileError::Syntax {
                    file,
                    line: l,
                    problem: p,
                }) => {
                    assert_eq!((file.as_str(), l, p), ("k.conf", *line, *problem), "{text}");
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(parse("", "empty").unwrap().is_empty());
    }

    #[test]
    fn format_round_trips() {
        let key =
            Key::generate(&"transfer.example.".parse().unwrap(), Algorithm::HmacSha256).unwrap();
        let text = format(&key);
        assert!(
            text.starts_with("key \"transfer.example\" {\n\talgorithm hmac-sha256;\n\tsecret \"")
        );
        let back = parse(&text, "x").unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].secret(), key.secret());
        assert_eq!(back[0].name(), key.name());
    }
}

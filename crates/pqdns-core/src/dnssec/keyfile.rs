//! BIND-style key files: `K<zone>+<alg>+<tag>.key` holds the DNSKEY record and
//! `K<zone>+<alg>+<tag>.private` the private key in `Private-key-format: v1.3` (BIND 9 `dst`
//! format; the ML-DSA layout is the one of draft-westerbaan-dnssec-mldsa §5: a 32-byte seed).
//! BIND files carry the key's `Created:`, `Publish:` and `Activate:` times (BIND 9 `dst`
//! metadata, `YYYYMMDDHHMMSS` UTC): without the last two, `dnssec-signzone -S` and BIND's
//! automatic key handling treat a key as inactive.
//!
//! ldns files (`Private-key-format: v1.2`) hold classical keys in BIND's fields, and
//! post-quantum keys the way Verisign's mtl-mode-ldns does: one `Key:` field (see
//! [`LdnsKeyField`]) with the secret key in liboqs' encoding, so ML-DSA keys are written
//! expanded, never as the seed (ldns would sign silently wrong with a seed).
//!
//! Private files are created with mode 0600 and their contents are never logged.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use zeroize::Zeroizing;

use super::algorithm::{Algorithm, SecAlg};
use super::dnskey::{dnskey_rdata, key_tag, DnskeyRef, FLAG_SEP, FLAG_ZONE};
use super::profile::Profile;
use super::provider::{CryptoError, PrivateFields, Provider, SigningKey};
use crate::atomic_file::{write_atomic, FileMode};
use crate::name::Name;
use crate::rr::{Class, Record, RrType};
use crate::zonefile::ZoneFileReader;

/// Why a key could not be read, written or made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyFileError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file content is malformed.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 if the problem is the file as a whole).
        line: usize,
        /// What was wrong.
        message: String,
    },
    /// The algorithm number means nothing in the chosen profile.
    #[error("{}: algorithm number {number} is not mapped by profile {profile:?}", path.display())]
    UnknownNumber {
        /// The file.
        path: PathBuf,
        /// The number in the DNSKEY.
        number: u8,
        /// The profile used.
        profile: String,
    },
    /// The crypto library rejected the key, or has no such algorithm.
    #[error("{}: {source}", path.display())]
    Crypto {
        /// The file.
        path: PathBuf,
        /// The library's reason.
        source: CryptoError,
    },
    /// The key cannot be written in the requested file format.
    #[error("{}: {reason}", path.display())]
    FormatUnsupported {
        /// The file that was not written.
        path: PathBuf,
        /// Why, and what to use instead.
        reason: &'static str,
    },
}

/// Which tool's key-file conventions to write (both are read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyFileFormat {
    /// BIND 9 `dnssec-keygen`: `Private-key-format: v1.3`, `Created:`, comments in `.key`;
    /// post-quantum keys also carry `PublicKey:` (OQS-BIND).
    #[default]
    Bind,
    /// NLnet Labs `ldns-keygen`: `Private-key-format: v1.2`, key fields only (post-quantum
    /// keys: one `Key:` field as Verisign's mtl-mode-ldns writes, see [`LdnsKeyField`]); `.key`
    /// without a TTL and with `;{id = TAG (ksk|zsk), size = BITSb}`. MTL keys cannot be
    /// written in this format (ldns keeps a whole MTL signing context there).
    Ldns,
}

/// Key role: KSK (SEP flag, signs the DNSKEY RRset), ZSK (signs the rest) or CSK (both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyRole {
    /// Key-signing key (flags 257).
    Ksk,
    /// Zone-signing key (flags 256).
    Zsk,
    /// Combined signing key (flags 257, signs everything).
    Csk,
}

impl KeyRole {
    /// DNSKEY flags for this role.
    pub fn flags(self) -> u16 {
        match self {
            KeyRole::Ksk | KeyRole::Csk => FLAG_ZONE | FLAG_SEP,
            KeyRole::Zsk => FLAG_ZONE,
        }
    }
}

/// A zone's signing key: the DNSKEY it publishes and the private key behind it.
pub struct ZoneKey {
    /// Zone apex (DNSKEY owner).
    pub owner: Name,
    /// DNSKEY flags (257 or 256).
    pub flags: u16,
    /// Algorithm number under the zone's profile.
    pub number: SecAlg,
    /// TTL for the DNSKEY record, in seconds.
    pub ttl: u32,
    /// The private key.
    pub key: Box<dyn SigningKey>,
}

impl std::fmt::Debug for ZoneKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ZoneKey({} flags {} alg {} tag {})",
            self.owner,
            self.flags,
            self.number,
            self.key_tag()
        )
    }
}

impl ZoneKey {
    /// Generates a key for `alg` with the number `profile` gives it.
    ///
    /// # Errors
    /// [`KeyFileError::Crypto`] if the profile has no number for it or the provider cannot
    /// generate it (the path in the error is the zone name).
    pub fn generate(
        owner: &Name,
        alg: Algorithm,
        role: KeyRole,
        profile: &Profile,
        provider: &Provider,
        ttl: u32,
    ) -> Result<ZoneKey, KeyFileError> {
        let crypto = |source| KeyFileError::Crypto {
            path: PathBuf::from(owner.to_string()),
            source,
        };
        let number = profile
            .number(alg)
            .ok_or_else(|| crypto(CryptoError::Unsupported(alg)))?;
        let key = provider
            .scheme(alg)
            .and_then(|s| s.generate())
            .map_err(crypto)?;
        Ok(ZoneKey {
            owner: owner.clone(),
            flags: role.flags(),
            number,
            ttl,
            key,
        })
    }

    /// DNSKEY RDATA.
    pub fn dnskey_rdata(&self) -> Vec<u8> {
        dnskey_rdata(self.flags, self.number, self.key.public_key())
    }

    /// The DNSKEY record.
    pub fn dnskey_record(&self) -> Record {
        Record {
            owner: self.owner.clone(),
            rtype: RrType::DNSKEY,
            class: Class::IN,
            ttl: self.ttl,
            rdata: self.dnskey_rdata(),
        }
    }

    /// Key tag (RFC 4034 Appendix B).
    pub fn key_tag(&self) -> u16 {
        key_tag(&self.dnskey_rdata())
    }

    /// True if the SEP flag is set.
    pub fn is_sep(&self) -> bool {
        self.flags & FLAG_SEP != 0
    }

    /// The BIND file stem `K<zone>+<alg>+<tag>` (zone without escapes' special meaning).
    pub fn file_stem(&self) -> String {
        format!("K{}+{:03}+{:05}", self.owner, self.number.0, self.key_tag())
    }

    /// Writes `<stem>.key` and `<stem>.private` (mode 0600) into `dir` in BIND's format
    /// ([`KeyFileFormat::Bind`]); returns both paths. See [`ZoneKey::write_files_as`].
    ///
    /// # Errors
    /// [`KeyFileError::Io`] if a file cannot be written.
    pub fn write_files(&self, dir: &Path) -> Result<(PathBuf, PathBuf), KeyFileError> {
        self.write_files_as(dir, KeyFileFormat::Bind)
    }

    /// Writes `<stem>.key` and `<stem>.private` (mode 0600) into `dir` in `format`; returns
    /// both paths. In BIND's format the key is created, published and activated now.
    ///
    /// Each file is written atomically ([`crate::atomic_file`]), the private one first: a
    /// failure (full disk, file-size limit, signal) leaves at most a complete `.private` without
    /// its `.key`, which [`find_key_files`] does not see, never a truncated key.
    ///
    /// # Errors
    /// [`KeyFileError::Io`] if a file cannot be written; [`KeyFileError::FormatUnsupported`]
    /// for an MTL key in ldns's format; [`KeyFileError::Crypto`] if a post-quantum key has no
    /// liboqs encoding for ldns's format.
    pub fn write_files_as(
        &self,
        dir: &Path,
        format: KeyFileFormat,
    ) -> Result<(PathBuf, PathBuf), KeyFileError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| KeyFileError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let stem = self.file_stem();
        let key_path = dir.join(format!("{stem}.key"));
        let private_path = dir.join(format!("{stem}.private"));
        let created = crate::time::now();
        let private_text = self.private_text(format, created, &private_path)?;
        write_atomic(&private_path, private_text.as_bytes(), FileMode::Private)
            .map_err(io(&private_path))?;
        write_atomic(
            &key_path,
            self.key_text(format, created).as_bytes(),
            FileMode::Public,
        )
        .map_err(io(&key_path))?;
        Ok((key_path, private_path))
    }

    /// The `.key` file: the DNSKEY record with comments as BIND or ldns write them; BIND's
    /// carry the key's times (all `created`, UNIX seconds) as `dnssec-keygen` writes them.
    fn key_text(&self, format: KeyFileFormat, created: u64) -> String {
        let record = self.dnskey_record();
        match format {
            KeyFileFormat::Bind => {
                let role = if self.is_sep() { "key" } else { "zone" };
                let mut text = format!(
                    "; This is a {role}-signing key, keyid {}, for {}\n; Algorithm: {} ({})\n",
                    self.key_tag(),
                    self.owner,
                    self.number,
                    self.key.algorithm().name(),
                );
                let (stamp, readable) = (
                    crate::time::to_yyyymmddhhmmss(created),
                    crate::time::to_ctime(created),
                );
                for name in BIND_TIMES {
                    let _ = writeln!(text, "; {name}: {stamp} ({readable})");
                }
                let _ = writeln!(text, "{record}");
                text
            }
            // ldns-keygen: no TTL, and the key tag, role and size in a trailing comment.
            KeyFileFormat::Ldns => {
                let role = if self.is_sep() { "ksk" } else { "zsk" };
                let rdata = crate::rdata::to_presentation(RrType::DNSKEY, &record.rdata);
                format!(
                    "{}\tIN\tDNSKEY\t{rdata} ;{{id = {} ({role}), size = {}b}}\n",
                    self.owner,
                    self.key_tag(),
                    self.key_bits()
                )
            }
        }
    }

    /// Key size in bits as ldns reports it: the RSA modulus, else the public key length.
    fn key_bits(&self) -> usize {
        let public = self.key.public_key();
        match self.key.algorithm() {
            Algorithm::RsaSha1
            | Algorithm::RsaSha1Nsec3Sha1
            | Algorithm::RsaSha256
            | Algorithm::RsaSha512 => {
                // RFC 3110 §2: exponent length (1 byte, or 0 and 2 bytes), exponent, modulus.
                let (len, skip) = match public.first() {
                    Some(0) => (
                        usize::from(u16::from_be_bytes([
                            *public.get(1).unwrap_or(&0),
                            *public.get(2).unwrap_or(&0),
                        ])),
                        3,
                    ),
                    Some(&n) => (usize::from(n), 1),
                    None => (0, 0),
                };
                public.len().saturating_sub(skip + len) * 8
            }
            _ => public.len() * 8,
        }
    }

    /// The `.private` file (`path` only labels errors). BIND: `v1.3`; for post-quantum
    /// algorithms the public key too (`PublicKey:` before the times, as OQS-BIND requires);
    /// then `Created:`, `Publish:` and `Activate:`, all `created` (UNIX seconds). ldns: `v1.2`
    /// with the key fields only, as `ldns-keygen` writes; a post-quantum key as one `Key:`
    /// field ([`LdnsKeyField`]).
    fn private_text(
        &self,
        format: KeyFileFormat,
        created: u64,
        path: &Path,
    ) -> Result<Zeroizing<String>, KeyFileError> {
        let b64 = |v: &[u8]| Zeroizing::new(base64::engine::general_purpose::STANDARD.encode(v));
        let mut text = Zeroizing::new(String::new());
        let version = match format {
            KeyFileFormat::Bind => "v1.3",
            KeyFileFormat::Ldns => "v1.2",
        };
        let alg = self.key.algorithm();
        let _ = writeln!(text, "Private-key-format: {version}");
        let _ = writeln!(text, "Algorithm: {} ({})", self.number, alg.mnemonic());
        match format {
            KeyFileFormat::Ldns if alg.is_mtl() => {
                return Err(KeyFileError::FormatUnsupported {
                    path: path.to_path_buf(),
                    reason: "ldns keeps a whole MTL signing context (series, leaf count, tree \
                             state) in its key file, which pqdns does not write; use the bind \
                             format",
                })
            }
            KeyFileFormat::Ldns if alg.is_post_quantum() => {
                let secret =
                    self.key
                        .liboqs_secret_key()
                        .map_err(|source| KeyFileError::Crypto {
                            path: path.to_path_buf(),
                            source,
                        })?;
                let field = LdnsKeyField::encode(&secret, self.key.public_key());
                let _ = writeln!(text, "{}: {}", LdnsKeyField::NAME, *b64(&field));
            }
            _ => {
                for (name, value) in &self.key.private_fields().0 {
                    let _ = writeln!(text, "{name}: {}", *b64(value.as_slice()));
                }
            }
        }
        if format == KeyFileFormat::Bind {
            if alg.is_post_quantum() {
                let _ = writeln!(text, "PublicKey: {}", *b64(self.key.public_key()));
            }
            let stamp = crate::time::to_yyyymmddhhmmss(created);
            for name in BIND_TIMES {
                let _ = writeln!(text, "{name}: {stamp}");
            }
        }
        Ok(text)
    }

    /// Reads a key pair given the path of its `.key` or `.private` file (or the stem).
    ///
    /// # Errors
    /// [`KeyFileError`] naming the file and, for parse errors, the line.
    pub fn read_files(
        path: &Path,
        profile: &Profile,
        provider: &Provider,
    ) -> Result<ZoneKey, KeyFileError> {
        let text = path.to_string_lossy();
        let stem = text
            .strip_suffix(".key")
            .or_else(|| text.strip_suffix(".private"))
            .unwrap_or(&text);
        let key_path = PathBuf::from(format!("{stem}.key"));
        let private_path = PathBuf::from(format!("{stem}.private"));
        let key_text = std::fs::read_to_string(&key_path).map_err(|source| KeyFileError::Io {
            path: key_path.clone(),
            source,
        })?;
        crate::atomic_file::warn_if_world_readable(&private_path);
        let private_text =
            Zeroizing::new(std::fs::read_to_string(&private_path).map_err(|source| {
                KeyFileError::Io {
                    path: private_path.clone(),
                    source,
                }
            })?);
        ZoneKey::from_texts(
            &key_text,
            &private_text,
            &key_path,
            &private_path,
            profile,
            provider,
        )
    }

    /// Reads a key pair from the texts of its `.key` file (a DNSKEY record in master-file
    /// form) and `.private` file (BIND `Private-key-format: v1.x` fields); `key_path` and
    /// `private_path` only label errors (nothing is read from disk).
    ///
    /// # Errors
    /// [`KeyFileError::Parse`] naming the file and line, [`KeyFileError::UnknownNumber`] for
    /// an algorithm outside `profile`, [`KeyFileError::Crypto`] if the provider rejects the
    /// key material.
    pub fn from_texts(
        key_text: &str,
        private_text: &str,
        key_path: &Path,
        private_path: &Path,
        profile: &Profile,
        provider: &Provider,
    ) -> Result<ZoneKey, KeyFileError> {
        let key_path = key_path.to_path_buf();
        let private_path = private_path.to_path_buf();
        let records = ZoneFileReader::new(None, Some(3600))
            .read_str(key_text, &key_path.to_string_lossy())
            .map_err(|e| KeyFileError::Parse {
                path: key_path.clone(),
                line: e.line,
                message: e.message,
            })?;
        let record = records
            .into_iter()
            .find(|r| r.rtype == RrType::DNSKEY)
            .ok_or_else(|| KeyFileError::Parse {
                path: key_path.clone(),
                line: 0,
                message: "no DNSKEY record in key file".into(),
            })?;
        let dnskey = DnskeyRef::parse(&record.rdata).ok_or_else(|| KeyFileError::Parse {
            path: key_path.clone(),
            line: 0,
            message: "DNSKEY RDATA shorter than 4 bytes".into(),
        })?;
        let alg =
            profile
                .algorithm(dnskey.algorithm)
                .ok_or_else(|| KeyFileError::UnknownNumber {
                    path: key_path.clone(),
                    number: dnskey.algorithm.0,
                    profile: profile.name().to_string(),
                })?;

        let fields = parse_private(
            private_text,
            &private_path,
            dnskey.algorithm,
            dnskey.public_key,
            alg,
        )?;
        let crypto = |source| KeyFileError::Crypto {
            path: private_path.clone(),
            source,
        };
        let key = provider
            .scheme(alg)
            .and_then(|s| s.load(&fields, dnskey.public_key))
            .map_err(crypto)?;
        Ok(ZoneKey {
            owner: record.owner,
            flags: dnskey.flags,
            number: dnskey.algorithm,
            ttl: record.ttl,
            key,
        })
    }
}

/// The timing fields of BIND private files (BIND 9 `dst` metadata), each `YYYYMMDDHHMMSS` UTC.
const BIND_TIMING_FIELDS: [&str; 8] = [
    "Created",
    "Publish",
    "Activate",
    "Inactive",
    "Delete",
    "SyncPublish",
    "SyncDelete",
    "Revoke",
];

/// The times `dnssec-keygen` writes by default, in its order: `Created`, `Publish`, `Activate`;
/// pqdns writes all three as the time the key files are written.
const BIND_TIMES: &[&str] = BIND_TIMING_FIELDS.split_at(3).0;

/// The `Key:` field of Verisign's mtl-mode-ldns private files (`Private-key-format: v1.2`):
/// a 4-byte big-endian length, the secret key in liboqs' encoding (ML-DSA: the expanded
/// 2,560-byte ML-DSA-44 key, not the seed; Falcon-512: 1,281 bytes), a 4-byte big-endian
/// length and the public key. For MTL algorithms the MTL signing context (its SPHINCS+ seed,
/// series identifier, leaf count and tree state) follows.
pub struct LdnsKeyField;

impl LdnsKeyField {
    /// The field name.
    pub const NAME: &'static str = "Key";

    /// The field value (before base64) for `secret` and `public`, each at most 4 GiB - 1 bytes
    /// (key sizes are a few kilobytes).
    pub fn encode(secret: &[u8], public: &[u8]) -> Zeroizing<Vec<u8>> {
        let mut out = Zeroizing::new(Vec::with_capacity(8 + secret.len() + public.len()));
        for part in [secret, public] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    /// Splits a field value into its parts.
    ///
    /// # Errors
    /// What is wrong if a length runs past the end.
    pub fn split(value: &[u8]) -> Result<LdnsKeyParts<'_>, &'static str> {
        fn part(value: &[u8]) -> Option<(&[u8], &[u8])> {
            let (len, rest) = value.split_first_chunk::<4>()?;
            let len = usize::try_from(u32::from_be_bytes(*len)).ok()?;
            (rest.len() >= len).then(|| rest.split_at(len))
        }
        let (secret, rest) =
            part(value).ok_or("Key: the secret key's length runs past the end of the field")?;
        let (public, rest) =
            part(rest).ok_or("Key: the public key's length runs past the end of the field")?;
        Ok(LdnsKeyParts {
            secret,
            public,
            rest,
        })
    }
}

/// The parts of an ldns `Key:` field value ([`LdnsKeyField::split`]), borrowed from it.
#[derive(Clone, Copy)]
pub struct LdnsKeyParts<'a> {
    /// The secret key, liboqs encoding.
    pub secret: &'a [u8],
    /// The public key (the DNSKEY public-key field).
    pub public: &'a [u8],
    /// What follows: empty, or for MTL the MTL signing context.
    pub rest: &'a [u8],
}

impl std::fmt::Debug for LdnsKeyParts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LdnsKeyParts(secret {} bytes redacted, public {} bytes, rest {} bytes)",
            self.secret.len(),
            self.public.len(),
            self.rest.len()
        )
    }
}

/// Parses the text of the `.private` file `path` for the DNSKEY with algorithm `number`
/// (meaning `alg`) and `public_key`. An ldns `Key:` field ([`LdnsKeyField`]) becomes the
/// `PrivateKey` field; its public key must be the DNSKEY's. An MTL key's context after it is
/// not needed: pqdns starts a new series (random identifier) whenever it signs.
fn parse_private(
    text: &str,
    path: &Path,
    number: SecAlg,
    public_key: &[u8],
    alg: Algorithm,
) -> Result<PrivateFields, KeyFileError> {
    let parse_err = |line, message: String| KeyFileError::Parse {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut fields = PrivateFields::default();
    let mut saw_format = false;
    for (idx, line) in text.lines().enumerate() {
        let line_no = idx + 1;
        if line.trim().is_empty() {
            continue;
        }
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| parse_err(line_no, "expected `Name: value`".into()))?;
        let value = value.trim();
        match name.trim() {
            "Private-key-format" => {
                if !value.starts_with("v1.") {
                    return Err(parse_err(line_no, format!("unsupported format {value}")));
                }
                saw_format = true;
            }
            "Algorithm" => {
                let n = value.split_whitespace().next().unwrap_or("");
                if n.parse::<u8>().ok() != Some(number.0) {
                    return Err(parse_err(
                        line_no,
                        format!("algorithm {n} does not match the DNSKEY's {number}"),
                    ));
                }
            }
            timing if BIND_TIMING_FIELDS.contains(&timing) => {
                if crate::time::from_yyyymmddhhmmss(value).is_none() {
                    return Err(parse_err(
                        line_no,
                        format!("{timing}: {value:?} is not a YYYYMMDDHHMMSS time"),
                    ));
                }
            }
            LdnsKeyField::NAME => {
                let bytes = Zeroizing::new(
                    base64::engine::general_purpose::STANDARD
                        .decode(value)
                        .map_err(|_| parse_err(line_no, "Key: value is not base64".into()))?,
                );
                let LdnsKeyParts {
                    secret,
                    public,
                    rest,
                } = LdnsKeyField::split(&bytes).map_err(|m| parse_err(line_no, m.into()))?;
                if public != public_key {
                    return Err(parse_err(
                        line_no,
                        "Key: the public key differs from the one in the .key file".into(),
                    ));
                }
                if !rest.is_empty() && !alg.is_mtl() {
                    return Err(parse_err(
                        line_no,
                        format!("Key: {} bytes after the public key", rest.len()),
                    ));
                }
                fields
                    .0
                    .push(("PrivateKey".into(), Zeroizing::new(secret.to_vec())));
            }
            // OQS-BIND repeats the public key; it must be the DNSKEY's.
            "PublicKey" => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(value)
                    .map_err(|_| parse_err(line_no, "PublicKey: value is not base64".into()))?;
                if bytes != public_key {
                    return Err(parse_err(
                        line_no,
                        "PublicKey differs from the public key in the .key file".into(),
                    ));
                }
            }
            other => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(value)
                    .map_err(|_| parse_err(line_no, format!("{other}: value is not base64")))?;
                fields.0.push((other.to_string(), Zeroizing::new(bytes)));
            }
        }
    }
    if !saw_format {
        return Err(parse_err(0, "missing `Private-key-format` line".into()));
    }
    if fields.0.is_empty() {
        return Err(parse_err(0, "no key material (truncated file?)".into()));
    }
    Ok(fields)
}

/// The key files for `zone` in `dir`: paths of `K<zone>+*.key` files, sorted.
///
/// # Errors
/// [`KeyFileError::Io`] if the directory cannot be listed (a missing directory is empty).
pub fn find_key_files(dir: &Path, zone: &Name) -> Result<Vec<PathBuf>, KeyFileError> {
    let prefix = format!("K{zone}+");
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(KeyFileError::Io {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.to_ascii_lowercase()
                    .starts_with(&prefix.to_ascii_lowercase())
                    && n.ends_with(".key")
            })
        })
        .collect();
    out.sort();
    Ok(out)
}

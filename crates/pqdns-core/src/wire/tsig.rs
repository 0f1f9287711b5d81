//! TSIG: secret-key transaction authentication (RFC 8945), without I/O and without a clock
//! (every check takes `now`, UNIX seconds, from the caller).
//!
//! - **Record** (§4.2): type 250, class ANY, TTL 0, owned by the key name, the last record of
//!   the additional section. RDATA ([`TsigRdata`]): algorithm name, 48-bit time signed
//!   (seconds), fudge (seconds), MAC size and MAC, original ID, error (an extended RCODE) and
//!   other data. [`find`] locates it in a parsed message (anywhere else: FORMERR, §5.1).
//! - **Keys** ([`Key`]): name, [`Algorithm`] and secret; the secret is zeroized on drop and
//!   never printed by `Debug`. HMAC-SHA256 and HMAC-SHA512 sign; HMAC-SHA1, -SHA224 and
//!   -SHA384 are accepted for verification only (§6: SHA-1 and SHA-224 are optional,
//!   "not recommended" for new keys). HMAC-MD5 and GSS-TSIG are unknown algorithms (BADKEY).
//! - **What the MAC covers** ([`Digest`], §4.3): a request (or any unsolicited message, e.g.
//!   NOTIFY) is the message as it was before the TSIG was added (its original ID, ARCOUNT
//!   without the TSIG) and the TSIG variables in canonical form (§4.3.3: key name, class,
//!   TTL, algorithm name, time signed, fudge, error, other data); the first response to a
//!   signed request is prefixed by the request's MAC with its length (§4.3.1); each later
//!   message of a multi-message response (AXFR, IXFR) covers the prior message's MAC, the
//!   message and only the timers (time signed, fudge; §4.3.1, §5.3.1). This module signs
//!   every message of a response; it does not verify streams with unsigned messages between
//!   signed ones (§5.3.1 allows up to 99).
//! - **Verification** ([`Signed::verify`], §5.2): the key must be known and of the algorithm
//!   named (else BADKEY), the MAC must match (BADSIG; compared in constant time), and only
//!   then the time: `now` within time signed ± fudge (BADTIME, whose error response is
//!   signed, §5.2.3). A MAC longer than the hash, or shorter than both 10 bytes and half the
//!   hash, is FORMERR (§5.2.2.1); every truncation that rule allows is accepted, so BADTRUNC
//!   (a local policy demanding more) is never produced here.
//! - **Error responses** (§5.3.2): BADKEY and BADSIG answers carry an unsigned TSIG (MAC size
//!   0) with the error ([`append_unsigned`]); a BADTIME answer is signed and carries the
//!   request's time signed and, in other data, our time ([`Fields::bad_time`]).

use std::fmt;

use aws_lc_rs::{constant_time, hmac};
use zeroize::Zeroizing;

use super::name::NameBuf;
use super::{MessageView, Rcode, Section, WireError, HEADER_LEN};
use crate::name::{Name, NameRef};
use crate::rr::{Class, RrType};

/// The TSIG error "BADSIG" (RFC 8945 §5.2.2): the MAC did not verify. It shares the number 16
/// with BADVERS, which only the OPT record carries ([`Rcode::BADVERS`]).
pub const BADSIG: Rcode = Rcode(16);
/// Fudge written into our TSIG records, seconds: the permitted clock difference (RFC 8945
/// §10: "300 seconds" is recommended).
pub const DEFAULT_FUDGE: u16 = 300;
/// Longest MAC of a supported algorithm (HMAC-SHA512), bytes.
pub const MAX_MAC_LEN: usize = 64;
/// Largest 48-bit time signed, seconds.
const MAX_TIME: u64 = (1 << 48) - 1;
/// Fixed RDATA bytes besides the algorithm name, MAC and other data: time signed (6), fudge
/// (2), MAC size (2), original ID (2), error (2), other len (2).
const RDATA_FIXED: usize = 16;
/// TYPE, CLASS, TTL and RDLENGTH after the owner name.
const RR_FIXED: usize = 10;

/// A TSIG algorithm (RFC 8945 §6; the IANA "TSIG Algorithm Names" registry).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// `hmac-sha1.`: verification only.
    HmacSha1,
    /// `hmac-sha224.`: verification only.
    HmacSha224,
    /// `hmac-sha256.` (mandatory to implement, RFC 8945 §6).
    HmacSha256,
    /// `hmac-sha384.`: verification only.
    HmacSha384,
    /// `hmac-sha512.`
    HmacSha512,
}

/// Every algorithm with its name in wire format.
const ALGORITHMS: [(Algorithm, &[u8]); 5] = [
    (Algorithm::HmacSha1, b"\x09hmac-sha1\x00"),
    (Algorithm::HmacSha224, b"\x0bhmac-sha224\x00"),
    (Algorithm::HmacSha256, b"\x0bhmac-sha256\x00"),
    (Algorithm::HmacSha384, b"\x0bhmac-sha384\x00"),
    (Algorithm::HmacSha512, b"\x0bhmac-sha512\x00"),
];

impl Algorithm {
    /// The algorithm's name in wire format (lowercase, e.g. `hmac-sha256.`).
    pub fn wire_name(self) -> &'static [u8] {
        ALGORITHMS
            .iter()
            .find(|(a, _)| *a == self)
            .map_or(&b"\x00"[..], |(_, w)| w)
    }

    /// The name as key files write it, without the final dot (`hmac-sha256`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::HmacSha1 => "hmac-sha1",
            Algorithm::HmacSha224 => "hmac-sha224",
            Algorithm::HmacSha256 => "hmac-sha256",
            Algorithm::HmacSha384 => "hmac-sha384",
            Algorithm::HmacSha512 => "hmac-sha512",
        }
    }

    /// The algorithm whose wire-format name is `wire` (any case), if supported.
    pub fn from_wire(wire: &[u8]) -> Option<Algorithm> {
        ALGORITHMS
            .iter()
            .find(|(_, w)| w.eq_ignore_ascii_case(wire))
            .map(|(a, _)| *a)
    }

    /// The algorithm named `text` (any case, with or without the final dot), if supported.
    pub fn from_text(text: &str) -> Option<Algorithm> {
        let text = text.strip_suffix('.').unwrap_or(text);
        ALGORITHMS
            .iter()
            .map(|(a, _)| *a)
            .find(|a| a.name().eq_ignore_ascii_case(text))
    }

    /// Length of the full MAC (the hash's output), bytes.
    pub fn mac_len(self) -> usize {
        self.hmac().digest_algorithm().output_len
    }

    /// True for the algorithms we sign with (HMAC-SHA256 and HMAC-SHA512).
    pub fn signs(self) -> bool {
        matches!(self, Algorithm::HmacSha256 | Algorithm::HmacSha512)
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            Algorithm::HmacSha1 => hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY,
            Algorithm::HmacSha224 => hmac::HMAC_SHA224,
            Algorithm::HmacSha256 => hmac::HMAC_SHA256,
            Algorithm::HmacSha384 => hmac::HMAC_SHA384,
            Algorithm::HmacSha512 => hmac::HMAC_SHA512,
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a [`Key`] could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The secret is empty.
    #[error("empty TSIG secret")]
    EmptySecret,
    /// A key was to be generated for an algorithm we do not sign with.
    #[error("{0} is accepted for verification only; generate hmac-sha256 or hmac-sha512 keys")]
    VerifyOnly(Algorithm),
    /// The operating system's random generator failed.
    #[error("the random generator failed")]
    Random,
}

/// A TSIG key: its name (lowercased), algorithm and secret. The secret is zeroized when the
/// key is dropped and `Debug` never prints it.
#[derive(Clone)]
pub struct Key {
    name: Name,
    algorithm: Algorithm,
    secret: Zeroizing<Vec<u8>>,
    hmac: hmac::Key,
}

impl Key {
    /// The key `name` of `algorithm` with `secret` (any length; RFC 8945 §6 recommends at
    /// least the hash's output length).
    ///
    /// # Errors
    /// [`KeyError::EmptySecret`].
    pub fn new(name: &Name, algorithm: Algorithm, secret: &[u8]) -> Result<Key, KeyError> {
        if secret.is_empty() {
            return Err(KeyError::EmptySecret);
        }
        Ok(Key {
            name: name.to_lowercase(),
            algorithm,
            secret: Zeroizing::new(secret.to_vec()),
            hmac: hmac::Key::new(algorithm.hmac(), secret),
        })
    }

    /// A new key with a secret of the hash's output length from the OS CSPRNG.
    ///
    /// # Errors
    /// [`KeyError::VerifyOnly`] for an algorithm we do not sign with, [`KeyError::Random`].
    pub fn generate(name: &Name, algorithm: Algorithm) -> Result<Key, KeyError> {
        if !algorithm.signs() {
            return Err(KeyError::VerifyOnly(algorithm));
        }
        let mut secret = Zeroizing::new(vec![0u8; algorithm.mac_len()]);
        aws_lc_rs::rand::fill(&mut secret).map_err(|_| KeyError::Random)?;
        Key::new(name, algorithm, &secret)
    }

    /// The key name (lowercase).
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The secret, for writing key files. Never log it.
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// Bytes a TSIG record signed with this key takes in a message (owner uncompressed, full
    /// MAC), plus `other_len` bytes of other data.
    pub fn record_len(&self, other_len: usize) -> usize {
        self.name.wire_len()
            + RR_FIXED
            + self.algorithm.wire_name().len()
            + RDATA_FIXED
            + self.algorithm.mac_len()
            + other_len
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("name", &self.name)
            .field("algorithm", &self.algorithm)
            .field("secret", &"(not shown)")
            .finish()
    }
}

/// A set of keys, looked up by name (ignoring case). A linear search: a server holds a few
/// keys.
#[derive(Debug, Default)]
pub struct KeyRing {
    keys: Vec<Key>,
}

impl KeyRing {
    /// An empty ring.
    pub fn new() -> KeyRing {
        KeyRing::default()
    }

    /// Adds `key`; returns the key of the same name it replaces.
    pub fn insert(&mut self, key: Key) -> Option<Key> {
        match self.keys.iter_mut().find(|k| k.name == key.name) {
            Some(old) => Some(std::mem::replace(old, key)),
            None => {
                self.keys.push(key);
                None
            }
        }
    }

    /// The key named `wire` (uncompressed wire format, any case).
    pub fn get(&self, wire: &[u8]) -> Option<&Key> {
        self.keys
            .iter()
            .find(|k| k.name.as_wire().eq_ignore_ascii_case(wire))
    }

    /// The keys, in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = &Key> {
        self.keys.iter()
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True without keys.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The RDATA of a TSIG record (RFC 8945 §4.2), borrowed from a message.
#[derive(Clone, Copy, Debug)]
pub struct TsigRdata<'a> {
    /// Algorithm name, uncompressed (§4.2: "in domain name syntax").
    pub algorithm: &'a [u8],
    /// Time signed, UNIX seconds (48 bits).
    pub time_signed: u64,
    /// Permitted difference from time signed, seconds.
    pub fudge: u16,
    /// The MAC (empty in unsigned error responses, §5.3.2).
    pub mac: &'a [u8],
    /// The message ID when it was signed (a forwarder may change the header's).
    pub original_id: u16,
    /// The TSIG error, an extended RCODE (BADSIG, BADKEY, BADTIME, BADTRUNC).
    pub error: Rcode,
    /// Other data: the server's 48-bit time in a BADTIME response, else empty.
    pub other: &'a [u8],
}

impl<'a> TsigRdata<'a> {
    /// Reads TSIG RDATA.
    ///
    /// # Errors
    /// [`WireError::BadRdata`] if a field runs past the RDATA, the algorithm name is not a
    /// well-formed uncompressed name, or bytes are left over.
    pub fn parse(rdata: &'a [u8]) -> Result<TsigRdata<'a>, WireError> {
        let (name, mut at) = NameRef::read(rdata).map_err(|_| WireError::BadRdata)?;
        let mut take = |n: usize| {
            let field = rdata.get(at..at + n).ok_or(WireError::BadRdata);
            at += n;
            field
        };
        let time = take(6)?;
        let time_signed = time.iter().fold(0u64, |t, &b| t << 8 | u64::from(b));
        let fudge = u16_at(take(2)?);
        let mac_len = usize::from(u16_at(take(2)?));
        let mac = take(mac_len)?;
        let original_id = u16_at(take(2)?);
        let error = Rcode(u16_at(take(2)?));
        let other_len = usize::from(u16_at(take(2)?));
        let other = take(other_len)?;
        if at != rdata.len() {
            return Err(WireError::BadRdata);
        }
        Ok(TsigRdata {
            algorithm: name.as_wire(),
            time_signed,
            fudge,
            mac,
            original_id,
            error,
            other,
        })
    }

    /// Appends the RDATA in wire format (the algorithm name as given).
    pub fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.algorithm);
        out.extend_from_slice(&time48(self.time_signed));
        out.extend(self.fudge.to_be_bytes());
        out.extend((self.mac.len() as u16).to_be_bytes());
        out.extend_from_slice(self.mac);
        out.extend(self.original_id.to_be_bytes());
        out.extend(self.error.0.to_be_bytes());
        out.extend((self.other.len() as u16).to_be_bytes());
        out.extend_from_slice(self.other);
    }
}

fn u16_at(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

/// A time as the 48-bit big-endian field of TSIG (larger values are cut to 48 bits).
fn time48(t: u64) -> [u8; 6] {
    let b = (t & MAX_TIME).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// A MAC, at most [`MAX_MAC_LEN`] bytes, kept on the stack.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Mac {
    bytes: [u8; MAX_MAC_LEN],
    len: u8,
}

impl Mac {
    fn from_slice(mac: &[u8]) -> Mac {
        let len = mac.len().min(MAX_MAC_LEN);
        let mut bytes = [0; MAX_MAC_LEN];
        bytes[..len].copy_from_slice(&mac[..len]);
        Mac {
            bytes,
            len: len as u8,
        }
    }

    /// The MAC bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Mac({} bytes)", self.len)
    }
}

/// What a message's MAC covers besides the message itself (RFC 8945 §4.3).
#[derive(Clone, Copy, Debug)]
pub enum Digest<'m> {
    /// A request, or any message not answering a signed one (§4.3.3): the message and the
    /// TSIG variables.
    Request,
    /// The first response to a signed request: the request's MAC (with its length) first
    /// (§4.3.1).
    Response(&'m [u8]),
    /// A later message of a multi-message response: the prior message's MAC, the message,
    /// and only the timers (§4.3.1, §5.3.1).
    Subsequent(&'m [u8]),
}

/// The TSIG fields a signer chooses.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// Time signed, UNIX seconds.
    pub time_signed: u64,
    /// Fudge, seconds.
    pub fudge: u16,
    /// The TSIG error.
    pub error: Rcode,
    /// Other data (our time in a BADTIME response).
    other: [u8; 6],
    other_len: u8,
}

impl Fields {
    /// A normal signature at `now` (UNIX seconds) with [`DEFAULT_FUDGE`] and no error.
    pub fn at(now: u64) -> Fields {
        Fields {
            time_signed: now,
            fudge: DEFAULT_FUDGE,
            error: Rcode::NOERROR,
            other: [0; 6],
            other_len: 0,
        }
    }

    /// The signed BADTIME answer to a request signed at `request_time` (§5.2.3): the
    /// request's time signed, BADTIME, and our time `now` in other data.
    pub fn bad_time(request_time: u64, now: u64) -> Fields {
        Fields {
            time_signed: request_time,
            fudge: DEFAULT_FUDGE,
            error: Rcode::BADTIME,
            other: time48(now),
            other_len: 6,
        }
    }

    /// The other data.
    pub fn other(&self) -> &[u8] {
        &self.other[..usize::from(self.other_len)]
    }
}

/// The TSIG record of a parsed message.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    msg: &'a [u8],
    /// Offset of the TSIG record: the message before it is what was signed.
    start: usize,
    key_name: NameBuf,
    /// The record's RDATA.
    pub rdata: TsigRdata<'a>,
}

/// Why a message's TSIG was not accepted, and so what the answer must say (RFC 8945 §5.2).
#[derive(Debug)]
pub enum Rejection<'k> {
    /// FORMERR: a MAC longer than the hash or shorter than §5.2.2.1 allows.
    Malformed,
    /// The key is unknown, or not of the algorithm named (BADKEY).
    BadKey,
    /// The MAC does not match (BADSIG).
    BadSig,
    /// The MAC matches but the time is outside time signed ± fudge (BADTIME); the answer is
    /// signed with what this holds (§5.2.3).
    BadTime(Verified<'k>),
    /// The message carries no MAC but a TSIG error (an unsigned error response, §5.3.2).
    Unsigned(Rcode),
}

impl Rejection<'_> {
    /// The RCODE of the answer: FORMERR for [`Rejection::Malformed`], else NOTAUTH.
    pub fn rcode(&self) -> Rcode {
        match self {
            Rejection::Malformed => Rcode::FORMERR,
            _ => Rcode::NOTAUTH,
        }
    }

    /// The TSIG error of the answer (NOERROR for [`Rejection::Malformed`]).
    pub fn error(&self) -> Rcode {
        match self {
            Rejection::Malformed => Rcode::NOERROR,
            Rejection::BadKey => Rcode::BADKEY,
            Rejection::BadSig => BADSIG,
            Rejection::BadTime(_) => Rcode::BADTIME,
            Rejection::Unsigned(e) => *e,
        }
    }
}

/// A message whose MAC verified with [`Verified::key`].
#[derive(Clone, Copy, Debug)]
pub struct Verified<'k> {
    /// The key that signed it.
    pub key: &'k Key,
    /// Its MAC: what the answer's (or the next message's) digest starts with.
    pub mac: Mac,
    /// Its time signed, UNIX seconds.
    pub time_signed: u64,
    /// Its TSIG error (a signed error response carries one, e.g. BADTIME).
    pub error: Rcode,
    /// The message's length without the TSIG record, bytes.
    pub len: usize,
}

/// Finds the TSIG record of `view`, which must be the last record of the additional section
/// (RFC 8945 §5.1) with class ANY and TTL 0 (§4.2).
///
/// # Errors
/// [`WireError::BadRdata`] (FORMERR) for a TSIG record elsewhere, a second one, a wrong class
/// or TTL, or malformed RDATA.
pub fn find<'a>(view: &MessageView<'a>) -> Result<Option<Signed<'a>>, WireError> {
    let msg = view.as_bytes();
    let opt_ends = view.opt_range().is_some_and(|r| r.end == msg.len());
    let mut found = None;
    for section in [Section::Answer, Section::Authority, Section::Additional] {
        let mut records = view.records(section).peekable();
        while let Some(record) = records.next() {
            if record.rtype() != RrType::TSIG {
                continue;
            }
            // The OPT record is left out by `records`: the TSIG must still end the message.
            let last = section == Section::Additional && records.peek().is_none() && !opt_ends;
            if found.is_some() || !last || record.class() != Class::ANY || record.ttl() != 0 {
                return Err(WireError::BadRdata);
            }
            found = Some((record, msg.len() - record.wire().len()));
        }
    }
    let Some((record, start)) = found else {
        return Ok(None);
    };
    Ok(Some(Signed {
        msg,
        start,
        key_name: record.owner().decode(),
        rdata: TsigRdata::parse(record.rdata_raw())?,
    }))
}

impl<'a> Signed<'a> {
    /// The key name, uncompressed, case as sent.
    pub fn key_name(&self) -> &[u8] {
        self.key_name.as_wire()
    }

    /// The message's length without the TSIG record, bytes.
    pub fn unsigned_len(&self) -> usize {
        self.start
    }

    /// Verifies the MAC with `key` (the key the message names, looked up by the caller;
    /// `None`: unknown) as RFC 8945 §5.2 orders: key and algorithm, MAC, then time (`now`,
    /// UNIX seconds, within time signed ± fudge).
    ///
    /// # Errors
    /// [`Rejection`].
    pub fn verify<'k>(
        &self,
        key: Option<&'k Key>,
        digest: Digest<'_>,
        now: u64,
    ) -> Result<Verified<'k>, Rejection<'k>> {
        let r = &self.rdata;
        if r.mac.is_empty() && r.error != Rcode::NOERROR {
            return Err(Rejection::Unsigned(r.error));
        }
        let Some(key) = key.filter(|k| {
            Algorithm::from_wire(r.algorithm) == Some(k.algorithm)
                && k.name.as_wire().eq_ignore_ascii_case(self.key_name())
        }) else {
            return Err(Rejection::BadKey);
        };
        // RFC 8945 §5.2.2.1: a MAC size larger than the hash or "less than the larger of 10
        // (octets) and half the length of the hash function in use" MUST cause FORMERR.
        let full = key.algorithm.mac_len();
        if r.mac.len() > full || r.mac.len() < (full / 2).max(10) {
            return Err(Rejection::Malformed);
        }
        let mut header = [0u8; HEADER_LEN];
        header.copy_from_slice(&self.msg[..HEADER_LEN]);
        header[..2].copy_from_slice(&r.original_id.to_be_bytes());
        let arcount = u16_at(&header[10..]).saturating_sub(1);
        header[10..].copy_from_slice(&arcount.to_be_bytes());
        let fields = Fields {
            time_signed: r.time_signed,
            fudge: r.fudge,
            error: r.error,
            other: [0; 6],
            other_len: 0,
        };
        let computed = compute(
            key,
            digest,
            &header,
            &self.msg[HEADER_LEN..self.start],
            &fields,
            r.other,
        );
        if constant_time::verify_slices_are_equal(&computed.as_bytes()[..r.mac.len()], r.mac)
            .is_err()
        {
            return Err(Rejection::BadSig);
        }
        let verified = Verified {
            key,
            mac: Mac::from_slice(r.mac),
            time_signed: r.time_signed,
            error: r.error,
            len: self.start,
        };
        if now.abs_diff(r.time_signed) > u64::from(r.fudge) {
            return Err(Rejection::BadTime(verified));
        }
        Ok(verified)
    }
}

/// The MAC of a message: `header` (as signed) and `body` (the rest before the TSIG), with
/// the digest's prefix and the TSIG variables (or only the timers) of `fields` and `other`.
fn compute(
    key: &Key,
    digest: Digest<'_>,
    header: &[u8; HEADER_LEN],
    body: &[u8],
    fields: &Fields,
    other: &[u8],
) -> Mac {
    let mut ctx = hmac::Context::with_key(&key.hmac);
    if let Digest::Response(prior) | Digest::Subsequent(prior) = digest {
        ctx.update(&(prior.len() as u16).to_be_bytes());
        ctx.update(prior);
    }
    ctx.update(header);
    ctx.update(body);
    if !matches!(digest, Digest::Subsequent(_)) {
        // §4.3.3: names in canonical form (uncompressed, lowercase); our key names are
        // stored lowercase and algorithm names are written lowercase.
        ctx.update(key.name.as_wire());
        ctx.update(&Class::ANY.0.to_be_bytes());
        ctx.update(&0u32.to_be_bytes());
        ctx.update(key.algorithm.wire_name());
    }
    ctx.update(&time48(fields.time_signed));
    ctx.update(&fields.fudge.to_be_bytes());
    if !matches!(digest, Digest::Subsequent(_)) {
        ctx.update(&fields.error.0.to_be_bytes());
        ctx.update(&(other.len() as u16).to_be_bytes());
        ctx.update(other);
    }
    Mac::from_slice(ctx.sign().as_ref())
}

/// Signs the message in `msg[base..]` with `key` (RFC 8945 §5.1, §5.3): computes the MAC over
/// it as `digest` says and appends the TSIG record (owner the key name, the full MAC, the
/// message's ID as original ID), adding one to ARCOUNT. Returns the MAC, which the next
/// message's digest starts with.
///
/// # Errors
/// [`WireError::ShortHeader`] if `msg[base..]` has no header; [`WireError::Truncated`] if
/// ARCOUNT is already 65535. `msg` is then unchanged.
pub fn sign(
    key: &Key,
    digest: Digest<'_>,
    msg: &mut Vec<u8>,
    base: usize,
    fields: &Fields,
) -> Result<Mac, WireError> {
    let header: [u8; HEADER_LEN] = msg
        .get(base..base + HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(WireError::ShortHeader)?;
    if u16_at(&header[10..]) == u16::MAX {
        return Err(WireError::Truncated);
    }
    let mac = compute(
        key,
        digest,
        &header,
        &msg[base + HEADER_LEN..],
        fields,
        fields.other(),
    );
    let rdata = TsigRdata {
        algorithm: key.algorithm.wire_name(),
        time_signed: fields.time_signed,
        fudge: fields.fudge,
        mac: mac.as_bytes(),
        original_id: u16_at(&header),
        error: fields.error,
        other: fields.other(),
    };
    append(msg, base, key.name.as_wire(), &rdata);
    Ok(mac)
}

/// Appends an unsigned TSIG record (MAC size 0) carrying `error` to the response in
/// `msg[base..]`, for BADKEY and BADSIG answers (RFC 8945 §5.3.2: "the server SHOULD send back
/// an unsigned error message ... It MUST NOT send back a signed error message"). The key and
/// algorithm names are the request's, as sent; the time signed is `now`.
///
/// # Errors
/// As [`sign`].
pub fn append_unsigned(
    msg: &mut Vec<u8>,
    base: usize,
    request: &Signed<'_>,
    error: Rcode,
    now: u64,
) -> Result<(), WireError> {
    let id = msg
        .get(base..base + HEADER_LEN)
        .map(u16_at)
        .ok_or(WireError::ShortHeader)?;
    if u16_at(&msg[base + 10..]) == u16::MAX {
        return Err(WireError::Truncated);
    }
    let rdata = TsigRdata {
        algorithm: request.rdata.algorithm,
        time_signed: now,
        fudge: DEFAULT_FUDGE,
        mac: &[],
        original_id: id,
        error,
        other: &[],
    };
    append(msg, base, request.key_name(), &rdata);
    Ok(())
}

/// Bytes of an unsigned TSIG record answering `request` ([`append_unsigned`]).
pub fn unsigned_len(request: &Signed<'_>) -> usize {
    request.key_name().len() + RR_FIXED + request.rdata.algorithm.len() + RDATA_FIXED
}

/// Appends the TSIG record (owner `owner`, uncompressed) and adds one to ARCOUNT.
fn append(msg: &mut Vec<u8>, base: usize, owner: &[u8], rdata: &TsigRdata<'_>) {
    msg.extend_from_slice(owner);
    msg.extend(RrType::TSIG.0.to_be_bytes());
    msg.extend(Class::ANY.0.to_be_bytes());
    msg.extend(0u32.to_be_bytes());
    let len_at = msg.len();
    msg.extend([0, 0]);
    rdata.write(msg);
    let rdlen = (msg.len() - len_at - 2) as u16;
    msg[len_at..len_at + 2].copy_from_slice(&rdlen.to_be_bytes());
    let arcount = u16_at(&msg[base + 10..]) + 1;
    msg[base + 10..base + 12].copy_from_slice(&arcount.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Message, Question};
    use crate::wire::{Header, MessageWriter, FLAG_QR};

    const NOW: u64 = 1_700_000_000;

    fn key(alg: Algorithm, secret: &[u8]) -> Key {
        Key::new(&"Transfer.Key.".parse().unwrap(), alg, secret).unwrap()
    }

    fn query() -> Vec<u8> {
        let q = Question {
            qname: "example.".parse().unwrap(),
            qtype: RrType::AXFR,
            qclass: Class::IN,
        };
        Message::query(0x4242, q, false, None).to_wire()
    }

    /// The MAC, or the TSIG error (FORMERR for an unreadable message).
    fn check(msg: &[u8], key: &Key, digest: Digest<'_>, now: u64) -> Result<Mac, Rcode> {
        let view = MessageView::parse(msg).map_err(|_| Rcode::FORMERR)?;
        let signed = find(&view)
            .map_err(|_| Rcode::FORMERR)?
            .ok_or(Rcode::FORMERR)?;
        signed
            .verify(Some(key), digest, now)
            .map(|v| v.mac)
            .map_err(|r| r.error())
    }

    /// HMAC-SHA256 of a known message, computed independently (Python's hmac module over the
    /// bytes RFC 8945 §4.3.3 lists): pins the digest layout, not just a round trip.
    #[test]
    fn request_mac_known_answer() {
        let k = key(Algorithm::HmacSha256, b"0123456789abcdef0123456789abcdef");
        let mut msg = query();
        let mac = sign(&k, Digest::Request, &mut msg, 0, &Fields::at(NOW)).unwrap();
        let view = MessageView::parse(&msg).unwrap();
        assert_eq!(view.counts()[3], 1);
        let signed = find(&view).unwrap().unwrap();
        assert_eq!(signed.key_name(), b"\x08transfer\x03key\x00");
        assert_eq!(signed.rdata.time_signed, NOW);
        assert_eq!(signed.rdata.original_id, 0x4242);
        assert_eq!(signed.rdata.algorithm, b"\x0bhmac-sha256\x00");
        assert_eq!(
            data_encoding::HEXLOWER.encode(mac.as_bytes()),
            KNOWN_REQUEST_MAC
        );
        assert!(check(&msg, &k, Digest::Request, NOW).is_ok());
    }

    const KNOWN_REQUEST_MAC: &str =
        "89e003f00171741d081f9cc9cc3d244e8b673ea8c47ef22c82b197bfe7d3909e";

    #[test]
    fn every_flipped_byte_fails() {
        for alg in [Algorithm::HmacSha256, Algorithm::HmacSha512] {
            let k = key(alg, b"secret secret secret");
            let mut msg = query();
            sign(&k, Digest::Request, &mut msg, 0, &Fields::at(NOW)).unwrap();
            check(&msg, &k, Digest::Request, NOW).unwrap();
            for at in 0..msg.len() {
                let mut m = msg.clone();
                m[at] ^= 0x01;
                // The header's ID (bytes 0-1) is the one field outside the MAC: the original
                // ID from the TSIG record replaces it (RFC 8945 §4.3.3, forwarders).
                let r = check(&m, &k, Digest::Request, NOW);
                if at < 2 {
                    assert!(r.is_ok(), "the header ID is not signed, byte {at}");
                } else {
                    assert!(r.is_err(), "{alg}: flipped byte {at} verified");
                }
            }
        }
    }

    #[test]
    fn response_and_subsequent_messages_chain() {
        let k = key(Algorithm::HmacSha512, b"another secret");
        let mut req = query();
        let req_mac = sign(&k, Digest::Request, &mut req, 0, &Fields::at(NOW)).unwrap();
        let mut prior = req_mac;
        let mut first = true;
        for i in 0..3u8 {
            let mut resp = Vec::new();
            let w = MessageWriter::new(
                &mut resp,
                0,
                512,
                Header {
                    id: 0x4242,
                    flags: FLAG_QR | u16::from(i),
                },
            );
            w.finish(Rcode::NOERROR);
            let digest = if first {
                Digest::Response(prior.as_bytes())
            } else {
                Digest::Subsequent(prior.as_bytes())
            };
            let mac = sign(&k, digest, &mut resp, 0, &Fields::at(NOW + 1)).unwrap();
            assert_eq!(check(&resp, &k, digest, NOW), Ok(mac));
            // The wrong chaining fails.
            let wrong = if first {
                Digest::Request
            } else {
                Digest::Response(prior.as_bytes())
            };
            assert!(check(&resp, &k, wrong, NOW).is_err());
            prior = mac;
            first = false;
        }
    }

    #[test]
    fn key_time_and_truncation_rules() {
        let k = key(Algorithm::HmacSha256, b"s3cret");
        let other = key(Algorithm::HmacSha256, b"other");
        let sha512 = key(Algorithm::HmacSha512, b"s3cret");
        let mut msg = query();
        sign(&k, Digest::Request, &mut msg, 0, &Fields::at(NOW)).unwrap();
        assert_eq!(check(&msg, &other, Digest::Request, NOW), Err(BADSIG));
        assert_eq!(
            check(&msg, &sha512, Digest::Request, NOW),
            Err(Rcode::BADKEY)
        );
        let view = MessageView::parse(&msg).unwrap();
        let signed = find(&view).unwrap().unwrap();
        assert!(matches!(
            signed.verify(None, Digest::Request, NOW),
            Err(Rejection::BadKey)
        ));
        // Time: within the fudge either way, then BADTIME (checked after the MAC).
        for now in [NOW - 300, NOW + 300] {
            assert!(check(&msg, &k, Digest::Request, now).is_ok());
        }
        for now in [NOW - 301, NOW + 301] {
            assert_eq!(check(&msg, &k, Digest::Request, now), Err(Rcode::BADTIME));
            assert_eq!(check(&msg, &other, Digest::Request, now), Err(BADSIG));
        }
        // Truncated MACs: 16 bytes (half of SHA-256) verify, 15 and 33 are FORMERR.
        for (len, ok) in [(16usize, true), (15, false), (32, true)] {
            let mut m = query();
            let mac = sign(&k, Digest::Request, &mut m, 0, &Fields::at(NOW)).unwrap();
            let view = MessageView::parse(&m).unwrap();
            let start = find(&view).unwrap().unwrap().unsigned_len();
            m.truncate(start);
            let rdata = TsigRdata {
                algorithm: Algorithm::HmacSha256.wire_name(),
                time_signed: NOW,
                fudge: DEFAULT_FUDGE,
                mac: &mac.as_bytes()[..len],
                original_id: 0x4242,
                error: Rcode::NOERROR,
                other: &[],
            };
            m[11] -= 1;
            append(&mut m, 0, k.name().as_wire(), &rdata);
            let view = MessageView::parse(&m).unwrap();
            let r = find(&view)
                .unwrap()
                .unwrap()
                .verify(Some(&k), Digest::Request, NOW);
            assert_eq!(r.is_ok(), ok, "MAC of {len} bytes");
            if !ok {
                assert!(matches!(r, Err(Rejection::Malformed)));
            }
        }
    }

    #[test]
    fn tsig_must_be_last_in_additional() {
        let k = key(Algorithm::HmacSha256, b"s3cret");
        let mut msg = query();
        sign(&k, Digest::Request, &mut msg, 0, &Fields::at(NOW)).unwrap();
        // Move it to the answer section: FORMERR.
        let mut m = msg.clone();
        m[6..12].copy_from_slice(&[0, 1, 0, 0, 0, 0]);
        let view = MessageView::parse(&m).unwrap();
        assert!(find(&view).is_err());
        // Sign again: two TSIGs.
        let mut m = msg.clone();
        sign(&k, Digest::Request, &mut m, 0, &Fields::at(NOW)).unwrap();
        assert!(find(&MessageView::parse(&m).unwrap()).is_err());
        // Unsigned error response: reported as such.
        let view = MessageView::parse(&msg).unwrap();
        let signed = find(&view).unwrap().unwrap();
        let mut resp = query();
        resp[2] |= 0x80;
        append_unsigned(&mut resp, 0, &signed, Rcode::BADKEY, NOW).unwrap();
        assert_eq!(resp.len(), query().len() + unsigned_len(&signed));
        let view = MessageView::parse(&resp).unwrap();
        let r = find(&view)
            .unwrap()
            .unwrap()
            .verify(Some(&k), Digest::Request, NOW);
        assert!(matches!(r, Err(Rejection::Unsigned(Rcode::BADKEY))));
    }

    #[test]
    fn bad_time_answer_carries_both_times() {
        let k = key(Algorithm::HmacSha256, b"s3cret");
        let mut resp = query();
        let fields = Fields::bad_time(NOW - 1000, NOW);
        sign(&k, Digest::Response(&[1; 32]), &mut resp, 0, &fields).unwrap();
        assert_eq!(resp.len(), query().len() + k.record_len(6));
        let view = MessageView::parse(&resp).unwrap();
        let s = find(&view).unwrap().unwrap();
        assert_eq!(s.rdata.time_signed, NOW - 1000);
        assert_eq!(s.rdata.error, Rcode::BADTIME);
        assert_eq!(s.rdata.other, &time48(NOW));
        let v = s.verify(Some(&k), Digest::Response(&[1; 32]), NOW - 1000);
        assert_eq!(v.unwrap().error, Rcode::BADTIME);
    }

    #[test]
    fn keys_hide_their_secret() {
        let k = Key::generate(&"k.".parse().unwrap(), Algorithm::HmacSha512).unwrap();
        assert_eq!(k.secret().len(), 64);
        let shown = format!("{k:?}");
        assert!(shown.contains("hmac-sha512") || shown.contains("HmacSha512"));
        assert!(!shown.contains(&format!("{:?}", k.secret())));
        assert!(Key::generate(&"k.".parse().unwrap(), Algorithm::HmacSha1).is_err());
        assert_eq!(
            Algorithm::from_text("HMAC-SHA256."),
            Some(Algorithm::HmacSha256)
        );
        assert_eq!(Algorithm::from_text("hmac-md5"), None);
        let mut ring = KeyRing::new();
        assert!(ring.insert(k).is_none());
        assert!(ring.get(b"\x01K\x00").is_some());
    }
}

//! DNS cookies (RFC 7873) with interoperable server cookies (RFC 9018).
//!
//! A client sends an 8-byte client cookie in the EDNS COOKIE option, and from its second query
//! on the server cookie it got back. A server cookie that verifies proves the client received
//! our earlier response at its address, so its queries are not spoofed: such clients are
//! exempt from response-rate limiting ([`crate::rrl`]).
//!
//! Server cookie (RFC 9018 §4): Version 1 (1 byte), Reserved (3 bytes, 0 when we make one),
//! Timestamp (4 bytes, UNIX seconds), Hash (8 bytes) = SipHash-2-4 keyed with the 16-byte
//! server secret over `client cookie ‖ version ‖ reserved ‖ timestamp ‖ client IP` (4 or 16
//! bytes). Any server of an anycast set holding the same secret (BIND, Knot, NSD, unbound)
//! verifies it. A cookie is accepted from 1 hour in the past to 5 minutes in the future
//! (RFC 9018 §4.3); every response carries a fresh one.
//!
//! The secret is drawn from the OS CSPRNG at start and replaced every
//! [`DEFAULT_ROTATION`], the previous one still verifying for an hour (RFC 9018 §5: new
//! cookies with the new secret, both accepted meanwhile), or configured (32 hex digits,
//! [`parse_secret`]) so that an anycast set shares it.
//!
//! A COOKIE option of a length RFC 7873 §5.2.2 does not allow (not 8, nor 16 to 40; see
//! [`split`]) gets FORMERR. Under [`CookieMode::Require`], UDP queries without a valid server
//! cookie get BADCOOKIE (RFC 7873 §5.2.3) and a fresh cookie, nothing else.
//!
//! This module holds the protocol only (checking and making cookies); the services that answer
//! queries (pqdns-server's engine, the resolver service) put the option in their responses.

use std::net::IpAddr;
use std::sync::{PoisonError, RwLock};
use std::time::Duration;

use siphasher::sip::SipHasher24;

/// Length of a client cookie, bytes (RFC 7873 §4).
pub const CLIENT_COOKIE_LEN: usize = 8;
/// Length of our server cookies, bytes (RFC 9018 §4).
pub const SERVER_COOKIE_LEN: usize = 16;
/// Length of the COOKIE option data in our responses: client cookie and server cookie.
pub const RESPONSE_COOKIE_LEN: usize = CLIENT_COOKIE_LEN + SERVER_COOKIE_LEN;
/// Length of a server secret, bytes (SipHash-2-4 key, RFC 9018 §4.4).
pub const SECRET_LEN: usize = 16;
/// How often a generated secret is replaced.
pub const DEFAULT_ROTATION: Duration = Duration::from_secs(24 * 3600);
/// Oldest server cookie accepted, seconds (RFC 9018 §4.3).
const MAX_AGE: u32 = 3600;
/// Furthest a server cookie's timestamp may be ahead of our clock, seconds (RFC 9018 §4.3).
const MAX_AHEAD: u32 = 300;
/// Age below which a valid server cookie is sent back unchanged, seconds (RFC 9018 §4.3).
const REFRESH_AGE: u32 = 1800;
/// Server cookie version (RFC 9018 §4.1).
const VERSION: u8 = 1;

/// What the server does with cookies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CookieMode {
    /// Answer COOKIE options with server cookies; a valid one exempts from rate limiting.
    #[default]
    On,
    /// Ignore COOKIE options (no server cookies, no exemption).
    Off,
    /// As `on`, and UDP queries without a valid server cookie get BADCOOKIE with a cookie to
    /// retry with, and no data (BIND's `require-server-cookie`).
    Require,
}

impl std::str::FromStr for CookieMode {
    type Err = String;
    fn from_str(s: &str) -> Result<CookieMode, String> {
        match s {
            "on" => Ok(CookieMode::On),
            "off" => Ok(CookieMode::Off),
            "require" => Ok(CookieMode::Require),
            _ => Err(format!(
                "unknown cookie mode {s:?}: use \"on\", \"off\" or \"require\""
            )),
        }
    }
}

/// The COOKIE option of a query, checked against our secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieCheck {
    /// No COOKIE option (or cookies are off).
    Absent,
    /// A client cookie only: a first contact.
    ClientOnly,
    /// A server cookie we made for this client and address, recently.
    Valid,
    /// A server cookie that does not verify (another secret, address or too old).
    Invalid,
}

/// Splits COOKIE option data into the client cookie and the server cookie (possibly empty).
/// `None` for a length RFC 7873 §5.2.2 answers with FORMERR.
pub fn split(data: &[u8]) -> Option<(&[u8; CLIENT_COOKIE_LEN], &[u8])> {
    let valid = data.len() == CLIENT_COOKIE_LEN || (16..=40).contains(&data.len());
    let (client, server) = data.split_first_chunk::<CLIENT_COOKIE_LEN>()?;
    valid.then_some((client, server))
}

/// The server's cookie secrets.
#[derive(Debug)]
pub struct Cookies {
    mode: CookieMode,
    secrets: RwLock<Secrets>,
    /// `None`: a configured secret, never replaced.
    rotation: Option<Duration>,
}

#[derive(Debug)]
struct Secrets {
    current: [u8; SECRET_LEN],
    previous: Option<[u8; SECRET_LEN]>,
    /// When `current` started being used, UNIX seconds.
    since: u64,
}

impl Cookies {
    /// Cookies under `mode`, with `secret` if configured, else a random one replaced every
    /// `rotation`.
    ///
    /// # Errors
    /// The OS random number generator failed.
    pub fn new(
        mode: CookieMode,
        secret: Option<[u8; SECRET_LEN]>,
        rotation: Duration,
    ) -> Result<Cookies, String> {
        let (current, rotation) = match secret {
            Some(s) => (s, None),
            None => (random_secret()?, Some(rotation)),
        };
        Ok(Cookies {
            mode,
            secrets: RwLock::new(Secrets {
                current,
                previous: None,
                since: pqdns_core::time::now(),
            }),
            rotation,
        })
    }

    /// The mode.
    pub fn mode(&self) -> CookieMode {
        self.mode
    }

    /// Checks the COOKIE option data of a query from `client` at `now` (UNIX seconds). The
    /// caller has checked the length with [`split`].
    pub fn check(&self, data: &[u8], client: IpAddr, now: u64) -> CookieCheck {
        let Some((client_cookie, server)) = split(data) else {
            return CookieCheck::Invalid;
        };
        if self.mode == CookieMode::Off {
            return CookieCheck::Absent;
        }
        if server.is_empty() {
            return CookieCheck::ClientOnly;
        }
        let Some(stamp) = server.get(4..8) else {
            return CookieCheck::Invalid;
        };
        let stamp = u32::from_be_bytes([stamp[0], stamp[1], stamp[2], stamp[3]]);
        let now = now as u32;
        let fresh = now.wrapping_sub(stamp) <= MAX_AGE || stamp.wrapping_sub(now) <= MAX_AHEAD;
        if server.len() != SERVER_COOKIE_LEN || server[0] != VERSION || !fresh {
            return CookieCheck::Invalid;
        }
        let secrets = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        let matches = |secret: &[u8; SECRET_LEN]| {
            hash(secret, client_cookie, &server[..8], client) == server[8..]
        };
        if matches(&secrets.current) || secrets.previous.as_ref().is_some_and(matches) {
            CookieCheck::Valid
        } else {
            CookieCheck::Invalid
        }
    }

    /// Writes the response's COOKIE option data (RFC 9018 §4) to `out`: `client_cookie`, then
    /// a server cookie for `client` stamped `now` (UNIX seconds) with the current secret.
    pub fn write(
        &self,
        client_cookie: &[u8; CLIENT_COOKIE_LEN],
        client: IpAddr,
        now: u64,
        out: &mut [u8; RESPONSE_COOKIE_LEN],
    ) {
        self.rotate(now);
        let mut head = [0u8; 8];
        head[0] = VERSION;
        head[4..].copy_from_slice(&(now as u32).to_be_bytes());
        let secrets = self.secrets.read().unwrap_or_else(PoisonError::into_inner);
        let h = hash(&secrets.current, client_cookie, &head, client);
        out[..CLIENT_COOKIE_LEN].copy_from_slice(client_cookie);
        out[CLIENT_COOKIE_LEN..CLIENT_COOKIE_LEN + 8].copy_from_slice(&head);
        out[CLIENT_COOKIE_LEN + 8..].copy_from_slice(&h);
    }

    /// Writes the COOKIE option data answering the query's `data` (checked as `check` at
    /// `now`) to `out`: a valid server cookie less than half an hour old is sent back as it
    /// is, anything else gets a fresh one (RFC 9018 §4.3).
    pub fn answer(
        &self,
        data: &[u8],
        check: CookieCheck,
        client: IpAddr,
        now: u64,
        out: &mut [u8; RESPONSE_COOKIE_LEN],
    ) {
        let Some((client_cookie, server)) = split(data) else {
            return;
        };
        let stamp = server
            .get(4..8)
            .map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
        if check == CookieCheck::Valid && (now as u32).wrapping_sub(stamp) <= REFRESH_AGE {
            out.copy_from_slice(&data[..RESPONSE_COOKIE_LEN]);
        } else {
            self.write(client_cookie, client, now, out);
        }
    }

    /// Replaces a generated secret once its time is up (the old one verifies for a while).
    fn rotate(&self, now: u64) {
        let Some(every) = self.rotation else { return };
        let due = |s: &Secrets| now.saturating_sub(s.since) >= every.as_secs();
        if !due(&self.secrets.read().unwrap_or_else(PoisonError::into_inner)) {
            return;
        }
        let Ok(fresh) = random_secret() else {
            tracing::warn!("cookie secret not replaced: the OS random number generator failed");
            return;
        };
        let mut s = self.secrets.write().unwrap_or_else(PoisonError::into_inner);
        if due(&s) {
            s.previous = Some(s.current);
            s.current = fresh;
            s.since = now;
        }
    }
}

/// Parses a configured secret: 32 hex digits.
///
/// # Errors
/// A message for anything else.
pub fn parse_secret(text: &str) -> Result<[u8; SECRET_LEN], String> {
    let bytes = data_encoding::HEXLOWER_PERMISSIVE
        .decode(text.as_bytes())
        .map_err(|e| format!("cookie_secret: not hex: {e}"))?;
    bytes.try_into().map_err(|b: Vec<u8>| {
        format!(
            "cookie_secret: {} bytes, must be 16 (32 hex digits)",
            b.len()
        )
    })
}

fn random_secret() -> Result<[u8; SECRET_LEN], String> {
    let mut s = [0u8; SECRET_LEN];
    getrandom::fill(&mut s).map_err(|e| format!("the OS random number generator failed: {e}"))?;
    Ok(s)
}

/// SipHash-2-4 of `client cookie ‖ version ‖ reserved ‖ timestamp ‖ client IP`
/// (RFC 9018 §4.4); `head` is the server cookie's first 8 bytes.
fn hash(
    secret: &[u8; SECRET_LEN],
    client_cookie: &[u8; CLIENT_COOKIE_LEN],
    head: &[u8],
    client: IpAddr,
) -> [u8; 8] {
    use std::hash::Hasher;
    let mut h = SipHasher24::new_with_key(secret);
    h.write(client_cookie);
    h.write(head);
    match client {
        IpAddr::V4(a) => h.write(&a.octets()),
        IpAddr::V6(a) => h.write(&a.octets()),
    }
    // SipHash output bytes are the little-endian form of the 64-bit result.
    h.finish().to_le_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        data_encoding::HEXLOWER.decode(s.as_bytes()).unwrap()
    }

    fn with_secret(secret: &str) -> Cookies {
        let s = parse_secret(secret).unwrap();
        Cookies::new(CookieMode::On, Some(s), DEFAULT_ROTATION).unwrap()
    }

    /// RFC 9018 Appendix A: the server cookies of A.1, A.2, A.3 and A.4 (IPv6, new secret).
    #[test]
    fn rfc9018_appendix_a_vectors() {
        for (secret, client_cookie, ip, now, want) in [
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "2464c4abcf10c957",
                "198.51.100.100",
                1559731985u64,
                "010000005cf79f111f8130c3eee29480",
            ),
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "2464c4abcf10c957",
                "198.51.100.100",
                1559734385,
                "010000005cf7a871d4a564a1442aca77",
            ),
            (
                "e5e973e5a6b2a43f48e7dc849e37bfcf",
                "fc93fc62807ddb86",
                "203.0.113.203",
                1559734700,
                "010000005cf7a9acf73a7810aca2381e",
            ),
            (
                "445536bcd2513298075a5d379663c962",
                "22681ab97d52c298",
                "2001:db8:220:1:59de:d0f4:8769:82b8",
                1559741961,
                "010000005cf7c609a6bb79d16625507a",
            ),
        ] {
            let cookies = with_secret(secret);
            let cc: [u8; 8] = hex(client_cookie).try_into().unwrap();
            let mut out = [0u8; RESPONSE_COOKIE_LEN];
            cookies.write(&cc, ip.parse().unwrap(), now, &mut out);
            assert_eq!(&out[..8], &cc);
            assert_eq!(
                data_encoding::HEXLOWER.encode(&out[8..]),
                want,
                "{ip} at {now}"
            );
            // And it verifies, for that address only, inside the time window.
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(cookies.check(&out, ip, now + 60), CookieCheck::Valid);
            assert_eq!(
                cookies.check(&out, "192.0.2.1".parse().unwrap(), now),
                CookieCheck::Invalid
            );
            assert_eq!(
                cookies.check(&out, ip, now + 3601),
                CookieCheck::Invalid,
                "too old"
            );
            assert_eq!(
                cookies.check(&out, ip, now - 301),
                CookieCheck::Invalid,
                "from the future"
            );
        }
    }

    /// RFC 9018 A.3: reserved bytes the client echoes are part of the hash; A.4: a cookie of
    /// the old secret verifies while it is the previous one, not with the new one alone.
    #[test]
    fn echoed_reserved_bytes_and_the_previous_secret() {
        let a3 = hex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let cookies = with_secret("e5e973e5a6b2a43f48e7dc849e37bfcf");
        let ip: IpAddr = "203.0.113.203".parse().unwrap();
        // Its timestamp 0x5cf78f71 is 1559727985; at A.3's time (1559734700) it is too old.
        assert_eq!(cookies.check(&a3, ip, 1559727985 + 60), CookieCheck::Valid);
        assert_eq!(cookies.check(&a3, ip, 1559734700), CookieCheck::Invalid);
        let mut zeroed = a3.clone();
        zeroed[9..12].fill(0);
        assert_eq!(
            cookies.check(&zeroed, ip, 1559727985 + 60),
            CookieCheck::Invalid
        );

        let a4 = hex("22681ab97d52c298010000005cf7c57926556bd0934c72f8");
        let ip6: IpAddr = "2001:db8:220:1:59de:d0f4:8769:82b8".parse().unwrap();
        let new_only = with_secret("445536bcd2513298075a5d379663c962");
        assert_eq!(new_only.check(&a4, ip6, 1559741961), CookieCheck::Invalid);
        let rolled = with_secret("445536bcd2513298075a5d379663c962");
        rolled.secrets.write().unwrap().previous =
            Some(parse_secret("dd3bdf9344b678b185a6f5cb60fca715").unwrap());
        assert_eq!(rolled.check(&a4, ip6, 1559741961), CookieCheck::Valid);
    }

    #[test]
    fn lengths_modes_and_rotation() {
        for (len, ok) in [
            (0, false),
            (7, false),
            (8, true),
            (9, false),
            (15, false),
            (16, true),
            (24, true),
            (40, true),
            (41, false),
        ] {
            assert_eq!(split(&vec![0; len]).is_some(), ok, "{len} bytes");
        }
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let cc = [7u8; 8];
        let generated = Cookies::new(CookieMode::On, None, Duration::from_secs(100)).unwrap();
        let since = generated.secrets.read().unwrap().since;
        assert_eq!(generated.check(&cc, ip, since), CookieCheck::ClientOnly);
        let mut first = [0u8; RESPONSE_COOKIE_LEN];
        generated.write(&cc, ip, since, &mut first);
        assert_eq!(generated.check(&first, ip, since), CookieCheck::Valid);
        // After a rotation the old cookie still verifies, and new ones use the new secret.
        let mut second = [0u8; RESPONSE_COOKIE_LEN];
        generated.write(&cc, ip, since + 100, &mut second);
        assert_ne!(first[16..], second[16..]);
        assert_eq!(generated.check(&first, ip, since + 100), CookieCheck::Valid);
        assert_eq!(
            generated.check(&second, ip, since + 100),
            CookieCheck::Valid
        );
        // A young valid cookie comes back unchanged, an old one is renewed.
        let mut echoed = [0u8; RESPONSE_COOKIE_LEN];
        generated.answer(&first, CookieCheck::Valid, ip, since + 60, &mut echoed);
        assert_eq!(echoed, first);
        generated.answer(&first, CookieCheck::Valid, ip, since + 1801, &mut echoed);
        assert_ne!(echoed[12..16], first[12..16], "a new timestamp");
        assert_eq!(
            generated.check(&echoed, ip, since + 1801),
            CookieCheck::Valid
        );
        let off = Cookies::new(CookieMode::Off, None, DEFAULT_ROTATION).unwrap();
        assert_eq!(off.check(&first, ip, since), CookieCheck::Absent);
        assert!(parse_secret("e5e973").is_err() && parse_secret("zz").is_err());
    }
}

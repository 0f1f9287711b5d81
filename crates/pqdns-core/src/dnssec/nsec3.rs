//! NSEC3 (RFC 5155): the iterated SHA-1 owner-name hash (§5), NSEC3 and NSEC3PARAM RDATA, and
//! parameters with the RFC 9276 defaults (0 extra iterations, empty salt, opt-out off).

use aws_lc_rs::digest;
use data_encoding::BASE32HEX_NOPAD;

use crate::name::Name;
use crate::rdata::write_type_bitmap;
use crate::rr::RrType;
use crate::wire::rdata::Nsec3Param;

/// NSEC3 hash algorithm 1, SHA-1 (RFC 5155 §11).
pub const HASH_SHA1: u8 = 1;
/// Opt-out flag (RFC 5155 §3.1.2.1).
pub const FLAG_OPT_OUT: u8 = 1;
/// Largest iteration count accepted when validating; RFC 9276 §3.2 lets validators treat more
/// than this as insecure, and we refuse to spend the work.
pub const MAX_ITERATIONS: u16 = 150;

/// NSEC3 chain parameters; the default is RFC 9276's: no extra iterations, no salt, no
/// opt-out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Nsec3Params {
    /// Extra hash iterations (RFC 9276 §3.1 recommends 0).
    pub iterations: u16,
    /// Salt (RFC 9276 §3.1 recommends none).
    pub salt: Vec<u8>,
    /// Opt-out (off by default).
    pub opt_out: bool,
}

impl Nsec3Params {
    /// NSEC3PARAM RDATA (RFC 5155 §4.2; flags are 0 there).
    pub fn nsec3param_rdata(&self) -> Vec<u8> {
        let mut out = vec![HASH_SHA1, 0];
        out.extend(self.iterations.to_be_bytes());
        out.push(self.salt.len() as u8);
        out.extend_from_slice(&self.salt);
        out
    }

    /// Parses the first fields shared by NSEC3 and NSEC3PARAM RDATA
    /// ([`crate::wire::rdata::Nsec3Param`]); returns the parameters, the hash algorithm and the
    /// bytes after the salt.
    pub fn parse(rdata: &[u8]) -> Option<(Nsec3Params, u8, &[u8])> {
        let (p, rest) = Nsec3Param::read_prefix(rdata)?;
        Some((Nsec3Params::from_view(&p), p.hash_algorithm, rest))
    }

    /// The parameters of NSEC3 or NSEC3PARAM RDATA read through its view.
    pub fn from_view(p: &Nsec3Param<'_>) -> Nsec3Params {
        Nsec3Params {
            iterations: p.iterations,
            salt: p.salt.to_vec(),
            opt_out: p.flags & FLAG_OPT_OUT != 0,
        }
    }

    /// The hashed owner name of `name`: IH(salt, name, iterations) (RFC 5155 §5).
    pub fn hash(&self, name: &Name) -> [u8; 20] {
        let mut wire = Vec::with_capacity(name.wire_len());
        name.write_canonical(&mut wire);
        let mut h = sha1(&[&wire, &self.salt]);
        for _ in 0..self.iterations {
            h = sha1(&[&h, &self.salt]);
        }
        h
    }

    /// The NSEC3 owner name for `name` in `zone` (RFC 5155 §3): the hash, base32hex, as the
    /// first label under the apex; `None` if the zone name is too long to take the label.
    pub fn hashed_owner(&self, name: &Name, zone: &Name) -> Option<Name> {
        hashed_owner_name(&self.hash(name), zone)
    }

    /// NSEC3 RDATA (RFC 5155 §3.2).
    pub fn nsec3_rdata(&self, next_hashed: &[u8], types: &[RrType]) -> Vec<u8> {
        let mut out = vec![HASH_SHA1, u8::from(self.opt_out)];
        out.extend(self.iterations.to_be_bytes());
        out.push(self.salt.len() as u8);
        out.extend_from_slice(&self.salt);
        out.push(next_hashed.len() as u8);
        out.extend_from_slice(next_hashed);
        write_type_bitmap(&mut out, types);
        out
    }
}

fn sha1(parts: &[&[u8]]) -> [u8; 20] {
    let mut ctx = digest::Context::new(&digest::SHA1_FOR_LEGACY_USE_ONLY);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; 20];
    out.copy_from_slice(ctx.finish().as_ref());
    out
}

/// The NSEC3 owner name for a hash in `zone`: base32hex (lower case, no padding) of `hash` as
/// the first label (RFC 5155 §3); `None` if the zone name is too long to take the label.
pub fn hashed_owner_name(hash: &[u8], zone: &Name) -> Option<Name> {
    let label = BASE32HEX_NOPAD.encode(hash).to_ascii_lowercase();
    zone.prepend_label(label.as_bytes()).ok()
}

/// The next closer name (RFC 5155 §1.3): the ancestor of `name` (or `name` itself) one label
/// longer than `closest_encloser`; `None` unless `name` is strictly below `closest_encloser`.
pub fn next_closer(name: &Name, closest_encloser: &Name) -> Option<Name> {
    if name == closest_encloser || !name.is_subdomain_of(closest_encloser) {
        return None;
    }
    let want = closest_encloser.label_count() + 1;
    let mut cur = name.clone();
    while cur.label_count() > want {
        cur = cur.parent()?;
    }
    Some(cur)
}

/// Decodes the hash from an NSEC3 owner name's first label (base32hex).
pub fn owner_hash(owner: &Name) -> Option<Vec<u8>> {
    let label = owner.labels().next()?;
    BASE32HEX_NOPAD.decode(&label.to_ascii_uppercase()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_match_rfc5155_appendix_a() {
        // RFC 5155 Appendix A: salt aabbccdd, 12 iterations.
        let params = Nsec3Params {
            iterations: 12,
            salt: vec![0xaa, 0xbb, 0xcc, 0xdd],
            opt_out: false,
        };
        let zone: Name = "example.".parse().unwrap();
        let cases = [
            ("example.", "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom"),
            ("a.example.", "35mthgpgcu1qg68fab165klnsnk3dpvl"),
            ("ns1.example.", "2t7b4g4vsa5smi47k61mv5bv1a22bojr"),
            ("*.w.example.", "r53bq7cc2uvmubfu5ocmm6pers9tk9en"),
        ];
        for (name, hash) in cases {
            let owner = params.hashed_owner(&name.parse().unwrap(), &zone).unwrap();
            assert_eq!(owner.to_string(), format!("{hash}.example."), "{name}");
        }
    }

    #[test]
    fn next_closer_names() {
        let n = |s: &str| -> Name { s.parse().unwrap() };
        let ce = n("example.");
        assert_eq!(
            next_closer(&n("a.b.c.example."), &ce),
            Some(n("c.example."))
        );
        assert_eq!(next_closer(&n("c.EXAMPLE."), &ce), Some(n("c.example.")));
        assert_eq!(next_closer(&n("example."), &ce), None);
        assert_eq!(next_closer(&n("a.example.org."), &ce), None);
    }

    #[test]
    fn hashed_owner_needs_room_for_the_label() {
        // 32 base32hex characters + length byte: a zone name above 222 bytes cannot take it.
        let long: Name = format!(
            "{}.",
            vec!["a".repeat(63); 3].join(".") + "." + &"b".repeat(30)
        )
        .parse()
        .unwrap();
        assert!(long.wire_len() > 222);
        assert_eq!(Nsec3Params::default().hashed_owner(&long, &long), None);
    }
}

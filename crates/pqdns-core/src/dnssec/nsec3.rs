//! NSEC3 (RFC 5155): the iterated SHA-1 owner-name hash (§5), NSEC3 and NSEC3PARAM RDATA, and
//! parameters with the RFC 9276 defaults (0 extra iterations, empty salt, opt-out off).

use aws_lc_rs::digest;
use data_encoding::BASE32HEX_NOPAD;

use crate::name::Name;
use crate::rdata::write_type_bitmap;
use crate::rr::RrType;

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

    /// Parses the first fields shared by NSEC3 and NSEC3PARAM RDATA; returns the parameters,
    /// the hash algorithm and the bytes after the salt.
    pub fn parse(rdata: &[u8]) -> Option<(Nsec3Params, u8, &[u8])> {
        let (&alg, rest) = rdata.split_first()?;
        let (&flags, rest) = rest.split_first()?;
        let iterations = u16::from_be_bytes([*rest.first()?, *rest.get(1)?]);
        let salt_len = usize::from(*rest.get(2)?);
        let salt = rest.get(3..3 + salt_len)?.to_vec();
        Some((
            Nsec3Params {
                iterations,
                salt,
                opt_out: flags & FLAG_OPT_OUT != 0,
            },
            alg,
            &rest[3 + salt_len..],
        ))
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

    /// The NSEC3 owner name for `name` in `zone`: base32hex(hash) as the first label.
    pub fn hashed_owner(&self, name: &Name, zone: &Name) -> Name {
        let label = BASE32HEX_NOPAD
            .encode(&self.hash(name))
            .to_ascii_lowercase();
        zone.prepend_label(label.as_bytes()).expect(
            "a 32-character label under a valid zone name fits unless the zone is >222 bytes",
        )
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
            let owner = params.hashed_owner(&name.parse().unwrap(), &zone);
            assert_eq!(owner.to_string(), format!("{hash}.example."), "{name}");
        }
    }
}

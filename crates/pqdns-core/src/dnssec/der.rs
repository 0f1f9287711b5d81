//! Just enough DER (ITU-T X.690) to read the RSA components out of a PKCS #8 `PrivateKeyInfo`
//! (RFC 5208 §5) wrapping a PKCS #1 `RSAPrivateKey` (RFC 8017 §A.1.2), so that generated RSA
//! keys can be written in BIND's private-key format.

/// Reads one TLV with the expected tag; returns (contents, rest).
fn tlv(data: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&t, rest) = data.split_first()?;
    if t != tag {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, &b| acc << 8 | usize::from(b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| rest.split_at(len))
}

const SEQUENCE: u8 = 0x30;
const INTEGER: u8 = 0x02;
const OCTET_STRING: u8 = 0x04;

/// The eight RSA components (n, e, d, p, q, dP, dQ, qInv) as unsigned big-endian bytes, from
/// PKCS #8 DER. `None` if the structure is not a two-prime RSA key.
pub(crate) fn rsa_private_components(pkcs8: &[u8]) -> Option<Vec<Vec<u8>>> {
    let (info, _) = tlv(pkcs8, SEQUENCE)?;
    let (_version, rest) = tlv(info, INTEGER)?;
    let (_alg, rest) = tlv(rest, SEQUENCE)?;
    let (key, _) = tlv(rest, OCTET_STRING)?;
    let (mut rsa, _) = tlv(key, SEQUENCE)?;
    let (_version, rest) = tlv(rsa, INTEGER)?;
    rsa = rest;
    let mut out = Vec::with_capacity(8);
    for _ in 0..8 {
        let (int, rest) = tlv(rsa, INTEGER)?;
        let start = int.iter().position(|&b| b != 0).unwrap_or(int.len());
        out.push(int[start..].to_vec());
        rsa = rest;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_short_and_long_lengths_and_rejects_truncation() {
        assert_eq!(
            tlv(&[0x02, 0x01, 0x05, 0xff], INTEGER),
            Some((&[5u8][..], &[0xffu8][..]))
        );
        let mut long = vec![0x04, 0x81, 0x80];
        long.extend([7u8; 0x80]);
        assert_eq!(tlv(&long, OCTET_STRING).unwrap().0.len(), 0x80);
        assert_eq!(tlv(&[0x02, 0x05, 1, 2], INTEGER), None);
        assert_eq!(tlv(&[0x30, 0x00], INTEGER), None);
        assert_eq!(
            rsa_private_components(&[0x30, 0x03, 0x02, 0x01, 0x00]),
            None
        );
    }
}

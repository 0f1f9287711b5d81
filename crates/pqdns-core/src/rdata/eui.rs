//! EUI48 and EUI64 RDATA (RFC 7043 §3.2, §4.2): 6 or 8 bytes, in presentation format that
//! many groups of two hexadecimal digits separated by hyphens (`00-00-5e-00-53-2a`).

use std::fmt;

/// Parses `xx-xx-…` with exactly `len` groups; `None` otherwise.
pub(super) fn parse(text: &str, len: usize) -> Option<Vec<u8>> {
    let groups: Vec<&str> = text.split('-').collect();
    if groups.len() != len {
        return None;
    }
    groups
        .iter()
        .map(|g| {
            (g.len() == 2 && g.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u8::from_str_radix(g, 16).ok())
                .flatten()
        })
        .collect()
}

/// Writes the bytes as lowercase hyphen-separated hex, as RFC 7043's examples do.
pub(super) fn write(f: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            f.write_char('-')?;
        }
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

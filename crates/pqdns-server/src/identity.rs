//! Which server answered: the name server identifier (NSID, RFC 5001) and the CHAOS-class TXT
//! names operators query to tell the servers of an anycast or load-balanced set apart
//! (RFC 4892 §2: `id.server.` and `version.server.`; BIND's `hostname.bind.` and
//! `version.bind.`, which NSD and Knot answer too).
//!
//! Everything is off by default (NSD's `hide-identity`/`hide-version`, Knot's empty
//! `identity`/`version`): a query for these names is REFUSED, and an NSID option is ignored
//! (RFC 5001 §2.1 lets a server "choose not to provide" it). Configured in `[server]`:
//!
//! ```toml
//! [server]
//! nsid = "ns1.fra"           # or "0x6e7331" for raw bytes (hex)
//! identity = "ns1.fra"       # CH TXT id.server. / hostname.bind.
//! version = "pqdns 0.1"      # CH TXT version.server. / version.bind.
//! ```

use pqdns_core::wire::{MessageWriter, Rcode, Section, FLAG_AA};
use pqdns_core::{Class, Name, RrType};

/// Longest NSID payload accepted, in bytes (RFC 5001 §2.3 sets no limit; an EDNS option
/// holds at most 65535 bytes, and this keeps NSID far from any UDP budget).
pub const MAX_NSID_LEN: usize = 128;

/// What the server says about itself; `None` fields are not disclosed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// NSID payload (opaque bytes, RFC 5001 §2.3) sent to queries with an NSID option.
    pub nsid: Option<Vec<u8>>,
    /// The answer to CH TXT `id.server.` and `hostname.bind.` (RFC 4892 §2.2).
    pub id: Option<String>,
    /// The answer to CH TXT `version.server.` and `version.bind.`.
    pub version: Option<String>,
}

/// Parses an `nsid` setting: `0x` followed by hex digits for raw bytes, else the text's UTF-8
/// bytes.
///
/// # Errors
/// A message for bad hex, an empty value, or more than [`MAX_NSID_LEN`] bytes.
pub fn parse_nsid(text: &str) -> Result<Vec<u8>, String> {
    let bytes = match text.strip_prefix("0x") {
        Some(hex) => data_encoding::HEXLOWER_PERMISSIVE
            .decode(hex.as_bytes())
            .map_err(|e| format!("nsid {text:?}: bad hex after 0x: {e}"))?,
        None => text.as_bytes().to_vec(),
    };
    if bytes.is_empty() || bytes.len() > MAX_NSID_LEN {
        return Err(format!(
            "nsid {text:?}: must be 1 to {MAX_NSID_LEN} bytes, is {}",
            bytes.len()
        ));
    }
    Ok(bytes)
}

impl Identity {
    /// The TXT text configured for a CHAOS-class name, if any.
    fn text_for(&self, qname: &Name) -> Option<&str> {
        let name = qname.to_string().to_ascii_lowercase();
        match name.as_str() {
            "id.server." | "hostname.bind." => self.id.as_deref(),
            "version.server." | "version.bind." => self.version.as_deref(),
            _ => None,
        }
    }

    /// Answers a query of class CH into `w`: the configured TXT record (class CH, TTL 0, AA)
    /// for QTYPE TXT or ANY, NODATA for other types of a configured name, REFUSED otherwise.
    pub fn answer_chaos(
        &self,
        qname: &Name,
        qtype: RrType,
        w: &mut MessageWriter<'_, '_>,
    ) -> Rcode {
        let Some(text) = self.text_for(qname) else {
            return Rcode::REFUSED;
        };
        w.set_flag(FLAG_AA);
        if matches!(qtype, RrType::TXT | RrType::ANY) {
            // A TXT RDATA is a sequence of <character-string>s of at most 255 bytes each.
            let mut rdata = Vec::with_capacity(text.len() + text.len() / 255 + 1);
            for chunk in text.as_bytes().chunks(255) {
                rdata.push(chunk.len() as u8);
                rdata.extend_from_slice(chunk);
            }
            if text.is_empty() {
                rdata.push(0);
            }
            let mark = w.mark();
            w.record(
                Section::Answer,
                qname.as_wire(),
                RrType::TXT,
                Class::CH,
                0,
                &rdata,
            );
            if w.commit(mark).is_err() {
                w.set_flag(pqdns_core::wire::FLAG_TC);
            }
        }
        Rcode::NOERROR
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nsid_is_text_or_hex_and_bounded() {
        assert_eq!(parse_nsid("ns1").unwrap(), b"ns1");
        assert_eq!(parse_nsid("0x6E7331").unwrap(), b"ns1");
        assert!(parse_nsid("0xzz").is_err());
        assert!(parse_nsid("").is_err());
        assert!(parse_nsid(&"a".repeat(MAX_NSID_LEN + 1)).is_err());
    }
}

//! IPSECKEY RDATA after the precedence (RFC 4025 §2): gateway type, algorithm, gateway
//! (none, IPv4, IPv6 or an uncompressed domain name, by gateway type) and an optional public
//! key, base64 in presentation format (RFC 4025 §3: `precedence gateway-type algorithm
//! gateway base64-key`, gateway `.` when there is none).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine as _;

use super::{RdataError, Token};
use crate::name::Name;

/// RFC 4025 §2.3: gateway types.
const NONE: u8 = 0;
const IPV4: u8 = 1;
const IPV6: u8 = 2;
const NAME: u8 = 3;

fn bad(expected: &'static str, found: &str) -> RdataError {
    RdataError::Bad {
        expected,
        found: found.to_string(),
    }
}

/// Parses `gateway-type algorithm gateway [key]` and appends the wire form.
pub(super) fn parse(
    tokens: &[Token],
    origin: Option<&Name>,
    out: &mut Vec<u8>,
) -> Result<(), RdataError> {
    let [kind, alg, gateway, key @ ..] = tokens else {
        return Err(RdataError::Missing(
            "gateway type, algorithm and gateway (RFC 4025 §3)",
        ));
    };
    let number = |t: &Token, what| t.text.parse::<u8>().map_err(|_| bad(what, &t.text));
    let kind_value = number(kind, "a gateway type (0 to 3)")?;
    out.push(kind_value);
    out.push(number(alg, "an IPSECKEY algorithm number")?);
    let g = gateway.text.as_str();
    match kind_value {
        NONE if g == "." => {}
        NONE => return Err(bad("`.` for gateway type 0", g)),
        IPV4 => out.extend(
            g.parse::<Ipv4Addr>()
                .map_err(|_| bad("an IPv4 gateway", g))?
                .octets(),
        ),
        IPV6 => out.extend(
            g.parse::<Ipv6Addr>()
                .map_err(|_| bad("an IPv6 gateway", g))?
                .octets(),
        ),
        NAME => out.extend_from_slice(
            Name::parse(g, origin)
                .map_err(|_| bad("a gateway domain name", g))?
                .as_wire(),
        ),
        _ => return Err(bad("a gateway type (0 to 3)", &kind.text)),
    }
    let key: String = key.iter().map(|t| t.text.as_str()).collect();
    out.extend(
        base64::engine::general_purpose::STANDARD
            .decode(key.as_bytes())
            .map_err(|_| bad("a base64 public key", &key))?,
    );
    Ok(())
}

/// The gateway's length in `data` (which starts at the gateway type); `None` if malformed.
fn gateway_len(data: &[u8]) -> Option<usize> {
    let gateway = data.get(2..)?;
    let n = match data[0] {
        NONE => 0,
        IPV4 => 4,
        IPV6 => 16,
        NAME => crate::name::uncompressed_len(gateway).ok()?,
        _ => return None,
    };
    (n <= gateway.len()).then_some(n)
}

/// True if `data` (from the gateway type on) is well formed.
pub(super) fn check(data: &[u8]) -> bool {
    gateway_len(data).is_some()
}

/// Writes RDATA checked by [`check`] (from the gateway type on).
pub(super) fn write(f: &mut impl fmt::Write, data: &[u8]) -> fmt::Result {
    let n = gateway_len(data).ok_or(fmt::Error)?;
    let (gateway, key) = data[2..].split_at(n);
    write!(f, "{} {} ", data[0], data[1])?;
    match data[0] {
        NONE => f.write_char('.')?,
        IPV4 => write!(
            f,
            "{}",
            Ipv4Addr::new(gateway[0], gateway[1], gateway[2], gateway[3])
        )?,
        IPV6 => {
            let octets: [u8; 16] = gateway.try_into().map_err(|_| fmt::Error)?;
            write!(f, "{}", Ipv6Addr::from(octets))?
        }
        _ => write!(f, "{}", Name::from_wire(gateway).map_err(|_| fmt::Error)?)?,
    }
    if !key.is_empty() {
        write!(
            f,
            " {}",
            base64::engine::general_purpose::STANDARD.encode(key)
        )?;
    }
    Ok(())
}

//! SvcParams of SVCB and HTTPS records (RFC 9460 §2.1, §7; dohpath RFC 9461 §5; ohttp RFC 9540
//! §4): presentation ↔ wire.
//!
//! The RDATA is SvcPriority (16 bits), TargetName (never compressed, RFC 9460 §2.2) and the
//! SvcParams, which this module handles: in presentation format `key[=value]` in any order, on
//! the wire sorted by key, each key at most once. Values are char-strings; comma-separated
//! values (`mandatory`, `alpn`, the hints) follow Appendix A.1: the char-string is decoded
//! first, then split at commas not escaped by a backslash (`\,` and `\\`).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use base64::Engine as _;

use super::{unescape, write_char_string, RdataError, Token};

/// `mandatory`: keys a client must understand (RFC 9460 §8).
const MANDATORY: u16 = 0;
/// `alpn`: supported protocol IDs (RFC 9460 §7.1).
const ALPN: u16 = 1;
/// `no-default-alpn`: the default protocol is not supported (RFC 9460 §7.1).
const NO_DEFAULT_ALPN: u16 = 2;
/// `port`: the alternative endpoint's port (RFC 9460 §7.2).
const PORT: u16 = 3;
/// `ipv4hint` (RFC 9460 §7.3).
const IPV4HINT: u16 = 4;
/// `ech`: an ECHConfigList, base64 in presentation format (RFC 9460 §14.3.2).
const ECH: u16 = 5;
/// `ipv6hint` (RFC 9460 §7.3).
const IPV6HINT: u16 = 6;
/// `dohpath`: a URI template for DNS over HTTPS (RFC 9461 §5).
const DOHPATH: u16 = 7;
/// `ohttp`: the service offers Oblivious HTTP (RFC 9540 §4), no value.
const OHTTP: u16 = 8;
/// Key 65535 is reserved ("Invalid key", RFC 9460 §14.3.2).
const INVALID: u16 = 65535;

/// The registered keys' names (RFC 9460 §14.3.2 and the registry since).
const NAMES: [(u16, &str); 9] = [
    (MANDATORY, "mandatory"),
    (ALPN, "alpn"),
    (NO_DEFAULT_ALPN, "no-default-alpn"),
    (PORT, "port"),
    (IPV4HINT, "ipv4hint"),
    (ECH, "ech"),
    (IPV6HINT, "ipv6hint"),
    (DOHPATH, "dohpath"),
    (OHTTP, "ohttp"),
];

fn bad(expected: &'static str, found: &str) -> RdataError {
    RdataError::Bad {
        expected,
        found: found.to_string(),
    }
}

fn rule(rule: &'static str, found: &str) -> RdataError {
    RdataError::Rule {
        rule,
        found: found.to_string(),
    }
}

/// A key by name or as `keyNNNNN` (RFC 9460 §2.1); not the reserved 65535.
fn key_from_text(text: &str) -> Option<u16> {
    if let Some(&(key, _)) = NAMES.iter().find(|(_, n)| *n == text) {
        return Some(key);
    }
    let digits = text.strip_prefix("key")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&k| k != INVALID)
}

/// A key's presentation name: registered name or `keyNNNNN`.
fn key_name(key: u16) -> std::borrow::Cow<'static, str> {
    match NAMES.iter().find(|(k, _)| *k == key) {
        Some((_, name)) => (*name).into(),
        None => format!("key{key}").into(),
    }
}

/// Splits a decoded value at unescaped commas (RFC 9460 Appendix A.1: `\,` and `\\` are the
/// only escapes); `None` on another escape or a dangling backslash.
fn split_value_list(value: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut items = vec![Vec::new()];
    let mut i = 0;
    while i < value.len() {
        match value[i] {
            b'\\' => {
                let next = *value.get(i + 1).filter(|b| matches!(b, b'\\' | b','))?;
                items.last_mut()?.push(next);
                i += 2;
            }
            b',' => {
                items.push(Vec::new());
                i += 1;
            }
            b => {
                items.last_mut()?.push(b);
                i += 1;
            }
        }
    }
    Some(items)
}

/// Parses the SvcParams tokens (after SvcPriority and TargetName) and appends their wire form.
pub(super) fn parse(tokens: &[Token], out: &mut Vec<u8>) -> Result<(), RdataError> {
    let mut params: BTreeMap<u16, Vec<u8>> = BTreeMap::new();
    let mut i = 0;
    while let Some(tok) = tokens.get(i) {
        i += 1;
        if tok.quoted {
            return Err(bad("a SvcParam key[=value]", &tok.text));
        }
        let (name, value) = match tok.text.split_once('=') {
            None => (tok.text.as_str(), None),
            // `key="value"`: the lexer splits the quoted value into the next token.
            Some((name, "")) => match tokens.get(i).filter(|t| t.quoted) {
                Some(quoted) => {
                    i += 1;
                    (name, Some(quoted.text.as_str()))
                }
                None => (name, Some("")),
            },
            Some((name, value)) => (name, Some(value)),
        };
        let key = key_from_text(name).ok_or_else(|| bad("a SvcParamKey", name))?;
        let value = value
            .map(|v| unescape(v).ok_or_else(|| bad("a char-string value", v)))
            .transpose()?;
        let wire = value_wire(key, value.as_deref(), &tok.text)?;
        // RFC 9460 §2.2: "SvcParamKeys SHALL appear in increasing numeric order" and each at
        // most once; presentation format may list them in any order.
        if params.insert(key, wire).is_some() {
            return Err(rule("SvcParamKey given twice (RFC 9460 §2.2)", name));
        }
    }
    if let Some(mandatory) = params.get(&MANDATORY) {
        for pair in mandatory.chunks_exact(2) {
            let key = u16::from_be_bytes([pair[0], pair[1]]);
            // RFC 9460 §8: "each key listed in mandatory MUST be present in the RR".
            if !params.contains_key(&key) {
                return Err(rule(
                    "a key listed in mandatory is missing from the RR (RFC 9460 §8)",
                    &key_name(key),
                ));
            }
        }
    }
    for (key, value) in params {
        out.extend(key.to_be_bytes());
        out.extend(
            u16::try_from(value.len())
                .map_err(|_| RdataError::TooLong)?
                .to_be_bytes(),
        );
        out.extend(value);
    }
    Ok(())
}

/// The wire form of one parameter's (decoded) value; `token` is shown in errors.
fn value_wire(key: u16, value: Option<&[u8]>, token: &str) -> Result<Vec<u8>, RdataError> {
    let needs = |expected| value.filter(|v| !v.is_empty()).ok_or(bad(expected, token));
    let list = |expected| {
        split_value_list(needs(expected)?)
            .filter(|items| items.iter().all(|i| !i.is_empty()))
            .ok_or(bad(expected, token))
    };
    let text = |item: &[u8]| String::from_utf8(item.to_vec()).ok();
    let mut out = Vec::new();
    match key {
        MANDATORY => {
            let mut keys = Vec::new();
            for item in list("a list of SvcParamKeys")? {
                let name = text(&item).unwrap_or_default();
                let k = key_from_text(&name).ok_or_else(|| bad("a SvcParamKey", &name))?;
                // RFC 9460 §8: "The mandatory SvcParamKey MUST NOT appear in its own value-list".
                if k == MANDATORY {
                    return Err(rule("mandatory lists itself (RFC 9460 §8)", token));
                }
                keys.push(k);
            }
            keys.sort_unstable();
            if keys.windows(2).any(|w| w[0] == w[1]) {
                return Err(rule("mandatory lists a key twice (RFC 9460 §8)", token));
            }
            keys.iter().for_each(|k| out.extend(k.to_be_bytes()));
        }
        ALPN => {
            for id in list("a list of ALPN protocol IDs")? {
                out.push(u8::try_from(id.len()).map_err(|_| bad("an ALPN ID", token))?);
                out.extend(id);
            }
        }
        NO_DEFAULT_ALPN | OHTTP => {
            if value.is_some_and(|v| !v.is_empty()) {
                return Err(bad("no value", token));
            }
        }
        PORT => {
            let port = text(needs("a port")?).and_then(|t| t.parse::<u16>().ok());
            out.extend(port.ok_or(bad("a port", token))?.to_be_bytes());
        }
        IPV4HINT => {
            for item in list("a list of IPv4 addresses")? {
                let a = text(&item).and_then(|t| t.parse::<Ipv4Addr>().ok());
                out.extend(a.ok_or(bad("an IPv4 address", token))?.octets());
            }
        }
        IPV6HINT => {
            for item in list("a list of IPv6 addresses")? {
                let a = text(&item).and_then(|t| t.parse::<Ipv6Addr>().ok());
                out.extend(a.ok_or(bad("an IPv6 address", token))?.octets());
            }
        }
        ECH => {
            let config = base64::engine::general_purpose::STANDARD
                .decode(needs("a base64 ECHConfigList")?)
                .ok()
                .filter(|c| !c.is_empty());
            out = config.ok_or(bad("a base64 ECHConfigList", token))?;
        }
        DOHPATH => {
            // RFC 9461 §5: a URI template, UTF-8.
            let path = value.unwrap_or_default();
            std::str::from_utf8(path).map_err(|_| bad("a UTF-8 URI template", token))?;
            out = path.to_vec();
        }
        _ => out = value.unwrap_or_default().to_vec(),
    }
    Ok(out)
}

/// Iterates over `(key, value)` in wire-format SvcParams; `None` where they are cut off.
fn params(data: &[u8]) -> impl Iterator<Item = Option<(u16, &[u8])>> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(([k0, k1, l0, l1], tail)) = rest.split_first_chunk::<4>().map(|(h, t)| (*h, t))
        else {
            rest = &[];
            return Some(None);
        };
        let len = usize::from(u16::from_be_bytes([l0, l1]));
        if tail.len() < len {
            rest = &[];
            return Some(None);
        }
        let (value, next) = tail.split_at(len);
        rest = next;
        Some(Some((u16::from_be_bytes([k0, k1]), value)))
    })
}

/// True if wire-format SvcParams are well formed: keys in strictly increasing order, not the
/// reserved 65535, and the registered keys' values as RFC 9460 §7 and §8 lay them out.
pub(super) fn check(data: &[u8]) -> bool {
    let mut last: Option<u16> = None;
    for param in params(data) {
        let Some((key, v)) = param else { return false };
        if key == INVALID || last.is_some_and(|l| l >= key) {
            return false;
        }
        last = Some(key);
        let ok = match key {
            MANDATORY => {
                !v.is_empty()
                    && v.len() % 2 == 0
                    && v.chunks_exact(2)
                        .map(|p| u16::from_be_bytes([p[0], p[1]]))
                        .try_fold(0u16, |prev, k| (k > prev).then_some(k))
                        .is_some()
            }
            ALPN => {
                let mut rest = v;
                while let Some((&len, tail)) = rest.split_first() {
                    if len == 0 || tail.len() < usize::from(len) {
                        return false;
                    }
                    rest = &tail[usize::from(len)..];
                }
                !v.is_empty()
            }
            NO_DEFAULT_ALPN | OHTTP => v.is_empty(),
            PORT => v.len() == 2,
            IPV4HINT => !v.is_empty() && v.len() % 4 == 0,
            IPV6HINT => !v.is_empty() && v.len() % 16 == 0,
            ECH => !v.is_empty(),
            DOHPATH => std::str::from_utf8(v).is_ok(),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Bytes of one value-list item with `,` and `\` escaped (RFC 9460 Appendix A.1).
fn push_list_item(out: &mut Vec<u8>, item: &[u8]) {
    for &b in item {
        if matches!(b, b',' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
}

/// Writes SvcParams checked by [`check`], each preceded by a space, as BIND prints them:
/// char-string values (alpn, dohpath, unregistered keys) quoted, the others bare.
pub(super) fn write(f: &mut impl fmt::Write, data: &[u8]) -> fmt::Result {
    for (key, v) in params(data).flatten() {
        write!(f, " {}", key_name(key))?;
        match key {
            MANDATORY => {
                for (i, p) in v.chunks_exact(2).enumerate() {
                    let sep = if i == 0 { '=' } else { ',' };
                    write!(f, "{sep}{}", key_name(u16::from_be_bytes([p[0], p[1]])))?;
                }
            }
            ALPN => {
                let mut list = Vec::new();
                let mut rest = v;
                while let Some((&len, tail)) = rest.split_first() {
                    if !list.is_empty() {
                        list.push(b',');
                    }
                    let (id, next) = tail.split_at(usize::from(len));
                    push_list_item(&mut list, id);
                    rest = next;
                }
                f.write_char('=')?;
                write_char_string(f, &list)?;
            }
            NO_DEFAULT_ALPN | OHTTP => {}
            PORT => write!(f, "={}", u16::from_be_bytes([v[0], v[1]]))?,
            IPV4HINT => {
                for (i, a) in v.chunks_exact(4).enumerate() {
                    let addr = Ipv4Addr::new(a[0], a[1], a[2], a[3]);
                    write!(f, "{}{addr}", if i == 0 { '=' } else { ',' })?;
                }
            }
            IPV6HINT => {
                for (i, a) in v.chunks_exact(16).enumerate() {
                    let octets: [u8; 16] = a.try_into().map_err(|_| fmt::Error)?;
                    let addr = Ipv6Addr::from(octets);
                    write!(f, "{}{addr}", if i == 0 { '=' } else { ',' })?;
                }
            }
            ECH => write!(
                f,
                "={}",
                base64::engine::general_purpose::STANDARD.encode(v)
            )?,
            _ if v.is_empty() => {}
            _ => {
                f.write_char('=')?;
                write_char_string(f, v)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::rr::Record;
    use crate::zonefile::ZoneFileReader;

    fn read(line: &str) -> Result<Record, String> {
        ZoneFileReader::new(None, Some(300))
            .read_str(line, "rfc9460")
            .map(|mut r| r.remove(0))
            .map_err(|e| e.to_string())
    }

    fn hex(text: &str) -> Vec<u8> {
        let digits: String = text.split_whitespace().collect();
        data_encoding::HEXLOWER.decode(digits.as_bytes()).unwrap()
    }

    /// `foo.example.com.` and `foo.example.org.` on the wire.
    const FOO_COM: &str = "03 666f6f 07 6578616d706c65 03 636f6d 00";
    const FOO_ORG: &str = "03 666f6f 07 6578616d706c65 03 6f7267 00";

    #[test]
    fn rfc9460_appendix_d_vectors_parse_to_their_wire_form_and_print_back() {
        let vectors = [
            // D.1 AliasMode.
            (
                "example.com. HTTPS 0 foo.example.com.",
                format!("0000 {FOO_COM}"),
            ),
            // D.2 ServiceMode.
            ("example.com. SVCB 1 .", "0001 00".into()),
            (
                "example.com. SVCB 16 foo.example.com. port=53",
                format!("0010 {FOO_COM} 0003 0002 0035"),
            ),
            (
                "example.com. SVCB 1 foo.example.com. key667=hello",
                format!("0001 {FOO_COM} 029b 0005 68656c6c6f"),
            ),
            (
                r#"example.com. SVCB 1 foo.example.com. key667="hello\210qoo""#,
                format!("0001 {FOO_COM} 029b 0009 68656c6c6f d2 716f6f"),
            ),
            (
                r#"example.com. SVCB 1 foo.example.com. ( ipv6hint="2001:db8::1,2001:db8::53:1" )"#,
                format!(
                    "0001 {FOO_COM} 0006 0020 20010db8000000000000000000000001 \
                     20010db8000000000000000000530001"
                ),
            ),
            (
                r#"example.com. SVCB 1 example.com. ( ipv6hint="2001:db8:122:344::192.0.2.33" )"#,
                "0001 07 6578616d706c65 03 636f6d 00 0006 0010 20010db8012203440000 0000 c0000221"
                    .into(),
            ),
            (
                "example.com. SVCB 16 foo.example.org. ( alpn=h2,h3-19 mandatory=ipv4hint,alpn \
                 ipv4hint=192.0.2.1 )",
                format!(
                    "0010 {FOO_ORG} 0000 0004 0001 0004 0001 0009 02 6832 05 68332d3139 \
                     0004 0004 c0000201"
                ),
            ),
            (
                r#"example.com. SVCB 16 foo.example.org. alpn="f\\\\oo\\,bar,h2""#,
                format!("0010 {FOO_ORG} 0001 000c 08 665c6f6f2c626172 02 6832"),
            ),
            (
                r"example.com. SVCB 16 foo.example.org. alpn=f\\\092oo\092,bar,h2",
                format!("0010 {FOO_ORG} 0001 000c 08 665c6f6f2c626172 02 6832"),
            ),
        ];
        for (line, wire) in vectors {
            let record = read(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            assert_eq!(record.rdata, hex(&wire), "{line}");
            // What pqdns prints parses back to the same wire form.
            let printed = record.to_string();
            assert_eq!(read(&printed).unwrap().rdata, record.rdata, "{printed}");
        }
        // The printed forms, as BIND prints them (keys in wire order, alpn quoted).
        let printed = |line: &str| {
            crate::rdata::to_presentation(read(line).unwrap().rtype, &read(line).unwrap().rdata)
        };
        assert_eq!(
            printed("x. SVCB 16 foo.example.org. ( alpn=h2,h3-19 mandatory=ipv4hint,alpn ipv4hint=192.0.2.1 )"),
            r#"16 foo.example.org. mandatory=alpn,ipv4hint alpn="h2,h3-19" ipv4hint=192.0.2.1"#
        );
        assert_eq!(
            printed(r"x. SVCB 16 foo.example.org. alpn=f\\\092oo\092,bar,h2"),
            r#"16 foo.example.org. alpn="f\\\\oo\\,bar,h2""#
        );
        assert_eq!(
            printed(r#"x. SVCB 1 foo.example.com. key667="hello\210qoo""#),
            r#"1 foo.example.com. key667="hello\210qoo""#
        );
        assert_eq!(printed("x. SVCB 1 ."), "1 .");
    }

    #[test]
    fn rfc9460_appendix_d3_failure_cases_are_refused() {
        for (params, why) in [
            ("( key123=abc key123=def )", "twice"),
            ("mandatory", "SvcParamKeys"),
            ("alpn", "ALPN"),
            ("port", "port"),
            ("ipv4hint", "IPv4"),
            ("ipv6hint", "IPv6"),
            ("no-default-alpn=abc", "no value"),
            ("mandatory=key123", "missing from the RR"),
            ("mandatory=mandatory", "lists itself"),
            ("( mandatory=key123,key123 key123=abc )", "twice"),
        ] {
            let line = format!("example.com. SVCB 1 foo.example.com. {params}");
            let err = read(&line).unwrap_err();
            assert!(err.contains(why), "{line}: {err}");
            assert!(err.starts_with("rfc9460:1: SVCB record"), "{err}");
        }
    }

    #[test]
    fn every_registered_key_round_trips() {
        let line = "x. HTTPS 1 . ( ohttp dohpath=/dns-query{?dns} ech=AEj+DQ== ipv6hint=2001:db8::1 \
                    port=8443 no-default-alpn alpn=h3,h2 mandatory=alpn,port key65000 key9=\"a b\" )";
        let record = read(line).unwrap();
        let text = crate::rdata::to_presentation(record.rtype, &record.rdata);
        assert_eq!(
            text,
            "1 . mandatory=alpn,port alpn=\"h3,h2\" no-default-alpn port=8443 ech=AEj+DQ== \
             ipv6hint=2001:db8::1 dohpath=\"/dns-query{?dns}\" ohttp key9=\"a b\" key65000"
        );
        assert_eq!(
            read(&format!("x. HTTPS {text}")).unwrap().rdata,
            record.rdata
        );
        // Unknown keys in wire order, the reserved key 65535 refused.
        assert!(read("x. SVCB 1 . key65535=a").is_err());
        assert!(read("x. SVCB 1 . ech=!!").is_err());
        assert!(read("x. SVCB 1 . port=65536").is_err());
        assert!(read("x. SVCB 1 . alpn=h2,,h3").is_err());
    }

    #[test]
    fn malformed_wire_params_print_as_rfc3597() {
        // Keys out of order: 0003 before 0001.
        let rdata = hex("0001 00 0003 0002 0035 0001 0003 02 6832");
        assert!(!super::check(&rdata[3..]));
        assert!(crate::rdata::to_presentation(crate::RrType::SVCB, &rdata).starts_with("\\# 16 "));
        // A port of three bytes.
        assert!(!super::check(&hex("0003 0003 000035")));
        assert!(super::check(&hex("0003 0002 0035")));
    }
}

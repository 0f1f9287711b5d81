//! LOC RDATA (RFC 1876): a location as latitude, longitude and altitude with size and
//! precision, presentation ↔ wire.
//!
//! Wire (RFC 1876 §2): VERSION (0), SIZE, HORIZ PRE, VERT PRE (each a mantissa and a
//! power-of-ten exponent of centimetres, one nibble each), LATITUDE and LONGITUDE
//! (thousandths of an arc second offset by 2³¹, north and east positive), ALTITUDE
//! (centimetres above 100 000 m below the WGS 84 spheroid): 16 bytes.
//! Presentation (RFC 1876 §3): `d1 [m1 [s1]] N|S d2 [m2 [s2]] E|W alt[m] [siz[m] [hp[m]
//! [vp[m]]]]`, defaults 1m, 10000m and 10m. Output is BIND's form, every field written.

use std::fmt;

use super::{RdataError, Token};

/// 2³¹: the equator and the prime meridian (RFC 1876 §2).
const EQUATOR: i64 = 1 << 31;
/// Thousandths of an arc second in one degree.
const MS_PER_DEGREE: i64 = 3_600_000;
/// The altitude field's zero: 100 000 m below the reference, in centimetres.
const ALTITUDE_BASE: i64 = 10_000_000;
/// The largest size or precision: 9 × 10⁹ cm (90 000 000 m, RFC 1876 §3).
const MAX_PRECISION_CM: u64 = 9_000_000_000;

fn bad(expected: &'static str, found: &str) -> RdataError {
    RdataError::Bad {
        expected,
        found: found.to_string(),
    }
}

/// Centimetres from `[-]M[.cc][m]`; `None` if malformed.
fn centimetres(text: &str) -> Option<i64> {
    let text = text.strip_suffix(['m', 'M']).unwrap_or(text);
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() || frac.len() > 2 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: i64 = whole
        .parse()
        .ok()
        .filter(|_| whole.bytes().all(|b| b.is_ascii_digit()))?;
    let frac: i64 = format!("{frac:0<2}").parse().ok()?;
    let cm = whole.checked_mul(100)?.checked_add(frac)?;
    Some(if negative { -cm } else { cm })
}

/// A size or precision in centimetres as RFC 1876's mantissa/exponent byte; the value is
/// truncated to its leading digit, as BIND does (`15m` is stored as 10 m).
fn precision_byte(text: &str) -> Result<u8, RdataError> {
    let expected = "a size or precision in metres (0 to 90000000.00)";
    let cm = centimetres(text)
        .and_then(|cm| u64::try_from(cm).ok())
        .filter(|&cm| cm <= MAX_PRECISION_CM)
        .ok_or_else(|| bad(expected, text))?;
    let mut exponent = 0u8;
    let mut mantissa = cm;
    while mantissa >= 10 {
        mantissa /= 10;
        exponent += 1;
    }
    Ok(((mantissa as u8) << 4) | exponent)
}

/// Writes a precision byte as BIND does: whole metres from 1 m up, else `0.cc`.
fn write_precision(f: &mut impl fmt::Write, byte: u8) -> fmt::Result {
    let (mantissa, exponent) = (u64::from(byte >> 4), u32::from(byte & 0x0f));
    if exponent >= 2 {
        write!(f, "{}m", mantissa * 10u64.pow(exponent - 2))
    } else {
        write!(f, "0.{:02}m", mantissa * 10u64.pow(exponent))
    }
}

/// Parses `d [m [s]] H` from `tokens`, where `H` is one of `hemispheres` (positive first);
/// returns the field value and the tokens left.
fn angle<'t>(
    tokens: &'t [Token],
    max_degrees: i64,
    hemispheres: [&str; 2],
) -> Result<(u32, &'t [Token]), RdataError> {
    let expected = if max_degrees == 90 {
        "a latitude: degrees [minutes [seconds]] N or S"
    } else {
        "a longitude: degrees [minutes [seconds]] E or W"
    };
    let missing = RdataError::Missing(expected);
    let mut parts = [0i64; 3];
    let mut rest = tokens;
    for (i, part) in parts.iter_mut().enumerate() {
        let tok = rest.first().ok_or(missing.clone())?;
        let is_hemisphere = hemispheres.iter().any(|h| tok.text.eq_ignore_ascii_case(h));
        if i > 0 && is_hemisphere {
            break;
        }
        *part = match i {
            2 => {
                let (s, ms) = tok.text.split_once('.').unwrap_or((&tok.text, ""));
                let ok = !s.is_empty()
                    && ms.len() <= 3
                    && s.bytes().chain(ms.bytes()).all(|b| b.is_ascii_digit());
                let s: i64 = s
                    .parse()
                    .ok()
                    .filter(|_| ok)
                    .ok_or(bad(expected, &tok.text))?;
                let ms: i64 = format!("{ms:0<3}")
                    .parse()
                    .map_err(|_| bad(expected, &tok.text))?;
                Some(s * 1000 + ms).filter(|&v| v < 60_000)
            }
            _ => tok
                .text
                .parse::<i64>()
                .ok()
                .filter(|&v| v >= 0 && (i == 0 || v < 60)),
        }
        .ok_or_else(|| bad(expected, &tok.text))?;
        rest = &rest[1..];
    }
    let (hemisphere, rest) = rest.split_first().ok_or(missing)?;
    let sign = match hemispheres
        .iter()
        .position(|h| hemisphere.text.eq_ignore_ascii_case(h))
    {
        Some(0) => 1,
        Some(_) => -1,
        None => return Err(bad(expected, &hemisphere.text)),
    };
    let ms = parts[0] * MS_PER_DEGREE + parts[1] * 60_000 + parts[2];
    if ms > max_degrees * MS_PER_DEGREE {
        return Err(bad(expected, &tokens[0].text));
    }
    let value = u32::try_from(EQUATOR + sign * ms).map_err(|_| bad(expected, &tokens[0].text))?;
    Ok((value, rest))
}

/// Parses the presentation tokens of a LOC record and appends its 16 wire bytes.
pub(super) fn parse(tokens: &[Token], out: &mut Vec<u8>) -> Result<(), RdataError> {
    let (latitude, rest) = angle(tokens, 90, ["N", "S"])?;
    let (longitude, rest) = angle(rest, 180, ["E", "W"])?;
    let expected_alt = "an altitude in metres (-100000.00 to 42849672.95)";
    let (alt, rest) = rest
        .split_first()
        .ok_or(RdataError::Missing(expected_alt))?;
    let altitude = centimetres(&alt.text)
        .and_then(|cm| u32::try_from(cm + ALTITUDE_BASE).ok())
        .ok_or_else(|| bad(expected_alt, &alt.text))?;
    // RFC 1876 §3: "If omitted, siz defaults to 1m, hp to 10000m, and vp to 10m".
    let mut precision = [0x12, 0x16, 0x13];
    if rest.len() > precision.len() {
        return Err(RdataError::Extra(rest[precision.len()].text.clone()));
    }
    for (slot, tok) in precision.iter_mut().zip(rest) {
        *slot = precision_byte(&tok.text)?;
    }
    out.push(0);
    out.extend(precision);
    out.extend(latitude.to_be_bytes());
    out.extend(longitude.to_be_bytes());
    out.extend(altitude.to_be_bytes());
    Ok(())
}

fn field(data: &[u8], at: usize) -> i64 {
    i64::from(u32::from_be_bytes([
        data[at],
        data[at + 1],
        data[at + 2],
        data[at + 3],
    ]))
}

/// True if `data` is a version 0 LOC RDATA with valid precision bytes and angles in range.
pub(super) fn check(data: &[u8]) -> bool {
    data.len() == 16
        && data[0] == 0
        && data[1..4].iter().all(|b| b >> 4 <= 9 && b & 0x0f <= 9)
        && (field(data, 4) - EQUATOR).abs() <= 90 * MS_PER_DEGREE
        && (field(data, 8) - EQUATOR).abs() <= 180 * MS_PER_DEGREE
}

fn write_angle(f: &mut impl fmt::Write, value: i64, hemispheres: [char; 2]) -> fmt::Result {
    let offset = value - EQUATOR;
    let ms = offset.abs();
    write!(
        f,
        "{} {} {}.{:03} {}",
        ms / MS_PER_DEGREE,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000,
        hemispheres[usize::from(offset < 0)]
    )
}

/// Writes LOC RDATA checked by [`check`] in BIND's presentation form.
pub(super) fn write(f: &mut impl fmt::Write, data: &[u8]) -> fmt::Result {
    write_angle(f, field(data, 4), ['N', 'S'])?;
    f.write_char(' ')?;
    write_angle(f, field(data, 8), ['E', 'W'])?;
    let alt = field(data, 12) - ALTITUDE_BASE;
    let sign = if alt < 0 { "-" } else { "" };
    write!(f, " {sign}{}.{:02}m", alt.abs() / 100, alt.abs() % 100)?;
    for &byte in &data[1..4] {
        f.write_char(' ')?;
        write_precision(f, byte)?;
    }
    Ok(())
}

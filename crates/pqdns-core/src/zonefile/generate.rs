//! BIND's `$GENERATE` directive: `$GENERATE start-stop[/step] lhs [ttl] [class] type rhs`
//! makes one record per value of the range, with `$` in `lhs` and `rhs` replaced by the value.
//!
//! Modifiers (BIND 9 ARM, "The `$GENERATE` Directive"): `${offset[,width[,base]]}` adds
//! `offset` to the value and pads it with zeros to `width` characters in `base`: `d`
//! (decimal, the default), `o` (octal), `x` / `X` (hexadecimal, lower / upper case), `n` / `N`
//! (reversed nibbles separated by dots, as under `ip6.arpa.`, where `width` counts the dots
//! too). `\$` keeps a literal `$` (the backslash stays, for the name or RDATA parser), and `$$`
//! is a `$`. The range is bounded by [`MAX_GENERATE_RECORDS`].

use crate::rdata::Token;

/// The most records one `$GENERATE` may make: a larger range is refused, not truncated.
pub const MAX_GENERATE_RECORDS: u64 = 65_536;

/// The widest `${…,width,…}` accepted: a domain name is at most 255 octets.
const MAX_WIDTH: usize = 255;

/// One `$GENERATE` directive, parsed: the values and the templates.
pub(super) struct Generate<'t> {
    start: u64,
    stop: u64,
    step: u64,
    lhs: &'t str,
    /// The TTL, class and type tokens between `lhs` and `rhs`, as written.
    middle: Vec<&'t str>,
    rhs: &'t str,
}

impl<'t> Generate<'t> {
    /// Parses the directive's arguments (the tokens after `$GENERATE`).
    pub(super) fn parse(args: &'t [Token]) -> Result<Generate<'t>, String> {
        let usage = "$GENERATE needs start-stop[/step] lhs [ttl] [class] type rhs";
        let [range, lhs, middle @ .., rhs] = args else {
            return Err(usage.into());
        };
        if middle.is_empty() || middle.len() > 3 {
            return Err(format!(
                "{usage} (rhs is one token: quote RDATA with spaces)"
            ));
        }
        let bad_range = || {
            format!(
                "bad $GENERATE range {:?}: expected start-stop[/step]",
                range.text
            )
        };
        let (span, step) = match range.text.split_once('/') {
            Some((span, step)) => (span, step.parse::<u64>().map_err(|_| bad_range())?),
            None => (range.text.as_str(), 1),
        };
        let (start, stop) = span.split_once('-').ok_or_else(bad_range)?;
        let number = |t: &str| t.parse::<u32>().map(u64::from).map_err(|_| bad_range());
        let (start, stop) = (number(start)?, number(stop)?);
        if stop < start || step == 0 {
            return Err(format!(
                "bad $GENERATE range {:?}: start above stop or step 0",
                range.text
            ));
        }
        let generate = Generate {
            start,
            stop,
            step,
            lhs: &lhs.text,
            middle: middle.iter().map(|t| t.text.as_str()).collect(),
            rhs: &rhs.text,
        };
        let count = generate.count();
        if count > MAX_GENERATE_RECORDS {
            return Err(format!(
                "$GENERATE range {:?} makes {count} records, more than the \
                 {MAX_GENERATE_RECORDS} allowed",
                range.text
            ));
        }
        Ok(generate)
    }

    /// How many records the directive makes.
    pub(super) fn count(&self) -> u64 {
        (self.stop - self.start) / self.step + 1
    }

    /// The master-file line of each value, in order (an error stops at the faulty value).
    pub(super) fn lines(&self) -> impl Iterator<Item = Result<String, String>> + '_ {
        (self.start..=self.stop)
            .step_by(usize::try_from(self.step).unwrap_or(usize::MAX))
            .map(|value| {
                let lhs = substitute(self.lhs, value)?;
                let rhs = substitute(self.rhs, value)?;
                Ok(format!("{lhs} {} {rhs}", self.middle.join(" ")))
            })
    }
}

/// Replaces `$` and `${offset[,width[,base]]}` in `template` with `value`.
pub(super) fn substitute(template: &str, value: u64) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 8);
    let mut chars = template.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                out.push('\\');
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            '$' if chars.next_if(|&(_, c)| c == '$').is_some() => out.push('$'),
            '$' if chars.next_if(|&(_, c)| c == '{').is_some() => {
                let rest = &template[at + 2..];
                let close = rest
                    .find('}')
                    .ok_or_else(|| format!("$GENERATE: unclosed ${{ in {template:?}"))?;
                out.push_str(&modified(&rest[..close], value)?);
                for _ in 0..=close {
                    chars.next();
                }
            }
            '$' => out.push_str(&value.to_string()),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Formats `value` as `${spec}` says (`offset[,width[,base]]`).
fn modified(spec: &str, value: u64) -> Result<String, String> {
    let bad = || format!("$GENERATE: bad modifier ${{{spec}}}: expected offset[,width[,base]]");
    let mut parts = spec.split(',');
    let offset: i64 = parts.next().unwrap_or("").parse().map_err(|_| bad())?;
    let width: usize = match parts.next() {
        Some(w) => w.parse().map_err(|_| bad())?,
        None => 0,
    };
    let base = parts.next().unwrap_or("d");
    if parts.next().is_some() || width > MAX_WIDTH {
        return Err(bad());
    }
    let shifted = i64::try_from(value)
        .ok()
        .and_then(|v| v.checked_add(offset))
        .and_then(|v| u64::try_from(v).ok())
        .ok_or_else(|| format!("$GENERATE: ${{{spec}}} makes {value} negative"))?;
    Ok(match base {
        "d" => format!("{shifted:0width$}"),
        "o" => format!("{shifted:0width$o}"),
        "x" => format!("{shifted:0width$x}"),
        "X" => format!("{shifted:0width$X}"),
        "n" => nibbles(shifted, width, false),
        "N" => nibbles(shifted, width, true),
        _ => return Err(bad()),
    })
}

/// Hex digits least significant first, separated by dots, until the value is used up and
/// `width` characters (dots included) are written.
fn nibbles(mut value: u64, mut width: usize, upper: bool) -> String {
    let mut out = String::new();
    loop {
        let digit = char::from_digit((value & 0xf) as u32, 16).unwrap_or('0');
        out.push(if upper {
            digit.to_ascii_uppercase()
        } else {
            digit
        });
        value >>= 4;
        width = width.saturating_sub(1);
        if value == 0 && width == 0 {
            return out;
        }
        out.push('.');
        width = width.saturating_sub(1);
        if value == 0 && width == 0 {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modifiers_as_the_bind_manual_describes() {
        assert_eq!(substitute("host$", 7).unwrap(), "host7");
        assert_eq!(substitute("${0,3}", 7).unwrap(), "007");
        assert_eq!(substitute("${-5,4,o}", 13).unwrap(), "0010");
        assert_eq!(substitute("${0,2,x}${16,0,X}", 250).unwrap(), "fa10A");
        assert_eq!(substitute("${0,0,n}", 0x1a).unwrap(), "a.1");
        assert_eq!(substitute("${0,0,N}", 0x1a).unwrap(), "A.1");
        assert_eq!(substitute("${0,3,n}", 1).unwrap(), "1.0");
        assert_eq!(substitute("${0,7,n}", 0xabc).unwrap(), "c.b.a.0");
        assert_eq!(substitute(r"a\$b$$c$", 4).unwrap(), r"a\$b$c4");
        for bad in ["${", "${x}", "${1,2,q}", "${1,2,d,4}", "${0,300}", "${-5}"] {
            assert!(substitute(bad, 3).is_err(), "{bad}");
        }
    }

    fn toks(text: &str) -> Vec<Token> {
        text.split_whitespace()
            .map(|t| Token {
                text: t.into(),
                quoted: false,
            })
            .collect()
    }

    #[test]
    fn ranges_are_checked_and_bounded() {
        let lines = |args: &str| {
            Generate::parse(&toks(args)).map(|g| g.lines().collect::<Result<Vec<_>, _>>())
        };
        assert_eq!(
            lines("1-5/2 h$ A 192.0.2.$").unwrap().unwrap(),
            ["h1 A 192.0.2.1", "h3 A 192.0.2.3", "h5 A 192.0.2.5"]
        );
        assert_eq!(
            lines("0-0 @ 60 IN TXT x").unwrap().unwrap(),
            ["@ 60 IN TXT x"]
        );
        for (args, why) in [
            ("1-70000 h$ A 192.0.2.1", "more than the 65536"),
            ("0-4294967295 h$ A 192.0.2.1", "4294967296 records"),
            ("0-4294967296 h$ A 192.0.2.1", "expected start-stop"),
            ("5-1 h$ A 192.0.2.1", "start above stop"),
            ("1-5/0 h$ A 192.0.2.1", "step 0"),
            ("1-5 h$ A", "needs start-stop"),
            ("1-5 h$ 1 IN A x y", "rhs is one token"),
            ("15 h$ A x", "expected start-stop"),
        ] {
            let err = lines(args).err().unwrap_or_else(|| panic!("{args}"));
            assert!(err.contains(why), "{args}: {err}");
        }
        assert!(lines("1-65536 h$ A 192.0.2.1").is_ok());
    }
}

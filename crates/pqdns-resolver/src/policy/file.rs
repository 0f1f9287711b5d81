//! The policy tables of the configuration file (TOML, beside the options of `--config`,
//! `pqdns_net::option_file`), as written; [`super::PolicySource::load`] checks them. Unknown
//! keys inside a table are errors; each value that can be wrong keeps its place in the file
//! (a span) so that its error names the line.

use serde::Deserialize;
use toml::Spanned;

/// The tables (other top-level keys are the options, read elsewhere).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) struct Tables {
    #[serde(default)]
    pub(super) forward_zone: Vec<ForwardZone>,
    #[serde(default)]
    pub(super) stub_zone: Vec<StubZone>,
    #[serde(default)]
    pub(super) local_zone: Vec<LocalZone>,
    #[serde(default)]
    pub(super) access_control: Vec<Access>,
    #[serde(default)]
    pub(super) domain_insecure: Vec<DomainInsecure>,
    #[serde(default)]
    pub(super) negative_trust_anchor: Vec<NegativeTrustAnchor>,
}

/// `[[forward-zone]]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct ForwardZone {
    pub(super) name: Spanned<String>,
    pub(super) upstreams: Spanned<Vec<Spanned<String>>>,
    /// Only hybrid post-quantum TLS key exchanges with these upstreams.
    #[serde(default)]
    pub(super) pq_only: bool,
    /// The zone is an insecure domain ([`super::insecure`]).
    #[serde(default)]
    pub(super) insecure: bool,
}

/// `[[stub-zone]]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct StubZone {
    pub(super) name: Spanned<String>,
    pub(super) servers: Spanned<Vec<Spanned<String>>>,
    /// The zone is an insecure domain ([`super::insecure`]).
    #[serde(default)]
    pub(super) insecure: bool,
}

/// `[[local-zone]]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct LocalZone {
    pub(super) name: Spanned<String>,
    #[serde(rename = "type")]
    pub(super) kind: Spanned<String>,
    #[serde(default)]
    pub(super) records: Vec<Spanned<String>>,
}

/// `[[access-control]]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct Access {
    pub(super) prefix: Spanned<String>,
    pub(super) action: Spanned<String>,
}

/// `[[domain-insecure]]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct DomainInsecure {
    pub(super) name: Spanned<String>,
}

/// `[[negative-trust-anchor]]`: until when, an offset date-time (RFC 3339).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct NegativeTrustAnchor {
    pub(super) name: Spanned<String>,
    pub(super) until: Spanned<toml::value::Datetime>,
}

/// UNIX seconds of a TOML offset date-time (`2026-11-27T12:00:00Z`, or with `+01:00`);
/// `None` for a local date or time, which names no instant.
pub(super) fn unix_seconds(t: &toml::value::Datetime) -> Option<u64> {
    let (Some(date), Some(time), Some(offset)) = (t.date, t.time, t.offset) else {
        return None;
    };
    let text = format!(
        "{:04}{:02}{:02}{:02}{:02}{:02}",
        date.year, date.month, date.day, time.hour, time.minute, time.second
    );
    let utc_as_local = pqdns_core::time::from_yyyymmddhhmmss(&text)?;
    let east = match offset {
        toml::value::Offset::Z => 0,
        toml::value::Offset::Custom { minutes } => i64::from(minutes) * 60,
    };
    u64::try_from(i64::try_from(utc_as_local).ok()? - east).ok()
}

/// The line (from 1) of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

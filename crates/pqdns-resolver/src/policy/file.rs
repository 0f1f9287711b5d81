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
}

/// `[[stub-zone]]`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub(super) struct StubZone {
    pub(super) name: Spanned<String>,
    pub(super) servers: Spanned<Vec<Spanned<String>>>,
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

/// The line (from 1) of byte `offset` in `text`.
pub(super) fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

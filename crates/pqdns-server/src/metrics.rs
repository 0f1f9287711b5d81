//! Prometheus metrics in the text exposition format (version 0.0.4), served over HTTP/1.1 at
//! `GET /metrics` when `[server] metrics = "ADDR"` is set (off by default).
//!
//! Series:
//! - `pqdns_queries_total{transport,qtype,rcode}`: responses sent (a query dropped without a
//!   response is not counted); a zone transfer counts once, with the RCODE of its first
//!   message;
//! - `pqdns_truncated_responses_total{transport}`: responses with TC set;
//! - `pqdns_response_bytes{transport}`: histogram of response sizes in bytes (DNS message
//!   without the TCP length prefix; a zone transfer counts each of its messages);
//! - `pqdns_tls_handshakes_total{transport,group}`: completed TLS handshakes by negotiated key
//!   exchange group;
//! - `pqdns_tls_handshake_failures_total{transport,reason}`: handshakes that failed, by
//!   reason: `no-shared-group` (a classical-only client under `pq-only`/`pq-strict`),
//!   `no-shared-signature-scheme` (a client without ML-DSA against an ML-DSA certificate, or
//!   a client accepting only ML-DSA against a classical one),
//!   `timeout`, `other`;
//! - `pqdns_connections_refused_total{transport}`: stream connections closed at once because a
//!   connection cap was reached (RFC 7766 §6.2.2);
//! - `pqdns_doh_reset_floods_total`: HTTP/2 connections closed because the client reset too
//!   many streams ("rapid reset", CVE-2023-44487);
//! - `pqdns_rrl_responses_total{action}`: UDP responses response-rate limiting dropped or
//!   sent truncated ([`crate::rrl`]).
//! - `pqdns_amplification_limited_total`: UDP responses to clients without a valid server
//!   cookie cut to TC by the amplification limit ([`crate::service`]).
//! - `pqdns_tsig_failures_total{error}`: requests whose TSIG (RFC 8945) was rejected:
//!   `badkey`, `badsig`, `badtime`, `formerr` (a misplaced or malformed TSIG record).
//! - `pqdns_transfers_in_total{result}`: refreshes of secondary zones that transferred a new
//!   version (`axfr`, `ixfr`) or failed against a primary (`failed`: garbage, truncation, bad
//!   TSIG, a serial not newer, timeout; [`crate::secondary`]).
//! - `pqdns_inline_signings_total{kind}` and `pqdns_inline_signatures_total`: transferred
//!   versions of inline-signed secondary zones signed `incremental`ly (an IXFR's changed
//!   RRsets) or `whole`, and the RRSIG records the incremental signings made
//!   ([`crate::inline_signing`]).
//!
//! The hot path only does relaxed atomic adds on fixed arrays: no lock, no allocation, no
//! label lookup by string. Series with a zero value are omitted from `pqdns_queries_total`.
//! The HTTP listener is [`pqdns_net::metrics_http`]'s, bounded in connections and, for reading
//! headers, by the server's idle timeout.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use pqdns_core::RrType;
use tokio::net::TcpListener;
use tokio::sync::watch;

use pqdns_core::wire::Rcode;
use pqdns_net::metrics_http::{
    self, counters, group_label, group_slot, write_histogram, GROUP_SLOTS,
};
use pqdns_net::{HandshakeFailure, Transport};

use crate::service::Authoritative;

/// The encrypted transports (DoT, DoH, DoQ) as (counter index, metric label).
fn encrypted() -> impl Iterator<Item = (usize, &'static str)> {
    Transport::ALL
        .into_iter()
        .filter(|t| t.is_encrypted())
        .map(|t| (t.index(), t.name()))
}

/// The stream transports (TCP, DoT, DoH, DoQ) as (counter index, metric label).
fn streams() -> impl Iterator<Item = (usize, &'static str)> {
    Transport::ALL
        .into_iter()
        .filter(|t| t.is_stream())
        .map(|t| (t.index(), t.name()))
}

/// Number of transports counted ([`Transport::ALL`]).
const N_TRANSPORTS: usize = Transport::ALL.len();

/// QTYPEs counted by name; the others count as `other`, unparsable queries as `none`.
const QTYPES: [(RrType, &str); 24] = [
    (RrType::A, "A"),
    (RrType::NS, "NS"),
    (RrType::CNAME, "CNAME"),
    (RrType::SOA, "SOA"),
    (RrType::PTR, "PTR"),
    (RrType::MX, "MX"),
    (RrType::TXT, "TXT"),
    (RrType::AAAA, "AAAA"),
    (RrType::SRV, "SRV"),
    (RrType::NAPTR, "NAPTR"),
    (RrType::DS, "DS"),
    (RrType::RRSIG, "RRSIG"),
    (RrType::NSEC, "NSEC"),
    (RrType::DNSKEY, "DNSKEY"),
    (RrType::NSEC3, "NSEC3"),
    (RrType::NSEC3PARAM, "NSEC3PARAM"),
    (RrType::TLSA, "TLSA"),
    (RrType(64), "SVCB"),
    (RrType(65), "HTTPS"),
    (RrType::CAA, "CAA"),
    (RrType::ANY, "ANY"),
    (RrType::AXFR, "AXFR"),
    (crate::axfr::IXFR, "IXFR"),
    (RrType::OPT, "OPT"),
];
const QTYPE_SLOTS: usize = QTYPES.len() + 2;
const QTYPE_LABELS_EXTRA: [&str; 2] = ["other", "none"];

const RCODES: [Rcode; 8] = [
    Rcode::NOERROR,
    Rcode::FORMERR,
    Rcode::SERVFAIL,
    Rcode::NXDOMAIN,
    Rcode::NOTIMP,
    Rcode::REFUSED,
    Rcode::NOTAUTH,
    Rcode::BADVERS,
];
const RCODE_SLOTS: usize = RCODES.len() + 1;

/// Upper bounds of the response size buckets, in bytes (the last bucket is `+Inf`).
pub(crate) const SIZE_BUCKETS: [usize; 13] = [
    64, 128, 256, 512, 1024, 1232, 1500, 2048, 4096, 8192, 16384, 32768, 65535,
];
const SIZE_SLOTS: usize = SIZE_BUCKETS.len() + 1;

/// All counters; see the module doc. About 12 KiB.
#[derive(Debug)]
pub struct Metrics {
    queries: [[[AtomicU64; RCODE_SLOTS]; QTYPE_SLOTS]; N_TRANSPORTS],
    truncated: [AtomicU64; N_TRANSPORTS],
    sizes: [[AtomicU64; SIZE_SLOTS]; N_TRANSPORTS],
    size_sum: [AtomicU64; N_TRANSPORTS],
    handshakes: [[AtomicU64; GROUP_SLOTS]; N_TRANSPORTS],
    handshake_failures: [[AtomicU64; HandshakeFailure::ALL.len()]; N_TRANSPORTS],
    refused: [AtomicU64; N_TRANSPORTS],
    reset_floods: AtomicU64,
    /// UDP responses withheld by RRL: [dropped, sent truncated].
    rate_limited: [AtomicU64; 2],
    amplification_limited: AtomicU64,
    /// Requests whose TSIG was rejected, by [`TsigFailure`].
    tsig_failures: [AtomicU64; TsigFailure::ALL.len()],
    /// Incoming transfers: [AXFR, IXFR, failed].
    transfers_in: [AtomicU64; 3],
    /// Inline signings of transferred versions: [whole, incremental].
    inline_signings: [AtomicU64; 2],
    /// RRSIG records made by incremental inline signings.
    inline_signatures: AtomicU64,
}

/// Why a request's TSIG was rejected (RFC 8945 §5.2), as counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TsigFailure {
    /// Unknown key or algorithm.
    BadKey = 0,
    /// The MAC did not verify.
    BadSig = 1,
    /// Outside the time window.
    BadTime = 2,
    /// A misplaced or malformed TSIG record, or a MAC of a forbidden length.
    FormErr = 3,
}

impl TsigFailure {
    const ALL: [(TsigFailure, &'static str); 4] = [
        (TsigFailure::BadKey, "badkey"),
        (TsigFailure::BadSig, "badsig"),
        (TsigFailure::BadTime, "badtime"),
        (TsigFailure::FormErr, "formerr"),
    ];
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics {
            queries: std::array::from_fn(|_| std::array::from_fn(|_| counters())),
            truncated: counters(),
            sizes: std::array::from_fn(|_| counters()),
            size_sum: counters(),
            handshakes: std::array::from_fn(|_| counters()),
            handshake_failures: std::array::from_fn(|_| counters()),
            refused: counters(),
            reset_floods: AtomicU64::new(0),
            rate_limited: counters(),
            amplification_limited: AtomicU64::new(0),
            tsig_failures: counters(),
            transfers_in: counters(),
            inline_signings: counters(),
            inline_signatures: AtomicU64::new(0),
        }
    }
}

impl Metrics {
    /// Counts one response: `qtype` is `None` for a query that did not parse; `len` is the
    /// message length in bytes.
    pub fn response(
        &self,
        transport: Transport,
        qtype: Option<RrType>,
        rcode: Rcode,
        truncated: bool,
        len: usize,
    ) {
        let p = transport.index();
        let q = match qtype {
            Some(t) => QTYPES
                .iter()
                .position(|(k, _)| *k == t)
                .unwrap_or(QTYPES.len()),
            None => QTYPES.len() + 1,
        };
        let r = RCODES
            .iter()
            .position(|k| *k == rcode)
            .unwrap_or(RCODES.len());
        self.queries[p][q][r].fetch_add(1, Relaxed);
        if truncated {
            self.truncated[p].fetch_add(1, Relaxed);
        }
        self.message(transport, len);
    }

    /// Counts the size of one more message of a multi-message response (a zone transfer).
    pub fn message(&self, transport: Transport, len: usize) {
        let p = transport.index();
        let b = SIZE_BUCKETS
            .iter()
            .position(|limit| len <= *limit)
            .unwrap_or(SIZE_BUCKETS.len());
        self.sizes[p][b].fetch_add(1, Relaxed);
        self.size_sum[p].fetch_add(len as u64, Relaxed);
    }

    /// Counts a completed TLS handshake and its negotiated key exchange group.
    pub fn handshake(&self, transport: Transport, group: Option<rustls::NamedGroup>) {
        self.handshakes[transport.index()][group_slot(group)].fetch_add(1, Relaxed);
    }

    /// Counts a failed or timed-out TLS handshake.
    pub fn handshake_failure(&self, transport: Transport, reason: HandshakeFailure) {
        self.handshake_failures[transport.index()][reason as usize].fetch_add(1, Relaxed);
    }

    /// Counts a stream connection closed at once because a connection cap was reached.
    pub fn connection_refused(&self, transport: Transport) {
        self.refused[transport.index()].fetch_add(1, Relaxed);
    }

    /// Counts an HTTP/2 connection closed for a stream reset flood.
    pub fn reset_flood(&self) {
        self.reset_floods.fetch_add(1, Relaxed);
    }

    /// Counts one UDP response withheld by response-rate limiting: sent as a truncated stub
    /// (`slipped`) or dropped.
    pub fn rate_limited(&self, slipped: bool) {
        self.rate_limited[usize::from(slipped)].fetch_add(1, Relaxed);
    }

    /// Counts one UDP response cut to TC by the amplification limit.
    pub fn amplification_limited(&self) {
        self.amplification_limited.fetch_add(1, Relaxed);
    }

    /// Counts a request whose TSIG was rejected.
    pub fn tsig_failure(&self, why: TsigFailure) {
        self.tsig_failures[why as usize].fetch_add(1, Relaxed);
    }

    /// Counts one incoming transfer: `Some(incremental)` when a new version came (IXFR when
    /// true), `None` when a refresh from a primary failed.
    pub fn transfer_in(&self, result: Option<bool>) {
        let slot = match result {
            Some(false) => 0,
            Some(true) => 1,
            None => 2,
        };
        self.transfers_in[slot].fetch_add(1, Relaxed);
    }

    /// Counts one inline signing of a transferred version: `Some(signatures)` (RRSIG records
    /// made) when incremental, `None` when whole.
    pub fn inline_signing(&self, incremental: Option<usize>) {
        self.inline_signings[usize::from(incremental.is_some())].fetch_add(1, Relaxed);
        if let Some(n) = incremental {
            self.inline_signatures.fetch_add(n as u64, Relaxed);
        }
    }

    /// The text exposition of every series.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(8192);
        let load = |c: &AtomicU64| c.load(Relaxed);
        out.push_str("# HELP pqdns_queries_total DNS responses sent, by transport, query type and response code.\n# TYPE pqdns_queries_total counter\n");
        for (p, name) in Transport::ALL.map(|t| (t.index(), t.name())) {
            for (q, per_qtype) in self.queries[p].iter().enumerate() {
                let qtype = QTYPES
                    .get(q)
                    .map_or_else(|| QTYPE_LABELS_EXTRA[q - QTYPES.len()], |(_, l)| l);
                for (r, c) in per_qtype.iter().enumerate() {
                    let n = load(c);
                    if n == 0 {
                        continue;
                    }
                    let rcode = RCODES.get(r).and_then(|k| k.mnemonic()).unwrap_or("OTHER");
                    let _ = writeln!(
                        out,
                        "pqdns_queries_total{{transport=\"{name}\",qtype=\"{qtype}\",rcode=\"{rcode}\"}} {n}"
                    );
                }
            }
        }
        out.push_str("# HELP pqdns_truncated_responses_total Responses sent with the TC bit set.\n# TYPE pqdns_truncated_responses_total counter\n");
        for (p, name) in Transport::ALL.map(|t| (t.index(), t.name())) {
            let n = load(&self.truncated[p]);
            let _ = writeln!(
                out,
                "pqdns_truncated_responses_total{{transport=\"{name}\"}} {n}"
            );
        }
        out.push_str("# HELP pqdns_response_bytes Size of DNS response messages in bytes.\n# TYPE pqdns_response_bytes histogram\n");
        for (p, name) in Transport::ALL.map(|t| (t.index(), t.name())) {
            let sum = load(&self.size_sum[p]);
            let labels = format!("transport=\"{name}\"");
            let sizes = &self.sizes[p];
            write_histogram(
                &mut out,
                "pqdns_response_bytes",
                &labels,
                &SIZE_BUCKETS,
                sizes,
                sum,
            );
        }
        out.push_str("# HELP pqdns_tls_handshakes_total Completed TLS handshakes by negotiated key exchange group.\n# TYPE pqdns_tls_handshakes_total counter\n");
        for (p, name) in encrypted() {
            for (g, c) in self.handshakes[p].iter().enumerate() {
                let group = group_label(g);
                let n = load(c);
                let _ = writeln!(
                    out,
                    "pqdns_tls_handshakes_total{{transport=\"{name}\",group=\"{group}\"}} {n}"
                );
            }
        }
        out.push_str("# HELP pqdns_tls_handshake_failures_total TLS handshakes that failed or timed out, by reason.\n# TYPE pqdns_tls_handshake_failures_total counter\n");
        for (p, name) in encrypted() {
            for reason in HandshakeFailure::ALL {
                let n = load(&self.handshake_failures[p][reason as usize]);
                let _ = writeln!(
                    out,
                    "pqdns_tls_handshake_failures_total{{transport=\"{name}\",reason=\"{}\"}} {n}",
                    reason.name()
                );
            }
        }
        out.push_str("# HELP pqdns_connections_refused_total Stream connections closed at once because a connection cap was reached.\n# TYPE pqdns_connections_refused_total counter\n");
        for (p, name) in streams() {
            let n = load(&self.refused[p]);
            let _ = writeln!(
                out,
                "pqdns_connections_refused_total{{transport=\"{name}\"}} {n}"
            );
        }
        let n = load(&self.reset_floods);
        let _ = writeln!(
            out,
            "# HELP pqdns_doh_reset_floods_total HTTP/2 connections closed because the client reset too many streams.\n# TYPE pqdns_doh_reset_floods_total counter\npqdns_doh_reset_floods_total {n}"
        );
        let _ = writeln!(
            out,
            "# HELP pqdns_rrl_responses_total UDP responses withheld by response-rate limiting.\n# TYPE pqdns_rrl_responses_total counter"
        );
        for (i, action) in ["dropped", "truncated"].into_iter().enumerate() {
            let n = load(&self.rate_limited[i]);
            let _ = writeln!(out, "pqdns_rrl_responses_total{{action=\"{action}\"}} {n}");
        }
        let n = load(&self.amplification_limited);
        let _ = writeln!(
            out,
            "# HELP pqdns_amplification_limited_total UDP responses to clients without a valid server cookie cut to TC by the amplification limit.\n# TYPE pqdns_amplification_limited_total counter\npqdns_amplification_limited_total {n}"
        );
        let _ = writeln!(
            out,
            "# HELP pqdns_tsig_failures_total Requests whose TSIG was rejected (RFC 8945 §5.2).\n# TYPE pqdns_tsig_failures_total counter"
        );
        for (why, label) in TsigFailure::ALL {
            let n = load(&self.tsig_failures[why as usize]);
            let _ = writeln!(out, "pqdns_tsig_failures_total{{error=\"{label}\"}} {n}");
        }
        out.push_str(
            "# HELP pqdns_transfers_in_total Refreshes of secondary zones: new versions by transfer kind, and failures.\n# TYPE pqdns_transfers_in_total counter\n",
        );
        for (slot, label) in ["axfr", "ixfr", "failed"].iter().enumerate() {
            let n = load(&self.transfers_in[slot]);
            let _ = writeln!(out, "pqdns_transfers_in_total{{result=\"{label}\"}} {n}");
        }
        out.push_str(
            "# HELP pqdns_inline_signings_total Transferred versions of inline-signed zones signed, by kind.\n# TYPE pqdns_inline_signings_total counter\n",
        );
        for (slot, label) in ["whole", "incremental"].iter().enumerate() {
            let n = load(&self.inline_signings[slot]);
            let _ = writeln!(out, "pqdns_inline_signings_total{{kind=\"{label}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP pqdns_inline_signatures_total RRSIG records made by incremental inline signings.\n# TYPE pqdns_inline_signatures_total counter\npqdns_inline_signatures_total {}",
            load(&self.inline_signatures)
        );
        out
    }
}

/// Serves `GET /metrics` on `listener` from `shared.metrics` until `shutdown` changes
/// ([`pqdns_net::metrics_http::serve`]); reading a request's headers may take `idle`.
pub(crate) async fn serve(
    listener: TcpListener,
    shared: Arc<Authoritative>,
    idle: std::time::Duration,
    shutdown: watch::Receiver<bool>,
    xdp: crate::xdp::Watched,
) {
    let render = move || {
        let mut text = shared.metrics.as_ref()?.render();
        shared.catalog().online.render(&mut text);
        crate::xdp::render(&xdp, &mut text);
        Some(text)
    };
    metrics_http::serve(listener, Arc::new(render), idle, shutdown).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_land_under_their_labels() {
        let m = Metrics::default();
        m.response(Transport::Udp, Some(RrType::A), Rcode::NOERROR, false, 100);
        m.response(Transport::Udp, Some(RrType::A), Rcode::NOERROR, true, 1232);
        m.response(
            Transport::Dot,
            Some(RrType(999)),
            Rcode::NXDOMAIN,
            false,
            70_000,
        );
        m.response(Transport::Tcp, None, Rcode::FORMERR, false, 12);
        m.handshake(Transport::Dot, Some(rustls::NamedGroup::X25519MLKEM768));
        m.handshake(Transport::Doq, Some(rustls::NamedGroup::X25519MLKEM768));
        m.handshake(Transport::Doh, Some(rustls::NamedGroup::FFDHE2048));
        m.handshake_failure(Transport::Doh, HandshakeFailure::NoSharedGroup);
        m.connection_refused(Transport::Dot);
        m.reset_flood();
        m.reset_flood();
        let text = m.render();
        for line in [
            "pqdns_queries_total{transport=\"udp\",qtype=\"A\",rcode=\"NOERROR\"} 2",
            "pqdns_queries_total{transport=\"dot\",qtype=\"other\",rcode=\"NXDOMAIN\"} 1",
            "pqdns_queries_total{transport=\"tcp\",qtype=\"none\",rcode=\"FORMERR\"} 1",
            "pqdns_truncated_responses_total{transport=\"udp\"} 1",
            "pqdns_response_bytes_bucket{transport=\"udp\",le=\"128\"} 1",
            "pqdns_response_bytes_bucket{transport=\"udp\",le=\"1232\"} 2",
            "pqdns_response_bytes_bucket{transport=\"dot\",le=\"65535\"} 0",
            "pqdns_response_bytes_bucket{transport=\"dot\",le=\"+Inf\"} 1",
            "pqdns_response_bytes_sum{transport=\"udp\"} 1332",
            "pqdns_response_bytes_count{transport=\"udp\"} 2",
            "pqdns_tls_handshakes_total{transport=\"dot\",group=\"X25519MLKEM768\"} 1",
            "pqdns_tls_handshakes_total{transport=\"doq\",group=\"X25519MLKEM768\"} 1",
            "pqdns_tls_handshakes_total{transport=\"doh\",group=\"other\"} 1",
            "pqdns_tls_handshake_failures_total{transport=\"doh\",reason=\"no-shared-group\"} 1",
            "pqdns_tls_handshake_failures_total{transport=\"doh\",reason=\"timeout\"} 0",
            "pqdns_connections_refused_total{transport=\"dot\"} 1",
            "pqdns_connections_refused_total{transport=\"tcp\"} 0",
            "pqdns_doh_reset_floods_total 2",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line}:\n{text}");
        }
        assert!(!text.contains("qtype=\"MX\""), "zero series are omitted");
    }
}

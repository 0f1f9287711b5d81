//! Why a resolution failed before validation could say anything: every server failed, the
//! referrals led nowhere, or a [`crate::resolve::WorkLimits`] bound was reached. Each variant
//! carries the names and numbers it is about, not a sentence.

use pqdns_core::{Name, RrType};

use crate::transport::TransportError;

/// Why resolution failed before validation could say anything.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Every server failed (I/O, timeout, or a malformed or mismatched response).
    #[error("{0}")]
    Transport(#[from] TransportError),
    /// Referrals did not lead to an answer (lame, out-of-bailiwick, or no usable addresses).
    #[error("resolution failed: {0}")]
    Lame(#[from] Lame),
    /// A [`crate::resolve::WorkLimits`] bound was reached.
    #[error("work limit: {0}")]
    WorkLimit(#[from] LimitReached),
}

/// How the servers asked failed to lead to an answer (RFC 1034 §5.3.3; bailiwick: RFC 2181
/// §5.4.1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Lame {
    /// There was no server to ask (an empty forwarder list).
    #[error("no servers")]
    NoServers,
    /// The server of `zone` neither answered (QNAME, QTYPE) nor referred it elsewhere.
    #[error("no answer and no referral from {zone}'s server for {qname} {qtype}")]
    NoReferral {
        /// The zone whose server was asked.
        zone: Name,
        /// The name asked about.
        qname: Name,
        /// The type asked about.
        qtype: RrType,
    },
    /// The server of `zone` referred `qname` to `cut`, which is not strictly below `zone`
    /// and at or above `qname`.
    #[error(
        "{zone}'s server referred {qname} to {cut}, which is not between {zone} and {qname} \
         (out of bailiwick)"
    )]
    OutOfBailiwick {
        /// The zone whose server was asked.
        zone: Name,
        /// The name asked about.
        qname: Name,
        /// The zone it was referred to.
        cut: Name,
    },
    /// A referral to `cut` gave no glue inside the referring zone (RFC 9471) for its NS
    /// names, and no NS name outside `cut` could be resolved within the budget.
    #[error("referral to {cut}: no usable glue, and no NS name outside it resolved")]
    NoAddresses {
        /// The delegated zone.
        cut: Name,
    },
    /// More than `limit` referrals ([`crate::resolve::WorkLimits::max_referrals`]) were
    /// followed for `qname`.
    #[error("more than {limit} referrals for {qname}")]
    TooManyReferrals {
        /// The bound reached.
        limit: usize,
        /// The name asked about.
        qname: Name,
    },
}

/// Which [`crate::resolve::WorkLimits`] bound one resolution reached.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitReached {
    /// More than `limit` queries ([`crate::resolve::WorkLimits::max_exchanges`]); the next
    /// would have been for (`qname`, `qtype`).
    #[error("more than {limit} queries for one resolution (at {qname} {qtype})")]
    Exchanges {
        /// The bound reached.
        limit: usize,
        /// The name of the query not sent.
        qname: Name,
        /// The type of the query not sent.
        qtype: RrType,
    },
    /// More than `limit` CNAMEs or DNAMEs ([`crate::resolve::WorkLimits::max_cnames`])
    /// followed from `qname` (RFC 1034 §3.6.2).
    #[error("more than {limit} CNAMEs or DNAMEs from {qname}")]
    Redirections {
        /// The bound reached.
        limit: usize,
        /// The name asked about.
        qname: Name,
    },
}

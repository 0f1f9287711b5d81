//! What a resolution returns: validated RRsets with their status, the denial proofs, a
//! referral when the server asked was not authoritative, what was dropped, and — under an
//! explicitly named accessor — the unvalidated messages.
//!
//! Only RRsets on the answer chain (QNAME's RRset, or CNAMEs then the target's, RFC 1034
//! §3.6.2) and, for negative answers, the SOA and NSEC/NSEC3 RRsets of the proof are kept.
//! Everything else a server sent (other RRsets in any section, additional data) is dropped and
//! listed in [`Answer::dropped`]. A Secure RRset is a [`VerifiedRRset`], which only the
//! validator makes; a Bogus answer carries no data at all.

use pqdns_core::dnssec::denial::VerifiedDenial;
use pqdns_core::dnssec::validate::{Status, UnverifiedRRset, VerifiedRRset};
use pqdns_core::message::Message;
use pqdns_core::wire::Rcode;
use pqdns_core::{Name, Record, RrType};

use crate::transport::ExchangeInfo;

/// A section of a DNS message (RFC 1035 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Section {
    /// ANSWER.
    Answer,
    /// AUTHORITY.
    Authority,
    /// ADDITIONAL.
    Additional,
}

/// An RRset of an answer, with how far it was validated. Bogus data never appears here.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AnswerRRset {
    /// Verified through a chain of signatures from a trust anchor; TTL capped per
    /// RFC 4035 §5.3.3.
    Secure(VerifiedRRset),
    /// From a zone proven to be unsigned (RFC 4035 §4.3 Insecure): not verified.
    Insecure(UnverifiedRRset),
    /// Not below any trust anchor, or RRSIG records answering QTYPE RRSIG (which nothing
    /// signs, RFC 4035 §2.2): not verified.
    Indeterminate(UnverifiedRRset),
}

impl AnswerRRset {
    /// Owner name.
    pub fn owner(&self) -> &Name {
        match self {
            AnswerRRset::Secure(v) => v.owner(),
            AnswerRRset::Insecure(u) | AnswerRRset::Indeterminate(u) => &u.owner,
        }
    }

    /// Type.
    pub fn rtype(&self) -> RrType {
        match self {
            AnswerRRset::Secure(v) => v.rtype(),
            AnswerRRset::Insecure(u) | AnswerRRset::Indeterminate(u) => u.rtype,
        }
    }

    /// `Secure`, `Insecure` or `Indeterminate`.
    pub fn status_name(&self) -> &'static str {
        match self {
            AnswerRRset::Secure(_) => "Secure",
            AnswerRRset::Insecure(_) => "Insecure",
            AnswerRRset::Indeterminate(_) => "Indeterminate",
        }
    }

    /// True for [`AnswerRRset::Secure`].
    pub fn is_secure(&self) -> bool {
        matches!(self, AnswerRRset::Secure(_))
    }

    /// The records (without RRSIGs); for Secure RRsets with the capped TTL.
    pub fn records(&self) -> Vec<Record> {
        match self {
            AnswerRRset::Secure(v) => v.records(),
            AnswerRRset::Insecure(u) | AnswerRRset::Indeterminate(u) => u.records(),
        }
    }

    /// The RRSIG records that verified it (Secure RRsets only; empty otherwise).
    pub fn rrsig_records(&self) -> Vec<Record> {
        match self {
            AnswerRRset::Secure(v) => v.rrsig_records(),
            AnswerRRset::Insecure(_) | AnswerRRset::Indeterminate(_) => Vec::new(),
        }
    }
}

/// A referral: the server asked (forwarding mode) is not authoritative for the name and
/// pointed below a zone cut (RFC 1034 §4.3.2 step 3b).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Referral {
    /// The delegated zone.
    pub zone: Name,
    /// The delegation's NS RRset (parent side, never signed: RFC 4035 §2.2).
    pub ns: UnverifiedRRset,
    /// The delegation's DS RRset, verified with the parent's keys (a signed delegation).
    pub ds: Option<VerifiedRRset>,
    /// The verified proof that the delegation has no DS (an unsigned delegation).
    pub no_ds: Option<VerifiedDenial>,
    /// Glue: A/AAAA RRsets for NS names inside the delegated zone (not validated).
    pub glue: Vec<UnverifiedRRset>,
}

/// An RRset a server sent that the answer does not use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// Where it was.
    pub section: Section,
    /// Owner name.
    pub owner: Name,
    /// Type (RRSIGs without their RRset count as the type they cover).
    pub rtype: RrType,
}

/// The result of [`crate::Resolver::resolve`]. Built only by the resolver.
#[derive(Debug)]
pub struct Answer {
    pub(crate) qname: Name,
    pub(crate) qtype: RrType,
    pub(crate) rcode: Rcode,
    pub(crate) status: Status,
    pub(crate) answers: Vec<AnswerRRset>,
    pub(crate) authority: Vec<AnswerRRset>,
    pub(crate) denials: Vec<VerifiedDenial>,
    pub(crate) referral: Option<Referral>,
    pub(crate) dropped: Vec<Dropped>,
    pub(crate) chain: Vec<String>,
    pub(crate) exchanges: Vec<ExchangeInfo>,
    pub(crate) unvalidated: Vec<Message>,
    pub(crate) synthesised: bool,
}

impl Answer {
    /// The question's name.
    pub fn qname(&self) -> &Name {
        &self.qname
    }

    /// The question's type.
    pub fn qtype(&self) -> RrType {
        self.qtype
    }

    /// RCODE of the last response used (RFC 1035 §4.1.1, RFC 6891 §6.1.3): NOERROR (0),
    /// NXDOMAIN (3), or the error a server returned.
    pub fn rcode(&self) -> Rcode {
        self.rcode
    }

    /// The RCODE's mnemonic (RFC 1035 §4.1.1, RFC 6895 §2.3): `NOERROR`, `SERVFAIL`, …, or
    /// `RCODE<n>`.
    pub fn rcode_name(&self) -> String {
        rcode_name(self.rcode)
    }

    /// The validation result for the whole answer. Secure only if every RRset in
    /// [`Answer::answers`] is Secure and, for negative answers, the denial is proven.
    pub fn status(&self) -> &Status {
        &self.status
    }

    /// The ANSWER data: the chain from QNAME (CNAMEs, then the QTYPE RRset), each RRset with
    /// its own status. For a negative answer, only the CNAMEs leading to the name that has no
    /// data; empty for Bogus answers.
    pub fn answers(&self) -> &[AnswerRRset] {
        &self.answers
    }

    /// The AUTHORITY data of a negative or wildcard answer: the SOA and the NSEC/NSEC3 RRsets
    /// of the proofs (to include when a client sets DO, RFC 4035 §3.1.3). Empty when Bogus.
    pub fn authority(&self) -> &[AnswerRRset] {
        &self.authority
    }

    /// The verified denial proofs (NXDOMAIN, NODATA, wildcard expansion).
    pub fn denials(&self) -> &[VerifiedDenial] {
        &self.denials
    }

    /// The referral, when a forwarding server was not authoritative for the name.
    pub fn referral(&self) -> Option<&Referral> {
        self.referral.as_ref()
    }

    /// RRsets the servers sent that are not part of the answer (dropped, never returned).
    pub fn dropped(&self) -> &[Dropped] {
        &self.dropped
    }

    /// The chain of trust walked, one line per step (for `--trace`).
    pub fn chain(&self) -> &[String] {
        &self.chain
    }

    /// True if the answer was synthesised from cached, validated NSEC/NSEC3 records without
    /// asking any server (aggressive use of DNSSEC-validated cache, RFC 8198).
    pub fn synthesised(&self) -> bool {
        self.synthesised
    }

    /// Every exchange made, in order.
    pub fn exchanges(&self) -> &[ExchangeInfo] {
        &self.exchanges
    }

    /// The responses exactly as received (after bailiwick filtering in iterative mode), in
    /// order: the answer to the question, then one per CNAME target looked up separately.
    /// **Not validated**: use only where unvalidated data is asked for explicitly (a client
    /// setting CD, RFC 4035 §3.2.2, or diagnostics).
    pub fn unvalidated_messages(&self) -> &[Message] {
        &self.unvalidated
    }
}

/// The mnemonic of an RCODE (`RCODE<n>` for one without a name).
pub(crate) fn rcode_name(code: Rcode) -> String {
    code.to_string()
}

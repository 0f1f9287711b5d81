//! What one resolution carries from concern to concern: the trace of steps (for `--trace`),
//! the exchanges made and the query budget, the cached responses it used, and the per-
//! resolution state that [`super::iterate`] and [`super::trust`] own (their types, their
//! fields). Fields are private: each owner reaches its part through one method.

use pqdns_core::dnssec::mtl::SigTags;
use pqdns_core::{Name, RrType};

use super::iterate::Glueless;
use super::trust::Local;
use super::WorkLimits;
use crate::cache::Stored;
use crate::transport::ExchangeInfo;

/// Cached responses one resolution remembers having used (lookups beyond are not confirmed,
/// so they just expire sooner).
const MAX_USED: usize = 256;

/// Per-resolution state.
pub(super) struct Ctx {
    /// One line per step, in order ([`crate::Answer::chain`]).
    trace: Vec<String>,
    /// Every exchange made, in order ([`crate::Answer::exchanges`]).
    exchanges: Vec<ExchangeInfo>,
    /// Queries this resolution may still send ([`WorkLimits::max_exchanges`]).
    exchanges_left: usize,
    /// Ask for full MTL signatures (EDNS option 65050, naming the ladders held by SigTag) and
    /// bypass cached responses.
    full_signatures: Option<SigTags>,
    /// Responses for this QTYPE (the answer chain) come from the servers, never the cache:
    /// a refresh ([`crate::Resolver::refresh`]).
    fresh: Option<RrType>,
    /// The (QNAME, QTYPE) and store of every response this resolution took from the cache or
    /// put in it, to confirm them when it does not end Bogus (at most [`MAX_USED`]).
    used: Vec<(Name, RrType, Stored)>,
    /// The NS-name budget of iteration.
    glueless: Glueless,
    /// The validator and the trust found so far.
    trust: Local,
}

impl Ctx {
    /// A fresh resolution within `work`, validating with `trust`.
    pub(super) fn new(work: &WorkLimits, trust: Local) -> Ctx {
        Ctx {
            trace: Vec::new(),
            exchanges: Vec::new(),
            exchanges_left: work.max_exchanges,
            full_signatures: None,
            fresh: None,
            used: Vec::new(),
            glueless: Glueless::new(work.max_glueless),
            trust,
        }
    }

    /// As [`Ctx::new`], but its queries ask for full MTL signatures of the ladders not in
    /// `held`, continuing after the `previous` exchanges of the same resolution (reported
    /// with it, and counted against its budget).
    pub(super) fn full_signatures(
        work: &WorkLimits,
        trust: Local,
        previous: &[ExchangeInfo],
        held: SigTags,
    ) -> Ctx {
        Ctx {
            full_signatures: Some(held),
            exchanges: previous.to_vec(),
            exchanges_left: work.max_exchanges.saturating_sub(previous.len()),
            ..Ctx::new(work, trust)
        }
    }

    /// Adds a line to the trace.
    pub(super) fn note(&mut self, line: String) {
        self.trace.push(line);
    }

    /// This resolution takes responses for `qtype` (its answer chain) from the servers only.
    pub(super) fn fresh(self, qtype: RrType) -> Ctx {
        Ctx {
            fresh: Some(qtype),
            ..self
        }
    }

    /// True if a response for `qtype` may come from the cache: not when asking for full MTL
    /// signatures, nor for the QTYPE of a refresh.
    pub(super) fn may_use_cache(&self, qtype: RrType) -> bool {
        self.full_signatures.is_none() && self.fresh != Some(qtype)
    }

    /// The SigTags of the ladders held, when this resolution asks for full MTL signatures.
    pub(super) fn held_ladders(&self) -> Option<&SigTags> {
        self.full_signatures.as_ref()
    }

    /// Takes one query from the budget; false if it is spent.
    pub(super) fn spend_exchange(&mut self) -> bool {
        let Some(left) = self.exchanges_left.checked_sub(1) else {
            return false;
        };
        self.exchanges_left = left;
        true
    }

    /// Records an exchange that got a response.
    pub(super) fn exchanged(&mut self, mut info: ExchangeInfo) {
        info.full_signatures = self.full_signatures.is_some();
        self.exchanges.push(info);
    }

    /// Remembers that the resolution used the cached response `stored` for (`name`, `qtype`).
    pub(super) fn used(&mut self, name: &Name, qtype: RrType, stored: Stored) {
        if self.used.len() < MAX_USED {
            self.used.push((name.clone(), qtype, stored));
        }
    }

    /// The cached responses used so far (taken: the list is left empty).
    pub(super) fn take_used(&mut self) -> Vec<(Name, RrType, Stored)> {
        std::mem::take(&mut self.used)
    }

    /// Iteration's NS-name budget.
    pub(super) fn glueless(&mut self) -> &mut Glueless {
        &mut self.glueless
    }

    /// The validator and the zones trusted so far.
    pub(super) fn trust(&mut self) -> &mut Local {
        &mut self.trust
    }

    /// The trace and the exchanges, for the [`crate::Answer`].
    pub(super) fn into_report(self) -> (Vec<String>, Vec<ExchangeInfo>) {
        (self.trace, self.exchanges)
    }
}

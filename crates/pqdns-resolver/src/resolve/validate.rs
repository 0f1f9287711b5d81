//! From responses to an [`Answer`]: follow the answer chain from QNAME (RFC 1034 §3.6.2),
//! check every RRset on it (`trust`), prove negative and wildcard answers with verified
//! NSEC/NSEC3 records (RFC 4035 §5.4, RFC 5155 §8), report referrals, and keep nothing else.
//!
//! A DNAME above the current name redirects it (RFC 6672 §3.1: the DNAME is verified, the
//! server's synthesized CNAME is unsigned and used only if it agrees). A CNAME or DNAME target
//! the response does not cover is looked up separately (bounded by
//! [`WorkLimits::max_cnames`]). The overall status is the weakest link —
//! Bogus, then Indeterminate, then Insecure — and Secure only through
//! [`pqdns_core::dnssec::validate::conclude`], which checks that the verified RRsets and
//! proofs answer the question.
//!
//! Owns nothing across resolutions: it drives [`Fetch`] for responses and [`Trust`] for
//! every RRset and proof, and builds the [`Answer`].
//!
//! QTYPE ANY (RFC 8482 §4.1) is answered by the first RRset the server gives at the name (a
//! CNAME included), validated as any other; the rest are dropped. QTYPE RRSIG is answered by
//! the RRSIG records at the name, unvalidated (Indeterminate): nothing signs them (RFC 4035
//! §2.2), and unbound does the same; a negative answer to it with an SOA is validated as
//! usual, an empty NOERROR without SOA (some authorities' answer) is passed through
//! unvalidated too.

use std::sync::Arc;
use std::time::Instant;

use pqdns_core::dnssec::denial::{prove, Claim, VerifiedDenial};
use pqdns_core::dnssec::validate::{
    conclude, Reason, Status, TrustedKeys, UnverifiedRRset, VerifiedRRset,
};
use pqdns_core::message::Message;
use pqdns_core::wire::{Ede, Rcode, FLAG_AA};
use pqdns_core::{Name, Record, RrType};

use super::aggressive::Aggressive;
use super::ctx::Ctx;
use super::fetch::Fetch;
use super::trust::{Checked, NoDs, Trust, Unsigned};
use super::{LimitReached, ResolveError, WorkLimits};
use crate::answer::{rcode_name, Answer, AnswerRRset, Dropped, Referral, Section};

/// The RRsets of one response and which of them the answer uses.
struct Sections {
    sets: [Vec<UnverifiedRRset>; 3],
    used: [Vec<bool>; 3],
}

const SECTIONS: [Section; 3] = [Section::Answer, Section::Authority, Section::Additional];

fn index(s: Section) -> usize {
    match s {
        Section::Answer => 0,
        Section::Authority => 1,
        Section::Additional => 2,
    }
}

impl Sections {
    fn new(m: &Message) -> Sections {
        let sets = [
            UnverifiedRRset::group(&m.answers),
            UnverifiedRRset::group(&m.authority),
            UnverifiedRRset::group(&m.additional),
        ];
        let used = [
            vec![false; sets[0].len()],
            vec![false; sets[1].len()],
            vec![false; sets[2].len()],
        ];
        Sections { sets, used }
    }

    /// The first unused RRset with RDATA in `section` matching `pred`.
    fn find(&self, section: Section, pred: impl Fn(&UnverifiedRRset) -> bool) -> Option<usize> {
        let i = index(section);
        self.sets[i]
            .iter()
            .enumerate()
            .position(|(j, s)| !self.used[i][j] && !s.rdatas.is_empty() && pred(s))
    }

    /// Marks RRset `j` of `section` as used and returns it.
    fn take(&mut self, section: Section, j: usize) -> UnverifiedRRset {
        let i = index(section);
        self.used[i][j] = true;
        self.sets[i][j].clone()
    }

    /// Marks and returns every unused RRset of `section` matching `pred`.
    fn take_all(
        &mut self,
        section: Section,
        pred: impl Fn(&UnverifiedRRset) -> bool,
    ) -> Vec<UnverifiedRRset> {
        let mut out = Vec::new();
        while let Some(j) = self.find(section, &pred) {
            out.push(self.take(section, j));
        }
        out
    }

    /// Marks the RRsets of `section` at `owner` that are RRSIGs alone (the answer to QTYPE
    /// RRSIG) as used.
    fn take_signatures(&mut self, section: Section, owner: &Name) {
        let i = index(section);
        for (set, used) in self.sets[i].iter().zip(self.used[i].iter_mut()) {
            if set.owner == *owner && set.rdatas.is_empty() && !set.rrsigs.is_empty() {
                *used = true;
            }
        }
    }

    /// What the answer did not use.
    fn dropped(&self) -> Vec<Dropped> {
        let mut out = Vec::new();
        for section in SECTIONS {
            let i = index(section);
            for (set, used) in self.sets[i].iter().zip(&self.used[i]) {
                if !used {
                    out.push(Dropped {
                        section,
                        owner: set.owner.clone(),
                        rtype: set.rtype,
                    });
                }
            }
        }
        out
    }
}

/// `name` redirected by the DNAME RRset `dname` (RFC 6672 §2.2).
fn substitute(name: &Name, dname: &UnverifiedRRset) -> Result<Name, Halt> {
    dname
        .rdatas
        .first()
        .and_then(|t| {
            name.replace_suffix(&dname.owner, &Name::from_wire(t).ok()?)?
                .ok()
        })
        .ok_or_else(|| {
            Halt::Bogus(Reason::new(
                Ede::DNSSEC_BOGUS,
                format!(
                    "malformed DNAME at {}, or {name} too long after substitution",
                    dname.owner
                ),
            ))
        })
}

/// QTYPE RRSIG: the RRSIG records at the current name in the answer section, if there are
/// any, become the answer, unvalidated (Indeterminate: no AD). Nothing signs a signature
/// (RFC 4035 §2.2: "An RRSIG RR itself MUST NOT be signed"), so there is nothing to verify
/// them with; unbound answers positive RRSIG queries unchecked too. Without RRSIG records
/// the answer is negative and validated as any other. True if it found some.
fn signatures(msg: &Message, s: &mut Sections, w: &mut Walk) -> bool {
    let found: Vec<&Record> = msg
        .answers
        .iter()
        .filter(|r| r.rtype == RrType::RRSIG && r.owner == w.name)
        .collect();
    let Some(first) = found.first() else {
        return false;
    };
    let mut set = UnverifiedRRset {
        owner: w.name.clone(),
        rtype: RrType::RRSIG,
        class: first.class,
        ttl: found.iter().map(|r| r.ttl).min().unwrap_or(0),
        rdatas: Vec::new(),
        rrsigs: Vec::new(),
        rrsig_ttl: 0,
    };
    for r in found {
        if !set.rdatas.contains(&r.rdata) {
            set.rdatas.push(r.rdata.clone());
        }
    }
    s.take_signatures(Section::Answer, &w.name);
    w.indeterminate(Reason::new(
        Ede::OTHER,
        format!(
            "RRSIG records at {} are not validated: no signature covers a signature \
             (RFC 4035 §2.2)",
            w.name
        ),
    ));
    w.answers.push(AnswerRRset::Indeterminate(set));
    true
}

/// Why the walk stopped early.
enum Halt {
    Bogus(Reason),
    Error(ResolveError),
}

impl From<Reason> for Halt {
    fn from(r: Reason) -> Halt {
        Halt::Bogus(r)
    }
}

/// What to do after one response.
enum Step {
    Done,
    /// Look up the current name (a CNAME target the response did not cover).
    Chase,
}

/// The answer being built.
struct Walk {
    qname: Name,
    qtype: RrType,
    rcode: Rcode,
    name: Name,
    cnames: usize,
    secure: Vec<VerifiedRRset>,
    answers: Vec<AnswerRRset>,
    authority: Vec<AnswerRRset>,
    denials: Vec<VerifiedDenial>,
    referral: Option<Referral>,
    dropped: Vec<Dropped>,
    bogus: Option<Reason>,
    insecure: Option<Reason>,
    indeterminate: Option<Reason>,
    messages: Vec<Message>,
}

impl Walk {
    fn insecure(&mut self, r: Reason) {
        self.insecure.get_or_insert(r);
    }

    fn indeterminate(&mut self, r: Reason) {
        self.indeterminate.get_or_insert(r);
    }

    /// Adds a verified denial and its RRsets to the authority data.
    fn denial(&mut self, d: VerifiedDenial) {
        for set in d.rrsets() {
            let secure = AnswerRRset::Secure(set.clone());
            if !self.authority.contains(&secure) {
                self.authority.push(secure);
            }
        }
        self.denials.push(d);
    }

    fn finish(mut self, ctx: Ctx) -> Answer {
        let (chain, exchanges) = ctx.into_report();
        let status = if let Some(r) = self.bogus.take() {
            Status::Bogus(r)
        } else if let Some(r) = self.indeterminate.take() {
            Status::Indeterminate(r)
        } else if let Some(r) = self.insecure.take() {
            Status::Insecure(r)
        } else {
            conclude(&self.qname, self.qtype, &self.secure, &self.denials)
        };
        if status.is_bogus() {
            self.answers.clear();
            self.authority.clear();
            self.denials.clear();
            self.referral = None;
        }
        Answer {
            qname: self.qname,
            qtype: self.qtype,
            rcode: self.rcode,
            status,
            answers: self.answers,
            authority: self.authority,
            denials: self.denials,
            referral: self.referral,
            dropped: self.dropped,
            chain,
            exchanges,
            unvalidated: self.messages,
            synthesised: false,
        }
    }
}

/// One resolution's view of the resolver: where responses come from, trust, and the
/// validated denial records kept for synthesis.
pub(super) struct Validation<'a> {
    fetch: &'a Fetch,
    trust: &'a Trust,
    aggressive: &'a Aggressive,
    /// [`WorkLimits::max_cnames`].
    max_cnames: usize,
}

impl<'a> Validation<'a> {
    /// Resolutions with responses from `fetch`, trust from `trust` and denials synthesised
    /// from `aggressive`, following at most `max_cnames` CNAMEs and DNAMEs.
    pub(super) fn new(
        fetch: &'a Fetch,
        trust: &'a Trust,
        aggressive: &'a Aggressive,
        max_cnames: usize,
    ) -> Self {
        Validation {
            fetch,
            trust,
            aggressive,
            max_cnames,
        }
    }

    /// Resolves and validates (qname, qtype) into an [`Answer`] within `work`; `fresh`: with
    /// the answer chain asked of the servers, not taken from the cache nor synthesised from
    /// cached denials ([`crate::Resolver::refresh`]).
    pub(super) async fn answer(
        &self,
        work: &WorkLimits,
        qname: Name,
        qtype: RrType,
        fresh: bool,
    ) -> Result<Answer, ResolveError> {
        // RFC 8198: a negative answer the validated denial records already prove.
        if !fresh {
            if let Some(answer) = self.aggressive.answer(&qname, qtype, Instant::now()) {
                return Ok(answer);
            }
        }
        let mut ctx = Ctx::new(work, self.trust.local());
        if fresh {
            ctx = ctx.fresh(qtype);
        }
        let (answer, ladder_missing) = self.answer_in(qname.clone(), qtype, ctx).await?;
        self.aggressive.learn(&answer, Instant::now());
        if answer.status().is_bogus() && ladder_missing {
            // A condensed MTL signature whose ladder is not held (a zone re-signed since its
            // DNSKEY RRset was trusted): once more, asking for full signatures, whose ladders
            // are then kept for the condensed signatures that follow.
            let local = self.trust.local();
            let held = self.trust.held_ladders();
            let ctx = Ctx::full_signatures(work, local, answer.exchanges(), held);
            return Ok(self.answer_in(qname, qtype, ctx).await?.0);
        }
        Ok(answer)
    }

    /// Resolves and validates (qname, qtype) with `ctx`; also says whether a ladder was
    /// missing.
    async fn answer_in(
        &self,
        qname: Name,
        qtype: RrType,
        mut ctx: Ctx,
    ) -> Result<(Answer, bool), ResolveError> {
        let mut msg = self.fetch.lookup(&qname, qtype, &mut ctx).await?;
        let mut w = Walk {
            qname: qname.clone(),
            qtype,
            rcode: msg.rcode(),
            name: qname,
            cnames: 0,
            secure: Vec::new(),
            answers: Vec::new(),
            authority: Vec::new(),
            denials: Vec::new(),
            referral: None,
            dropped: Vec::new(),
            bogus: None,
            insecure: None,
            indeterminate: None,
            messages: Vec::new(),
        };
        loop {
            let mut sections = Sections::new(&msg);
            let step = self.walk(&msg, &mut sections, &mut w, &mut ctx).await;
            w.dropped.extend(sections.dropped());
            w.messages.push(msg);
            match step {
                Ok(Step::Done) => break,
                Ok(Step::Chase) => {
                    let name = w.name.clone();
                    msg = self.fetch.lookup(&name, qtype, &mut ctx).await?;
                }
                Err(Halt::Bogus(r)) => {
                    w.bogus = Some(r);
                    break;
                }
                Err(Halt::Error(e)) => return Err(e),
            }
        }
        let ladder_missing = ctx.trust().ladder_missing();
        let used = ctx.take_used();
        let answer = w.finish(ctx);
        // RFC 4035 §4.7: what failed validation is not kept beyond a few seconds.
        if !answer.status().is_bogus() {
            self.fetch.confirm(&used);
        }
        Ok((answer, ladder_missing))
    }

    /// Uses one response: the chain from the current name, then a negative answer, a
    /// referral, or a CNAME target to chase.
    async fn walk(
        &self,
        msg: &Message,
        s: &mut Sections,
        w: &mut Walk,
        ctx: &mut Ctx,
    ) -> Result<Step, Halt> {
        let code = msg.rcode();
        w.rcode = code;
        if code != Rcode::NOERROR && code != Rcode::NXDOMAIN {
            w.indeterminate(Reason::new(
                Ede::OTHER,
                format!("the server answered {}", rcode_name(code)),
            ));
            return Ok(Step::Done);
        }
        let qtype = w.qtype;
        if qtype == RrType::RRSIG && code == Rcode::NOERROR && signatures(msg, s, w) {
            return Ok(Step::Done);
        }
        let mut advanced = false;
        loop {
            let name = w.name.clone();
            // RFC 6672 §3.1: a DNAME above the name redirects it, whatever the QTYPE.
            let redirect = s.find(Section::Answer, |r| {
                r.rtype == RrType::DNAME && r.owner != name && name.is_subdomain_of(&r.owner)
            });
            let found = redirect
                .or_else(|| {
                    s.find(Section::Answer, |r| {
                        r.owner == name && r.rtype.answers(qtype)
                    })
                })
                .or_else(|| {
                    (qtype != RrType::CNAME)
                        .then(|| {
                            s.find(Section::Answer, |r| {
                                r.owner == name && r.rtype == RrType::CNAME
                            })
                        })
                        .flatten()
                });
            let Some(j) = found else { break };
            let set = s.take(Section::Answer, j);
            match self.trust.check_rrset(&set, self.fetch, ctx).await {
                Checked::Secure(v, keys) => {
                    if v.from_wildcard() {
                        let source = v.signed_owner().parent().unwrap_or_else(Name::root);
                        let claim = Claim::Expanded { source };
                        let d = self.prove_with(&keys, s, &name, claim, ctx).await?;
                        ctx.note(format!("{name}: wildcard expansion proven"));
                        w.denial(d);
                    }
                    w.secure.push(v.clone());
                    w.answers.push(AnswerRRset::Secure(v));
                }
                Checked::Insecure(r) => {
                    w.insecure(r);
                    w.answers.push(AnswerRRset::Insecure(set.clone()));
                }
                Checked::Indeterminate(r) => {
                    w.indeterminate(r);
                    w.answers.push(AnswerRRset::Indeterminate(set.clone()));
                }
                Checked::Bogus(r) => return Err(Halt::Bogus(r)),
            }
            let next = if redirect.is_some() {
                self.count_redirection(w)?;
                let next = substitute(&name, &set)?;
                // The server's synthesized CNAME is unsigned: it is used (not listed as
                // dropped) only when it says what the verified DNAME says.
                let synthesized = s.find(Section::Answer, |r| {
                    r.owner == name
                        && r.rtype == RrType::CNAME
                        && r.rdatas.len() == 1
                        && Name::from_wire(&r.rdatas[0]).is_ok_and(|t| t == next)
                });
                if let Some(k) = synthesized {
                    s.take(Section::Answer, k);
                }
                if qtype == RrType::CNAME {
                    return Ok(Step::Done);
                }
                next
            } else if set.rtype.answers(qtype) {
                if code == Rcode::NXDOMAIN {
                    return Err(Halt::Bogus(Reason::new(
                        Ede::DNSSEC_BOGUS,
                        format!("NXDOMAIN with a {qtype} RRset for {name}"),
                    )));
                }
                return Ok(Step::Done);
            } else {
                self.count_redirection(w)?;
                Name::from_wire(&set.rdatas[0]).map_err(|_| {
                    Halt::Bogus(Reason::new(
                        Ede::DNSSEC_BOGUS,
                        format!("malformed CNAME at {name}"),
                    ))
                })?
            };
            w.name = next;
            advanced = true;
        }
        let name = w.name.clone();
        let soa = s.find(Section::Authority, |r| r.rtype == RrType::SOA);
        if code == Rcode::NXDOMAIN || soa.is_some() {
            return self.negative(soa, s, w, ctx).await;
        }
        if !msg.has_flag(FLAG_AA) {
            let cut = s.find(Section::Authority, |r| {
                r.rtype == RrType::NS && name.is_subdomain_of(&r.owner)
            });
            if let Some(j) = cut {
                return self.referral(j, s, w, ctx).await;
            }
        }
        if advanced {
            return Ok(Step::Chase);
        }
        self.negative(None, s, w, ctx).await
    }

    /// Counts one CNAME or DNAME followed, against [`WorkLimits::max_cnames`].
    fn count_redirection(&self, w: &mut Walk) -> Result<(), Halt> {
        w.cnames += 1;
        if w.cnames > self.max_cnames {
            return Err(Halt::Error(
                LimitReached::Redirections {
                    limit: self.max_cnames,
                    qname: w.qname.clone(),
                }
                .into(),
            ));
        }
        Ok(())
    }

    /// NXDOMAIN or NODATA for the current name: the SOA and the denial proof.
    async fn negative(
        &self,
        soa: Option<usize>,
        s: &mut Sections,
        w: &mut Walk,
        ctx: &mut Ctx,
    ) -> Result<Step, Halt> {
        let name = w.name.clone();
        let claim = if w.rcode == Rcode::NXDOMAIN {
            Claim::NxDomain
        } else {
            Claim::NoData(w.qtype)
        };
        let Some(j) = soa else {
            if w.qtype == RrType::RRSIG && w.rcode == Rcode::NOERROR {
                // QTYPE RRSIG: authorities answer it unevenly (RRSIGs, minimal empty answers);
                // what comes back is passed through unvalidated, as positive RRSIG answers are
                // (see `signatures`), never Secure and never SERVFAIL for the missing SOA.
                w.indeterminate(Reason::new(
                    Ede::OTHER,
                    format!(
                        "no RRSIG records at {name} and no SOA: the empty answer to QTYPE RRSIG \
                         is passed through unvalidated"
                    ),
                ));
                return Ok(Step::Done);
            }
            // Without an SOA there is no proof: acceptable only in an unsigned zone.
            match self.trust.unsigned(&name, self.fetch, ctx).await {
                Unsigned::Insecure(r) => w.insecure(r),
                Unsigned::Indeterminate(r) => w.indeterminate(r),
                Unsigned::Bogus(r) => {
                    return Err(Halt::Bogus(Reason::new(
                        Ede::NSEC_MISSING,
                        format!("negative answer for {name} without SOA: {}", r.text),
                    )))
                }
            }
            return Ok(Step::Done);
        };
        let soa = s.take(Section::Authority, j);
        match self.trust.check_rrset(&soa, self.fetch, ctx).await {
            Checked::Secure(v, keys) => {
                if keys.zone() != v.owner() || !name.is_subdomain_of(v.owner()) {
                    return Err(Halt::Bogus(Reason::new(
                        Ede::DNSSEC_BOGUS,
                        format!("SOA {} is not the apex of a zone holding {name}", v.owner()),
                    )));
                }
                let d = self.prove_with(&keys, s, &name, claim.clone(), ctx).await?;
                ctx.note(format!(
                    "{name}: {claim:?} proven by {}'s denial records",
                    keys.zone()
                ));
                w.authority.push(AnswerRRset::Secure(v));
                w.denial(d);
            }
            Checked::Insecure(r) => {
                w.insecure(r);
                w.authority.push(AnswerRRset::Insecure(soa));
            }
            Checked::Indeterminate(r) => {
                w.indeterminate(r);
                w.authority.push(AnswerRRset::Indeterminate(soa));
            }
            Checked::Bogus(r) => return Err(Halt::Bogus(r)),
        }
        Ok(Step::Done)
    }

    /// Verifies the NSEC/NSEC3 RRsets of the authority section signed by `keys`' zone and
    /// checks that they prove `claim` for `name`.
    async fn prove_with(
        &self,
        keys: &Arc<TrustedKeys>,
        s: &mut Sections,
        name: &Name,
        claim: Claim,
        ctx: &mut Ctx,
    ) -> Result<VerifiedDenial, Halt> {
        let zone = keys.zone().clone();
        let sets = s.take_all(Section::Authority, |r| {
            (r.rtype == RrType::NSEC || r.rtype == RrType::NSEC3) && r.signers().contains(&zone)
        });
        let verified = self.trust.verify_all(keys, sets, ctx).await?;
        Ok(prove(&zone, name, claim, &verified)?)
    }

    /// A referral (forwarding mode): the server is not authoritative for the current name.
    /// Its DS is verified, or its absence proven, so the answer can say whether the data
    /// below would be signed; the referral is reported, not followed.
    async fn referral(
        &self,
        j: usize,
        s: &mut Sections,
        w: &mut Walk,
        ctx: &mut Ctx,
    ) -> Result<Step, Halt> {
        let name = w.name.clone();
        let ns = s.take(Section::Authority, j);
        let cut = ns.owner.clone();
        let targets: Vec<Name> = ns
            .rdatas
            .iter()
            .filter_map(|r| Name::from_wire(r).ok())
            .collect();
        let glue = s.take_all(Section::Additional, |r| {
            matches!(r.rtype, RrType::A | RrType::AAAA)
                && r.owner.is_subdomain_of(&cut)
                && targets.contains(&r.owner)
        });
        let ds = s.find(Section::Authority, |r| {
            r.owner == cut && r.rtype == RrType::DS
        });
        let mut referral = Referral {
            zone: cut.clone(),
            ns,
            ds: None,
            no_ds: None,
            glue,
        };
        let not_authoritative = |what: String| {
            Reason::new(
                Ede::OTHER,
                format!(
                    "referral to {cut}{what}: the server asked is not authoritative for {name}; \
                     ask {cut}'s name servers, or resolve iteratively (--root)"
                ),
            )
        };
        match self.trust.anchor(&cut) {
            None => w.indeterminate(Reason::new(
                Ede::OTHER,
                format!("no trust anchor covers {name} (referral to {cut})"),
            )),
            Some(anchor) if *anchor == cut => {
                w.indeterminate(not_authoritative(" (a trust anchor)".into()));
            }
            Some(_) => match ds {
                Some(j) => {
                    let ds = s.take(Section::Authority, j);
                    match self.trust.check_rrset(&ds, self.fetch, ctx).await {
                        Checked::Secure(v, keys) => {
                            w.indeterminate(not_authoritative(format!(
                                ", a signed delegation (DS verified with {}'s DNSKEY)",
                                keys.zone()
                            )));
                            referral.ds = Some(v);
                        }
                        Checked::Insecure(r) => w.insecure(r),
                        Checked::Indeterminate(r) => w.indeterminate(r),
                        Checked::Bogus(r) => return Err(Halt::Bogus(r)),
                    }
                }
                None => {
                    let proof = s.take_all(Section::Authority, |r| {
                        r.rtype == RrType::NSEC || r.rtype == RrType::NSEC3
                    });
                    match self
                        .trust
                        .prove_no_ds(&cut, &proof, self.fetch, ctx, 0)
                        .await
                    {
                        NoDs::Proven(d) => {
                            w.insecure(Reason::new(
                                Ede::OTHER,
                                format!(
                                    "{name} is at or below {cut}, an unsigned delegation (no DS, proven \
                                     by {}'s denial records); the server asked referred the \
                                     query there",
                                    d.zone()
                                ),
                            ));
                            referral.no_ds = Some(d);
                        }
                        NoDs::Insecure(r) => w.insecure(r),
                        NoDs::Bogus(r) => return Err(Halt::Bogus(r)),
                    }
                }
            },
        }
        ctx.note(format!("{name}: referral to {cut}"));
        w.referral = Some(referral);
        Ok(Step::Done)
    }
}

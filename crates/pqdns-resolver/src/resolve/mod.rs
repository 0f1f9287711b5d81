//! Resolution (RFC 1034 §5.3.3) and validation (RFC 4035 §5): ask a named server
//! (forwarding) or walk down from root hints (iterative, with bailiwick checks), then validate
//! the answer through the chain of trust — trust anchor → DS → DNSKEY → RRSIG at every zone
//! cut, and NSEC/NSEC3 proofs for negative and wildcard answers — keeping only validated data
//! ([`crate::answer`]).
//!
//! A [`Resolver`] is cheap to clone and shared by tasks: [`Resolver::resolve`] takes `&self`
//! and returns a `Send + 'static` future, so `tokio::spawn(resolver.resolve(&name, qtype))`
//! works. Shared state — the answer cache, delegations learned from referrals, and the trust
//! established per zone — sits behind locks that are never held across an await. Signature
//! verification (milliseconds for SPHINCS+) runs on tokio's blocking threads, at most
//! [`Config::verify_threads`] at a time, never on the async executor.
//!
//! Inside, each concern owns its state behind private fields and is reached only through its
//! methods; the resolver composes them:
//!
//! - `fetch`: where a response comes from — the cache of raw responses ([`crate::cache`]),
//!   then the forwarders or iteration;
//! - `exchange`: one query to a list of servers — the transport [`Client`], the servers that
//!   did not answer recently (`crate::infra`), query IDs and EDNS;
//! - `iterate`: referrals from the roots down (bailiwick rules), and the delegations learned;
//! - `minimise`: QNAME minimisation (RFC 9156) of the questions iteration sends;
//! - `trust`: trust anchors, trust per zone (remembered, computed once for concurrent
//!   resolutions), signature checks on blocking threads, and the MTL ladders;
//! - `validate`: from responses to an [`Answer`] — the answer chain, denial proofs, referrals;
//! - `anchor_refresh`: active refresh of trust anchors under automated updates (RFC 5011
//!   §2.3, [`Resolver::refresh_trust_anchor`]);
//! - `aggressive`: NXDOMAIN and NODATA synthesised from validated NSEC/NSEC3 records kept
//!   per zone (RFC 8198), consulted before any response is fetched;
//! - `ctx`: what one resolution carries between them (trace, exchanges, budgets);
//! - `error`: [`ResolveError`] and the facts it carries ([`Lame`], [`LimitReached`]).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pqdns_core::dnssec::validate::{Limits, PqPolicy};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::{Name, RrType};

use crate::anchor_update::StateFile;
use crate::anchors::TrustAnchors;
use crate::answer::Answer;
use crate::cache;
use crate::nta::NegativeTrustAnchors;
use crate::transport::Client;

mod aggressive;
mod anchor_refresh;
mod ctx;
mod error;
mod exchange;
mod fetch;
mod iterate;
mod minimise;
mod trust;
mod validate;

pub(crate) use aggressive::DenialProof;
pub use aggressive::DEFAULT_BYTES as DEFAULT_AGGRESSIVE_NSEC_BYTES;
pub use anchor_refresh::{AnchorRefresh, AnchorRefreshError};
pub use error::{Lame, LimitReached, ResolveError};
pub use minimise::{MAX_MINIMISE_COUNT, MINIMISE_ONE_LAB};
/// Where queries go.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Mode {
    /// Send every query to this server (it must serve or recurse for all zones involved). A
    /// referral from it is reported in [`Answer::referral`], not followed.
    Forward(SocketAddr),
    /// As [`Mode::Forward`] with several servers: each query goes to the first that answers,
    /// in order (every try counts against [`WorkLimits::max_exchanges`]).
    ForwardAny(Vec<SocketAddr>),
    /// Start at these root servers and follow referrals (in bailiwick only; NS names without
    /// glue are resolved within [`WorkLimits`]); glue addresses use `port`.
    Iterative {
        /// Root server addresses.
        roots: Vec<SocketAddr>,
        /// Port for servers learned from glue.
        port: u16,
    },
}

/// Bounds on the work one resolution may cause, against amplification by hostile servers
/// (NXNSAttack: referrals to many NS names without glue; CNAME loops).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct WorkLimits {
    /// Queries sent per resolution, counting every server tried, validation lookups and
    /// NS-name lookups.
    pub max_exchanges: usize,
    /// Referrals followed per lookup (iterative mode).
    pub max_referrals: usize,
    /// NS names without glue resolved per referral (iterative mode).
    pub max_glueless_per_referral: usize,
    /// NS names without glue resolved per resolution (iterative mode).
    pub max_glueless: usize,
    /// CNAMEs followed per resolution (RFC 1034 §3.6.2).
    pub max_cnames: usize,
}

impl Default for WorkLimits {
    fn default() -> WorkLimits {
        WorkLimits {
            max_exchanges: 64,
            max_referrals: 16,
            max_glueless_per_referral: 3,
            max_glueless: 6,
            max_cnames: 8,
        }
    }
}

/// Resolver settings.
#[non_exhaustive]
pub struct Config {
    /// Forwarding or iterative.
    pub mode: Mode,
    /// Trust anchors.
    pub anchors: TrustAnchors,
    /// Algorithm-number profile for validation.
    pub profile: Profile,
    /// Crypto provider.
    pub provider: Provider,
    /// RFC 6840 §5.11 behaviour or require-pq.
    pub pq_policy: PqPolicy,
    /// Downgrade protection by DS (on by default): a zone whose authenticated DS RRset (or
    /// trust anchor) names a supported post-quantum algorithm must validate through it, down
    /// to the next secure delegation ([`pqdns_core::dnssec::downgrade`] states the rule).
    pub ds_downgrade_protection: bool,
    /// Signature-verification limits per resolution.
    pub limits: Limits,
    /// Query and referral limits per resolution.
    pub work: WorkLimits,
    /// Clock for signature validity, UNIX seconds; `None` = now.
    pub now: Option<u64>,
    /// EDNS(0) UDP payload size advertised, bytes.
    pub udp_payload: u16,
    /// Signature verifications run in parallel on blocking threads (the rest wait).
    pub verify_threads: usize,
    /// Bounds of the cache of raw responses ([`crate::cache`]): bytes and longest life.
    pub cache: cache::Limits,
    /// Memory for the validated NSEC/NSEC3 records that negative answers are synthesised
    /// from (aggressive use of DNSSEC-validated cache, RFC 8198), bytes; 0 turns it off.
    /// [`DEFAULT_AGGRESSIVE_NSEC_BYTES`] by default.
    pub aggressive_nsec_bytes: usize,
    /// QNAME minimisation in iterative mode (RFC 9156, relaxed: a minimised query that fails
    /// is sent again in full); on by default.
    pub qname_minimisation: bool,
    /// Negative trust anchors (RFC 7646): names at and below them are Insecure, not
    /// validated, until each expires. None by default.
    pub negative_trust_anchors: NegativeTrustAnchors,
    /// Automated updates of the trust anchors (RFC 5011, [`crate::anchor_update`]) with
    /// their state in this file, refreshed by [`Resolver::refresh_trust_anchor`]; `None`
    /// (default): the anchors are fixed.
    pub anchor_state: Option<StateFile>,
}

/// EDNS(0) UDP payload size advertised by default, bytes (the DNS Flag Day 2020 value).
pub const DEFAULT_UDP_PAYLOAD: u16 = 1232;

/// Default per-exchange timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

impl Config {
    /// Settings with the defaults: `default` profile and provider, RFC 6840 §5.11 algorithm
    /// policy with downgrade protection by DS, default limits, the real clock, a 1232-byte UDP payload, one verification
    /// thread per CPU, a 16 MiB cache of raw responses and 4 MiB of validated denial records
    /// for aggressive NSEC/NSEC3 (RFC 8198), and QNAME minimisation (RFC 9156).
    pub fn new(mode: Mode, anchors: TrustAnchors) -> Config {
        Config {
            mode,
            anchors,
            profile: Profile::default_profile(),
            provider: Provider::default_provider(),
            pq_policy: PqPolicy::AnyAlgorithm,
            ds_downgrade_protection: true,
            limits: Limits::default(),
            work: WorkLimits::default(),
            now: None,
            udp_payload: DEFAULT_UDP_PAYLOAD,
            verify_threads: std::thread::available_parallelism().map_or(2, usize::from),
            cache: cache::Limits::default(),
            aggressive_nsec_bytes: aggressive::DEFAULT_BYTES,
            qname_minimisation: true,
            negative_trust_anchors: NegativeTrustAnchors::new(),
            anchor_state: None,
        }
    }
}

/// A boxed `Send` future, for recursion between lookups and trust.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Locks a mutex, ignoring poisoning (the data are caches: a panic elsewhere leaves them
/// consistent enough to use).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The clock for signature validity and cache lifetimes: [`Config::now`], or the real one.
#[derive(Clone, Copy, Debug)]
struct Clock(Option<u64>);

impl Clock {
    /// Now, UNIX seconds.
    fn unix(self) -> u64 {
        self.0.unwrap_or_else(pqdns_core::time::now)
    }
}

/// MTL ladders a resolver keeps, per (DNSKEY, series): one per MTL zone and re-signing.
pub const MAX_LADDERS: usize = 256;

/// Shared state of a resolver: the settings, where responses come from, and trust.
struct Inner {
    config: Config,
    fetch: fetch::Fetch,
    trust: trust::Trust,
    aggressive: aggressive::Aggressive,
}

/// A validating resolver: one transport client, a cache, and trust per zone. Clones share
/// everything.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

impl Resolver {
    /// A resolver using `client` for transport.
    pub fn new(config: Config, client: Client) -> Resolver {
        Resolver {
            inner: Arc::new(Inner {
                fetch: fetch::Fetch::new(&config, client),
                trust: trust::Trust::new(&config),
                aggressive: aggressive::Aggressive::new(config.aggressive_nsec_bytes),
                config,
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Answers made Insecure by a negative trust anchor so far (RFC 7646), for metrics.
    pub fn nta_hits(&self) -> u64 {
        self.inner.trust.nta_hits()
    }

    /// Adds a negative trust anchor (RFC 7646) at `domain` until `expires` (UNIX seconds), or
    /// gives an existing one that expiry; the next resolutions treat names at and below it as
    /// Insecure, and the NSEC/NSEC3 records kept for synthesis (RFC 8198), validated before,
    /// are forgotten. Answers already in a service's cache stay there until their TTL runs
    /// out.
    pub fn add_negative_trust_anchor(&self, domain: Name, expires: u64) {
        self.inner.trust.negative().add(domain, expires);
        self.inner.aggressive.clear();
    }

    /// Removes the negative trust anchor at `domain` (RFC 7646 §6: the zone is repaired):
    /// the next resolutions validate names below it again. False if there was none.
    pub fn remove_negative_trust_anchor(&self, domain: &Name) -> bool {
        self.inner.trust.negative().remove(domain)
    }

    /// The negative trust anchors in force or expired but not removed, with their expiry
    /// (UNIX seconds).
    pub fn negative_trust_anchors(&self) -> Vec<(Name, u64)> {
        let negative = self.inner.trust.negative();
        negative.entries().map(|(d, e)| (d.clone(), e)).collect()
    }

    /// Removes the negative trust anchors expired at `now` (UNIX seconds), whatever their
    /// source (RFC 7646 §8: they expire), logging each; returns them. An expired anchor no
    /// longer applies in any case; this forgets it.
    pub fn expire_negative_trust_anchors(&self, now: u64) -> Vec<Name> {
        self.inner.trust.expire_negative(now)
    }

    /// When the next negative trust anchor expires (UNIX seconds), if there is one.
    pub fn next_negative_trust_anchor_expiry(&self) -> Option<u64> {
        self.inner.trust.next_negative_expiry()
    }

    /// Puts the configuration file's insecure domains and negative trust anchors in place of
    /// the previous file's ([`crate::policy`]); true if they changed, and then the NSEC/NSEC3
    /// records kept for synthesis (RFC 8198), validated under the old ones, are forgotten.
    pub(crate) fn set_configured_trust(
        &self,
        insecure: crate::policy::insecure::InsecureDomains,
        negative: NegativeTrustAnchors,
    ) -> bool {
        let changed = self.inner.trust.set_configured(insecure, negative);
        if changed {
            self.inner.aggressive.clear();
        }
        changed
    }

    /// Minimised queries sent so far (RFC 9156; iterative mode), for metrics.
    pub fn minimised_queries(&self) -> u64 {
        self.inner.fetch.minimised_queries()
    }

    /// Replaces the forward and stub zones ([`crate::policy::forward`]) by those of
    /// `routes`, at once for every resolution that starts later; the caches stay.
    pub(crate) fn set_zones(&self, routes: Vec<crate::policy::forward::ZoneRoute>) {
        self.inner.fetch.set_zones(routes);
    }

    /// Resolves `qname`/`qtype` and validates the answer. The future owns what it needs
    /// (`Send + 'static`), so it can be spawned.
    ///
    /// # Errors
    /// [`ResolveError`] when no response could be obtained; validation problems and error
    /// RCODEs are reported in [`Answer::status`], not as errors.
    pub fn resolve(
        &self,
        qname: &Name,
        qtype: RrType,
    ) -> impl Future<Output = Result<Answer, ResolveError>> + Send + 'static {
        self.run(qname, qtype, false)
    }

    /// As [`Resolver::resolve`], but the answer chain (the responses for `qtype` at `qname`
    /// and at the CNAME targets) is asked of the servers, not taken from the cache of raw
    /// responses nor synthesised from cached denials (RFC 8198); the zones' keys and
    /// delegations may come from the cache. For prefetch: a cached answer near its expiry is
    /// replaced by a fresh one ([`crate::service::prefetch`]).
    ///
    /// # Errors
    /// As [`Resolver::resolve`].
    pub fn refresh(
        &self,
        qname: &Name,
        qtype: RrType,
    ) -> impl Future<Output = Result<Answer, ResolveError>> + Send + 'static {
        self.run(qname, qtype, true)
    }

    /// The answer for `qname`/`qtype` that the validated NSEC/NSEC3 records kept for
    /// aggressive use already prove (RFC 8198 §5: a Secure NXDOMAIN, NODATA or wildcard
    /// expansion), found without any query and without waiting; `None` when they prove none.
    /// [`Resolver::resolve`] gives the same answer first; a service calls this where it
    /// answers its cache hits, so a synthesised answer needs no task and no wait.
    pub fn synthesise(&self, qname: &Name, qtype: RrType) -> Option<Answer> {
        self.inner
            .aggressive
            .answer(qname, qtype, std::time::Instant::now())
    }

    /// As [`Resolver::synthesise`], with the key of the NXDOMAIN or NODATA proof the answer
    /// rests on (`None` for a wildcard expansion): a service keeps the response it writes
    /// under that key ([`crate::service`]).
    pub(crate) fn synthesise_with_proof(
        &self,
        qname: &Name,
        qtype: RrType,
    ) -> Option<(Answer, Option<DenialProof>)> {
        self.inner
            .aggressive
            .answer_with_proof(qname, qtype, std::time::Instant::now())
    }

    /// The key of the NXDOMAIN or NODATA proof [`Resolver::synthesise`] would give now, found
    /// without building the answer (the records are chosen and checked against `qname`);
    /// `None` when there is none.
    pub(crate) fn denial_proof(&self, qname: &Name, qtype: RrType) -> Option<DenialProof> {
        self.inner
            .aggressive
            .proof(qname, qtype, std::time::Instant::now())
    }

    /// [`Resolver::resolve`], or with `fresh` [`Resolver::refresh`].
    fn run(
        &self,
        qname: &Name,
        qtype: RrType,
        fresh: bool,
    ) -> impl Future<Output = Result<Answer, ResolveError>> + Send + 'static {
        let inner = self.inner.clone();
        let qname = qname.clone();
        async move {
            let Inner {
                config,
                fetch,
                trust,
                aggressive,
            } = &*inner;
            validate::Validation::new(fetch, trust, aggressive, config.work.max_cnames)
                .answer(&config.work, qname, qtype, fresh)
                .await
        }
    }
}

//! Resolution (RFC 1034 §5.3.3) and validation (RFC 4035 §5): ask a named server
//! (forwarding) or walk down from root hints (iterative, with bailiwick checks: `iterate`),
//! then validate the answer through the chain of trust — trust anchor → DS → DNSKEY → RRSIG
//! at every zone cut (`trust`), and NSEC/NSEC3 proofs for negative and wildcard answers —
//! keeping only validated data (`validate`, [`crate::answer`]).
//!
//! A [`Resolver`] is cheap to clone and shared by tasks: [`Resolver::resolve`] takes `&self`
//! and returns a `Send + 'static` future, so `tokio::spawn(resolver.resolve(&name, qtype))`
//! works. Shared state — the answer cache, delegations learned from referrals, and the trust
//! established per zone — sits behind locks that are never held across an await. Signature
//! verification (milliseconds for SPHINCS+) runs on tokio's blocking threads, at most
//! [`Config::verify_threads`] at a time, never on the async executor.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pqdns_core::dnssec::mtl::{LadderCache, EDNS_FULL_SIGNATURES};
use pqdns_core::dnssec::validate::{Limits, PqPolicy, Reason, Validator};
use pqdns_core::dnssec::{Profile, Provider};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, EDNS_DO, FLAG_CD};
use pqdns_core::{Class, Name, RrType};
use tokio::sync::Semaphore;

use crate::anchors::TrustAnchors;
use crate::answer::Answer;
use crate::cache::{self, Cache, Stored};
use crate::infra::Infra;
use crate::iterate::Delegations;
use crate::random;
use crate::transport::{Client, ExchangeInfo, TransportError};
use crate::trust::TrustMemo;

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
}

/// EDNS(0) UDP payload size advertised by default, bytes (the DNS Flag Day 2020 value).
pub const DEFAULT_UDP_PAYLOAD: u16 = 1232;

/// Default per-exchange timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);

impl Config {
    /// Settings with the defaults: `default` profile and provider, RFC 6840 §5.11 algorithm
    /// policy, default limits, the real clock, a 1232-byte UDP payload, one verification
    /// thread per CPU, and a 16 MiB cache of raw responses.
    pub fn new(mode: Mode, anchors: TrustAnchors) -> Config {
        Config {
            mode,
            anchors,
            profile: Profile::default_profile(),
            provider: Provider::default_provider(),
            pq_policy: PqPolicy::AnyAlgorithm,
            limits: Limits::default(),
            work: WorkLimits::default(),
            now: None,
            udp_payload: DEFAULT_UDP_PAYLOAD,
            verify_threads: std::thread::available_parallelism().map_or(2, usize::from),
            cache: cache::Limits::default(),
        }
    }
}

/// Why resolution failed before validation could say anything.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// Every server failed (I/O, timeout, or a malformed or mismatched response).
    #[error("{0}")]
    Transport(#[from] TransportError),
    /// Referrals did not lead to an answer (lame, out-of-bailiwick, or no usable addresses).
    #[error("resolution failed: {0}")]
    Lame(String),
    /// A [`WorkLimits`] bound was reached.
    #[error("work limit: {0}")]
    WorkLimit(String),
}

/// A boxed `Send` future, for recursion between lookups and trust.
pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Locks a mutex, ignoring poisoning (the data are caches: a panic elsewhere leaves them
/// consistent enough to use).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Shared state of a resolver.
pub(crate) struct Inner {
    pub(crate) config: Config,
    client: Client,
    cache: Cache,
    pub(crate) delegations: Mutex<Delegations>,
    pub(crate) trust: TrustMemo,
    /// Servers that did not answer recently, tried last.
    infra: Infra,
    verify_slots: Semaphore,
    /// MTL ladders verified by any resolution, by SigTag (draft-fregly-dnsop-slh-dsa-mtl-dnssec,
    /// draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00).
    ladders: Arc<Mutex<LadderCache>>,
}

/// MTL ladders a resolver keeps, per (DNSKEY, series): one per MTL zone and re-signing.
pub const MAX_LADDERS: usize = 256;

/// Per-resolution state: the validator with its work budget, the trace, exchanges made,
/// trust found so far, and the query budgets.
pub(crate) struct Ctx {
    validator: Option<Validator>,
    pub(crate) chain: Vec<String>,
    pub(crate) exchanges: Vec<ExchangeInfo>,
    pub(crate) trust: std::collections::HashMap<Name, crate::trust::ZoneTrust>,
    exchanges_left: usize,
    pub(crate) glueless_left: usize,
    /// NS names being resolved (cycle guard for glueless delegations).
    pub(crate) resolving: Vec<Name>,
    /// Ask for full MTL signatures (EDNS option 65050) and bypass cached responses.
    full_signatures: bool,
    /// The (QNAME, QTYPE) and store of every response this resolution took from the cache or
    /// put in it, to confirm them when it does not end Bogus (at most [`MAX_USED`]).
    pub(crate) used: Vec<(Name, RrType, Stored)>,
}

/// Cached responses one resolution remembers having used (lookups beyond are not confirmed,
/// so they just expire sooner).
const MAX_USED: usize = 256;

impl Ctx {
    /// Remembers that the resolution used the cached response `stored` for (`name`, `qtype`).
    fn used(&mut self, name: &Name, qtype: RrType, stored: Stored) {
        if self.used.len() < MAX_USED {
            self.used.push((name.clone(), qtype, stored));
        }
    }
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
        let threads = config.verify_threads.max(1);
        Resolver {
            inner: Arc::new(Inner {
                client,
                cache: Cache::new(config.cache),
                delegations: Mutex::new(Delegations::new()),
                trust: TrustMemo::new(),
                infra: Infra::new(),
                verify_slots: Semaphore::new(threads),
                ladders: Arc::new(Mutex::new(LadderCache::new(MAX_LADDERS))),
                config,
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &Config {
        &self.inner.config
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
        let inner = self.inner.clone();
        let qname = qname.clone();
        async move { inner.answer(qname, qtype).await }
    }
}

impl Inner {
    fn now(&self) -> u64 {
        self.config.now.unwrap_or_else(pqdns_core::time::now)
    }

    pub(crate) fn new_ctx(&self) -> Ctx {
        let c = &self.config;
        Ctx {
            validator: Some(
                Validator::new(&c.profile, &c.provider, self.now(), c.limits, c.pq_policy)
                    .with_ladders(self.ladders.clone()),
            ),
            chain: Vec::new(),
            exchanges: Vec::new(),
            trust: std::collections::HashMap::new(),
            exchanges_left: c.work.max_exchanges,
            glueless_left: c.work.max_glueless,
            resolving: Vec::new(),
            full_signatures: false,
            used: Vec::new(),
        }
    }

    /// True if a condensed MTL signature could not be checked for want of its ladder.
    pub(crate) fn ladder_missing(ctx: &Ctx) -> bool {
        ctx.validator
            .as_ref()
            .is_some_and(Validator::ladder_missing)
    }

    /// A context whose queries ask for full MTL signatures, continuing after the `previous`
    /// exchanges of the same resolution (reported with it, and counted against its budget).
    pub(crate) fn full_signature_ctx(&self, previous: &[ExchangeInfo]) -> Ctx {
        let ctx = self.new_ctx();
        Ctx {
            full_signatures: true,
            exchanges: previous.to_vec(),
            exchanges_left: ctx.exchanges_left.saturating_sub(previous.len()),
            ..ctx
        }
    }

    /// Runs signature checks on a blocking thread with the resolution's validator (so its work
    /// budget counts them), at most `verify_threads` at a time.
    pub(crate) async fn verify<T, F>(&self, ctx: &mut Ctx, check: F) -> Result<T, Reason>
    where
        F: FnOnce(&mut Validator) -> Result<T, Reason> + Send + 'static,
        T: Send + 'static,
    {
        let _permit = self
            .verify_slots
            .acquire()
            .await
            .expect("the semaphore is never closed");
        let mut validator = ctx
            .validator
            .take()
            .expect("the validator is returned after every check");
        let job = tokio::task::spawn_blocking(move || {
            let out = check(&mut validator);
            (validator, out)
        });
        match job.await {
            Ok((validator, out)) => {
                ctx.validator = Some(validator);
                out
            }
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down and will drop this task.
            Err(_) => std::future::pending().await,
        }
    }

    fn query(
        &self,
        qname: &Name,
        qtype: RrType,
        full_signatures: bool,
    ) -> Result<Message, TransportError> {
        // Option 65050 asks for full MTL signatures: a 2025 server sends them all
        // (draft-fregly-dnsop-slh-dsa-mtl-dnssec); a 2026 server sends them where the ladder is
        // not among the SigTags listed here, the (at most 8) newest ladders held
        // (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00).
        let options = if full_signatures {
            let held = lock(&self.ladders).recent_tags();
            vec![(EDNS_FULL_SIGNATURES, held.to_bytes())]
        } else {
            Vec::new()
        };
        let mut m = Message::query(
            random::query_id()?,
            Question {
                qname: qname.clone(),
                qtype,
                qclass: Class::IN,
            },
            false,
            Some(Edns {
                udp_payload: self.config.udp_payload,
                ext_rcode: 0,
                version: 0,
                flags: EDNS_DO,
                options,
            }),
        );
        // We validate ourselves: ask for unvalidated data (RFC 4035 §3.2.2).
        m.flags |= FLAG_CD;
        Ok(m)
    }

    /// Asks `servers` in turn until one answers, those that did not answer recently last
    /// ([`crate::infra`]); each try counts against the budget.
    pub(crate) async fn ask(
        &self,
        servers: &[SocketAddr],
        qname: &Name,
        qtype: RrType,
        ctx: &mut Ctx,
    ) -> Result<Message, ResolveError> {
        let mut last = None;
        for server in &self.infra.order(servers, Instant::now()) {
            if ctx.exchanges_left == 0 {
                return Err(ResolveError::WorkLimit(format!(
                    "more than {} queries for one resolution (at {qname} {qtype})",
                    self.config.work.max_exchanges
                )));
            }
            ctx.exchanges_left -= 1;
            let query = self.query(qname, qtype, ctx.full_signatures)?;
            match self.client.exchange(*server, &query).await {
                Ok((m, mut info)) => {
                    self.infra.answered(*server);
                    info.full_signatures = ctx.full_signatures;
                    ctx.exchanges.push(info);
                    return Ok(m);
                }
                Err(e) => {
                    tracing::debug!(%server, error = %e, "server failed");
                    if matches!(e, TransportError::Timeout(_) | TransportError::Io(_)) {
                        self.infra.failed(*server, Instant::now());
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.map_or_else(
            || ResolveError::Lame("no servers".into()),
            ResolveError::from,
        ))
    }

    /// Lets the cached responses a resolution `used` live their whole TTL: it did not end
    /// Bogus ([`crate::cache`]).
    pub(crate) fn confirm_cached(&self, used: &[(Name, RrType, Stored)]) {
        for (name, qtype, stored) in used {
            self.cache.confirm(name, *qtype, *stored);
        }
    }

    /// The response for (qname, qtype) from the cache, the forwarder, or by iteration.
    pub(crate) fn lookup<'a>(
        &'a self,
        qname: &'a Name,
        qtype: RrType,
        ctx: &'a mut Ctx,
    ) -> BoxFuture<'a, Result<Message, ResolveError>> {
        Box::pin(async move {
            let now = Instant::now();
            // A cached response may hold the condensed signatures that need a ladder.
            if !ctx.full_signatures {
                if let Some((m, stored)) = self.cache.get(qname, qtype, now) {
                    ctx.used(qname, qtype, stored);
                    return Ok(m);
                }
            }
            let m = match &self.config.mode {
                Mode::Forward(server) => self.ask(&[*server], qname, qtype, ctx).await?,
                Mode::ForwardAny(servers) => self.ask(servers, qname, qtype, ctx).await?,
                Mode::Iterative { roots, port } => {
                    self.iterate(qname, qtype, roots, *port, ctx).await?
                }
            };
            if let Some(stored) = self
                .cache
                .put(qname.clone(), qtype, m.clone(), now, self.now())
            {
                ctx.used(qname, qtype, stored);
            }
            Ok(m)
        })
    }
}

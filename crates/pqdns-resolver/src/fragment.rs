//! The fragment-fetching UDP client: ARRF or QBF (`pqdns_core::frag`), negotiated with the
//! pqdns fragmentation EDNS option (`pqdns_core::frag::edns`), with TCP fallback.
//!
//! The query carries the option offering the configured scheme. An answer that carries the
//! option back is a first fragment: QBF fragment 1 (TC=1; the fragment count follows from the
//! algorithms' maximum sizes and the UDP budget) or an ARRF answer with RRFRAGs. All missing
//! fragments are then requested at once on the same socket (connected to the server, so
//! datagrams from elsewhere are dropped by the kernel) and reassembled; the caller validates
//! the result like any answer. Lost fragments are requested again once after
//! [`FragConfig::round_timeout`]; if the answer is still incomplete, or any fragment is
//! inconsistent, the caller falls back to TCP. An answer with TC=1 and no option is ordinary
//! truncation: TCP as usual.
//!
//! **Pushed fragments.** When the query carries a server cookie learnt from this server
//! (RFC 7873 §5.3; [`crate::cookies`]) and [`FragConfig::push`] is on, the option also sets
//! the PUSH flag: a server that finds the cookie valid sends every fragment at once and says so
//! in the first fragment, which saves the round trip of the requests. The client then waits
//! [`FragConfig::push_wait`] for them (datagrams that overtake the first fragment are kept,
//! up to [`MAX_EARLY`]) and requests whatever is still missing as above, then TCP.
//!
//! Bounds: fragment datagrams longer than the UDP budget are dropped; QBF keeps at most
//! `qbf::MAX_FRAGMENTS` fragments of at most the budget each; ARRF keeps what
//! [`pqdns_core::frag::arrf::Limits`] allows (by default 1 MiB over all pending answers,
//! 64 KiB of data per answer, whatever RRSIZE a server announces).

use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pqdns_core::dnssec::Profile;
use pqdns_core::frag::arrf::{self, ArrfError, Key, Limits, Progress, Reassembler};
use pqdns_core::frag::edns::{FragOption, Fragmentation, DEFAULT_CODE, PUSH};
use pqdns_core::frag::qbf;
use pqdns_core::message::Message;
use pqdns_core::wire::{FLAG_QR, FLAG_TC, OPTION_COOKIE};
use pqdns_core::RrType;
use tokio::net::UdpSocket;

use crate::transport::{udp_socket, ExchangeInfo, TransportError, UdpAnswer, MAX_MESSAGE};

/// Smallest UDP payload every server accepts, bytes (RFC 1035 §4.2.1).
const MIN_UDP_PAYLOAD: u16 = 512;

/// Client fragmentation settings.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FragConfig {
    /// Scheme offered; [`Fragmentation::Off`] sends no option (TC → TCP only).
    pub mode: Fragmentation,
    /// EDNS option code of the negotiation option (65001–65534).
    pub option_code: u16,
    /// RR type number of ARRF's RRFRAG.
    pub rrfrag_type: RrType,
    /// ARRF reassembly bounds (memory, pending answers, age).
    pub limits: Limits,
    /// How long to wait for the fragments of one request round before asking again (once),
    /// then falling back to TCP.
    pub round_timeout: Duration,
    /// Profile giving the algorithms' maximum sizes for the QBF fragment count (the server
    /// uses the `default` profile).
    pub profile: Profile,
    /// Ask for pushed fragments (the option's PUSH flag) when the query carries a server
    /// cookie.
    pub push: bool,
    /// How long to wait for pushed fragments after the first before requesting the missing
    /// ones.
    pub push_wait: Duration,
}

impl FragConfig {
    /// `mode` with option 65108, RRFRAG type 65388, default ARRF limits, 1 s rounds, the
    /// `default` profile, and pushed fragments asked for (waited for 200 ms).
    pub fn new(mode: Fragmentation) -> FragConfig {
        FragConfig {
            mode,
            option_code: DEFAULT_CODE,
            rrfrag_type: arrf::DEFAULT_RRFRAG_TYPE,
            limits: Limits::default(),
            round_timeout: Duration::from_secs(1),
            profile: Profile::default_profile(),
            push: true,
            push_wait: Duration::from_millis(200),
        }
    }
}

/// Most fragment datagrams kept that arrive before the first fragment (pushed fragments
/// overtaking it).
pub const MAX_EARLY: usize = 64;

/// Request rounds per answer: the first, and one more for what was lost.
const ROUNDS: usize = 2;

/// How the fragments after the first come.
struct Delivery {
    /// The server pushes them (the first fragment said PUSH).
    pushed: bool,
    /// Fragment datagrams that arrived before the first.
    early: Vec<Vec<u8>>,
}

impl Delivery {
    /// Rounds to run: waiting for pushed fragments, then [`ROUNDS`] of requests.
    fn rounds(&self) -> usize {
        ROUNDS + usize::from(self.pushed)
    }
}

/// What to do with one received datagram.
enum Step {
    /// Keep waiting for more.
    More,
    /// The answer is complete.
    Done(Message),
    /// Give up and use TCP.
    Fail,
}

/// Fragmentation state of one client: settings and the ARRF reassembler, shared by every
/// exchange of the client (its memory bound is for all pending answers together); the lock is
/// held only while one datagram is added, never across an await.
pub(crate) struct Fragmenting {
    config: FragConfig,
    reassembler: Mutex<Reassembler>,
}

impl Fragmenting {
    pub(crate) fn new(config: FragConfig) -> Fragmenting {
        Fragmenting {
            reassembler: Mutex::new(Reassembler::new(config.limits, config.rrfrag_type)),
            config,
        }
    }

    fn reassembler(&self) -> MutexGuard<'_, Reassembler> {
        self.reassembler.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Memory charged to ARRF reassembly now and at its peak, bytes.
    pub(crate) fn reassembly_memory(&self) -> (usize, usize) {
        let r = self.reassembler();
        (r.memory_used(), r.peak_memory())
    }

    fn compact(&self) -> Option<RrType> {
        (self.config.mode == Fragmentation::Arrf).then_some(self.config.rrfrag_type)
    }

    /// Sends `query` over UDP offering fragmentation and returns the complete answer's wire
    /// form (or a first response that does not parse, for the caller to reject), or
    /// [`UdpAnswer::Truncated`] when the caller should go on (truncated, fragments lost or
    /// inconsistent).
    ///
    /// # Errors
    /// [`TransportError::Io`] for socket errors.
    pub(crate) async fn exchange(
        &self,
        server: SocketAddr,
        query: &Message,
        info: &mut ExchangeInfo,
    ) -> Result<UdpAnswer, TransportError> {
        let mut query = query.clone();
        let Some(edns) = query.edns.as_mut() else {
            return Ok(UdpAnswer::Truncated(Vec::new()));
        };
        let ours = edns.udp_payload;
        // A server cookie (beyond the 8-byte client cookie) proves our address to the server.
        let proven = edns.option(OPTION_COOKIE).is_some_and(|c| c.len() > 8);
        let push = if self.config.push && proven { PUSH } else { 0 };
        FragOption::schemes(self.config.mode.bit() | push).put(edns, self.config.option_code);
        let socket = udp_socket(server).await?;
        let wire = query.to_wire();
        socket.send(&wire).await?;
        info.bytes_sent = wire.len();
        let mut buf = vec![0u8; MAX_MESSAGE];
        let mut early = Vec::new();
        let first = loop {
            let n = socket.recv(&mut buf).await?;
            if n < 2 || buf[..2] != wire[..2] {
                continue;
            }
            info.bytes_received += n;
            if push != 0 && self.is_later_fragment(&buf[..n], &query) {
                if early.len() < MAX_EARLY {
                    early.push(buf[..n].to_vec());
                }
                continue;
            }
            break &buf[..n];
        };
        let Ok(parsed) = Message::parse_with(first, self.compact()) else {
            // Truncated: the caller goes on. Otherwise the response is malformed: hand it
            // back so that the caller rejects it (FORMERR) instead of quietly trying TCP.
            let tc = first.len() >= 4 && u16::from_be_bytes([first[2], first[3]]) & FLAG_TC != 0;
            return Ok(if tc {
                UdpAnswer::Truncated(first.to_vec())
            } else {
                UdpAnswer::Whole(first.to_vec())
            });
        };
        let Some(option) = FragOption::find(parsed.edns.as_ref(), self.config.option_code)
            .filter(|o| o.scheme_bits() == self.config.mode.bit())
        else {
            return Ok(if parsed.has_flag(FLAG_TC) {
                UdpAnswer::Truncated(first.to_vec())
            } else {
                UdpAnswer::Whole(first.to_vec())
            });
        };
        let delivery = Delivery {
            pushed: push != 0 && option.push(),
            early,
        };
        info.fragments_pushed = delivery.pushed;
        let server_payload = parsed.edns.as_ref().map_or(0, |e| e.udp_payload);
        let budget = usize::from(ours.clamp(MIN_UDP_PAYLOAD, server_payload.max(MIN_UDP_PAYLOAD)));
        let done = match self.config.mode {
            Fragmentation::Qbf => {
                self.qbf(&socket, &query, parsed, delivery, budget, info)
                    .await
            }
            Fragmentation::Arrf => {
                let key = Key {
                    server,
                    id: query.id,
                    question: query.questions[0].clone(),
                };
                let done = self
                    .arrf(&socket, &query, &key, parsed, delivery, budget, info)
                    .await;
                self.reassembler().abandon(&key);
                done
            }
            Fragmentation::Off => None,
        };
        Ok(done.map_or_else(
            || UdpAnswer::Truncated(Vec::new()),
            |m| UdpAnswer::Whole(m.to_wire()),
        ))
    }

    /// True if `datagram` is a fragment other than the first of the answer to `query`: a QBF
    /// `?n?` question or ARRF's `. RRFRAG` question, where the first repeats the query's.
    fn is_later_fragment(&self, datagram: &[u8], query: &Message) -> bool {
        Message::parse_with(datagram, self.compact()).is_ok_and(|m| {
            m.questions.len() == 1 && m.questions != query.questions && m.has_flag(FLAG_QR)
        })
    }

    /// How long to wait in round `i` (from 0), and whether to send requests in it: a round
    /// waiting for pushed fragments comes first and sends none.
    fn round_plan(&self, delivery: &Delivery, i: usize) -> (Duration, bool) {
        if delivery.pushed && i == 0 {
            (self.config.push_wait, false)
        } else {
            (self.config.round_timeout, true)
        }
    }

    /// Fetches QBF fragments 2..=N of the answer whose fragment 1 is `first`.
    async fn qbf(
        &self,
        socket: &UdpSocket,
        query: &Message,
        first: Message,
        mut delivery: Delivery,
        budget: usize,
        info: &mut ExchangeInfo,
    ) -> Option<Message> {
        let Ok(count) = qbf::fragment_count(&first, budget, &self.config.profile) else {
            return None;
        };
        let original = &query.questions[0];
        let mut slots: Vec<Option<Message>> = vec![None; usize::from(count)];
        slots[0] = Some(first);
        for i in 0..delivery.rounds() {
            let (timeout, ask) = self.round_plan(&delivery, i);
            let early = std::mem::take(&mut delivery.early);
            let mut requests = Vec::new();
            for (n, _) in (1..=count).zip(&slots).filter(|(_, s)| s.is_none() && ask) {
                let mut r = query.clone();
                let Ok(name) = qbf::fragment_qname(n, &original.qname) else {
                    return None;
                };
                r.questions[0].qname = name;
                requests.push(r.to_wire());
            }
            let step = |wire: &[u8]| {
                let Ok(m) = Message::parse(wire) else {
                    return Step::More;
                };
                let Some((n, qname)) = m.questions.first().and_then(|q| {
                    (q.qtype == original.qtype)
                        .then(|| qbf::parse_fragment_qname(&q.qname))
                        .flatten()
                }) else {
                    return Step::More;
                };
                if qname != original.qname || usize::from(n) > slots.len() {
                    return Step::More;
                }
                if slots[usize::from(n) - 1].is_none() {
                    slots[usize::from(n) - 1] = Some(m);
                }
                if slots.iter().all(Option::is_some) {
                    let all: Vec<Message> = slots.iter().flatten().cloned().collect();
                    return qbf::reassemble(&all).map_or(Step::Fail, Step::Done);
                }
                Step::More
            };
            match round(socket, &requests, &early, budget, timeout, info, step).await {
                Some(Step::Done(m)) => return Some(m),
                Some(_) => return None,
                None => {}
            }
        }
        None
    }

    /// Fetches the ARRF ranges missing from the answer `first`.
    #[expect(clippy::too_many_arguments, reason = "one exchange's state")]
    async fn arrf(
        &self,
        socket: &UdpSocket,
        query: &Message,
        key: &Key,
        first: Message,
        mut delivery: Delivery,
        budget: usize,
        info: &mut ExchangeInfo,
    ) -> Option<Message> {
        let started = self.reassembler().start(key.clone(), first, Instant::now());
        let mut progress = match started {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "ARRF first response refused");
                return None;
            }
        };
        let t = self.config.rrfrag_type;
        let edns = query.edns.clone()?;
        for i in 0..delivery.rounds() {
            let wanted = match progress {
                Progress::Complete(m) => return Some(m),
                Progress::Missing(w) => w,
            };
            let (timeout, ask) = self.round_plan(&delivery, i);
            let early = std::mem::take(&mut delivery.early);
            let wanted = if ask { wanted } else { Vec::new() };
            let requests: Vec<Vec<u8>> = arrf::plan_requests(&wanted, budget)
                .iter()
                .map(|group| {
                    arrf::fragment_request(
                        key.id,
                        &key.question,
                        group,
                        edns.clone(),
                        t,
                        self.config.option_code,
                    )
                    .to_wire_with(Some(t))
                })
                .collect();
            let step = |wire: &[u8]| {
                let Ok(m) = Message::parse_with(wire, Some(t)) else {
                    return Step::More;
                };
                let added = self.reassembler().add(key, &m, Instant::now());
                match added {
                    Ok(Progress::Complete(m)) => Step::Done(m),
                    Ok(Progress::Missing(_))
                    | Err(ArrfError::Duplicate(_) | ArrfError::NotForUs) => Step::More,
                    Err(e) => {
                        tracing::debug!(error = %e, "ARRF fragment refused");
                        Step::Fail
                    }
                }
            };
            match round(socket, &requests, &early, budget, timeout, info, step).await {
                Some(Step::Done(m)) => return Some(m),
                Some(_) => return None,
                None => {}
            }
            let missing = self.reassembler().missing(key);
            progress = match missing {
                Some(w) => Progress::Missing(w),
                None => return None,
            };
        }
        None
    }
}

/// Sends `requests` back to back, then feeds `early` datagrams (received already) and
/// responses to `step` until it finishes (`Some`) or `timeout` passes (`None`). Datagrams
/// longer than `budget` are dropped. A socket error (e.g. ICMP port unreachable) ends the
/// round with [`Step::Fail`]: TCP may still work.
async fn round(
    socket: &UdpSocket,
    requests: &[Vec<u8>],
    early: &[Vec<u8>],
    budget: usize,
    timeout: Duration,
    info: &mut ExchangeInfo,
    mut step: impl FnMut(&[u8]) -> Step,
) -> Option<Step> {
    for d in early.iter().filter(|d| d.len() <= budget) {
        match step(d) {
            Step::More => {}
            other => return Some(other),
        }
    }
    for r in requests {
        if socket.send(r).await.is_err() {
            return Some(Step::Fail);
        }
        info.bytes_sent += r.len();
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let mut buf = vec![0u8; budget + 1];
    loop {
        let n = match tokio::time::timeout_at(deadline, socket.recv(&mut buf)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => return Some(Step::Fail),
            Err(_) => return None,
        };
        info.bytes_received += n;
        if n > budget {
            continue;
        }
        match step(&buf[..n]) {
            Step::More => {}
            other => return Some(other),
        }
    }
}

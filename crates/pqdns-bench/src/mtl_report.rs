//! The MTL-mode report (`pqdns-bench mtl`), in two parts.
//!
//! - Series (core API, [`mtl::MtlSigner`]): per MTL algorithm and series size (leaves = signed
//!   RRsets), the bytes of condensed and full signatures, and the cost of verifying one RRset's
//!   signature with the ladder cached (a condensed signature: hashes only) and without it (a
//!   full signature: the ladder's SPHINCS+-128s signature plus the path).
//! - Zones: per algorithm, the time to sign the TLD-like delegation zone of Verisign's MTL-mode
//!   figures on all cores, the signed zone's size, and the bytes on the wire of two typical
//!   DNSSEC answers from it — an A answer for an apex host and a referral (NS, DS and its
//!   RRSIG, glue) — so SLH-DSA-MTL can be read beside SPHINCS+, ML-DSA, Falcon and ECDSA, and
//!   beside Verisign's published table.
//!
//! [`Options::quick`] runs in seconds (CI runs it as a unit test); [`Options::full`] is the
//! hand-run of `docs/bench/mtl.md` (SPHINCS+-128s zone signing takes minutes).

use std::time::Instant;

use pqdns_core::dnssec::keyfile::{KeyRole, ZoneKey};
use pqdns_core::dnssec::mtl::series::{SeriesFiles, SeriesStore, DEFAULT_CAPACITY};
use pqdns_core::dnssec::sign::{resign_zone, sign_zone, Denial, Incremental, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone, VerifyOptions};
use pqdns_core::dnssec::{mtl, Algorithm, Profile, Provider};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::Edns;
use pqdns_core::zonefile::{write_records, ZoneFileReader};
use pqdns_core::{time, Class, Name, RrType, Zone};
use pqdns_server::answer::{respond, Transport};
use pqdns_server::catalog::{Catalog, ServedZone};
use serde::Serialize;

use crate::genzone::delegations_zone;
use crate::proc_stat::self_cpu_time;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Options {
    /// Delegations of each generated zone signed (one zone per entry).
    pub delegations: Vec<usize>,
    /// Algorithms whose zones are signed.
    pub algorithms: Vec<Algorithm>,
    /// MTL algorithms whose series are measured.
    pub mtl_algorithms: Vec<Algorithm>,
    /// Series sizes (leaves) measured.
    pub leaf_counts: Vec<u32>,
    /// Condensed-signature verifications timed per series (the mean is reported).
    pub condensed_verifications: u32,
    /// Full-signature verifications timed per series (the mean is reported).
    pub full_verifications: u32,
}

impl Options {
    /// The hand-run of `docs/bench/mtl.md`: the 20- and 1500-delegation zones for ECDSA,
    /// ML-DSA-44, Falcon-512 and the MTL modes of both generations (ML-DSA-MTL, FL-DSA-MTL,
    /// SLH-DSA-MTL-SHA2 2025 and 2026), series of 10 to 1 000 000 leaves.
    pub fn full() -> Options {
        Options {
            delegations: vec![20, 1500],
            algorithms: vec![
                Algorithm::EcdsaP256Sha256,
                Algorithm::MlDsa44,
                Algorithm::Falcon512,
                Algorithm::MlDsaMtl44,
                Algorithm::FlDsaMtl512,
                Algorithm::MtlSlhDsaSha2_128s,
                Algorithm::SlhDsaMtl2026Sha2_128s,
            ],
            mtl_algorithms: vec![
                Algorithm::MtlSlhDsaSha2_128s,
                Algorithm::SlhDsaMtl2026Sha2_128s,
                Algorithm::MlDsaMtl44,
                Algorithm::FlDsaMtl512,
            ],
            leaf_counts: vec![10, 100, 1_000, 3_000, 10_000, 100_000, 1_000_000],
            condensed_verifications: 2_000,
            full_verifications: 20,
        }
    }

    /// Seconds: a 20-delegation zone for ECDSA, ML-DSA-44, SLH-DSA-MTL-SHA2-128s and
    /// ML-DSA-MTL, series of 10 to 1000 leaves, few timed verifications (numbers for shape,
    /// not for reading).
    pub fn quick() -> Options {
        Options {
            delegations: vec![20],
            algorithms: vec![
                Algorithm::EcdsaP256Sha256,
                Algorithm::MlDsa44,
                Algorithm::MtlSlhDsaSha2_128s,
                Algorithm::MlDsaMtl44,
            ],
            mtl_algorithms: vec![Algorithm::MtlSlhDsaSha2_128s, Algorithm::MlDsaMtl44],
            leaf_counts: vec![10, 100, 1_000],
            condensed_verifications: 50,
            full_verifications: 2,
        }
    }
}

/// The whole report (the JSON file).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// Threads used for zone signing.
    pub threads: usize,
    /// MTL series measurements.
    pub series: Vec<SeriesRow>,
    /// Signed-zone measurements, zone by zone.
    pub zones: Vec<Row>,
}

/// One MTL series: signature sizes and verification cost.
#[derive(Clone, Debug, Serialize)]
pub struct SeriesRow {
    /// Algorithm name.
    pub algorithm: String,
    /// Leaves (signed RRsets) in the series.
    pub leaves: u32,
    /// Rungs of the ladder (one per set bit of `leaves`).
    pub rungs: usize,
    /// Shortest condensed signature field over the leaves, bytes (RRSIG signature field).
    pub condensed_min_bytes: usize,
    /// Longest condensed signature field over the leaves, bytes.
    pub condensed_max_bytes: usize,
    /// Full signature field of the leaf with the longest path, bytes (condensed part, signed
    /// ladder, 4-byte length, SPHINCS+-128s signature).
    pub full_bytes: usize,
    /// Time to append all leaves (hashing), seconds.
    pub append_seconds: f64,
    /// Time to sign the ladder once (SPHINCS+-128s), seconds.
    pub ladder_sign_seconds: f64,
    /// Mean time to verify one condensed signature against a cached, verified ladder,
    /// microseconds.
    pub verify_condensed_us: f64,
    /// Mean time to verify one full signature (no ladder cached), microseconds.
    pub verify_full_us: f64,
}

/// The answers to one kind of query in a signed zone: pqdns-server's responses (its answer
/// engine, [`pqdns_server::answer::respond`]) to queries with DO and an EDNS payload of 1232
/// bytes, asked over a stream so that none is truncated: the bytes a UDP answer would need.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Answers {
    /// Queries asked.
    pub count: usize,
    /// Responses of at most 1232 bytes (what fits the DNS Flag Day 2020 UDP size).
    pub fitting_1232: usize,
    /// Mean response size, bytes.
    pub mean_bytes: f64,
    /// Largest response, bytes.
    pub max_bytes: usize,
}

impl Answers {
    fn of(sizes: &[usize]) -> Answers {
        Answers {
            count: sizes.len(),
            fitting_1232: sizes.iter().filter(|&&b| b <= 1232).count(),
            mean_bytes: sizes.iter().sum::<usize>() as f64 / sizes.len().max(1) as f64,
            max_bytes: sizes.iter().copied().max().unwrap_or(0),
        }
    }
}

/// One signed zone.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// Delegations in the zone.
    pub delegations: usize,
    /// Algorithm name.
    pub algorithm: String,
    /// RRSIGs in the signed zone.
    pub signatures: usize,
    /// RRSIGs carrying a full MTL signature (0 for other algorithms).
    pub full_signatures: usize,
    /// Zone signing wall time on all threads, seconds (key generation excluded).
    pub seconds: f64,
    /// Zone signing CPU time of all threads (`getrusage`), seconds.
    pub cpu_seconds: f64,
    /// Whole-zone verification (`dnssec::verify::verify_zone`: every signature, MTL ladders
    /// verified once) CPU time, seconds.
    pub verify_cpu_seconds: f64,
    /// Signed zone size as a master file, bytes.
    pub signed_zone_bytes: usize,
    /// Response to `ns1.<origin> A` (A + RRSIG, OPT), bytes.
    pub a_answer_bytes: usize,
    /// Response to `www.d7.<origin> A`: a referral (2 NS, DS + RRSIG, 2 glue A, OPT), bytes.
    pub referral_bytes: usize,
    /// Referrals: `www.dN.<origin> A` for every delegation N.
    pub referrals: Answers,
    /// DS answers: `dN.<origin> DS` for every delegation N.
    pub ds: Answers,
    /// NXDOMAIN: `nxN.<origin> A` for every delegation N (SOA + RRSIG and NSEC proofs).
    pub nxdomain: Answers,
    /// 2026 MTL only: the same NXDOMAIN queries from a validator that holds the zone's ladder
    /// and names it by its SigTag (EDNS option 65050), so the apex SOA's signature, stored
    /// full, comes condensed (draft-hdong-dnsop-ml-dsa-mtl-dnssec-sigtag-ext-00).
    pub nxdomain_ladder_held: Option<Answers>,
    /// MTL only: the referrals after a refresh that appended every RRset to the key's saved
    /// series (`mtl::series`; 2 × the zone's RRsets), as a server re-signing the zone serves
    /// them.
    pub refreshed_referrals: Option<Answers>,
}

/// Response bytes for each of `questions` from `catalog` (see [`Answers`]), asked by a
/// validator that holds the ladders `held` names (EDNS option 65050) when it is `Some`.
fn answer_bytes(
    catalog: &Catalog,
    questions: &[(Name, RrType)],
    held: Option<&mtl::SigTags>,
) -> Vec<usize> {
    let client: std::net::IpAddr = [127, 0, 0, 1].into();
    let mut out = Vec::new();
    let mut edns = Edns::dnssec_ok(1232);
    if let Some(tags) = held {
        edns.options.push((mtl::EDNS_SIGTAG, tags.to_bytes()));
    }
    questions
        .iter()
        .map(|(qname, qtype)| {
            let query = Message::query(
                0x1234,
                Question {
                    qname: qname.clone(),
                    qtype: *qtype,
                    qclass: Class::IN,
                },
                false,
                Some(edns.clone()),
            )
            .to_wire();
            let o = respond(catalog, &query, Transport::Tcp, client, 1232, &mut out, 0);
            assert!(!o.truncated && o.len > 0, "{qname} {qtype}: {o:?}");
            o.len
        })
        .collect()
}

/// Measures one MTL series of `leaves` leaves (150-byte messages, about an A RRset's signed
/// data) under a fresh key of `alg`.
///
/// # Panics
/// If the core MTL code fails on valid input (a bug, reported loudly in a benchmark).
pub fn series(alg: Algorithm, leaves: u32, opts: &Options) -> SeriesRow {
    let provider = Provider::default_provider();
    let key = provider
        .scheme(alg)
        .and_then(|s| s.generate())
        .expect("MTL key generation works");
    let mut signer = mtl::MtlSigner::new(&*key).expect("an MTL key");
    let message = |i: u32| [&i.to_be_bytes()[..], &[0x5a; 146]].concat();
    let start = Instant::now();
    for i in 0..leaves {
        signer.append(&message(i)).expect("append works");
    }
    let append_seconds = start.elapsed().as_secs_f64();
    let start = Instant::now();
    signer.sign_ladder().expect("ladder signing works");
    let ladder_sign_seconds = start.elapsed().as_secs_f64();
    // Condensed sizes depend only on the rung a leaf climbs to: a stride of samples plus the
    // last leaf (the lowest rung) covers every rung height that matters here.
    let stride = (leaves / 1000).max(1);
    let sizes: Vec<(usize, u32)> = (0..leaves)
        .step_by(stride as usize)
        .chain([leaves - 1])
        .map(|leaf| {
            (
                signer
                    .signature(u64::from(leaf), false)
                    .expect("leaf")
                    .len(),
                leaf,
            )
        })
        .collect();
    let (condensed_min_bytes, _) = *sizes.iter().min().expect("leaves > 0");
    let (condensed_max_bytes, longest) = *sizes.iter().max().expect("leaves > 0");
    let full = signer
        .signature(u64::from(longest), true)
        .expect("ladder signed");
    let condensed = signer.signature(u64::from(longest), false).expect("leaf");
    let msg = message(longest);
    let pk = key.public_key();
    let start = Instant::now();
    let mut verified = None;
    for _ in 0..opts.full_verifications.max(1) {
        verified = Some(mtl::verify_full(alg, pk, &msg, &full).expect("full signature verifies"));
    }
    let verify_full_us =
        start.elapsed().as_secs_f64() * 1e6 / f64::from(opts.full_verifications.max(1));
    let mut ladders = mtl::LadderCache::new(4);
    ladders.insert(verified.expect("verified once"));
    let start = Instant::now();
    for _ in 0..opts.condensed_verifications.max(1) {
        let fetched = mtl::verify_signature(alg, pk, &msg, &condensed, &ladders)
            .expect("condensed signature verifies against the cached ladder");
        assert!(fetched.is_none(), "a condensed signature carries no ladder");
    }
    let verify_condensed_us =
        start.elapsed().as_secs_f64() * 1e6 / f64::from(opts.condensed_verifications.max(1));
    SeriesRow {
        algorithm: alg.name().into(),
        leaves,
        rungs: signer.ladder().rungs.len(),
        condensed_min_bytes,
        condensed_max_bytes,
        full_bytes: full.len(),
        append_seconds,
        ladder_sign_seconds,
        verify_condensed_us,
        verify_full_us,
    }
}

/// Runs the report: the MTL series first (seconds), then, for each zone of
/// `opts.delegations` delegations and each algorithm, signs it with one CSK (NSEC, 14-day
/// validity) on all cores, verifies it whole, and measures pqdns-server's answers from it;
/// `progress` sees the report after each step, so a long run leaves its results behind as it
/// goes.
///
/// # Panics
/// If signing, verification or answering fails (a bug, reported loudly in a benchmark).
pub fn run(opts: &Options, progress: &dyn Fn(&Report)) -> Report {
    let mut report = Report {
        threads: rayon::current_num_threads(),
        ..Report::default()
    };
    for &alg in &opts.mtl_algorithms {
        for &leaves in &opts.leaf_counts {
            let row = series(alg, leaves, opts);
            eprintln!("{row:?}");
            report.series.push(row);
        }
        progress(&report);
    }
    for &delegations in &opts.delegations {
        for &alg in &opts.algorithms {
            let row = zone_row(delegations, alg);
            eprintln!("{row:?}");
            report.zones.push(row);
            progress(&report);
        }
    }
    report
}

/// Signs, verifies and answers from the zone of `delegations` delegations with `alg`.
fn zone_row(delegations: usize, alg: Algorithm) -> Row {
    let origin: Name = "tld.".parse().expect("valid");
    let text = delegations_zone("tld.", delegations, 0);
    let records = ZoneFileReader::new(None, None)
        .read_str(&text, "generated")
        .expect("generated zone parses");
    let unsigned = Zone::from_records(origin.clone(), records).expect("generated zone is valid");
    let mut signed = unsigned.clone();
    let profile = Profile::default_profile();
    let provider = Provider::default_provider();
    let now = time::now();
    let policy = SigningPolicy {
        inception: now - 3600,
        expiration: now + 14 * 86_400,
        denial: Denial::Nsec,
        published_dnskeys: None,
    };
    let key = ZoneKey::generate(&origin, alg, KeyRole::Csk, &profile, &provider, 3600)
        .expect("key generation works");
    let (cpu, start) = (self_cpu_time(), Instant::now());
    let stats = sign_zone(&mut signed, std::slice::from_ref(&key), &policy, &|_, _| {})
        .expect("signing works");
    let seconds = start.elapsed().as_secs_f64();
    let cpu_seconds = (self_cpu_time() - cpu).as_secs_f64();
    let cpu = self_cpu_time();
    let verified = verify_zone(&signed, &profile, &provider, &VerifyOptions::at(now));
    let verify_cpu_seconds = (self_cpu_time() - cpu).as_secs_f64();
    assert!(verified.is_ok(), "{alg}: {:?}", verified.failures.first());
    let all = signed.records();
    let full_signatures = match mtl::MtlParams::of(alg) {
        Some(p) => all
            .iter()
            .filter(|r| r.rtype == RrType::RRSIG)
            .filter_map(|r| pqdns_core::dnssec::rrsig::Rrsig::parse(&r.rdata))
            .filter(|sig| {
                mtl::MtlSignature::parse_as(p.format, sig.signature).is_ok_and(|m| m.is_full())
            })
            .count(),
        None => 0,
    };
    let mut out = String::new();
    write_records(&mut out, &all).expect("string write");
    let catalog = Catalog::new([ServedZone::new(signed)]).expect("one zone");
    let name = |text: &str| Name::parse(text, Some(&origin)).expect("valid");
    let questions = |label: &dyn Fn(usize) -> String, rtype: RrType| {
        (0..delegations)
            .map(|i| (name(&label(i)), rtype))
            .collect::<Vec<_>>()
    };
    let ask = |label: &dyn Fn(usize) -> String, rtype: RrType| {
        answer_bytes(&catalog, &questions(label, rtype), None)
    };
    let one = |owner: &str, rtype| answer_bytes(&catalog, &[(name(owner), rtype)], None)[0];
    let held = mtl::SigTags::new(
        catalog
            .zones()
            .flat_map(|z| &z.mtl_ladders)
            .filter(|l| l.format == mtl::Format::V2026)
            .map(|l| l.tag),
    );
    let nxdomain_ladder_held = (!held.tags().is_empty()).then(|| {
        Answers::of(&answer_bytes(
            &catalog,
            &questions(&|i| format!("nx{i}"), RrType::A),
            Some(&held),
        ))
    });
    let refreshed_referrals = mtl::MtlParams::of(alg).map(|_| {
        let refreshed = refreshed(&unsigned, &key, &policy);
        let catalog = Catalog::new([ServedZone::new(refreshed)]).expect("one zone");
        Answers::of(&answer_bytes(
            &catalog,
            &questions(&|i| format!("www.d{i}"), RrType::A),
            None,
        ))
    });
    Row {
        delegations,
        algorithm: alg.name().into(),
        signatures: stats.signatures,
        full_signatures,
        seconds,
        cpu_seconds,
        verify_cpu_seconds,
        signed_zone_bytes: out.len(),
        a_answer_bytes: one("ns1", RrType::A),
        referral_bytes: one("www.d7", RrType::A),
        referrals: Answers::of(&ask(&|i| format!("www.d{i}"), RrType::A)),
        ds: Answers::of(&ask(&|i| format!("d{i}"), RrType::DS)),
        nxdomain: Answers::of(&ask(&|i| format!("nx{i}"), RrType::A)),
        nxdomain_ladder_held,
        refreshed_referrals,
    }
}

/// `unsigned` signed twice with MTL key `key` through a series store, the second time with
/// every signature due (a refresh): every RRset is appended to the saved series.
fn refreshed(unsigned: &Zone, key: &ZoneKey, policy: &SigningPolicy) -> Zone {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = SeriesFiles::open(dir.path(), "tld", DEFAULT_CAPACITY).expect("series files");
    let incremental = |previous| Incremental {
        previous,
        keep_expiring_after: u64::MAX,
        mtl_series: Some(&store as &dyn SeriesStore),
        ..Incremental::default()
    };
    let keys = std::slice::from_ref(key);
    let mut first = unsigned.clone();
    resign_zone(&mut first, keys, policy, &incremental(None), &|_, _| {}).expect("signing works");
    let mut again = unsigned.clone();
    resign_zone(
        &mut again,
        keys,
        policy,
        &incremental(Some(&first)),
        &|_, _| {},
    )
    .expect("re-signing works");
    again
}

/// Verisign's published figures for the same zone shape (IETF 122 slides, 4-core Xeon, ldns
/// with KSK + ZSK): (pqdns algorithm name, seconds to sign, signed zone MB). Their
/// "SLH-DSA-SHA2-128" is liboqs' SPHINCS+-SHA2-128s-simple.
pub const VERISIGN: &[(&str, f64, f64)] = &[
    ("ECDSAP256SHA256", 0.4, 2.06),
    ("ML-DSA-44", 0.7, 11.13),
    ("Falcon-512", 1.5, 4.36),
    ("SPHINCS+-SHA2-128s-simple", 534.5, 32.15),
    ("SPHINCS+-SHAKE-128s-simple", 1058.4, 32.22),
    ("SLH-DSA-MTL-SHA2-128s", 0.8, 2.96),
    ("SLH-DSA-MTL-SHAKE-128s", 1.2, 3.04),
];

/// Draws `STEM-signatures.{svg,png}` (condensed and full signature bytes over series size)
/// and, for the largest zone, `STEM-size` (signed zone size per algorithm, pqdns beside
/// Verisign), `STEM-answers` (mean referral bytes) and `STEM-fit` (share of referrals and DS
/// answers within 1232 bytes), each `.svg` and `.png`.
///
/// # Errors
/// Drawing or file errors.
pub fn chart(stem: &std::path::Path, report: &Report) -> Result<(), Box<dyn std::error::Error>> {
    let name = stem
        .file_name()
        .map_or("mtl".into(), |n| n.to_string_lossy());
    let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for r in &report.series {
        for (kind, bytes) in [
            ("condensed (max)", r.condensed_max_bytes),
            ("full", r.full_bytes),
        ] {
            let label = format!("{} {kind}", r.algorithm);
            let point = (f64::from(r.leaves), bytes as f64);
            match lines.iter_mut().find(|(l, _)| *l == label) {
                Some((_, points)) => points.push(point),
                None => lines.push((label, vec![point])),
            }
        }
    }
    if !lines.is_empty() {
        crate::charts::lines(
            &stem.with_file_name(format!("{name}-signatures")),
            "MTL signature field size by series size",
            "leaves (signed RRsets) in the series",
            "bytes",
            &lines,
        )?;
    }
    // Zone charts: the largest zone measured.
    let largest = report.zones.iter().map(|r| r.delegations).max();
    let rows: Vec<&Row> = report
        .zones
        .iter()
        .filter(|r| Some(r.delegations) == largest)
        .collect();
    let mut items = Vec::new();
    for r in &rows {
        items.push((
            format!("pqdns {}", r.algorithm),
            r.signed_zone_bytes as f64 / 1e6,
        ));
        if let Some((_, _, mb)) = VERISIGN.iter().find(|(a, _, _)| *a == r.algorithm) {
            items.push((format!("Verisign {}", r.algorithm), *mb));
        }
    }
    let delegations = largest.unwrap_or(0);
    crate::charts::bars(
        &stem.with_file_name(format!("{name}-size")),
        &format!("Signed {delegations}-delegation zone"),
        "MB",
        &items,
    )?;
    let items: Vec<(String, f64)> = rows
        .iter()
        .map(|r| (r.algorithm.clone(), r.referrals.mean_bytes))
        .collect();
    crate::charts::bars(
        &stem.with_file_name(format!("{name}-answers")),
        &format!("Referral from the {delegations}-delegation zone, DO (mean)"),
        "bytes",
        &items,
    )?;
    let items: Vec<(String, f64)> = rows
        .iter()
        .map(|r| {
            let fit = r.referrals.fitting_1232 + r.ds.fitting_1232;
            let all = (r.referrals.count + r.ds.count).max(1);
            (r.algorithm.clone(), 100.0 * fit as f64 / all as f64)
        })
        .collect();
    crate::charts::bars(
        &stem.with_file_name(format!("{name}-fit")),
        &format!("Referrals and DS answers <= 1232 bytes ({delegations} delegations)"),
        "%",
        &items,
    )
}

/// The zone rows as CSV (`PREFIX.csv`): sizes, times, and per kind of answer (referral, DS,
/// NXDOMAIN, MTL referral after a refresh) the count, the mean and largest bytes and how many
/// fit 1232 bytes.
pub fn to_csv(report: &Report) -> String {
    let mut out = String::from(
        "delegations,algorithm,signatures,full_signatures,seconds,cpu_seconds,verify_cpu_seconds,threads,signed_zone_bytes,a_answer_bytes,referral_bytes",
    );
    for kind in [
        "referral",
        "ds",
        "nxdomain",
        "refreshed_referral",
        "nxdomain_ladder_held",
    ] {
        out.push_str(&format!(
            ",{kind}_count,{kind}_mean_bytes,{kind}_max_bytes,{kind}_fitting_1232"
        ));
    }
    out.push('\n');
    for r in &report.zones {
        out.push_str(&format!(
            "{},{},{},{},{:.3},{:.3},{:.3},{},{},{},{}",
            r.delegations,
            r.algorithm,
            r.signatures,
            r.full_signatures,
            r.seconds,
            r.cpu_seconds,
            r.verify_cpu_seconds,
            report.threads,
            r.signed_zone_bytes,
            r.a_answer_bytes,
            r.referral_bytes
        ));
        for a in [Some(&r.referrals), Some(&r.ds), Some(&r.nxdomain)]
            .into_iter()
            .chain([
                r.refreshed_referrals.as_ref(),
                r.nxdomain_ladder_held.as_ref(),
            ])
        {
            match a {
                Some(a) => out.push_str(&format!(
                    ",{},{:.1},{},{}",
                    a.count, a.mean_bytes, a.max_bytes, a.fitting_1232
                )),
                None => out.push_str(",,,,"),
            }
        }
        out.push('\n');
    }
    out
}

/// The series rows as CSV (`PREFIX-series.csv`).
pub fn series_csv(report: &Report) -> String {
    let mut out = String::from(
        "algorithm,leaves,rungs,condensed_min_bytes,condensed_max_bytes,full_bytes,append_seconds,ladder_sign_seconds,verify_condensed_us,verify_full_us\n",
    );
    for r in &report.series {
        out.push_str(&format!(
            "{},{},{},{},{},{},{:.4},{:.4},{:.2},{:.1}\n",
            r.algorithm,
            r.leaves,
            r.rungs,
            r.condensed_min_bytes,
            r.condensed_max_bytes,
            r.full_bytes,
            r.append_seconds,
            r.ladder_sign_seconds,
            r.verify_condensed_us,
            r.verify_full_us
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The quick run (what CI runs): each MTL algorithm signs the zone with exactly two full
    /// signatures (SOA and DNSKEY of the one CSK series) and as many signatures as ML-DSA-44;
    /// its condensed answers are far smaller than ML-DSA-44's and its zone smaller; its
    /// referrals fit 1232 bytes (ML-DSA-44's do not), its NXDOMAIN answers do not; condensed signatures
    /// grow by 16 bytes per tree level (41 + 16·height), full ones add the signed ladder and
    /// the 7856-byte SPHINCS+-128s signature; every measured signature verified.
    #[test]
    fn quick_run_shapes() {
        let report = run(&Options::quick(), &|_| {});
        let by = |name: &str| report.zones.iter().find(|r| r.algorithm == name).unwrap();
        let ml = by("ML-DSA-44");
        for mtl in [by("SLH-DSA-MTL-SHA2-128s"), by("ML-DSA-MTL-44")] {
            assert_eq!(mtl.full_signatures, 2, "{report:?}");
            assert_eq!(mtl.signatures, ml.signatures);
            assert!(mtl.a_answer_bytes + 2000 < ml.a_answer_bytes, "{report:?}");
            assert!(mtl.referral_bytes > mtl.a_answer_bytes, "{report:?}");
            assert!(mtl.signed_zone_bytes < ml.signed_zone_bytes, "{report:?}");
            // Condensed referrals fit 1232 bytes; negative answers carry the apex SOA's full
            // signature and do not, unless (2026) the validator names the ladder it holds.
            assert_eq!((mtl.referrals.count, mtl.referrals.fitting_1232), (20, 20));
            assert_eq!(mtl.nxdomain.fitting_1232, 0, "{report:?}");
            let held = mtl.nxdomain_ladder_held.as_ref();
            if mtl.algorithm == "ML-DSA-MTL-44" {
                let held = held.expect("a 2026 ladder");
                assert_eq!((held.count, held.fitting_1232), (20, 20), "{report:?}");
                assert!(held.max_bytes * 2 < mtl.nxdomain.mean_bytes as usize);
            } else {
                assert!(held.is_none(), "2025 ladders have no SigTag");
            }
            // After a refresh the series holds 96 leaves instead of 48: the oldest referral
            // paths of the new leaves are one level (16 bytes) longer.
            let refreshed = mtl.refreshed_referrals.as_ref().unwrap();
            assert_eq!(
                refreshed.max_bytes,
                mtl.referrals.max_bytes + 16,
                "{report:?}"
            );
        }
        let ecdsa = by("ECDSAP256SHA256");
        assert_eq!(
            ecdsa.referrals.fitting_1232 + ecdsa.nxdomain.fitting_1232,
            40
        );
        assert_eq!(ml.referrals.fitting_1232 + ml.ds.fitting_1232, 0);
        assert_eq!(report.series.len(), 6);
        for r in &report.series {
            let p = mtl::MtlParams::of(Algorithm::from_name(&r.algorithm).unwrap()).unwrap();
            // 1000 = 512 + 256 + 128 + 64 + 32 + 8: six rungs, the highest of height 9.
            let height = 31 - r.leaves.leading_zeros() as usize;
            assert_eq!(r.rungs, r.leaves.count_ones() as usize, "{r:?}");
            // 41 + 16·height (2025) or 77 + 16·height (2026).
            assert_eq!(
                r.condensed_max_bytes,
                p.format.condensed_len(height),
                "{r:?}"
            );
            assert!(r.condensed_min_bytes <= r.condensed_max_bytes, "{r:?}");
            // Then the ladder, a u32 length and the fixed-size ladder signature.
            assert_eq!(
                r.full_bytes,
                r.condensed_max_bytes
                    + p.format.ladder_len(r.rungs)
                    + 4
                    + p.underlying.max_signature_len(),
                "{r:?}"
            );
        }
        assert!(to_csv(&report).lines().count() == 5);
        assert!(series_csv(&report).lines().count() == 7);
    }
}

//! `pqdns-zone`: generate keys, sign zones, verify signed zones, print DS records and the
//! algorithm table — for classical and post-quantum DNSSEC.

#![forbid(unsafe_code)]

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use pqdns_core::atomic_file::{write_atomic, AtomicFile, FileMode};
use pqdns_core::config::LoadedConfig;
use pqdns_core::dnssec::cds;
use pqdns_core::dnssec::dnskey::{ds_record, DigestType, DnskeyRef};
use pqdns_core::dnssec::existing::{self, ExistingDnssec};
use pqdns_core::dnssec::keyfile::{KeyFileFormat, KeyRole, ZoneKey};
use pqdns_core::dnssec::mtl::series::{SeriesFiles, SeriesStore};
use pqdns_core::dnssec::nsec3::Nsec3Params;
use pqdns_core::dnssec::rollover::{KeyState, Next};
use pqdns_core::dnssec::sign::{resign_zone, Denial, Incremental, SigningPolicy};
use pqdns_core::dnssec::verify::{verify_zone_with, VerifyOptions};
use pqdns_core::dnssec::{Algorithm, Profile, Provider};
use pqdns_core::tsig_keyfile;
use pqdns_core::wire::tsig;
use pqdns_core::zonefile::{parse_ttl, ZoneFileReader};
use pqdns_core::zonemd::{self, ZonemdHash, ZonemdStatus};
use pqdns_core::{outln, stdout, time, Name, RrType, Zone};

/// Sign and check DNS zones with classical and post-quantum DNSSEC algorithms.
///
/// Algorithm numbers depend on the profile (`pqdns-zone algorithms` shows them): `default`
/// (IANA 18 = ML-DSA-44, CoreDNS numbers for the rest), `oqs-bind` or `verisign`.
#[derive(Parser)]
#[command(name = "pqdns-zone", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate a key pair and write BIND-style key files, K{zone}+{alg}+{tag}.key and .private
    /// (private file mode 0600).
    Keygen(KeygenArgs),
    /// Sign a zone: a master file with --origin and keys, or a TOML zone description.
    Sign(SignArgs),
    /// Verify a signed zone: every RRSIG, key tags, validity windows and (unless
    /// --signatures-only) signature completeness and the NSEC/NSEC3 chain. Exits 1 on any
    /// failure, like ldns-verify-zone.
    Verify(VerifyArgs),
    /// Print DS records for the SEP keys (KSKs) in a .key file or zone file.
    Ds(DsArgs),
    /// Show a zone's rollovers: each algorithm's and key's phase, the DS set asked of the
    /// parent, and the next step with its date. An algorithm rollover starts when `[signing]
    /// algorithms` of a signed zone changes, a key rollover when a key reaches
    /// `ksk_lifetime`/`zsk_lifetime`; pqdns-server (or `pqdns-zone sign`) takes the steps.
    Rollover(RolloverArgs),
    /// Print the algorithm table: name, number per profile, key and signature sizes.
    Algorithms,
    /// Generate a TSIG key (RFC 8945) and print it, or write it with --output (mode 0600), in
    /// the format BIND's `tsig-keygen` writes: `key "NAME" { algorithm …; secret "…"; };`.
    /// The secret comes from the OS random generator and is as long as the hash's output.
    TsigKeygen(TsigKeygenArgs),
}

#[derive(Args)]
struct TsigKeygenArgs {
    /// Key name, e.g. transfer-key or xfr.example.com.
    name: String,
    /// Algorithm: hmac-sha256 or hmac-sha512.
    #[arg(long, short, default_value = "hmac-sha256")]
    algorithm: String,
    /// Write the key to this file (atomically, mode 0600) instead of standard output.
    #[arg(long, short)]
    output: Option<PathBuf>,
}

#[derive(Args)]
struct CryptoArgs {
    /// Algorithm-number profile: a built-in one (default, oqs-bind, verisign-2025 — alias
    /// verisign —, verisign-2026), custom mappings `[base=NAME,]NUMBER=ALGORITHM,…` laid over
    /// a built-in profile (default `default`), or a file of such entries, one or more a line,
    /// `#` comments.
    #[arg(long, default_value = "default")]
    profile: String,
    /// Crypto provider: default (aws-lc-rs + liboqs) or liboqs (liboqs for every PQC algorithm).
    #[arg(long, default_value = "default")]
    provider: String,
}

impl CryptoArgs {
    fn resolve(&self) -> Result<(Profile, Provider), String> {
        let provider = Provider::named(&self.provider).ok_or_else(|| {
            format!(
                "unknown provider {:?}: use default or liboqs",
                self.provider
            )
        })?;
        let spec = &self.profile;
        let profile = if let Ok(built_in) = Profile::named(spec) {
            built_in
        } else if spec.contains('=') {
            Profile::from_mappings("custom", spec, &provider).map_err(|e| e.to_string())?
        } else if std::path::Path::new(spec).is_file() {
            let text =
                std::fs::read_to_string(spec).map_err(|e| format!("profile file {spec}: {e}"))?;
            Profile::from_mappings(spec, &text, &provider)
                .map_err(|e| format!("profile file {spec}: {e}"))?
        } else {
            Profile::named(spec).map_err(|e| e.to_string())?
        };
        Ok((profile, provider))
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Role {
    /// Key-signing key (flags 257): signs the DNSKEY RRset.
    Ksk,
    /// Zone-signing key (flags 256): signs everything else.
    Zsk,
    /// Combined signing key (flags 257): signs everything.
    Csk,
}

#[derive(Clone, Copy, ValueEnum)]
enum KeyFormat {
    /// BIND 9 (`Private-key-format: v1.3`, `Created:`, `Publish:`, `Activate:`; post-quantum
    /// keys also carry `PublicKey:` as OQS-BIND requires).
    Bind,
    /// ldns (`ldns-keygen`: `Private-key-format: v1.2`, no TTL in the .key file; post-quantum
    /// keys in one `Key:` field as Verisign's ldns writes it, ML-DSA expanded; not for MTL).
    Ldns,
}

#[derive(Args)]
struct KeygenArgs {
    /// Zone apex the key is for, e.g. example.com.
    #[arg(long)]
    zone: String,
    /// Algorithm name, e.g. ECDSAP256SHA256, ED25519, ML-DSA-44, Falcon-512 (see `algorithms`).
    #[arg(long, short)]
    algorithm: String,
    /// Key role.
    #[arg(long, value_enum, default_value = "csk")]
    role: Role,
    /// Directory to write the key files into.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// TTL of the DNSKEY record, seconds.
    #[arg(long, default_value_t = 3600)]
    ttl: u32,
    /// Key file conventions to write; both are read everywhere.
    #[arg(long, value_enum, default_value = "bind")]
    format: KeyFormat,
    #[command(flatten)]
    crypto: CryptoArgs,
}

#[derive(Args)]
struct ReadArgs {
    /// Directory `$INCLUDE` may read from. Default: the zone file's directory; includes
    /// outside it are refused.
    #[arg(long, value_name = "DIR")]
    include_dir: Option<PathBuf>,
}

impl ReadArgs {
    fn reader(&self, origin: Option<Name>, default_ttl: Option<u32>) -> ZoneFileReader {
        let reader = ZoneFileReader::new(origin, default_ttl);
        match &self.include_dir {
            Some(dir) => reader.with_include_dir(dir),
            None => reader,
        }
    }
}

#[derive(Args)]
struct SignArgs {
    /// A master file (with --origin and keys) or a TOML zone description (*.toml), whose
    /// signing table supplies algorithms, keys and policy (missing keys are generated).
    input: PathBuf,
    /// Zone apex, for a master file. Default: the owner of the first SOA.
    #[arg(long)]
    origin: Option<String>,
    /// Key file(s) (.key or .private path) to sign with, for a master file; several may follow
    /// one flag (`-k keys/K*.key`).
    #[arg(long = "key", short, num_args = 1..)]
    keys: Vec<PathBuf>,
    /// Use NSEC3 (RFC 5155) instead of NSEC, for a master file.
    #[arg(long)]
    nsec3: bool,
    /// NSEC3 extra iterations. RFC 9276 §3.1 says 0; more is warned about, and more than 150
    /// is refused (validators treat such zones as insecure, RFC 9276 §3.2).
    #[arg(long, default_value_t = 0)]
    iterations: u16,
    /// NSEC3 salt in hex, or - for none (RFC 9276 recommends none).
    #[arg(long, default_value = "-")]
    salt: String,
    /// Signature validity from now (seconds or units: 14d, 12h).
    #[arg(long, default_value = "14d")]
    validity: String,
    /// Inception this far before now, for clock skew.
    #[arg(long, default_value = "1h")]
    inception_offset: String,
    /// Output file; default: the zone file's name with `.signed` appended (for a TOML
    /// description, its `file`, or `<zone>.zone.signed` beside it for inline records). Written
    /// to a temporary file and renamed, and only if the signed zone passes `verify`.
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// Keep DNSKEYs found in the input that are not signing keys (published without signing,
    /// e.g. pre-published for a rollover; their algorithms must be among the signing keys').
    /// Default: remove them, and every old RRSIG/NSEC/NSEC3, logging what was removed.
    #[arg(long)]
    keep_dnskeys: bool,
    /// Put a ZONEMD record (RFC 8976, SIMPLE scheme) at the apex with this hash algorithm,
    /// computed after the rest of the zone is signed, then signed itself. Also `[signing]
    /// zonemd = true` (SHA-384) in a TOML description. A ZONEMD already at the input's apex is
    /// recomputed with its algorithms.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "sha384")]
    zonemd: Option<ZonemdArg>,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    crypto: CryptoArgs,
}

/// A ZONEMD hash algorithm (RFC 8976 §2.2.3).
#[derive(Clone, Copy, ValueEnum)]
enum ZonemdArg {
    /// SHA-384 (1).
    Sha384,
    /// SHA-512 (2).
    Sha512,
}

impl ZonemdArg {
    fn hash(self) -> ZonemdHash {
        match self {
            ZonemdArg::Sha384 => ZonemdHash::Sha384,
            ZonemdArg::Sha512 => ZonemdHash::Sha512,
        }
    }
}

#[derive(Args)]
struct VerifyArgs {
    /// Signed zone in master-file format (or partial data such as `dig +dnssec` output).
    file: PathBuf,
    /// Zone apex. Default: the owner of the first SOA (or the root with --signatures-only).
    #[arg(long)]
    origin: Option<String>,
    /// Evaluate validity windows at this time: UNIX seconds or YYYYMMDDHHMMSS. Default: now.
    #[arg(long)]
    at: Option<String>,
    /// Only check the signatures present (no completeness, no NSEC/NSEC3 chain).
    #[arg(long)]
    signatures_only: bool,
    /// A .key file (or zone file) with DNSKEYs that sign the zone without being published, as
    /// in the first step of an algorithm rollover; their signatures are checked too.
    /// Repeatable.
    #[arg(long = "unpublished-key", value_name = "FILE")]
    unpublished_keys: Vec<PathBuf>,
    #[command(flatten)]
    read: ReadArgs,
    #[command(flatten)]
    crypto: CryptoArgs,
}

#[derive(Args)]
struct RolloverArgs {
    /// The zone description (TOML).
    zone: PathBuf,
    /// Record that the parent's DS RRset now equals the DS set the zone asks for (its `.ds`
    /// file and CDS records), so that the rollover can go on; then reload the server.
    #[arg(long)]
    ds_published: bool,
    /// The time to show the state at: UNIX seconds or YYYYMMDDHHMMSS. Default: now.
    #[arg(long)]
    at: Option<String>,
}

#[derive(Args)]
struct DsArgs {
    /// A .key file or a zone file holding DNSKEY records.
    file: PathBuf,
    /// Digest type.
    #[arg(long, value_enum, default_value = "sha256")]
    digest: Digest,
}

#[derive(Clone, Copy, ValueEnum)]
enum Digest {
    /// SHA-256 (digest type 2, RFC 4509).
    Sha256,
    /// SHA-384 (digest type 4, RFC 6605).
    Sha384,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Keygen(a) => keygen(&a),
        Command::Sign(a) => sign(&a),
        Command::Verify(a) => verify(&a),
        Command::Ds(a) => ds(&a),
        Command::Rollover(a) => rollover(&a),
        Command::Algorithms => {
            algorithms();
            Ok(ExitCode::SUCCESS)
        }
        Command::TsigKeygen(a) => tsig_keygen(&a),
    };
    // A reader that closed the pipe (`| head`) is not a failure; a full disk under `> file` is.
    let result = result.and_then(|code| stdout::status().map(|()| code).map_err(|e| e.to_string()));
    result.unwrap_or_else(|e| {
        eprintln!("pqdns-zone: {e}");
        ExitCode::from(2)
    })
}

fn parse_name(text: &str) -> Result<Name, String> {
    Name::parse(text, Some(&Name::root())).map_err(|e| format!("bad name {text:?}: {e}"))
}

fn parse_algorithm(text: &str) -> Result<Algorithm, String> {
    let alg = Algorithm::from_name(text)
        .ok_or_else(|| format!("unknown algorithm {text:?}; `pqdns-zone algorithms` lists them"))?;
    match alg.unavailable_reason() {
        Some(why) => Err(format!("{alg} is unavailable: {why}")),
        None => Ok(alg),
    }
}

fn keygen(a: &KeygenArgs) -> Result<ExitCode, String> {
    let (profile, provider) = a.crypto.resolve()?;
    let zone = parse_name(&a.zone)?;
    let alg = parse_algorithm(&a.algorithm)?;
    let role = match a.role {
        Role::Ksk => KeyRole::Ksk,
        Role::Zsk => KeyRole::Zsk,
        Role::Csk => KeyRole::Csk,
    };
    let key = ZoneKey::generate(&zone, alg, role, &profile, &provider, a.ttl)
        .map_err(|e| e.to_string())?;
    let format = match a.format {
        KeyFormat::Bind => KeyFileFormat::Bind,
        KeyFormat::Ldns => KeyFileFormat::Ldns,
    };
    let (key_path, private_path) = key
        .write_files_as(&a.dir, format)
        .map_err(|e| e.to_string())?;
    tracing::info!(key = %key_path.display(), private = %private_path.display(), "wrote key files");
    outln!("{}", key.file_stem());
    Ok(ExitCode::SUCCESS)
}

fn tsig_keygen(a: &TsigKeygenArgs) -> Result<ExitCode, String> {
    let name = parse_name(&a.name)?;
    let algorithm = tsig::Algorithm::from_text(&a.algorithm)
        .ok_or_else(|| format!("unknown TSIG algorithm {:?}", a.algorithm))?;
    let key = tsig::Key::generate(&name, algorithm).map_err(|e| e.to_string())?;
    let text = tsig_keyfile::format(&key);
    match &a.output {
        Some(path) => {
            write_atomic(path, text.as_bytes(), FileMode::Private)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            tracing::info!(file = %path.display(), key = %key.name(), "wrote TSIG key");
        }
        None => outln!("{}", text.trim_end()),
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads a master file as a zone: with `checked`, every zone rule is enforced record by record
/// (errors carry file and line); without, records are only grouped (partial data such as
/// `dig` output). The origin defaults to the owner of the first SOA (the root if unchecked).
fn read_master(
    path: &Path,
    origin: Option<&str>,
    read: &ReadArgs,
    checked: bool,
) -> Result<Zone, String> {
    let origin = origin.map(parse_name).transpose()?;
    if checked {
        return read
            .reader(origin, None)
            .read_zone(path)
            .map_err(|e| e.to_string());
    }
    let origin = origin.unwrap_or_else(Name::root);
    let mut zone = Zone::new(origin.clone());
    for r in read
        .reader(Some(origin), None)
        .read_file(path)
        .map_err(|e| e.to_string())?
    {
        zone.insert(r)
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(zone)
}

/// A progress bar on a terminal for zones big enough to wait for.
fn progress_bar(total_hint: usize) -> Option<indicatif::ProgressBar> {
    (std::io::stderr().is_terminal() && total_hint > 1000).then(|| {
        let bar = indicatif::ProgressBar::new(total_hint as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "signing {bar:40} {pos}/{len} RRsets ({per_sec}, eta {eta})",
            )
            .expect("valid template"),
        );
        bar
    })
}

/// What `sign` needs, from a TOML description or from the command line.
struct SignJob {
    zone: Zone,
    keys: Vec<ZoneKey>,
    policy: SigningPolicy,
    /// Seconds new expirations may be moved earlier (`[signing] jitter`; 0 for a master file).
    jitter: u64,
    existing: ExistingDnssec,
    profile: Profile,
    provider: Provider,
    output: PathBuf,
    /// The series files of MTL keys, from a TOML description's state directory (held, locked,
    /// while signing): the signing appends to the keys' series. `None` for a master file.
    mtl_series: Option<SeriesFiles>,
    /// ZONEMD hash algorithms asked for (`--zonemd`, `[signing] zonemd`); empty: none.
    zonemd: Vec<ZonemdHash>,
}

fn sign_job_from_toml(a: &SignArgs) -> Result<SignJob, String> {
    let cfg = LoadedConfig::read(&a.input).map_err(|e| e.to_string())?;
    let signing = cfg
        .signing()
        .ok_or_else(|| format!("{}: no [signing] table", a.input.display()))?;
    let mut zone = cfg.read_zone().map_err(|e| e.to_string())?;
    let now = time::now();
    let rollover = cfg
        .rollover_keys(signing, &zone, now)
        .map_err(|e| e.to_string())?;
    for path in &rollover.written {
        tracing::info!(file = %path.display(), "generated key file");
    }
    for step in &rollover.steps {
        tracing::info!(zone = %zone.origin, "rollover: {step}");
    }
    for path in &rollover.retired {
        tracing::info!(file = %path.display(), "retired key file moved");
    }
    let keys = rollover.signing;
    let mtl_series = cfg.mtl_series(signing, &keys).map_err(|e| e.to_string())?;
    let mut policy = cfg.policy(signing, now).map_err(|e| e.to_string())?;
    policy.published_dnskeys = Some(rollover.published);
    let jitter = cfg.jitter(signing).map_err(|e| e.to_string())?;
    // Signed offline, the zone has no served serial to move past: the policy applies to the
    // file's serial alone.
    let serial = signing.serial.next(zone.soa_serial(), None, now);
    zone.set_soa_serial(serial);
    for record in cds::records(&rollover.ds, signing.cds) {
        zone.insert(record)
            .map_err(|e| format!("{}: CDS/CDNSKEY: {e}", a.input.display()))?;
    }
    let existing = if a.keep_dnskeys {
        ExistingDnssec::KeepDnskeys
    } else {
        cfg.existing_dnssec(signing)
    };
    Ok(SignJob {
        zone,
        keys,
        policy,
        jitter,
        existing,
        profile: cfg.profile(signing).map_err(|e| e.to_string())?,
        provider: cfg.provider(signing).map_err(|e| e.to_string())?,
        output: a.output.clone().unwrap_or_else(|| cfg.signed_zone_path()),
        mtl_series,
        zonemd: a
            .zonemd
            .map(ZonemdArg::hash)
            .into_iter()
            .chain(signing.zonemd.then_some(ZonemdHash::Sha384))
            .collect(),
    })
}

fn sign_job_from_master(a: &SignArgs) -> Result<SignJob, String> {
    let (profile, provider) = a.crypto.resolve()?;
    let zone = read_master(&a.input, a.origin.as_deref(), &a.read, true)?;
    if a.keys.is_empty() {
        return Err("give the signing keys with --key (see `pqdns-zone keygen`)".into());
    }
    let keys = a
        .keys
        .iter()
        .map(|p| ZoneKey::read_files(p, &profile, &provider).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let duration = |t: &str| parse_ttl(t).ok_or_else(|| format!("bad duration {t:?}"));
    let now = time::now();
    let denial = if a.nsec3 {
        let salt = if a.salt == "-" {
            Vec::new()
        } else {
            decode_hex(&a.salt).ok_or_else(|| format!("salt {:?} is not hex", a.salt))?
        };
        Denial::Nsec3(Nsec3Params {
            iterations: a.iterations,
            salt,
            opt_out: false,
        })
    } else {
        Denial::Nsec
    };
    let policy = SigningPolicy {
        inception: now.saturating_sub(u64::from(duration(&a.inception_offset)?)),
        expiration: now + u64::from(duration(&a.validity)?),
        denial,
        published_dnskeys: None,
    };
    let output = a.output.clone().unwrap_or_else(|| {
        let mut p = a.input.clone().into_os_string();
        p.push(".signed");
        PathBuf::from(p)
    });
    let existing = if a.keep_dnskeys {
        ExistingDnssec::KeepDnskeys
    } else {
        ExistingDnssec::Strip
    };
    Ok(SignJob {
        zone,
        keys,
        policy,
        jitter: 0,
        existing,
        profile,
        provider,
        output,
        mtl_series: None,
        zonemd: a.zonemd.map(ZonemdArg::hash).into_iter().collect(),
    })
}

fn sign(a: &SignArgs) -> Result<ExitCode, String> {
    let is_toml = a.input.extension().is_some_and(|e| e == "toml");
    let mut job = if is_toml {
        sign_job_from_toml(a)?
    } else {
        sign_job_from_master(a)?
    };
    let zone = &mut job.zone;
    let prepared = existing::prepare(zone, &job.keys, job.existing)
        .map_err(|e| format!("{}: {e}", zone.origin))?;
    if !prepared.is_empty() {
        tracing::info!(zone = %zone.origin, "input had DNSSEC records: {prepared}");
    }
    // RFC 8976 §3.1: placed before the denial chain is built, so the apex bitmap lists it.
    let hashes = zonemd::hashes_to_place(zone, &job.zonemd);
    if !hashes.is_empty() {
        zonemd::add_placeholder(zone, &hashes);
    }
    let bar = progress_bar(zone.nodes.len());
    let started = std::time::Instant::now();
    let spread = Incremental {
        jitter: job.jitter,
        mtl_series: job.mtl_series.as_ref().map(|s| s as &dyn SeriesStore),
        ..Incremental::default()
    };
    let stats = resign_zone(zone, &job.keys, &job.policy, &spread, &|done, total| {
        if let Some(b) = &bar {
            b.set_length(total as u64);
            b.set_position(done as u64);
        }
    })
    .map_err(|e| e.to_string())?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if !hashes.is_empty() {
        zonemd::sign_digests(zone, &job.keys, &job.policy).map_err(|e| e.to_string())?;
    }
    // Never write a zone that fails its own verification.
    let opts = VerifyOptions::at(time::now());
    // Keys of an algorithm rollover's first step sign without being published.
    let published = job.policy.published_dnskeys.as_ref();
    let unpublished: Vec<Vec<u8>> = job
        .keys
        .iter()
        .map(ZoneKey::dnskey_rdata)
        .filter(|rdata| published.is_some_and(|p| !p.contains(rdata)))
        .collect();
    let report = verify_zone_with(zone, &unpublished, &job.profile, &job.provider, &opts);
    if !report.is_ok() {
        for f in report.failures.iter().take(10) {
            tracing::error!(zone = %zone.origin, "verification: {f}");
        }
        return Err(format!(
            "{}: the signed zone fails verification ({} failures); {} not written",
            zone.origin,
            report.failures.len(),
            job.output.display()
        ));
    }
    zonemd::verify(zone)
        .map_err(|e| format!("{}: {e}; {} not written", zone.origin, job.output.display()))?;
    let write = |output: &Path| -> std::io::Result<()> {
        let mut file = AtomicFile::create(output, FileMode::Public)?;
        zone.write_master_file(&mut file)?;
        file.commit()
    };
    write(&job.output).map_err(|e| format!("{}: {e}", job.output.display()))?;
    tracing::info!(
        zone = %zone.origin,
        rrsets = stats.rrsets,
        signatures = stats.signatures,
        denial_records = stats.denial_records,
        verified = report.signatures_valid,
        seconds = started.elapsed().as_secs_f64(),
        output = %job.output.display(),
        "signed"
    );
    Ok(ExitCode::SUCCESS)
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn verify(a: &VerifyArgs) -> Result<ExitCode, String> {
    let (profile, provider) = a.crypto.resolve()?;
    let now = match &a.at {
        Some(t) => time::parse_cli_time(t)
            .ok_or_else(|| format!("bad --at {t:?}: UNIX seconds or YYYYMMDDHHMMSS"))?,
        None => time::now(),
    };
    let zone = read_master(&a.file, a.origin.as_deref(), &a.read, !a.signatures_only)?;
    let opts = VerifyOptions::signatures_only_at(now, a.signatures_only);
    let mut unpublished = Vec::new();
    for file in &a.unpublished_keys {
        unpublished.extend(dnskeys_in(file)?.into_iter().map(|r| r.rdata));
    }
    let report = verify_zone_with(&zone, &unpublished, &profile, &provider, &opts);
    for f in &report.failures {
        outln!("FAIL {f}");
    }
    // RFC 8976 §4: a whole zone's ZONEMD, if it has one (partial data has none to check).
    let zonemd_ok = a.signatures_only
        || match zonemd::verify(&zone) {
            Ok(ZonemdStatus::Absent) => true,
            Ok(ZonemdStatus::Verified(hash)) => {
                outln!("{}: ZONEMD verified ({hash})", zone.origin);
                true
            }
            Err(e) => {
                outln!("FAIL {}: {e}", zone.origin);
                false
            }
        };
    outln!(
        "{}: {} signatures checked, {} valid, {} failures",
        zone.origin,
        report.signatures_checked,
        report.signatures_valid,
        report.failures.len()
    );
    Ok(if report.is_ok() && zonemd_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn rollover(a: &RolloverArgs) -> Result<ExitCode, String> {
    let cfg = LoadedConfig::read(&a.zone).map_err(|e| e.to_string())?;
    let signing = cfg
        .signing()
        .ok_or_else(|| format!("{}: no [signing] table", a.zone.display()))?;
    let now = match &a.at {
        Some(t) => time::parse_cli_time(t).ok_or_else(|| format!("bad time {t:?}"))?,
        None => time::now(),
    };
    let path = cfg.key_state_path(signing);
    let mut state = KeyState::read(&path)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "{}: no rollover state yet; pqdns-server or `pqdns-zone sign` writes it when \
                 it first signs the zone",
                path.display()
            )
        })?;
    if a.ds_published {
        if !state.confirm_ds(now) {
            return Err(format!(
                "{}: no algorithm waits for the parent's DS RRset",
                cfg.origin
            ));
        }
        state.write(&path).map_err(|e| e.to_string())?;
        outln!(
            "recorded: the parent's DS RRset equals the requested DS set at {}",
            time::to_display(now)
        );
    }
    let zone = cfg.read_zone().map_err(|e| e.to_string())?;
    let wanted = cfg.wanted_algorithms(signing).map_err(|e| e.to_string())?;
    let timings = cfg
        .timings(signing, zone.max_ttl())
        .map_err(|e| e.to_string())?;
    outln!("zone {} ({})", cfg.origin, path.display());
    outln!("{:<20} {:<12} since", "algorithm", "phase");
    for alg in &state.algorithms {
        let phase = alg.phase.name();
        outln!(
            "{:<20} {phase:<12} {}",
            alg.name,
            time::to_display(alg.since)
        );
    }
    outln!("{:<30} {:<12} since", "key", "phase");
    for key in &state.keys {
        let (label, phase) = (state.label(key), key.phase.name());
        outln!("{label:<30} {phase:<12} {}", time::to_display(key.since));
    }
    let names = |numbers: Vec<pqdns_core::dnssec::SecAlg>| {
        let names: Vec<&str> = state
            .algorithms
            .iter()
            .filter(|s| numbers.iter().any(|n| n.0 == s.number))
            .map(|s| s.name.as_str())
            .collect();
        names.join(", ")
    };
    outln!("DS set asked of the parent: {}", names(state.ds_set()));
    if let Some(at) = state.ds_confirmed_at {
        outln!("parent's DS confirmed: {}", time::to_display(at));
    }
    let due = state.clone().advance(&wanted, &timings, now);
    if !due.is_empty() {
        let due: Vec<String> = due.iter().map(ToString::to_string).collect();
        outln!("due now, at the server's next reload: {}", due.join(", "));
        return Ok(ExitCode::SUCCESS);
    }
    match state.next(&wanted, &timings, now) {
        Next::Settled => outln!("next: nothing, every algorithm is active"),
        Next::ParentDs => outln!(
            "next: the parent's DS RRset must equal the DS set above (see {}); then run \
             `pqdns-zone rollover --ds-published {}` and reload the server",
            cfg.ds_path(signing).display(),
            a.zone.display()
        ),
        Next::At(at, steps) => {
            let steps: Vec<String> = steps.iter().map(ToString::to_string).collect();
            outln!("next: {} at {}", steps.join(", "), time::to_display(at));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The DNSKEY records of a .key file or zone file.
fn dnskeys_in(file: &Path) -> Result<Vec<pqdns_core::Record>, String> {
    let records = ZoneFileReader::new(None, Some(3600))
        .read_file(file)
        .map_err(|e| e.to_string())?;
    Ok(records
        .into_iter()
        .filter(|r| r.rtype == RrType::DNSKEY)
        .collect())
}

fn ds(a: &DsArgs) -> Result<ExitCode, String> {
    let records = dnskeys_in(&a.file)?;
    let digest = match a.digest {
        Digest::Sha256 => DigestType::Sha256,
        Digest::Sha384 => DigestType::Sha384,
    };
    let mut printed = 0;
    for r in &records {
        if DnskeyRef::parse(&r.rdata).is_some_and(|k| k.is_sep()) {
            if let Some(ds) = ds_record(r, digest) {
                outln!("{ds}");
                printed += 1;
            }
        }
    }
    if printed == 0 {
        return Err(format!(
            "{}: no DNSKEY with the SEP flag (a KSK or CSK)",
            a.file.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn algorithms() {
    let profiles: Vec<Profile> = Profile::BUILT_IN
        .iter()
        .map(|n| Profile::named(n).expect("built-in"))
        .collect();
    let provider = Provider::default_provider();
    let liboqs = Provider::liboqs_first();
    let size = |n: usize| {
        if n == 0 {
            "var".to_string()
        } else {
            n.to_string()
        }
    };
    let mut header = format!("{:<28}", "algorithm");
    for p in &profiles {
        header.push_str(&format!("{:>10}", p.name()));
    }
    outln!("{header}{:>9}{:>9}  implementation", "pk B", "sig B");
    for alg in Algorithm::ALL {
        let mut line = format!("{:<28}", alg.name());
        for p in &profiles {
            let n = p.number(*alg).map_or("-".to_string(), |n| n.to_string());
            line.push_str(&format!("{n:>10}"));
        }
        let backends: Vec<String> = [&provider, &liboqs]
            .iter()
            .filter_map(|pr| pr.scheme(*alg).ok())
            .map(|s| format!("{:?}", s.backend()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let validation_only = provider.scheme(*alg).is_ok_and(|s| !s.signs());
        let implementation = match alg.unavailable_reason() {
            Some(why) => format!("unavailable: {why}"),
            // RFC 8624 §3.1: validated, never used to sign (RSASHA1, RSASHA1-NSEC3-SHA1).
            None if validation_only => format!("{} (validation only)", backends.join(", ")),
            None => backends.join(", "),
        };
        outln!(
            "{line}{:>9}{:>9}  {implementation}",
            size(alg.public_key_len()),
            size(alg.max_signature_len())
        );
    }
    outln!("\nsig B is the largest signature (Falcon compressed signatures vary); var = depends on key size.");
}

//! `pqdns-zone` with MTL mode (SLH-DSA-MTL, algorithms 248 and 249): keygen, sign with NSEC and
//! NSEC3 under the default and verisign profiles, verify (condensed signatures through the
//! ladder of the SOA's full signature), ds; the zone Verisign's ldns fork signed verifies, and
//! the DS of its KSK agrees with `ldns-key2ds` (Debian `ldnsutils`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ZONE: &str = "\
$ORIGIN example.
$TTL 300
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
ns1      A     192.0.2.1
www      A     192.0.2.3
www      AAAA  2001:db8::3
mail     MX    10 www
sub      NS    ns.sub
ns.sub   A     192.0.2.5
sub      DS    12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
";

fn pqdns_zone(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pqdns-zone"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("pqdns-zone runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pqdns-core/tests/data/mtl-mode-ldns-sha2")
}

/// Generates a key; returns its .key file name.
fn keygen(dir: &Path, alg: &str, role: &str, profile: &str) -> String {
    let o = pqdns_zone(
        dir,
        &[
            "keygen",
            "--zone",
            "example.",
            "-a",
            alg,
            "--role",
            role,
            "--profile",
            profile,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    stdout(&o).trim().to_string() + ".key"
}

/// The RRSIG line of (owner, type) in a signed zone file, split into fields.
fn rrsig_fields(signed: &str, owner: &str, rtype: &str) -> Vec<String> {
    signed
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.len() > 5 && f[0] == owner && f[3] == "RRSIG" && f[4] == rtype)
        .unwrap_or_else(|| panic!("no RRSIG {owner} {rtype}"))
}

/// Must-show 2 (zone tool): 248 under the default profile with NSEC3 and 249 under the verisign
/// profile with NSEC sign, verify, carry full signatures only on the apex SOA and DNSKEY RRsets,
/// and fail verification with a reason when a condensed signature changes.
#[test]
fn mtl_zones_sign_and_verify_under_default_and_verisign_profiles() {
    for (alg, number, profile, nsec3) in [
        ("SLH-DSA-MTL-SHA2-128s", "248", "default", true),
        ("SLH-DSA-MTL-SHAKE-128s", "249", "verisign", false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("ex.zone"), ZONE).unwrap();
        let ksk = keygen(d, alg, "ksk", profile);
        let zsk = keygen(d, alg, "zsk", profile);
        assert!(ksk.contains(&format!("+{number}+")), "{ksk}");
        let mut args = vec![
            "sign",
            "ex.zone",
            "-k",
            &ksk,
            "-k",
            &zsk,
            "--profile",
            profile,
        ];
        args.extend(["-o", "ex.signed"]);
        if nsec3 {
            args.push("--nsec3");
        }
        let o = pqdns_zone(d, &args);
        assert!(o.status.success(), "{alg}: {}", text(&o));

        let ok = pqdns_zone(d, &["verify", "--profile", profile, "ex.signed"]);
        assert!(ok.status.success(), "{alg}: {}", text(&ok));
        assert!(stdout(&ok).contains(" 0 failures"), "{}", text(&ok));

        let signed = std::fs::read_to_string(d.join("ex.signed")).unwrap();
        let mut full: Vec<String> = signed
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() > 12 && f[3] == "RRSIG" && f[5] == number)
            .filter(|f| f[12..].concat().len() > 4_000) // condensed ones are < 200 base64 chars
            .map(|f| format!("{} {}", f[0], f[4]))
            .collect();
        full.sort();
        assert_eq!(full, ["example. DNSKEY", "example. SOA"], "{alg}");
        let denial = if nsec3 { "NSEC3" } else { "NSEC" };
        assert!(
            signed
                .lines()
                .any(|l| l.split_whitespace().nth(3) == Some(denial)),
            "{alg}: no {denial}"
        );

        // Flip one base64 character of www's condensed A signature (a sibling hash).
        let f = rrsig_fields(&signed, "www.example.", "A");
        let sig = f[12..].concat();
        let mut bad = sig.clone().into_bytes();
        let i = bad.len() - 4;
        bad[i] = if bad[i] == b'A' { b'B' } else { b'A' };
        let tampered = signed.replace(&sig, std::str::from_utf8(&bad).unwrap());
        assert_ne!(tampered, signed);
        std::fs::write(d.join("bad.signed"), tampered).unwrap();
        let o = pqdns_zone(d, &["verify", "--profile", profile, "bad.signed"]);
        assert_eq!(o.status.code(), Some(1), "{alg}: {}", text(&o));
        assert!(
            stdout(&o).contains("FAIL www.example. A:"),
            "{alg}: {}",
            text(&o)
        );

        // Under oqs-bind these numbers mean nothing: reported, not skipped.
        let o = pqdns_zone(d, &["verify", "--profile", "oqs-bind", "ex.signed"]);
        assert_eq!(o.status.code(), Some(1), "{alg}: {}", text(&o));
        assert!(stdout(&o).contains("not mapped by profile"), "{}", text(&o));
    }
}

/// Must-show 1 through the zone tool: the sample zone Verisign's ldns fork signed verifies with
/// `pqdns-zone verify` inside its validity window (all 11 RRSIGs) and not after it.
#[test]
fn verisign_sample_verifies_with_pqdns_zone() {
    let file = sample_dir().join("mtl.example.zone.signed");
    let file = file.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let o = pqdns_zone(
        dir.path(),
        &[
            "verify",
            "--profile",
            "verisign",
            "--at",
            "20261201000000",
            file,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        stdout(&o).contains("11 signatures checked, 11 valid, 0 failures"),
        "{}",
        text(&o)
    );
    let late = pqdns_zone(
        dir.path(),
        &[
            "verify",
            "--profile",
            "verisign",
            "--at",
            "20270101000000",
            file,
        ],
    );
    assert_eq!(late.status.code(), Some(1), "{}", text(&late));
}

/// `pqdns-zone ds` of an MTL KSK — Verisign's and one of ours — matches `ldns-key2ds`; the
/// SHA-1 DS ldns prints is the one shipped with the sample, so the peer handles algorithm 248.
#[test]
fn mtl_ds_agrees_with_ldns_key2ds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let sample = "Kmtl.example.+248+46331.key";
    std::fs::copy(sample_dir().join(sample), d.join(sample)).unwrap();
    let ours = keygen(d, "SLH-DSA-MTL-SHAKE-128s", "ksk", "default");
    let key2ds = |file: &str, digest: &str| -> String {
        let o = Command::new("ldns-key2ds")
            .args(["-n", digest, file])
            .current_dir(d)
            .output()
            .expect("ldns-key2ds runs: apt-get install ldnsutils");
        assert!(o.status.success(), "{}", text(&o));
        stdout(&o)
    };
    let shipped = std::fs::read_to_string(sample_dir().join("Kmtl.example.+248+46331.ds")).unwrap();
    let digest = |line: &str| line.split_whitespace().last().unwrap().to_lowercase();
    assert_eq!(digest(&key2ds(sample, "-1")), digest(&shipped));
    for file in [sample, ours.as_str()] {
        let o = pqdns_zone(d, &["ds", file]);
        assert!(o.status.success(), "{}", text(&o));
        let mine = stdout(&o);
        let theirs = key2ds(file, "-2");
        // Key tag, algorithm, digest type and digest agree.
        let tail = |s: &str| {
            let f: Vec<String> = s.split_whitespace().map(str::to_lowercase).collect();
            f[f.len() - 4..].to_vec()
        };
        assert_eq!(tail(&mine), tail(&theirs), "{file}");
    }
}

/// Each MTL signature of a signed zone file: (owner, type covered, series, leaf).
fn mtl_paths(signed: &str) -> Vec<(String, String, pqdns_core::dnssec::mtl::SeriesId, u64)> {
    use base64::Engine;
    use pqdns_core::dnssec::mtl::{Format, MtlSignature};
    signed
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|f| f.len() > 12 && f[3] == "RRSIG")
        .map(|f| {
            let field = base64::engine::general_purpose::STANDARD
                .decode(f[12..].concat())
                .unwrap();
            let path = MtlSignature::parse_as(Format::V2026, &field).unwrap().path;
            (f[0].to_string(), f[4].to_string(), path.series, path.leaf)
        })
        .collect()
}

/// Issue 34: `pqdns-zone sign` of a TOML description appends to the key's saved series
/// (`<state_dir>/example+129+<tag>.mtlseries`): signing twice keeps the series ID and the
/// second signing's leaves come after the first's; while another signer holds the series
/// (a running server), signing refuses instead of reusing leaf indexes.
#[test]
fn signing_a_description_twice_appends_to_one_series() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("example.zone"), ZONE).unwrap();
    // pqdns-zone writes the rollover state there without creating it (the server does).
    std::fs::create_dir(dir.path().join("state")).unwrap();
    std::fs::write(
        dir.path().join("example.toml"),
        "origin = \"example.\"\nfile = \"example.zone\"\n[signing]\n\
         algorithms = [\"ML-DSA-MTL-44\"]\nprofile = \"verisign-2026\"\nkeys = \"csk\"\n\
         state_directory = \"state\"\n",
    )
    .unwrap();
    let sign = || {
        let o = pqdns_zone(dir.path(), &["sign", "example.toml"]);
        assert!(o.status.success(), "{}", text(&o));
        mtl_paths(&std::fs::read_to_string(dir.path().join("example.zone.signed")).unwrap())
    };
    let first = sign();
    let second = sign();
    assert_eq!(first.len(), second.len());
    let series = first[0].2;
    assert!(first.iter().chain(&second).all(|p| p.2 == series));
    let mut leaves: Vec<u64> = first.iter().chain(&second).map(|p| p.3).collect();
    leaves.sort_unstable();
    let expected: Vec<u64> = (0..leaves.len() as u64).collect();
    assert_eq!(leaves, expected, "indexes continue, none twice");

    let held = pqdns_core::dnssec::mtl::series::SeriesFiles::open(
        &dir.path().join("state"),
        "example",
        16,
    )
    .unwrap();
    let o = pqdns_zone(dir.path(), &["sign", "example.toml"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("in use by another signer"),
        "{}",
        text(&o)
    );
    drop(held);
    let third = sign();
    assert!(third
        .iter()
        .all(|p| p.2 == series && p.3 >= leaves.len() as u64));
}

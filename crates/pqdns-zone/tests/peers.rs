//! `pqdns-zone` against real DNSSEC tools (Debian packages `ldnsutils` and `bind9-utils`):
//! zones we sign pass `ldns-verify-zone` and `dnssec-verify`; zones `dnssec-signzone` signs pass
//! `pqdns-zone verify`; DS records agree with `dnssec-dsfromkey`; bad input gets clear errors.

use std::path::Path;
use std::process::{Command, Output};

const ZONE: &str = "\
$ORIGIN example.
$TTL 300
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
ns1      A     192.0.2.1
www      A     192.0.2.3
*.wild   TXT   \"wildcard\"
a.b.ent  A     192.0.2.4
sub      NS    ns.sub
ns.sub   A     192.0.2.5
sub      DS    12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
";

/// Runs a peer tool; a missing tool fails the test naming the Debian package to install.
fn peer(dir: &Path, program: &str, package: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e}): apt-get install {package}"))
}

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

/// Generates a key with pqdns-zone; returns its file stem.
fn keygen(dir: &Path, alg: &str, role: &str) -> String {
    let o = pqdns_zone(
        dir,
        &["keygen", "--zone", "example.", "-a", alg, "--role", role],
    );
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_string() + ".key"
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ex.zone"), ZONE).unwrap();
    dir
}

#[test]
fn zones_we_sign_pass_ldns_verify_zone_and_dnssec_verify() {
    let dir = setup();
    let d = dir.path();
    let keys: Vec<String> = [
        ("ECDSAP256SHA256", "ksk"),
        ("ECDSAP256SHA256", "zsk"),
        ("ED25519", "ksk"),
        ("ED25519", "zsk"),
    ]
    .iter()
    .map(|(a, r)| keygen(d, a, r))
    .collect();
    for nsec3 in [false, true] {
        let mut args = vec!["sign", "ex.zone", "-o", "ex.signed"];
        for k in &keys {
            args.extend(["-k", k.as_str()]);
        }
        if nsec3 {
            args.push("--nsec3");
        }
        let o = pqdns_zone(d, &args);
        assert!(o.status.success(), "{}", text(&o));
        let ldns = peer(d, "ldns-verify-zone", "ldnsutils", &["ex.signed"]);
        assert!(ldns.status.success(), "nsec3={nsec3}: {}", text(&ldns));
        let bind = peer(
            d,
            "dnssec-verify",
            "bind9-utils",
            &["-o", "example.", "ex.signed"],
        );
        assert!(bind.status.success(), "nsec3={nsec3}: {}", text(&bind));
        assert!(text(&bind).contains("Zone fully signed"), "{}", text(&bind));
    }
    // And the peers notice tampering, so their "pass" above means something.
    let signed = std::fs::read_to_string(d.join("ex.signed")).unwrap();
    std::fs::write(
        d.join("bad.signed"),
        signed.replace("192.0.2.3", "192.0.2.9"),
    )
    .unwrap();
    let ldns = peer(d, "ldns-verify-zone", "ldnsutils", &["bad.signed"]);
    assert!(!ldns.status.success(), "{}", text(&ldns));
}

#[test]
fn zones_bind_signs_pass_pqdns_zone_verify_and_tampering_fails() {
    let dir = setup();
    let d = dir.path();
    for args in [
        &["-a", "ECDSAP256SHA256", "-f", "KSK"][..],
        &["-a", "ECDSAP256SHA256"],
        &["-a", "ED25519", "-f", "KSK"],
        &["-a", "ED25519"],
        &["-a", "RSASHA256", "-b", "2048", "-f", "KSK"],
        &["-a", "RSASHA256", "-b", "2048"],
    ] {
        let mut full = vec!["-q"];
        full.extend_from_slice(args);
        full.push("example.");
        let o = peer(d, "dnssec-keygen", "bind9-utils", &full);
        assert!(o.status.success(), "{}", text(&o));
    }
    let o = peer(
        d,
        "dnssec-signzone",
        "bind9-utils",
        &[
            "-S",
            "-3",
            "-",
            "-o",
            "example.",
            "-f",
            "bind.signed",
            "ex.zone",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let ok = pqdns_zone(d, &["verify", "bind.signed"]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(String::from_utf8_lossy(&ok.stdout).contains(" 0 failures"));

    let signed = std::fs::read_to_string(d.join("bind.signed")).unwrap();
    std::fs::write(
        d.join("bad.signed"),
        signed.replace("192.0.2.3", "192.0.2.9"),
    )
    .unwrap();
    let bad = pqdns_zone(d, &["verify", "bad.signed"]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(String::from_utf8_lossy(&bad.stdout).contains("FAIL www.example. A:"));
}

/// Keys `pqdns-zone keygen` writes in BIND's format carry `Publish:` and `Activate:`, so
/// `dnssec-signzone -S` (BIND's smart signing, which picks keys by their timing metadata) finds
/// them active and signs with them; without those lines it finds no keys at all.
#[test]
fn dnssec_signzone_smart_signing_finds_our_keys_active() {
    let dir = setup();
    let d = dir.path();
    let ksk = keygen(d, "ECDSAP256SHA256", "ksk");
    let zsk = keygen(d, "ECDSAP256SHA256", "zsk");
    let o = peer(
        d,
        "dnssec-signzone",
        "bind9-utils",
        &[
            "-S",
            "-K",
            ".",
            "-o",
            "example.",
            "-f",
            "bind.signed",
            "ex.zone",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        report.contains("KSKs: 1 active") && report.contains("ZSKs: 1 active"),
        "{}",
        text(&o)
    );
    let signed = std::fs::read_to_string(d.join("bind.signed")).unwrap();
    for key in [&ksk, &zsk] {
        let tag = key.trim_end_matches(".key").rsplit('+').next().unwrap();
        let tag = tag.trim_start_matches('0');
        assert!(signed.contains(&format!(" {tag} example.")), "{key} signed");
    }
    let ok = pqdns_zone(d, &["verify", "bind.signed"]);
    assert!(ok.status.success(), "{}", text(&ok));
}

#[test]
fn ds_matches_dnssec_dsfromkey() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, "ECDSAP256SHA256", "ksk");
    let ours = pqdns_zone(d, &["ds", &key]);
    assert!(ours.status.success(), "{}", text(&ours));
    let bind = peer(d, "dnssec-dsfromkey", "bind9-utils", &["-2", &key]);
    assert!(bind.status.success(), "{}", text(&bind));
    // "example.\t3600\tIN\tDS\t<rdata>" vs "example. IN DS <rdata>": compare the RDATA.
    let rdata = |o: &Output| {
        let s = String::from_utf8_lossy(&o.stdout).to_string();
        let after = s
            .split("DS")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        after.to_ascii_uppercase()
    };
    assert_eq!(rdata(&ours), rdata(&bind));
}

#[test]
fn post_quantum_zone_round_trip_and_profile_mismatch() {
    let dir = setup();
    let d = dir.path();
    let k1 = keygen(d, "ML-DSA-44", "csk");
    let k2 = keygen(d, "Falcon-512", "csk");
    let o = pqdns_zone(
        d,
        &[
            "sign",
            "ex.zone",
            "--nsec3",
            "-k",
            &k1,
            "-k",
            &k2,
            "-o",
            "pq.signed",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let ok = pqdns_zone(d, &["verify", "pq.signed"]);
    assert!(ok.status.success(), "{}", text(&ok));
    // OQS-bind reads 18 as round-3 Dilithium2: every ML-DSA-44 signature must fail there.
    let wrong = pqdns_zone(d, &["verify", "--profile", "oqs-bind", "pq.signed"]);
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    assert!(
        String::from_utf8_lossy(&wrong.stdout).contains("(Dilithium2): signature does not verify")
    );
    // Under the Verisign profile 18 and 17 mean nothing: reported, not skipped.
    let unmapped = pqdns_zone(d, &["verify", "--profile", "verisign", "pq.signed"]);
    assert_eq!(unmapped.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unmapped.stdout).contains("not mapped by profile"));
}

#[test]
fn bad_input_gets_clear_errors() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(
        d.join("bad.zone"),
        "$TTL 60\n$ORIGIN example.\nwww A 300.1.2.3\n",
    )
    .unwrap();
    let k = keygen(d, "ED25519", "csk");
    let o = pqdns_zone(d, &["sign", "bad.zone", "-k", &k]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("bad.zone:3: A record"),
        "{}",
        text(&o)
    );

    let o = pqdns_zone(d, &["keygen", "--zone", "example.", "-a", "Rainbow-III"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown algorithm"),
        "{}",
        text(&o)
    );

    let o = pqdns_zone(d, &["keygen", "--zone", "example.", "-a", "SNOVA_24_5_4"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unavailable"),
        "{}",
        text(&o)
    );

    let private = k.replace(".key", ".private");
    std::fs::write(
        d.join(&private),
        "Private-key-format: v1.3\nAlgorithm: 15 (ED25519)\n",
    )
    .unwrap();
    let o = pqdns_zone(d, &["sign", "ex.zone", "-k", &k]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(".private") && err.contains("truncated"),
        "{}",
        text(&o)
    );
}

/// `pqdns-zone tsig-keygen` writes what BIND's `tsig-keygen` writes: `named-checkconf` accepts
/// the file (it checks the algorithm and that the secret is base64), the file is 0600, the
/// secret is the hash's length, our key-file reader reads it back, and printing to standard
/// output gives the same format.
#[test]
fn tsig_keygen_writes_bind_key_files() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (alg, len) in [("hmac-sha256", 32), ("hmac-sha512", 64)] {
        let file = format!("{alg}.key");
        let o = pqdns_zone(d, &["tsig-keygen", "-a", alg, "xfr.example.", "-o", &file]);
        assert!(o.status.success(), "{}", text(&o));
        assert!(o.stdout.is_empty(), "the secret goes to the file only");
        let path = d.join(&file);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let o = peer(d, "named-checkconf", "bind9-utils", &[&file]);
        assert!(o.status.success(), "named-checkconf: {}", text(&o));
        let keys = pqdns_core::tsig_keyfile::read(&path).unwrap();
        assert_eq!(keys.len(), 1);
        assert_eq!(keys[0].name().to_string(), "xfr.example.");
        assert_eq!(keys[0].algorithm().name(), alg);
        assert_eq!(keys[0].secret().len(), len);
        // A broken secret is what named-checkconf would catch: the check is not vacuous.
        let broken = std::fs::read_to_string(&path)
            .unwrap()
            .replace("secret \"", "secret \"!!");
        std::fs::write(d.join("broken.key"), broken).unwrap();
        let o = peer(d, "named-checkconf", "bind9-utils", &["broken.key"]);
        assert!(!o.status.success(), "named-checkconf took a bad secret");
    }
    let o = pqdns_zone(d, &["tsig-keygen", "notify-key"]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with("key \"notify-key\" {\n\talgorithm hmac-sha256;\n\tsecret \""));
    assert_eq!(
        pqdns_core::tsig_keyfile::parse(&out, "stdout")
            .unwrap()
            .len(),
        1
    );
    let o = pqdns_zone(d, &["tsig-keygen", "-a", "hmac-sha1", "k"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("verification only"));
}

//! `pqdns-zone` as operators use it, and misuse it: a closed stdout (`| head -1`), signing
//! interrupted by a file-size limit (RLIMIT_FSIZE via `prlimit`, util-linux), zones NSD's
//! `nsd-checkzone` refuses, re-signing an already signed zone, NSEC3 iteration limits,
//! world-readable private keys, and key files OQS-BIND and ldns read.

use std::path::Path;
use std::process::{Command, Output, Stdio};

const ZONE: &str = "\
$ORIGIN example.
$TTL 300
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
ns1      A     192.0.2.1
www      A     192.0.2.3
";

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pqdns-zone"))
}

fn run(dir: &Path, args: &[&str]) -> Output {
    bin()
        .args(args)
        .current_dir(dir)
        .output()
        .expect("pqdns-zone runs")
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Generates a key; returns its `.key` file name.
fn keygen(dir: &Path, args: &[&str]) -> String {
    let mut all = vec!["keygen", "--zone", "example."];
    all.extend(args);
    let o = run(dir, &all);
    assert!(o.status.success(), "{}", text(&o));
    String::from_utf8(o.stdout).unwrap().trim().to_string() + ".key"
}

/// A standard output whose reader has already gone: every write gets EPIPE.
fn closed_stdout() -> Stdio {
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    Stdio::from(write)
}

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ex.zone"), ZONE).unwrap();
    dir
}

/// A sign command for `ex.zone` with the given key files.
fn sign_args<'a>(keys: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["sign", "ex.zone"];
    for k in keys {
        args.extend(["-k", k.as_str()]);
    }
    args.extend(extra);
    args
}

#[test]
fn a_closed_stdout_is_not_a_crash() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "ECDSAP256SHA256"]);
    let o = run(d, &sign_args(std::slice::from_ref(&key), &[]));
    assert!(o.status.success(), "{}", text(&o));
    // Verifying a month from now makes `verify` print FAIL lines and exit 1.
    let later = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 30 * 86_400;
    let later = later.to_string();
    for (args, code) in [
        (vec!["verify", "ex.zone.signed"], 0),
        (vec!["verify", "ex.zone.signed", "--at", later.as_str()], 1),
        (vec!["algorithms"], 0),
        (vec!["ds", key.as_str()], 0),
        (
            vec![
                "keygen", "--zone", "example.", "-a", "ED25519", "--dir", "more",
            ],
            0,
        ),
    ] {
        let o = bin()
            .args(&args)
            .current_dir(d)
            .stdout(closed_stdout())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn signing_interrupted_by_a_file_size_limit_keeps_the_previous_zone() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "ML-DSA-44"]);
    let o = run(d, &sign_args(std::slice::from_ref(&key), &[]));
    assert!(o.status.success(), "{}", text(&o));
    let good = std::fs::read(d.join("ex.zone.signed")).unwrap();
    assert!(good.len() > 4 * 4096, "{}", good.len());
    // The same zone again, with a later serial, under a limit smaller than its signed form.
    std::fs::write(d.join("ex.zone"), ZONE.replace("2024010101", "2024010102")).unwrap();
    let o = Command::new("prlimit")
        .arg("--fsize=4096")
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_pqdns-zone"))
        .args(sign_args(&[key], &[]))
        .current_dir(d)
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(!o.status.success(), "the write must fail: {}", text(&o));
    assert_eq!(
        std::fs::read(d.join("ex.zone.signed")).unwrap(),
        good,
        "the previous signed zone is intact"
    );
    let o = run(d, &["verify", "ex.zone.signed"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn key_generation_interrupted_by_a_file_size_limit_leaves_no_broken_key() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(
        d.join("ex.toml"),
        "origin = \"example.\"\nfile = \"ex.zone\"\n[signing]\nalgorithms = [\"ML-DSA-44\"]\n\
         keys = \"csk\"\nkey_directory = \"keys\"\n",
    )
    .unwrap();
    // An ML-DSA-44 private file (a 32-byte seed) fits in 1 KiB; its .key (1312-byte public
    // key in base64) does not.
    let o = Command::new("prlimit")
        .args(["--fsize=1024", "--"])
        .arg(env!("CARGO_BIN_EXE_pqdns-zone"))
        .args(["sign", "ex.toml"])
        .current_dir(d)
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(!o.status.success(), "{}", text(&o));
    let keys: Vec<String> = std::fs::read_dir(d.join("keys"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !keys.iter().any(|k| k.ends_with(".key")),
        "no (truncated) .key file: {keys:?}"
    );
    // The next run is not blocked by what the failed one left.
    let o = run(d, &["sign", "ex.toml"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(d, &["verify", "ex.zone.signed"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Zones NSD refuses are refused here too, with the file and line of the breaking record.
#[test]
fn zones_nsd_checkzone_refuses_are_refused_with_file_and_line() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "ED25519"]);
    for (body, line, what) in [
        ("w CNAME a\nw CNAME b\n", 8, "more than one CNAME"),
        ("w A 192.0.2.9\nw CNAME a\n", 8, "CNAME and other data"),
        ("w CNAME a\nw TXT \"x\"\n", 8, "CNAME and other data"),
        ("sub SOA ns1 hm 1 2 3 4 5\n", 7, "SOA record below the apex"),
        ("d DNAME other.\na.d A 192.0.2.9\n", 8, "below the DNAME"),
    ] {
        std::fs::write(d.join("bad.zone"), format!("{ZONE}{body}")).unwrap();
        let nsd = Command::new("nsd-checkzone")
            .args(["example.", "bad.zone"])
            .current_dir(d)
            .output()
            .expect("nsd-checkzone runs (apt-get install nsd)");
        assert!(!nsd.status.success(), "NSD refuses {body:?}");
        let o = run(d, &["sign", "bad.zone", "-k", &key]);
        assert_eq!(o.status.code(), Some(2), "{body:?}: {}", text(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("bad.zone:{line}: ")),
            "{body:?}: {err}"
        );
        assert!(err.contains(what), "{body:?}: {err}");
        assert!(!d.join("bad.zone.signed").exists());
        let o = run(d, &["verify", "bad.zone"]);
        assert!(!o.status.success(), "{body:?}: {}", text(&o));
    }
}

#[test]
fn ttls_above_2_31_are_zero_with_a_located_warning() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "ED25519"]);
    std::fs::write(
        d.join("ex.zone"),
        format!("{ZONE}big 2147483648 A 192.0.2.9\n"),
    )
    .unwrap();
    let o = run(d, &sign_args(&[key], &[]));
    assert!(o.status.success(), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("file=ex.zone line=7") && err.contains("RFC 2181"),
        "{err}"
    );
    let signed = std::fs::read_to_string(d.join("ex.zone.signed")).unwrap();
    assert!(
        signed.contains("big.example.\t0\tIN\tA\t192.0.2.9"),
        "{signed}"
    );
}

#[test]
fn nsec3_iterations_are_warned_about_above_0_and_refused_above_150() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "ED25519"]);
    let keys = [key];
    let o = run(d, &sign_args(&keys, &["--nsec3", "--iterations", "500"]));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("RFC 9276"), "{}", text(&o));
    assert!(!d.join("ex.zone.signed").exists());
    let o = run(d, &sign_args(&keys, &["--nsec3", "--iterations", "5"]));
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        stderr(&o).contains("WARN") && stderr(&o).contains("RFC 9276"),
        "{}",
        text(&o)
    );
    let o = run(d, &sign_args(&keys, &["--nsec3"]));
    assert!(!stderr(&o).contains("WARN"), "{}", text(&o));
}

/// Re-signing a signed zone with keys of another algorithm: the old DNSKEYs go (logged), and
/// keeping them without their private keys is refused instead of writing a zone that fails
/// verification.
#[test]
fn re_signing_with_another_algorithm_strips_old_keys_or_refuses() {
    let dir = setup();
    let d = dir.path();
    let rsa = keygen(d, &["-a", "RSASHA256"]);
    let o = run(d, &sign_args(&[rsa], &["-o", "rsa.signed"]));
    assert!(o.status.success(), "{}", text(&o));
    let ecdsa = keygen(d, &["-a", "ECDSAP256SHA256"]);
    let o = run(
        d,
        &[
            "sign",
            "rsa.signed",
            "-k",
            &ecdsa,
            "-o",
            "kept.signed",
            "--keep-dnskeys",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(stderr(&o).contains("RFC 4035 §2.2"), "{}", text(&o));
    assert!(!d.join("kept.signed").exists());
    let o = run(
        d,
        &["sign", "rsa.signed", "-k", &ecdsa, "-o", "ecdsa.signed"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        stderr(&o).contains("removed 1 DNSKEY") && stderr(&o).contains("algorithm 8 tag"),
        "{}",
        text(&o)
    );
    let signed = std::fs::read_to_string(d.join("ecdsa.signed")).unwrap();
    assert!(!signed.contains("DNSKEY\t256 3 8 "), "{signed}");
    let o = run(d, &["verify", "ecdsa.signed"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn toml_output_is_named_after_the_zone_file() {
    let dir = setup();
    let d = dir.path();
    std::fs::write(
        d.join("policy.toml"),
        "origin = \"example.\"\nfile = \"ex.zone\"\n[signing]\nalgorithms = [\"ED25519\"]\n",
    )
    .unwrap();
    let o = run(d, &["sign", "policy.toml"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(d.join("ex.zone.signed").exists());
    assert!(!d.join("policy.toml.signed").exists());
}

#[cfg(unix)]
#[test]
fn a_world_readable_private_key_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "ED25519"]);
    let private = key.replace(".key", ".private");
    let o = run(d, &sign_args(std::slice::from_ref(&key), &[]));
    assert!(!stderr(&o).contains("every user"), "{}", text(&o));
    std::fs::set_permissions(d.join(&private), std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = run(d, &sign_args(&[key], &[]));
    assert!(o.status.success(), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("every user") && err.contains(&private) && err.contains("mode=0644"),
        "{err}"
    );
}

/// OQS-BIND reads the public key from the private file of a post-quantum key and needs it
/// before `Created:`; `Publish:` and `Activate:` follow, in the OQS-bind samples' order, or
/// `dnssec-signzone -S` treats the key as inactive.
#[test]
fn falcon_private_key_in_bind_format_carries_the_public_key() {
    let dir = setup();
    let d = dir.path();
    let key = keygen(d, &["-a", "Falcon-512", "--format", "bind"]);
    let private = std::fs::read_to_string(d.join(key.replace(".key", ".private"))).unwrap();
    let lines: Vec<&str> = private.lines().collect();
    let position = |field: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("{field} missing:\n{private}"))
    };
    assert_eq!(lines[0], "Private-key-format: v1.3");
    assert!(position("PrivateKey: ") < position("PublicKey: "));
    assert!(position("PublicKey: ") < position("Created: "));
    assert!(position("Created: ") < position("Publish: "));
    assert!(position("Publish: ") < position("Activate: "));
    let dnskey = std::fs::read_to_string(d.join(&key)).unwrap();
    let public = lines[position("PublicKey: ")]
        .trim_start_matches("PublicKey: ")
        .to_string();
    assert!(
        dnskey.replace(' ', "").contains(&public),
        "PublicKey is the DNSKEY's key"
    );
    // And the key still loads and signs.
    let o = run(d, &sign_args(&[key], &[]));
    assert!(o.status.success(), "{}", text(&o));
    let o = run(d, &["verify", "ex.zone.signed"]);
    assert!(o.status.success(), "{}", text(&o));
}

/// Key files in both directions with NLnet Labs' own tools (Debian `ldnsutils`).
#[test]
fn ldns_keygen_keys_sign_here_and_our_keys_sign_with_ldns_signzone() {
    let dir = setup();
    let d = dir.path();
    let ldns = |program: &str, args: &[&str]| {
        let o = Command::new(program)
            .args(args)
            .current_dir(d)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e} (apt-get install ldnsutils)"));
        assert!(o.status.success(), "{program} {args:?}: {}", text(&o));
        o
    };
    // ldns-keygen → pqdns-zone sign → ldns-verify-zone and pqdns-zone verify.
    for (alg, extra) in [
        ("ECDSAP256SHA256", None),
        ("ECDSAP384SHA384", None),
        ("ED25519", None),
        ("RSASHA256", Some("2048")),
    ] {
        let mut args = vec!["-a", alg];
        if let Some(bits) = extra {
            args.extend(["-b", bits]);
        }
        args.push("example.");
        let stem = String::from_utf8(ldns("ldns-keygen", &args).stdout).unwrap();
        let key = format!("{}.key", stem.trim());
        let o = run(d, &sign_args(&[key], &["-o", "from-ldns.signed"]));
        assert!(o.status.success(), "{alg}: {}", text(&o));
        ldns("ldns-verify-zone", &["from-ldns.signed"]);
        let o = run(d, &["verify", "from-ldns.signed"]);
        assert!(o.status.success(), "{alg}: {}", text(&o));
    }
    // ldns-keygen's default 1024-bit RSA is refused with the reason.
    let stem =
        String::from_utf8(ldns("ldns-keygen", &["-a", "RSASHA256", "example."]).stdout).unwrap();
    let o = run(d, &sign_args(&[format!("{}.key", stem.trim())], &[]));
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("2048"), "{}", text(&o));

    // pqdns-zone keygen (both formats) → ldns-signzone → ldns-verify-zone and pqdns-zone.
    for format in ["ldns", "bind"] {
        for alg in ["ECDSAP256SHA256", "ED25519", "RSASHA256"] {
            let key = keygen(d, &["-a", alg, "--role", "ksk", "--format", format]);
            let stem = key.trim_end_matches(".key");
            if format == "ldns" {
                let private = std::fs::read_to_string(d.join(format!("{stem}.private"))).unwrap();
                assert!(
                    private.starts_with("Private-key-format: v1.2\n"),
                    "{private}"
                );
                assert!(!private.contains("Created"), "{private}");
                let public = std::fs::read_to_string(d.join(&key)).unwrap();
                assert!(
                    public.starts_with("example.\tIN\tDNSKEY\t257 3 "),
                    "{public}"
                );
                assert!(public.contains(";{id = "), "{public}");
            }
            ldns("ldns-signzone", &["-f", "by-ldns.signed", "ex.zone", stem]);
            ldns("ldns-verify-zone", &["by-ldns.signed"]);
            let signed = std::fs::read_to_string(d.join("by-ldns.signed")).unwrap();
            assert!(
                signed.contains("DNSKEY\t257 3 "),
                "ldns used our .key (KSK flags)"
            );
            let o = run(d, &["verify", "by-ldns.signed"]);
            assert!(o.status.success(), "{format} {alg}: {}", text(&o));
        }
    }
}

/// The fields of a `.private` file: (name, value) in order.
fn private_fields(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap_or_else(|| panic!("{l:?}"));
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

/// A `.private` file's field names, the first word of its `Private-key-format` and `Algorithm`
/// values, and the secret-key, public-key and trailing lengths of its ldns `Key:` field.
fn ldns_layout(text: &str) -> (Vec<String>, String, String, (usize, usize, usize)) {
    use base64::Engine as _;
    let fields = private_fields(text);
    let first = |name: &str| {
        let (_, v) = fields.iter().find(|(n, _)| n == name).expect(name);
        v.split_whitespace().next().unwrap().to_string()
    };
    let key = base64::engine::general_purpose::STANDARD
        .decode(first("Key"))
        .unwrap();
    let parts = pqdns_core::dnssec::keyfile::LdnsKeyField::split(&key).unwrap();
    (
        fields.iter().map(|(n, _)| n.clone()).collect(),
        first("Private-key-format"),
        first("Algorithm"),
        (parts.secret.len(), parts.public.len(), parts.rest.len()),
    )
}

/// `keygen --format ldns` writes post-quantum keys as Verisign's ldns-keygen does (the samples
/// in pqdns-core's `tests/data/peer-keys/ldns`): one `Key:` field, the ML-DSA-44 key expanded
/// to 2,560 bytes though pqdns stores a seed, and the ldns signer's numbers under
/// `--profile verisign`; the key signs with either provider. MTL keys are refused, naming the
/// file.
#[test]
fn keygen_ldns_format_matches_verisign_ldns_keygen() {
    let dir = setup();
    let d = dir.path();
    let samples =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../pqdns-core/tests/data/peer-keys/ldns");
    for (alg, sample) in [
        (
            "ML-DSA-44",
            "ML_DSA_44/Kml-dsa-44.ldns2pq.example.+245+05054.private",
        ),
        (
            "Falcon-512",
            "FL_DSA_512/Kfl-dsa-512.ldns2pq.example.+244+02214.private",
        ),
    ] {
        let args = [
            "-a",
            alg,
            "--role",
            "ksk",
            "--format",
            "ldns",
            "--profile",
            "verisign",
        ];
        let key = keygen(d, &args);
        let ours = std::fs::read_to_string(d.join(key.replace(".key", ".private"))).unwrap();
        let peer = std::fs::read_to_string(samples.join(sample)).unwrap();
        assert_eq!(ldns_layout(&ours), ldns_layout(&peer), "{alg}");
        for provider in ["default", "liboqs"] {
            let o = run(
                d,
                &sign_args(
                    std::slice::from_ref(&key),
                    &["--profile", "verisign", "--provider", provider],
                ),
            );
            assert!(o.status.success(), "{alg} {provider}: {}", text(&o));
            let o = run(d, &["verify", "--profile", "verisign", "ex.zone.signed"]);
            assert!(o.status.success(), "{alg} {provider}: {}", text(&o));
        }
    }
    let o = run(
        d,
        &[
            "keygen",
            "--zone",
            "example.",
            "-a",
            "SLH-DSA-MTL-SHA2-128s",
            "--format",
            "ldns",
            "--profile",
            "verisign",
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let err = stderr(&o);
    assert!(
        err.contains("Kexample.+248+") && err.contains(".private: ") && err.contains("MTL"),
        "{err}"
    );
}

/// A TOML zone description signed with `algorithms`, keys in `keys/`, 300 s TTLs.
fn write_rollover_zone(dir: &Path, algorithms: &str) {
    std::fs::write(
        dir.join("zone.toml"),
        format!(
            "origin = \"example.\"\ndefault_ttl = 300\nfile = \"ex.zone\"\n[signing]\n\
             algorithms = [{algorithms}]\nkeys = \"ksk-zsk\"\ndenial = \"nsec\"\n\
             cds = \"always\"\npropagation_delay = \"60\"\nkey_directory = \"keys\"\n"
        ),
    )
    .unwrap();
}

/// The algorithm numbers of the DNSKEY records and of the RRSIGs in a signed zone file.
fn algorithms_in(signed: &str) -> (Vec<String>, Vec<String>) {
    let mut dnskey = Vec::new();
    let mut rrsig = Vec::new();
    for line in signed.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.get(3) {
            Some(&"DNSKEY") => dnskey.push(f[6].to_string()),
            Some(&"RRSIG") => rrsig.push(f[5].to_string()),
            _ => {}
        }
    }
    for v in [&mut dnskey, &mut rrsig] {
        v.sort();
        v.dedup();
    }
    (dnskey, rrsig)
}

#[test]
fn an_algorithm_rollover_starts_when_the_algorithms_change_and_rollover_shows_it() {
    let dir = setup();
    let d = dir.path();
    write_rollover_zone(d, "\"ECDSAP256SHA256\"");
    let o = run(d, &["sign", "zone.toml"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = run(d, &["rollover", "zone.toml"]);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert!(out.contains("ECDSAP256SHA256      active"), "{out}");
    assert!(
        out.contains("DS set asked of the parent: ECDSAP256SHA256"),
        "{out}"
    );
    assert!(out.contains("next: nothing"), "{out}");
    let keys: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("ECDSAP256SHA256 KSK") || l.starts_with("ECDSAP256SHA256 ZSK"))
        .collect();
    assert_eq!(keys.len(), 2, "a KSK and a ZSK, active: {out}");
    assert!(keys.iter().all(|l| l.contains(" active ")), "{out}");

    // The operator asks for ML-DSA-44: its keys sign everything, unpublished.
    write_rollover_zone(d, "\"ML-DSA-44\"");
    let o = run(d, &["sign", "zone.toml"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        stderr(&o).contains("ML-DSA-44: (new) → signing"),
        "{}",
        text(&o)
    );
    let signed = std::fs::read_to_string(d.join("ex.zone.signed")).unwrap();
    assert_eq!(
        algorithms_in(&signed),
        (
            vec!["13".to_string()],
            vec!["13".to_string(), "18".to_string()]
        )
    );
    // The parent is still to point at the ECDSA key only.
    let cds: Vec<&str> = signed.lines().filter(|l| l.contains("\tCDS\t")).collect();
    assert!(
        !cds.is_empty()
            && cds
                .iter()
                .all(|l| l.split_whitespace().nth(5) == Some("13")),
        "{cds:?}"
    );
    // Verification needs the unpublished keys to check their signatures.
    let o = run(d, &["verify", "ex.zone.signed"]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("no DNSKEY at example. with key tag"),
        "{}",
        text(&o)
    );
    let ml_dsa_keys: Vec<String> = std::fs::read_dir(d.join("keys"))
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.contains("+018+") && p.ends_with(".key"))
        .collect();
    assert_eq!(ml_dsa_keys.len(), 2, "{ml_dsa_keys:?}");
    let mut args = vec!["verify", "ex.zone.signed"];
    for k in &ml_dsa_keys {
        args.extend(["--unpublished-key", k.as_str()]);
    }
    let o = run(d, &args);
    assert!(o.status.success(), "{}", text(&o));

    let o = run(d, &["rollover", "zone.toml"]);
    let out = text(&o);
    assert!(out.contains("ML-DSA-44            signing"), "{out}");
    // Published after the largest TTL (300 s) and the propagation delay (60 s).
    let state = std::fs::read_to_string(d.join("keys/example.keystate")).unwrap();
    let since: u64 = state
        .lines()
        .filter_map(|l| l.strip_prefix("since = "))
        .map(|v| v.parse().unwrap())
        .max()
        .unwrap();
    let next = format!(
        "next: ML-DSA-44: signing → published at {}",
        pqdns_core::time::to_display(since + 360)
    );
    assert!(out.contains(&next), "{next}\n{out}");
    let later = (since + 360).to_string();
    let o = run(d, &["rollover", "zone.toml", "--at", &later]);
    assert!(
        text(&o).contains("due now, at the server's next reload: ML-DSA-44: signing → published"),
        "{}",
        text(&o)
    );
    // Nothing waits for the parent yet.
    let o = run(d, &["rollover", "--ds-published", "zone.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        stderr(&o).contains("no algorithm waits for the parent"),
        "{}",
        text(&o)
    );
}

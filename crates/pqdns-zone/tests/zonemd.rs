//! ZONEMD (RFC 8976) against ldns (`ldns-verify-zone -ZZ`, Debian `ldnsutils`, which checks a
//! ZONEMD when present and with `-Z` requires one): zones `pqdns-zone sign` gives a ZONEMD
//! (SHA-384 or SHA-512, NSEC or NSEC3, `--zonemd` or `[signing] zonemd = true`) verify in ldns
//! and in `pqdns-zone verify`; a changed record fails both, also one that leaves every
//! signature valid (unsigned glue), so the failure is the digest's; the RFC 8976 A.1 example
//! verifies in both.

use std::path::Path;
use std::process::{Command, Output};

const ZONE: &str = "\
$ORIGIN example.
$TTL 300
@        SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
@        NS    ns1
ns1      A     192.0.2.1
www      A     192.0.2.3
@        HTTPS 1 . alpn=h3,h2 ipv4hint=192.0.2.3
a.b.ent  A     192.0.2.4
sub      NS    ns.sub
ns.sub   A     192.0.2.5
";

fn run(dir: &Path, program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} ({e})"))
}

fn pqdns_zone(dir: &Path, args: &[&str]) -> Output {
    run(dir, env!("CARGO_BIN_EXE_pqdns-zone"), args)
}

/// `ldns-verify-zone -ZZ`: DNSSEC valid and a ZONEMD present that matches.
fn ldns(dir: &Path, file: &str) -> Output {
    run(dir, "ldns-verify-zone", &["-ZZ", file])
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The signed file's apex ZONEMD records.
fn zonemd_lines(file: &Path) -> Vec<String> {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .filter(|l| l.split_whitespace().nth(3) == Some("ZONEMD"))
        .map(str::to_string)
        .collect()
}

/// Checks `file` passes both verifiers, and that changing the glue address (not signed, so
/// every RRSIG stays valid) or a signed record makes both fail, pqdns naming the digest.
fn both_verify_and_notice_changes(d: &Path, file: &str, hash: &str) {
    let o = ldns(d, file);
    assert!(o.status.success(), "{file}: {}", text(&o));
    let o = pqdns_zone(d, &["verify", file]);
    assert!(o.status.success(), "{file}: {}", text(&o));
    assert!(
        text(&o).contains(&format!("ZONEMD verified ({hash})")),
        "{}",
        text(&o)
    );
    let signed = std::fs::read_to_string(d.join(file)).unwrap();
    for (from, to, digest_only) in [
        ("192.0.2.5", "192.0.2.6", true),
        ("192.0.2.3", "192.0.2.9", false),
    ] {
        assert!(signed.contains(from));
        std::fs::write(d.join("changed"), signed.replace(from, to)).unwrap();
        let o = ldns(d, "changed");
        assert!(!o.status.success(), "{file} {from}: {}", text(&o));
        let o = pqdns_zone(d, &["verify", "changed"]);
        assert!(!o.status.success(), "{file} {from}: {}", text(&o));
        assert!(text(&o).contains("ZONEMD digest mismatch"), "{}", text(&o));
        if digest_only {
            assert!(
                text(&ldns(d, "changed")).contains("zone digest"),
                "ldns blames the digest"
            );
            assert!(
                text(&o).contains(", 0 failures"),
                "signatures still valid: {}",
                text(&o)
            );
        }
    }
}

#[test]
fn signed_zones_with_zonemd_verify_in_ldns_and_pqdns_and_changes_fail_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("ex.zone"), ZONE).unwrap();
    let o = pqdns_zone(
        d,
        &[
            "keygen",
            "--zone",
            "example.",
            "-a",
            "ECDSAP256SHA256",
            "--role",
            "csk",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let key = String::from_utf8(o.stdout).unwrap().trim().to_string() + ".key";
    for (flags, hash) in [
        (&["--zonemd"][..], "SHA-384"),
        (&["--zonemd", "sha512", "--nsec3"][..], "SHA-512"),
    ] {
        let mut args = vec!["sign", "ex.zone", "-k", &key, "-o", "ex.signed"];
        args.extend(flags);
        let o = pqdns_zone(d, &args);
        assert!(o.status.success(), "{}", text(&o));
        let zonemd = zonemd_lines(&d.join("ex.signed"));
        // RFC 8976 §2: at the apex, with the SOA serial, SIMPLE scheme.
        assert_eq!(zonemd.len(), 1, "{zonemd:?}");
        let fields: Vec<&str> = zonemd[0].split_whitespace().collect();
        assert_eq!(fields[0], "example.");
        assert_eq!(&fields[4..6], ["2024010101", "1"]);
        both_verify_and_notice_changes(d, "ex.signed", hash);
    }
    // Without --zonemd a zone gets none, and ldns -Z then refuses it.
    let o = pqdns_zone(d, &["sign", "ex.zone", "-k", &key, "-o", "plain.signed"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(zonemd_lines(&d.join("plain.signed")).is_empty());
    assert!(!ldns(d, "plain.signed").status.success());
    // Re-signing a zone that has a ZONEMD recomputes it rather than keeping a stale digest.
    let o = pqdns_zone(d, &["sign", "ex.signed", "-k", &key, "-o", "again.signed"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(ldns(d, "again.signed").status.success());
}

#[test]
fn toml_signing_zonemd_true_produces_a_zonemd_ldns_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("ex.zone"), ZONE).unwrap();
    std::fs::write(
        d.join("ex.toml"),
        "origin = \"example.\"\nfile = \"ex.zone\"\n[signing]\nalgorithms = [\"ED25519\"]\n\
         keys = \"csk\"\nkey_directory = \"keys\"\nzonemd = true\n",
    )
    .unwrap();
    let o = pqdns_zone(d, &["sign", "ex.toml"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(zonemd_lines(&d.join("ex.zone.signed")).len(), 1);
    both_verify_and_notice_changes(d, "ex.zone.signed", "SHA-384");
}

/// RFC 8976 Appendix A.1, the simple example zone (unsigned): `ldns-verify-zone -Z` accepts
/// its ZONEMD alone, and so does `pqdns-zone verify`.
#[test]
fn rfc8976_a1_example_verifies_in_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a1 = "example. 86400 IN SOA ns1.example. admin.example. 2018031900 1800 900 604800 86400\n\
              example. 86400 IN NS ns1.example.\nexample. 86400 IN NS ns2.example.\n\
              example. 86400 IN ZONEMD 2018031900 1 1 c68090d90a7aed716bc459f9340e3d7c1370d4d24b7e2fc3a1ddc0b9a87153b9a9713b3c9ae5cc27777f98b8e730044c\n\
              ns1.example. 3600 IN A 203.0.113.63\nns2.example. 3600 IN AAAA 2001:db8::63\n";
    std::fs::write(d.join("a1.zone"), a1).unwrap();
    let o = run(d, "ldns-verify-zone", &["-Z", "a1.zone"]);
    assert!(o.status.success(), "{}", text(&o));
    // Unsigned: pqdns-zone verify reports missing signatures but the ZONEMD as verified.
    let o = pqdns_zone(d, &["verify", "a1.zone"]);
    assert!(
        text(&o).contains("ZONEMD verified (SHA-384)"),
        "{}",
        text(&o)
    );
    std::fs::write(
        d.join("a1bad.zone"),
        a1.replace("203.0.113.63", "203.0.113.64"),
    )
    .unwrap();
    assert!(!run(d, "ldns-verify-zone", &["-Z", "a1bad.zone"])
        .status
        .success());
    let o = pqdns_zone(d, &["verify", "a1bad.zone"]);
    assert!(text(&o).contains("ZONEMD digest mismatch"), "{}", text(&o));
}

//! `pqdns-server --check` (issue 32 must-show 3), like named-checkconf: a sound configuration
//! passes and writes nothing; each kind of bad configuration exits 1 naming the file (and the
//! line, where the file has lines) and what is wrong, without binding anything.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_pqdns-server");

const ZONE: &str =
    "@ 3600 SOA ns hostmaster 1 7200 3600 1209600 300\n@ 3600 NS ns\nns 3600 A 192.0.2.1\n";

/// A zone description (lines 1-7) serving `z.zone`; `server` is appended to its [server]
/// table, which starts on line 6, `tail` after it.
fn description(server: &str, tail: &str) -> String {
    format!(
        "origin = \"pqdns.test.\"\nfile = \"z.zone\"\n[signing]\nalgorithms = [\"ECDSAP256SHA256\"]\n\
         key_directory = \"keys\"\n[server]\nudp = [\"127.0.0.1:5353\"]\n{server}{tail}"
    )
}

/// Runs `--check` in `dir` on `zone.toml`; exit code and everything printed.
fn check(dir: &Path, description: &str, zone: &str) -> (i32, String) {
    std::fs::write(dir.join("zone.toml"), description).unwrap();
    std::fs::write(dir.join("z.zone"), zone).unwrap();
    let out = Command::new("timeout")
        .args(["60", BIN, "--zone", "zone.toml", "--check"])
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_sound_configuration_passes_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let (code, text) = check(dir.path(), &description("", ""), ZONE);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("zone pqdns.test. (zone.toml): 3 records, signed with ECDSAP256SHA256"),
        "{text}"
    );
    assert!(
        text.contains("missing keys are generated at start"),
        "{text}"
    );
    assert!(text.contains("configuration ok"), "{text}");
    assert!(!dir.path().join("keys").exists(), "--check wrote keys");
}

#[test]
fn each_kind_of_bad_configuration_is_named_with_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let bad_key = dir.path().join("bad-keys");
    std::fs::create_dir_all(&bad_key).unwrap();
    std::fs::write(bad_key.join("Kpqdns.test.+013+12345.key"), "not a key\n").unwrap();
    std::fs::write(
        bad_key.join("Kpqdns.test.+013+12345.private"),
        "not a key\n",
    )
    .unwrap();
    let cases: Vec<(&str, String, &str, Vec<&str>)> = vec![
        (
            "TOML syntax",
            description("dot = [\n", ""),
            ZONE,
            vec!["zone.toml", "line 8"],
        ),
        (
            "unknown [server] key",
            description("colour = 1\n", ""),
            ZONE,
            vec!["zone.toml", "line 8", "unknown field `colour`"],
        ),
        (
            "listen address",
            description("tcp = [\"localhost\"]\n", ""),
            ZONE,
            vec!["zone.toml", "line 8", "invalid socket address"],
        ),
        (
            "algorithm",
            description("", "").replace("ECDSAP256SHA256", "RSAMD5-PQ"),
            ZONE,
            vec!["zone.toml", "unknown algorithm \"RSAMD5-PQ\""],
        ),
        (
            "transfer ACL",
            description("axfr_allow = [\"10.0.0.0/40\"]\n", ""),
            ZONE,
            vec!["zone.toml:8:", "axfr_allow"],
        ),
        (
            "NOTIFY target",
            description("notify = [\"ns1.example\"]\n", ""),
            ZONE,
            vec!["zone.toml:8:", "notify target"],
        ),
        (
            "fragmentation",
            description("fragmentation = \"udp\"\n", ""),
            ZONE,
            vec!["zone.toml:8:", "fragmentation \"udp\""],
        ),
        (
            "cookie secret",
            description("cookie_secret = \"00\"\n", ""),
            ZONE,
            vec!["zone.toml:8:", "cookie_secret"],
        ),
        (
            "unknown user",
            description("user = \"no-such-user-pqdns\"\n", ""),
            ZONE,
            vec!["no user \"no-such-user-pqdns\""],
        ),
        (
            "missing TLS files",
            description(
                "",
                "[server.tls]\ncertificate = \"none.pem\"\nprivate_key = \"none.key\"\n",
            ),
            ZONE,
            vec!["none.pem", "No such file"],
        ),
        (
            "missing zone file",
            description("", "").replace("z.zone", "gone.zone"),
            ZONE,
            vec!["gone.zone", "cannot read"],
        ),
        (
            "bad RDATA",
            description("", ""),
            "@ 3600 SOA ns h 1 2 3 4 5\n@ 3600 NS ns\nns 3600 A 192.0.2.300\n",
            vec!["z.zone:3:", "192.0.2.300"],
        ),
        (
            "record outside the zone",
            description("", ""),
            "@ 3600 SOA ns h 1 2 3 4 5\n@ 3600 NS ns\nns.elsewhere.example. 3600 A 192.0.2.1\n",
            vec!["z.zone:3:", "outside zone pqdns.test."],
        ),
        (
            "unreadable key file",
            description("", "").replace("key_directory = \"keys\"", "key_directory = \"bad-keys\""),
            ZONE,
            vec!["Kpqdns.test.+013+12345"],
        ),
    ];
    assert!(cases.len() >= 10);
    for (kind, desc, zone, wanted) in &cases {
        let (code, text) = check(dir.path(), desc, zone);
        assert_eq!(code, 1, "{kind}: exit status\n{text}");
        for w in wanted {
            assert!(text.contains(w), "{kind}: {w:?} not in\n{text}");
        }
        assert!(
            !text.contains("listening"),
            "{kind}: --check bound a listener\n{text}"
        );
    }
}

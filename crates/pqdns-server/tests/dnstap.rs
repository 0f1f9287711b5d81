//! dnstap (issue 32 must-show 4): pqdns-server started with `--dnstap FILE` is queried over
//! UDP, TCP, DoT, DoH and DoQ (kdig), stopped with SIGTERM, and BIND's `dnstap-read` decodes
//! the file: one AUTH_QUERY and one AUTH_RESPONSE per query, with the querier's address and
//! the DNS messages. Every wait is bounded.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{kdig, listening, require, spawn_server, KillOnDrop, RECORDS};

#[test]
fn dnstap_read_decodes_query_and_response_for_every_transport() {
    require("dnstap-read", "bind9-dnsutils");
    let dir = tempfile::tempdir().unwrap();
    let any = "[\"127.0.0.1:0\"]";
    std::fs::write(
        dir.path().join("zone.toml"),
        format!(
            "origin = \"pqdns.test.\"\nrecords = '''{RECORDS}'''\n[signing]\n\
             algorithms = [\"ECDSAP256SHA256\"]\nkey_directory = \"keys\"\n[server]\n\
             udp = {any}\ntcp = {any}\ndot = {any}\ndoh = {any}\ndoq = {any}\n\
             amplification_limit = 0\n"
        ),
    )
    .unwrap();
    let log = dir.path().join("server.log");
    let (child, rx) = spawn_server(
        &["--zone", "zone.toml", "--dnstap", "tap.fstrm"],
        dir.path(),
        &log,
    );
    let pid = child.id();
    let mut server = KillOnDrop(child);
    let within = Duration::from_secs(120);
    let udp = listening(&rx, "udp", within, &log);
    let tcp = listening(&rx, "tcp", within, &log);
    let dot = listening(&rx, "dot", within, &log);
    let doh = listening(&rx, "doh", within, &log);
    let doq = listening(&rx, "doq", within, &log);
    let queries: [(&str, std::net::SocketAddr, &[&str]); 5] = [
        ("udp", udp, &["+notcp"]),
        ("tcp", tcp, &["+tcp"]),
        ("dot", dot, &["+tls"]),
        ("doh", doh, &["+https"]),
        ("doq", doq, &["+quic"]),
    ];
    for (what, addr, how) in queries {
        let name = format!("{what}.pqdns.test.");
        let mut args = how.to_vec();
        args.extend([name.as_str(), "A"]);
        let r = kdig(addr, &args);
        // (kdig's HTTP line also says "status:", so the header line is matched whole.)
        assert!(
            r.text.contains("opcode: QUERY; status: NXDOMAIN"),
            "{what}: {}",
            r.text
        );
    }

    require("kill", "procps");
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }

    let out = Command::new("timeout")
        .args(["30", "dnstap-read", "-y", "tap.fstrm"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "dnstap-read: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<&str> = text.split("\n---").collect();
    let count = |what: &str| frames.iter().filter(|f| f.contains(what)).count();
    assert_eq!(count("type: AUTH_QUERY"), 5, "{text}");
    assert_eq!(count("type: AUTH_RESPONSE"), 5, "{text}");
    assert_eq!(count("query_address: \"127.0.0.1\""), 10, "{text}");
    assert_eq!(count("identity: pqdns-server"), 10, "{text}");
    for what in ["udp", "tcp", "dot", "doh", "doq"] {
        let name = format!("{what}.pqdns.test.");
        let about: Vec<&&str> = frames.iter().filter(|f| f.contains(&name)).collect();
        assert_eq!(about.len(), 2, "{what}: a query and its response\n{text}");
        assert!(
            about.iter().any(|f| f.contains("status: NXDOMAIN")),
            "{what}: the response message is decoded\n{text}"
        );
    }
    // BIND 9.18's dnstap-read names TCP and prints every other protocol as UDP (it predates
    // DOT 3, DOH 4 and DOQ 7, whose numbers pqdns-net's known-answer test checks).
    assert_eq!(count("socket_protocol: TCP"), 2, "{text}");
    let tcp = frames.iter().filter(|f| f.contains("tcp.pqdns.test."));
    assert!(
        tcp.clone().count() == 2 && tcp.into_iter().all(|f| f.contains("socket_protocol: TCP"))
    );
}

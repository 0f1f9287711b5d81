//! BIND's validator (delv from bind9-dnsutils) validates our answers from the zone's DS alone:
//! a positive answer, an NXDOMAIN, a wildcard answer and one redirected by a DNAME on a zone signed only with ECDSA
//! P-256. delv exits 0 even when validation fails, so the output is checked; a wrong trust
//! anchor must not validate, which shows the check can fail.

use crate::common;

use std::net::SocketAddr;
use std::path::Path;

use common::{require, run, TestServer, ORIGIN};
use pqdns_core::rdata::to_presentation;
use pqdns_core::RrType;
use pqdns_test_support::ports::free_dual_port;

fn anchor_file(dir: &Path, ds_rdata: &str) -> String {
    // "tag alg digest-type HEX" → trust-anchors { zone static-ds tag alg type "HEX"; };
    let f: Vec<&str> = ds_rdata.split_whitespace().collect();
    let text = format!(
        "trust-anchors {{ {ORIGIN} static-ds {} {} {} \"{}\"; }};\n",
        f[0],
        f[1],
        f[2],
        f[3..].concat()
    );
    let path = dir.join("anchor.conf");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn delv(server: &TestServer, anchor: &str, qname: &str, qtype: &str) -> String {
    let program = require("delv", "bind9-dnsutils");
    let addr = server.udp();
    let root = format!("+root={}", ORIGIN.trim_end_matches('.'));
    let args: Vec<String> = [
        "-a",
        anchor,
        &root,
        &format!("@{}", addr.ip()),
        "-p",
        &addr.port().to_string(),
        qname,
        qtype,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    run(&program, &args).1
}

#[test]
fn delv_fully_validates_positive_nxdomain_and_wildcard() {
    // UDP and TCP on one port: delv retries DNAME answers over TCP.
    let port = free_dual_port();
    let server = TestServer::start_with(&["ECDSAP256SHA256"], |s| {
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        (s.udp, s.tcp) = (vec![addr], vec![addr]);
    });
    assert_eq!(server.ds.len(), 1, "one KSK, one DS");
    let ds = to_presentation(RrType::DS, &server.ds[0].rdata);
    let written = std::fs::read_to_string(&server.ds_path).unwrap();
    assert!(written.contains(&ds), "DS file holds the printed DS");
    let anchor = anchor_file(server.dir.path(), &ds);

    let out = delv(&server, &anchor, &format!("www.{ORIGIN}"), "A");
    assert!(out.contains("; fully validated"), "{out}");
    assert!(out.contains("192.0.2.80"), "{out}");

    let out = delv(&server, &anchor, &format!("nope.{ORIGIN}"), "A");
    assert!(
        out.contains("; negative response, fully validated"),
        "{out}"
    );
    assert!(out.contains("NXDOMAIN"), "{out}");

    let out = delv(&server, &anchor, &format!("q.apps.{ORIGIN}"), "TXT");
    assert!(
        out.contains("; fully validated") && out.contains("served by the wildcard"),
        "{out}"
    );

    // old-apps DNAME apps: the signed DNAME, a synthesized CNAME, then the wildcard answer.
    let out = delv(&server, &anchor, &format!("q.old-apps.{ORIGIN}"), "TXT");
    assert!(
        out.contains("; fully validated")
            && out.contains("DNAME")
            && out.contains("served by the wildcard"),
        "DNAME: {out}"
    );

    let out = delv(&server, &anchor, &format!("www.{ORIGIN}"), "TXT");
    assert!(
        out.contains("; negative response, fully validated"),
        "NODATA: {out}"
    );

    // Control: a DS that matches no key must not validate.
    let mut wrong = ds.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == '0' { '1' } else { '0' });
    let bad_anchor = anchor_file(server.dir.path(), &wrong);
    let out = delv(&server, &bad_anchor, &format!("www.{ORIGIN}"), "A");
    assert!(!out.contains("fully validated"), "{out}");
}

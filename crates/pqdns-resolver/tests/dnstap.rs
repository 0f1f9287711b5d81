//! dnstap (issue 32 must-show 4): pqdns-resolver started with `--dnstap FILE` iterates from a
//! root through `tld.` to a leaf (in-process pqdns-servers on 127.0.0.2, .3 and .4), is
//! queried by kdig over UDP, TCP, DoT, DoH and DoQ, stopped with SIGTERM, and BIND's
//! `dnstap-read` decodes the file: a CLIENT_QUERY and a CLIENT_RESPONSE per query with the
//! client's address, and a RESOLVER_QUERY and a RESOLVER_RESPONSE per query sent to an
//! authority, with that authority's address and port and the zone it was asked for. Every
//! wait is bounded.

use crate::common;

use std::net::SocketAddr;

use common::hierarchy::{build_with, serve, Leaf, Running, LEAF_IP, ROOT_IP, TIERS, TLD_IP};
use common::service::Service;
use common::{dnstap_frames, runtime};
use pqdns_test_support::hierarchy::write_root_hints;
use pqdns_test_support::peers::{kdig, require};
use pqdns_test_support::ports::free_dual_port_on;

/// One leaf, signed as the root and `tld.` with ECDSA, quick to sign.
const LEAF: Leaf = Leaf {
    name: "leaf",
    algorithms: &["ECDSAP256SHA256"],
    denial: "nsec",
    ip: LEAF_IP,
    extra: "",
};

#[test]
fn dnstap_read_decodes_client_and_resolver_messages() {
    require("dnstap-read", "bind9-dnsutils");
    let h = build_with(&[LEAF], "ECDSAP256SHA256", "ECDSAP256SHA256", "");
    let rt = runtime();
    let port = free_dual_port_on(ROOT_IP.parse().unwrap());
    let at = |ip: &str| SocketAddr::new(ip.parse().unwrap(), port);
    let d = h.dir.path();
    let _servers = Running {
        handles: vec![
            serve(&rt, d, vec![h.root.clone()], at(ROOT_IP), false),
            serve(&rt, d, vec![h.tld.clone()], at(TLD_IP), false),
            serve(&rt, d, h.leaves.clone(), at(LEAF_IP), false),
        ],
        rt,
    };
    let hints = write_root_hints(d, TIERS.root);
    let anchor = d.join("root.ds");
    std::fs::write(&anchor, format!("{}\n", h.root_ds_text)).unwrap();
    let tap = d.join("tap.fstrm");
    let port_arg = port.to_string();
    let mut s = Service::start(
        d,
        "tap",
        &[
            "--root-hints",
            hints.to_str().unwrap(),
            "--authority-port",
            &port_arg,
            "--trust-anchor",
            anchor.to_str().unwrap(),
            "--dnstap",
            tap.to_str().unwrap(),
        ],
    );

    // A different question over each transport, each answered from the leaf.
    let queries: [(&str, SocketAddr, &str, &str, &str); 5] = [
        ("+notcp", s.udp, "www.leaf.tld.", "A", "192.0.2.1"),
        ("+tcp", s.tcp, "alias.leaf.tld.", "A", "192.0.2.1"),
        ("+tls", s.dot, "a.b.ent.leaf.tld.", "A", "192.0.2.2"),
        ("+https", s.doh, "x.wild.leaf.tld.", "TXT", "\"wildcard\""),
        ("+quic", s.doq, "leaf.tld.", "NS", "ns.leaf.tld."),
    ];
    for (how, addr, name, qtype, rdata) in queries {
        let r = kdig(addr, &[how, "+recurse", "+time=20", name, qtype]);
        // (kdig's HTTP line also says "status:", so the header line is matched whole.)
        assert!(
            r.text.contains("opcode: QUERY; status: NOERROR") && r.text.contains(rdata),
            "{how} {name}: {}",
            r.text
        );
    }
    s.terminate();

    let text = dnstap_frames(&tap);
    let frames: Vec<&str> = text.split("\n---").collect();
    let of = |kind: &str| -> Vec<&str> {
        let line = format!("type: {kind}\n");
        frames
            .iter()
            .copied()
            .filter(|f| f.contains(&line))
            .collect()
    };
    assert_eq!(
        frames.len(),
        of("CLIENT_QUERY").len()
            + of("CLIENT_RESPONSE").len()
            + of("RESOLVER_QUERY").len()
            + of("RESOLVER_RESPONSE").len(),
        "only these four kinds\n{text}"
    );
    assert!(
        frames
            .iter()
            .all(|f| f.contains("identity: pqdns-resolver")),
        "{text}"
    );

    // The clients: one query and its response per transport, with kdig's address.
    let client: Vec<&str> = [of("CLIENT_QUERY"), of("CLIENT_RESPONSE")].concat();
    assert_eq!(client.len(), 10, "{text}");
    assert!(
        client
            .iter()
            .all(|f| f.contains("query_address: \"127.0.0.1\"")),
        "{text}"
    );
    for (how, _, name, qtype, rdata) in queries {
        let question = format!("- '{name} IN {qtype}'");
        let about: Vec<&&str> = client.iter().filter(|f| f.contains(&question)).collect();
        assert_eq!(
            about.len(),
            2,
            "{how} {name}: a query and its response\n{text}"
        );
        assert!(
            about
                .iter()
                .any(|f| f.contains("status: NOERROR") && f.contains(rdata)),
            "{how} {name}: the response message is decoded\n{text}"
        );
        // BIND 9.18's dnstap-read names TCP and prints every other protocol as UDP (it
        // predates DOT 3, DOH 4 and DOQ 7, whose numbers pqdns-net's known-answer test holds).
        let protocol = if how == "+tcp" { "TCP" } else { "UDP" };
        let line = format!("socket_protocol: {protocol}\n");
        assert!(about.iter().all(|f| f.contains(&line)), "{how}\n{text}");
    }

    // The resolver's own queries: as many responses as queries (loopback loses none), each
    // to an authority of the hierarchy on its port, for the zone that authority serves, and
    // every tier asked.
    let (asked, answered) = (of("RESOLVER_QUERY"), of("RESOLVER_RESPONSE"));
    assert!(asked.len() >= 3, "{text}");
    assert_eq!(asked.len(), answered.len(), "{text}");
    let port_line = format!("response_port: {port}\n");
    for (ip, zone) in [(ROOT_IP, "."), (TLD_IP, "tld."), (LEAF_IP, "leaf.tld.")] {
        let address = format!("response_address: \"{ip}\"");
        let zone_line = format!("query_zone: {zone}\n");
        for group in [&asked, &answered] {
            let to: Vec<&&str> = group.iter().filter(|f| f.contains(&address)).collect();
            assert!(!to.is_empty(), "nothing with {ip}\n{text}");
            assert!(
                to.iter()
                    .all(|f| f.contains(&zone_line) && f.contains(&port_line)),
                "{ip} is asked for {zone} on port {port}\n{text}"
            );
        }
    }
    assert!(
        [&asked, &answered]
            .iter()
            .all(|g| g.iter().all(|f| !f.contains("query_address"))),
        "the authority is the responder\n{text}"
    );
    assert!(
        answered
            .iter()
            .any(|f| f.contains("- 'www.leaf.tld. IN A'") && f.contains("192.0.2.1")),
        "the leaf's answer is decoded\n{text}"
    );
}

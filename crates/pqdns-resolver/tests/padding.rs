//! EDNS padding (RFC 7830, RFC 8467 §4.1; issue 29): two `pqdns-resolver` processes, B
//! forwarding over DoT to A, A forwarding over UDP to a signed zone on pqdns-server.
//!
//! - kdig with `+padding` over DoT to B gets responses of a multiple of 468 bytes (its own
//!   count of received bytes) with a Padding option, on the miss and on the cache hit; over
//!   TCP with `+padding`, and over DoT with `+nopadding`, no Padding option, and the same
//!   answer;
//! - A's dnstap (decoded by BIND's `dnstap-read`) shows B's queries over DoT padded to
//!   multiples of 128 bytes, and A's responses to them to multiples of 468; A's own queries
//!   over UDP, and its responses to kdig over UDP, are not padded.

use crate::common;

use pqdns_test_support::peers::{kdig, require, DigOutput};

use common::service::Service;
use common::{dnstap_frames, serve_www_example};

/// The byte count kdig reports for the response (`;; Received N B`).
fn received(out: &DigOutput) -> usize {
    out.text
        .lines()
        .find_map(|l| l.strip_prefix(";; Received "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no byte count:\n{}", out.text))
}

/// Sizes in bytes of the messages in dnstap-read's YAML frames of `kind`, from their
/// `message_size: NNNb` line.
fn sizes(text: &str, kind: &str) -> Vec<usize> {
    let kind_line = format!("type: {kind}\n");
    text.split("\n---")
        .filter(|f| f.contains(&kind_line))
        .filter_map(|f| {
            f.lines().find_map(|l| {
                l.trim()
                    .strip_prefix("message_size: ")
                    .and_then(|r| r.trim_end_matches('b').parse().ok())
            })
        })
        .collect()
}

#[test]
fn encrypted_responses_and_queries_are_padded_to_their_blocks() {
    require("dnstap-read", "bind9-dnsutils");
    let served = serve_www_example();
    let d = served.dir.path();
    let anchor = d.join("keys/example.ds");
    let anchor = anchor.to_str().unwrap();
    let tap = d.join("a.fstrm");
    let upstream = served.addr.to_string();
    let mut a = Service::start(
        d,
        "a",
        &[
            "--forward",
            &upstream,
            "--trust-anchor",
            anchor,
            "--dnstap",
            tap.to_str().unwrap(),
        ],
    );
    let forward = format!("tls://{}", a.dot);
    let b = Service::start(
        d,
        "b",
        &[
            "--forward",
            &forward,
            "--forward-ca",
            a.cert.to_str().unwrap(),
            "--trust-anchor",
            anchor,
        ],
    );

    let ask = |how: &[&str], name: &str| {
        let mut args = vec!["+recurse", "+dnssec", "+time=20"];
        args.extend_from_slice(how);
        args.extend([name, "A"]);
        let out = kdig(if how.contains(&"+tls") { b.dot } else { b.tcp }, &args);
        assert!(
            out.text.contains("status: NOERROR") && out.text.contains("192.0.2.2"),
            "{how:?}:\n{}",
            out.text
        );
        out
    };
    // Over DoT with padding: the miss, then the cache hit, each a multiple of 468 bytes.
    for _ in 0..2 {
        let out = ask(&["+tls", "+padding"], "www.example.");
        let len = received(&out);
        assert!(len.is_multiple_of(468) && len > 0, "{len} B:\n{}", out.text);
        assert!(out.text.contains("PADDING:"), "{}", out.text);
    }
    // Not padded: TCP with +padding, DoT without it (kdig pads over TLS unless told not
    // to); the same cached answer otherwise.
    let tcp = ask(&["+tcp", "+padding"], "www.example.");
    let plain = ask(&["+tls", "+nopadding"], "www.example.");
    for out in [&tcp, &plain] {
        assert!(!out.text.contains("PADDING"), "{}", out.text);
    }
    assert_eq!(received(&tcp), received(&plain));
    assert!(!received(&tcp).is_multiple_of(468), "{}", tcp.text);

    a.terminate();
    let text = dnstap_frames(&tap);
    // B's queries to A over DoT (BIND 9.18 prints DoT as UDP) and A's responses to them.
    let queries = sizes(&text, "CLIENT_QUERY");
    let responses = sizes(&text, "CLIENT_RESPONSE");
    assert!(
        !queries.is_empty() && queries.len() == responses.len(),
        "{text}"
    );
    for len in &queries {
        assert_eq!(len % 128, 0, "query of {len} B\n{text}");
    }
    for len in &responses {
        assert_eq!(len % 468, 0, "response of {len} B\n{text}");
    }
    // A's own queries over UDP to the authority are not padded (one of them at least is not
    // a multiple of 128 by chance: their sizes differ with the names asked).
    let own = sizes(&text, "RESOLVER_QUERY");
    assert!(!own.is_empty(), "{text}");
    assert!(own.iter().any(|len| len % 128 != 0), "{own:?}");
}

//! Client DNS cookies (RFC 7873 §5.3, issue 16) against pqdns-server: the resolver's server
//! cookie exempts it from the server's response-rate limiting, so a burst of UDP queries to a
//! server that drops everything over one response per second still gets answered over UDP;
//! under `cookies = "require"` the BADCOOKIE answer to a first query is retried with the
//! learnt cookie. A response whose COOKIE option carries another client cookie is refused.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{name, serve, udp_client, ZoneSpec};
use pqdns_core::message::{Message, Question};
use pqdns_core::wire::{Edns, FLAG_QR, OPTION_COOKIE};
use pqdns_core::{Class, RrType};
use pqdns_resolver::cookies::CookieMismatch;
use pqdns_resolver::transport::{BadAnswer, TransportError};
use pqdns_resolver::{Config, Mode, Resolver, Transport};
use pqdns_server::cookie::CookieMode;
use tokio::net::UdpSocket;

const RECORDS: &str = "\
@    SOA  ns1 hostmaster 1 7200 3600 1209600 300
@    NS   ns1
ns1  A    192.0.2.53
www  A    192.0.2.80
";

#[test]
fn server_cookie_exempts_from_rate_limiting_and_badcookie_is_retried() {
    for mode in [CookieMode::On, CookieMode::Require] {
        let zone = ZoneSpec {
            origin: "cookie.test.",
            records: RECORDS,
            algorithms: &["ECDSAP256SHA256"],
            denial: "nsec",
        };
        // One response per second per client prefix, and nothing instead of TC=1 (slip 0):
        // without the exemption, the second query of this burst would time out.
        let served = serve(zone, false, |s| {
            s.rrl.rate = 1;
            s.rrl.slip = 0;
            s.cookies = mode;
        });
        let resolver = Resolver::new(
            Config::new(Mode::Forward(served.addr), served.anchors.clone()),
            udp_client(Duration::from_secs(2)),
        );
        for i in 0..20 {
            let qname = name(&format!("n{i}.cookie.test."));
            let answer = served
                .rt
                .block_on(resolver.resolve(&qname, RrType::A))
                .unwrap_or_else(|e| panic!("{mode:?} query {i}: {e}"));
            assert!(answer.status().is_secure(), "{mode:?} {i}");
            for e in answer.exchanges() {
                assert_eq!(e.transport, Some(Transport::Udp), "{mode:?} {i}: {e:?}");
            }
        }
    }
}

#[test]
fn a_foreign_client_cookie_is_refused() {
    let rt = common::runtime();
    let err = rt.block_on(async {
        let socket = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = socket.local_addr().unwrap();
        // An off-path forger who got ID and port right but cannot know our client cookie.
        common::spawn_udp(socket, |q, _| {
            let mut m = Message::parse(q).unwrap();
            m.flags |= FLAG_QR;
            let edns = m.edns.as_mut().unwrap();
            let (_, cookie) = edns
                .options
                .iter_mut()
                .find(|(code, _)| *code == OPTION_COOKIE)
                .expect("the resolver sends a cookie");
            assert_eq!(cookie.len(), 8, "a first query has no server cookie yet");
            cookie[0] ^= 0xff;
            cookie.extend_from_slice(&[7; 16]);
            Some(m.to_wire())
        });
        let query = Message::query(
            4711,
            Question {
                qname: name("www.cookie.test."),
                qtype: RrType::A,
                qclass: Class::IN,
            },
            false,
            Some(Edns::dnssec_ok(1232)),
        );
        udp_client(Duration::from_secs(2))
            .exchange(addr, &query)
            .await
            .unwrap_err()
    });
    assert!(
        matches!(
            &err,
            TransportError::BadAnswer(BadAnswer::Cookie(CookieMismatch::NotOurs))
        ),
        "{err}"
    );
}

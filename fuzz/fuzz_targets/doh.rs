//! Fuzz target for DoH request decoding (RFC 8484 §4.1, `pqdns-net/src/doh.rs`): the first
//! byte picks the method (GET, HEAD, POST, or another), the rest is split at NUL bytes into
//! the request target (path and query, parsed as an HTTP URI) and a Content-Type value.
//! No panic; a decoded GET message is at most 65535 bytes and is exactly what its `dns`
//! parameter encodes (base64url without padding, canonical); a POST is accepted only with
//! `application/dns-message`; every refusal is a 4xx status.

#![no_main]

use base64::Engine as _;
use http::{header::HeaderValue, Method, Uri};
use libfuzzer_sys::fuzz_target;
use pqdns_net::fuzzing::{decode_request, Decoded};
use pqdns_net::MAX_REQUEST;

fuzz_target!(|bytes: &[u8]| {
    let Some((&pick, rest)) = bytes.split_first() else {
        return;
    };
    let method = match pick % 4 {
        0 => Method::GET,
        1 => Method::HEAD,
        2 => Method::POST,
        _ => Method::PUT,
    };
    let mut parts = rest.splitn(2, |&b| b == 0);
    let Ok(uri) = Uri::try_from(parts.next().unwrap_or_default()) else {
        return;
    };
    let content_type = parts.next().and_then(|c| HeaderValue::from_bytes(c).ok());
    match decode_request(&method, &uri, content_type.as_ref(), "/dns-query") {
        Ok(Decoded::Message(m)) => {
            assert!(method == Method::GET || method == Method::HEAD);
            assert!(m.len() <= MAX_REQUEST, "{} bytes", m.len());
            let param = uri
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("dns=")))
                .expect("a decoded message came from the dns parameter");
            assert_eq!(
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&m),
                param
            );
        }
        Ok(Decoded::Body) => {
            assert_eq!(method, Method::POST);
            let c = content_type.expect("POST accepted without Content-Type");
            assert!(c.to_str().unwrap().trim_start().starts_with("application/dns-message"));
        }
        Err((status, text)) => {
            assert!(status.is_client_error(), "{status}");
            assert!(text.ends_with('\n'));
        }
    }
});

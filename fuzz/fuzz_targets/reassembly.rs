//! Fuzz target for ARRF and QBF reassembly (what a resolver does with fragments from a hostile
//! server): the input is split into messages (2-byte length prefixes); the first starts an
//! ARRF reassembly, the others are fed to it, and all go through QBF reassembly. Nothing may
//! panic, and the ARRF reassembler's memory must stay within its limit.

#![no_main]

use std::time::Instant;

use libfuzzer_sys::fuzz_target;
use pqdns_core::frag::arrf::{Key, Limits, Reassembler, DEFAULT_RRFRAG_TYPE};
use pqdns_core::frag::qbf;
use pqdns_core::message::Message;

fuzz_target!(|bytes: &[u8]| {
    let mut messages = Vec::new();
    let mut rest = bytes;
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        if let Ok(m) = Message::parse_with(&tail[..len], Some(DEFAULT_RRFRAG_TYPE)) {
            messages.push(m);
        }
        rest = &tail[len..];
    }
    let Some(first) = messages.first() else {
        return;
    };
    let mut limits = Limits::default();
    limits.max_bytes = 64 << 10;
    let mut reassembler = Reassembler::new(limits, DEFAULT_RRFRAG_TYPE);
    let now = Instant::now();
    if let Some(question) = first.questions.first() {
        let key = Key {
            server: "127.0.0.1:53".parse().expect("address"),
            id: first.id,
            question: question.clone(),
        };
        if reassembler.start(key.clone(), first.clone(), now).is_ok() {
            for m in &messages[1..] {
                let _ = reassembler.add(&key, m, now);
                assert!(reassembler.memory_used() <= limits.max_bytes);
            }
        }
    }
    let _ = qbf::reassemble(&messages);
});

//! Fuzz target for core message parsing, the resolver's exposure to hostile servers: any bytes
//! through `MessageView::parse` and `Message::parse` (with and without ARRF's compact RRFRAG
//! records). Neither may panic, they must agree on what is a message, and a parsed message
//! must encode to bytes that parse back to the same message.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pqdns_core::frag::arrf::DEFAULT_RRFRAG_TYPE;
use pqdns_core::message::Message;
use pqdns_core::wire::MessageView;

fuzz_target!(|bytes: &[u8]| {
    let view = MessageView::parse(bytes);
    let owned = Message::parse(bytes);
    assert_eq!(
        view.is_ok(),
        owned.is_ok(),
        "the view and the owned parser disagree"
    );
    if let Ok(m) = owned {
        let again = Message::parse(&m.to_wire()).expect("our own encoding parses");
        assert_eq!(again, m, "encode then parse changes the message");
    }
    let _ = Message::parse_with(bytes, Some(DEFAULT_RRFRAG_TYPE));
});

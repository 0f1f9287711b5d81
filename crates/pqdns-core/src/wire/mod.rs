//! The DNS wire format (RFC 1035 §4.1), read and written in one place.
//!
//! - Reading: [`MessageView::parse`] checks a whole message once (header, every name with one
//!   decompression rule, every record, the OPT record) without allocating, then hands out
//!   borrowed [`QuestionView`]s, [`RecordView`]s and an [`OptView`]. The owned
//!   `crate::message::Message` for clients is built from this view, so there is one parser.
//! - Writing: [`MessageWriter`] writes a message into a caller-owned buffer within a size
//!   budget: name compression, rollback of whole RRsets, TC, and an OPT record whose options
//!   ([`MessageWriter::add_option`]) are reserved from the budget before they are needed.
//! - Numbers: [`Rcode`], [`Opcode`] and [`Ede`] are open newtypes with named constants (unknown
//!   values are data); the header flag bits and [`HEADER_LEN`] are defined here only.
//! - Queries: [`query`] is the one acceptability check of a server's incoming message
//!   (which RCODE a malformed or unhandled message gets), shared by the authoritative server
//!   and the resolver service.
//! - TSIG: [`tsig`] signs and verifies messages with shared secrets (RFC 8945).
//! - RDATA: [`rdata`] has typed views (SOA, MX, SRV, DS, DNSKEY, RRSIG, NSEC, NSEC3,
//!   NSEC3PARAM). Which RDATA names are compressed, decompressed or lowercased is one table,
//!   the RDATA layouts of `crate::rdata`.
//!
//! Everything here is bounded and panic-free on hostile input: every length is checked against
//! the message, compression pointers must point strictly before the label run that holds them
//! (so no byte is read twice) with at most [`MAX_POINTER_JUMPS`] per name, and record counts
//! are bounded by the bytes present.

macro_rules! named_codes {
    ($ty:ident, $unknown:literal { $($name:ident = $num:literal, $text:literal, $doc:literal;)* }) => {
        impl $ty {
            $(#[doc = $doc] pub const $name: $ty = $ty($num);)*

            /// The registered name, or `None` for a value without one here.
            pub fn mnemonic(self) -> Option<&'static str> {
                match self.0 {
                    $($num => Some($text),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $ty {
            /// The registered name, or the number after a prefix for others.
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.mnemonic() {
                    Some(m) => f.write_str(m),
                    None => write!(f, concat!($unknown, "{}"), self.0),
                }
            }
        }
    };
}

mod ede;
mod edns;
mod error;
mod header;
mod name;
mod opcode;
#[cfg(feature = "parse-log")]
pub mod parse_log;
pub mod query;
mod rcode;
pub mod rdata;
mod record;
pub mod replay;
pub mod tsig;
mod view;
mod writer;

pub use ede::Ede;
pub use edns::{
    Edns, EdnsOptions, OptView, EDNS_CO, EDNS_DO, MIN_UDP_PAYLOAD, OPTION_COOKIE, OPTION_EDE,
    OPTION_NSID, OPTION_PADDING, OPT_LEN,
};
pub use error::WireError;
pub use header::{
    random_id, Header, FLAG_AA, FLAG_AD, FLAG_CD, FLAG_QR, FLAG_RA, FLAG_RD, FLAG_TC, HEADER_LEN,
};
pub use name::{NameBuf, WireName, MAX_POINTER_JUMPS};
pub use opcode::Opcode;
pub use rcode::Rcode;
pub use record::{RecordView, Section};
pub use view::{truncate_to_question, MessageView, QuestionView, Questions, Records};
pub use writer::{Full, Mark, MessageWriter, MAX_COMPRESSION_ENTRIES, MAX_OPTIONS};

//! Application-layer fragmentation of large DNSSEC answers, so post-quantum answers can stay on
//! UDP: ARRF (RRFRAG records, [`arrf`]) and QBF (query-based fragments, `?n?` names, [`qbf`]),
//! negotiated with an EDNS option ([`edns`]). Encode, fragment and reassemble only; the server
//! and resolver decide when to use it.

pub mod arrf;
pub mod edns;
pub mod qbf;

#[cfg(test)]
mod fixtures;

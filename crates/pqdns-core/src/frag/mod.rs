//! Application-layer fragmentation of large DNSSEC answers, so post-quantum answers can stay on
//! UDP: QBF (query-based fragments, `?n?` names). Encode, fragment and reassemble only; the
//! server and resolver decide when to use it.

pub mod qbf;

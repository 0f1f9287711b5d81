//! A per-thread count of the queries (messages with QR clear) that [`super::MessageView`]
//! parsed, behind the `parse-log` feature: tests of a server use it to show that a request is
//! parsed once on its way through the request pipeline (issue 26), whatever path it takes.

use std::cell::Cell;

thread_local! {
    static QUERIES: Cell<u64> = const { Cell::new(0) };
}

/// Counts one parsed query on this thread.
pub(super) fn count_query() {
    QUERIES.with(|c| c.set(c.get() + 1));
}

/// Queries parsed on this thread since the last call (and resets the count).
pub fn take_query_parses() -> u64 {
    QUERIES.with(|c| c.replace(0))
}

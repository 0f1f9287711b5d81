//! Resolutions in flight per client address: a bounded table of counters, so one client (or a
//! spoofed address) cannot take every resolution slot, and the table itself stays bounded.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use crate::resolve::lock;

/// Counters of resolutions in flight, by client address.
#[derive(Debug)]
pub(crate) struct ClientSlots {
    in_flight: Arc<Mutex<HashMap<IpAddr, usize>>>,
    per_client: usize,
    max_clients: usize,
}

/// One resolution's slot; given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    in_flight: Arc<Mutex<HashMap<IpAddr, usize>>>,
    client: IpAddr,
}

impl ClientSlots {
    /// At most `per_client` slots per address, for at most `max_clients` addresses at once.
    pub(crate) fn new(per_client: usize, max_clients: usize) -> ClientSlots {
        ClientSlots {
            in_flight: Arc::default(),
            per_client,
            max_clients,
        }
    }

    /// A slot for `client`, or `None` if it has `per_client` already or the table is full.
    pub(crate) fn acquire(&self, client: IpAddr) -> Option<Slot> {
        let mut map = lock(&self.in_flight);
        let full = map.len() >= self.max_clients;
        let count = match map.get_mut(&client) {
            Some(n) => n,
            None if full => return None,
            None => map.entry(client).or_insert(0),
        };
        if *count >= self.per_client {
            return None;
        }
        *count += 1;
        Some(Slot {
            in_flight: Arc::clone(&self.in_flight),
            client,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = lock(&self.in_flight);
        if let Some(n) = map.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_client_and_table_bounds() {
        let slots = ClientSlots::new(2, 2);
        let a: IpAddr = "192.0.2.1".parse().unwrap();
        let b: IpAddr = "192.0.2.2".parse().unwrap();
        let c: IpAddr = "192.0.2.3".parse().unwrap();
        let a1 = slots.acquire(a).unwrap();
        let _a2 = slots.acquire(a).unwrap();
        assert!(slots.acquire(a).is_none(), "a third for one client");
        let b1 = slots.acquire(b).unwrap();
        assert!(
            slots.acquire(c).is_none(),
            "a third client in a table of two"
        );
        drop(b1);
        let _c1 = slots
            .acquire(c)
            .expect("b's entry is gone once it finished");
        drop(a1);
        let _a3 = slots.acquire(a).expect("a slot came back");
        assert!(slots.acquire(a).is_none());
    }
}

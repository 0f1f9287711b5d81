//! Unpredictable query IDs and UDP source ports (RFC 5452 §4, §9.2), from the operating
//! system's CSPRNG (`getrandom(2)`, through the `getrandom` crate).
//!
//! Not aws-lc's DRBG: the first use of that in a process seeds it from CPU-jitter entropy,
//! 80–120 ms on the 2-core test machine, which a one-shot UDP query should not pay.

use crate::transport::TransportError;

fn random_u16() -> Result<u16, TransportError> {
    let mut b = [0u8; 2];
    getrandom::fill(&mut b).map_err(|e| {
        TransportError::Io(std::io::Error::other(format!(
            "the OS random number generator failed: {e}"
        )))
    })?;
    Ok(u16::from_be_bytes(b))
}

/// A uniformly random 16-bit query ID.
pub(crate) fn query_id() -> Result<u16, TransportError> {
    random_u16()
}

/// Lowest unprivileged port.
const FIRST_PORT: u16 = 1024;

/// A uniformly random unprivileged port, 1024–65535 (rejection sampling).
pub(crate) fn source_port() -> Result<u16, TransportError> {
    loop {
        let p = random_u16()?;
        if p >= FIRST_PORT {
            return Ok(p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_ports_are_spread_out() {
        // 2000 draws of a uniform 16-bit value: a repeat-heavy or constant source (an LCG
        // seeded from the PID gives one fixed sequence) would show far fewer distinct values.
        let ids: std::collections::HashSet<u16> = (0..2000).map(|_| query_id().unwrap()).collect();
        assert!(ids.len() > 1900, "{} distinct IDs of 2000", ids.len());
        let ports: Vec<u16> = (0..2000).map(|_| source_port().unwrap()).collect();
        assert!(ports.iter().all(|p| *p >= FIRST_PORT));
        let high = ports.iter().filter(|p| **p >= 33_000).count();
        assert!(
            (800..1200).contains(&high),
            "{high} of 2000 in the upper half"
        );
    }
}

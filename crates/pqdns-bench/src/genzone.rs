//! Synthetic zones for benchmarks: a TLD-like zone of N delegations (two NS, glue and a DS
//! each, like the 1500-delegation zone of Verisign's MTL-mode figures) plus M hosts.

use std::fmt::Write as _;

/// Master-file text of a zone at `origin` with `delegations` delegations and `hosts` A records.
///
/// Each delegation `dN` has `ns1.dN` and `ns2.dN` (glue A records) and one SHA-256 DS whose
/// digest is derived from N, so the output is deterministic.
pub fn delegations_zone(origin: &str, delegations: usize, hosts: usize) -> String {
    let mut z = String::with_capacity(delegations * 220 + hosts * 40 + 200);
    let _ = writeln!(z, "$ORIGIN {origin}\n$TTL 3600");
    let _ = writeln!(
        z,
        "@ SOA ns1 hostmaster 2026010101 7200 3600 1209600 300\n@ NS ns1\n@ NS ns2\n\
         ns1 A 192.0.2.1\nns2 A 192.0.2.2"
    );
    for i in 0..delegations {
        let digest: String = (0..32)
            .map(|b| format!("{:02X}", (i.wrapping_mul(31) + b * 7) as u8))
            .collect();
        let _ = writeln!(
            z,
            "d{i} NS ns1.d{i}\nd{i} NS ns2.d{i}\nns1.d{i} A 198.51.{}.{}\nns2.d{i} A 203.0.{}.{}\n\
             d{i} DS {} 13 2 {digest}",
            (i >> 8) & 0xff,
            i & 0xff,
            (i >> 8) & 0xff,
            i & 0xff,
            (i * 7919) % 65536,
        );
    }
    for i in 0..hosts {
        let _ = writeln!(z, "host{i} A 192.0.{}.{}", (i >> 8) & 0xff, i & 0xff);
    }
    z
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqdns_core::zone::Authority;
    use pqdns_core::zonefile::ZoneFileReader;
    use pqdns_core::{Name, RrType, Zone};

    #[test]
    fn generated_zone_has_the_asked_shape() {
        let origin: Name = "tld.".parse().unwrap();
        let text = delegations_zone("tld.", 20, 5);
        let records = ZoneFileReader::new(None, None)
            .read_str(&text, "gen")
            .unwrap();
        let zone = Zone::from_records(origin, records).unwrap();
        let delegations: Vec<_> = zone
            .nodes
            .keys()
            .filter(|n| zone.authority(n) == Authority::Delegation)
            .collect();
        assert_eq!(delegations.len(), 20);
        for d in delegations {
            assert_eq!(zone.rrset(d, RrType::NS).unwrap().rdatas.len(), 2);
            assert_eq!(zone.rrset(d, RrType::DS).unwrap().rdatas.len(), 1);
        }
        let glue = zone
            .nodes
            .keys()
            .filter(|n| zone.authority(n) == Authority::Glue)
            .count();
        assert_eq!(glue, 40);
        assert!(zone
            .rrset(&"host4.tld.".parse().unwrap(), RrType::A)
            .is_some());
    }
}

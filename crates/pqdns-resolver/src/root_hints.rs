//! Root hints: where iterative resolution starts. The file is the one IANA publishes as
//! `named.root` (Debian's `/usr/share/dns/root.hints`): master-file syntax (RFC 1035 §5) with
//! the root's NS RRset and the A/AAAA records of those names.

use std::net::IpAddr;
use std::path::Path;

use pqdns_core::zonefile::{ZoneFileError, ZoneFileReader};
use pqdns_core::{Name, RrType};

/// The addresses of the root servers a hints file names: the A and AAAA records of the targets
/// of its root NS records, in file order.
///
/// # Errors
/// [`ZoneFileError`] with file and line for an unreadable or malformed file, or (line 0) one
/// without a root NS record whose target has an address.
pub fn read(path: &Path) -> Result<Vec<IpAddr>, ZoneFileError> {
    let records = ZoneFileReader::new(Some(Name::root()), Some(0)).read_file(path)?;
    let targets: Vec<Name> = records
        .iter()
        .filter(|r| r.rtype == RrType::NS && r.owner.is_root())
        .filter_map(|r| Name::from_wire(&r.rdata).ok())
        .map(|n| n.to_lowercase())
        .collect();
    let addresses: Vec<IpAddr> = records
        .iter()
        .filter(|r| targets.contains(&r.owner.to_lowercase()))
        .filter_map(|r| match (r.rtype, r.rdata.len()) {
            (RrType::A, 4) => <[u8; 4]>::try_from(&r.rdata[..]).ok().map(IpAddr::from),
            (RrType::AAAA, 16) => <[u8; 16]>::try_from(&r.rdata[..]).ok().map(IpAddr::from),
            _ => None,
        })
        .collect();
    if addresses.is_empty() {
        return Err(ZoneFileError {
            file: path.to_path_buf(),
            line: 0,
            message: "no address of a root name server (root NS records and their A/AAAA)".into(),
        });
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_iana_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("root.hints");
        // The layout of IANA's named.root, two servers.
        std::fs::write(
            &path,
            ";       This file holds the information on root name servers\n\
             .                        3600000      NS    A.ROOT-SERVERS.NET.\n\
             A.ROOT-SERVERS.NET.      3600000      A     198.41.0.4\n\
             A.ROOT-SERVERS.NET.      3600000      AAAA  2001:503:ba3e::2:30\n\
             .                        3600000      NS    B.ROOT-SERVERS.NET.\n\
             B.ROOT-SERVERS.NET.      3600000      A     170.247.170.2\n\
             C.ROOT-SERVERS.NET.      3600000      A     192.33.4.12\n",
        )
        .unwrap();
        let got = read(&path).unwrap();
        let want: Vec<IpAddr> = ["198.41.0.4", "2001:503:ba3e::2:30", "170.247.170.2"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        // C is not named by an NS record.
        assert_eq!(got, want);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("root.hints");
        std::fs::write(&path, ". 3600 NS a.root.\na.root. 3600 A 300.1.1.1\n").unwrap();
        let e = read(&path).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        std::fs::write(&path, ". 3600 NS a.root.\n").unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.to_string().contains("no address"), "{e}");
    }
}

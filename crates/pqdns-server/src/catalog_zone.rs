//! Catalog zones (RFC 9432, schema version 2): a zone whose records list the member zones a
//! secondary should serve. Not to be confused with [`crate::catalog`], the set of zones this
//! server serves: a catalog zone is DNS data, one of those zones.
//!
//! This module is the format and the settings, with no I/O: [`parse`] reads the members of a
//! catalog zone (version, `*.zones` PTR members with their unique IDs, the `group` and `coo`
//! properties), [`produce`] writes a catalog zone of given members, and [`CatalogSettings`]
//! is the `[catalog]` table of a zone description. What a server does with them (members
//! added and removed at run time, produced catalogs kept current) is
//! [`crate::provisioning`].
//!
//! ```toml
//! origin = "catalog.example."        # a consumer: a secondary zone with a [catalog] table
//! [secondary]
//! primaries = ["192.0.2.1 key transfer."]
//! [catalog]
//! role = "consumer"
//! max_members = 10000                # a larger catalog changes nothing (logged, counted)
//! [catalog.template]                 # every member's description, without `origin`; its
//! [catalog.template.signing]         # [secondary] defaults to the catalog's own
//! algorithms = ["ECDSAP256SHA256", "ML-DSA-44"]
//! ```
//!
//! A producer is a zone with `[catalog] role = "producer"` and no data of its own: its members
//! are the other zones served here (catalog zones excepted), each with the producer's `group`
//! property if one is set.

use std::collections::BTreeMap;

use pqdns_core::config::LoadedConfig;
use pqdns_core::serial::Serial;
use pqdns_core::zonefile::ZoneFileReader;
use pqdns_core::{Name, RrType, Zone};
use serde::Deserialize;
use sha2::{Digest, Sha256};

/// The schema version this module reads and writes (RFC 9432 §4.2.1).
pub const VERSION: &str = "2";
/// Default bound on a consumed catalog's members ([`CatalogSettings::max_members`]).
pub const DEFAULT_MAX_MEMBERS: usize = 10_000;
/// Largest `group` property value accepted from a catalog, bytes (one TXT string).
pub const MAX_GROUP_LEN: usize = 255;

/// What a server does with a catalog zone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Serves the members listed in the catalog, transferred from a primary (RFC 9432 §5).
    Consumer,
    /// Publishes the zones served here as the catalog's members (RFC 9432 §4).
    Producer,
}

/// The `[catalog]` table of a zone description, as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogTable {
    role: Role,
    #[serde(default = "default_max_members")]
    max_members: usize,
    template: Option<toml::Table>,
    group: Option<String>,
}

fn default_max_members() -> usize {
    DEFAULT_MAX_MEMBERS
}

/// A zone's `[catalog]` settings.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct CatalogSettings {
    /// Consumer or producer.
    pub role: Role,
    /// Consumer: a catalog version with more members changes nothing.
    pub max_members: usize,
    /// Consumer: the zone description every member gets (without `origin`); its `[secondary]`
    /// table defaults to the catalog's own.
    pub template: toml::Table,
    /// Producer: the `group` property (RFC 9432 §4.4.2) given to every member.
    pub group: Option<String>,
}

/// Why a `[catalog]` table or a member's description is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[catalog]: {0}")]
pub struct SettingsError(String);

impl CatalogSettings {
    /// The `[catalog]` table of `cfg`, if it has one.
    ///
    /// # Errors
    /// [`SettingsError`] for unknown keys or a consumer that is not a secondary zone.
    pub fn of(cfg: &LoadedConfig) -> Result<Option<CatalogSettings>, SettingsError> {
        let Some(table) = &cfg.config.catalog else {
            return Ok(None);
        };
        let t: CatalogTable = table
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| SettingsError(e.message().to_string()))?;
        if t.role == Role::Consumer && cfg.secondary().is_none() {
            return Err(SettingsError(
                "a consumer's catalog comes from a primary: give the zone a [secondary] table"
                    .into(),
            ));
        }
        if t.role == Role::Producer
            && (cfg.secondary().is_some()
                || cfg.config.file.is_some()
                || cfg.config.records.is_some())
        {
            return Err(SettingsError(
                "a producer's catalog is made from the zones served here: no [secondary], \
                 `file` or `records`"
                    .into(),
            ));
        }
        if t.template
            .as_ref()
            .is_some_and(|t| t.contains_key("origin"))
        {
            return Err(SettingsError(
                "[catalog.template] has no `origin`: each member gets its own".into(),
            ));
        }
        if t.template
            .as_ref()
            .is_some_and(|t| t.contains_key("catalog"))
        {
            return Err(SettingsError(
                "[catalog.template] has no [catalog]: a member is no catalog".into(),
            ));
        }
        if t.group.as_ref().is_some_and(|g| g.len() > MAX_GROUP_LEN) {
            return Err(SettingsError(format!(
                "group is longer than {MAX_GROUP_LEN} bytes"
            )));
        }
        Ok(Some(CatalogSettings {
            role: t.role,
            max_members: t.max_members,
            template: t.template.unwrap_or_default(),
            group: t.group,
        }))
    }

    /// The zone description of `member` of the catalog `catalog` describes: the template
    /// with `origin` set, and the catalog's `[secondary]` table unless the template has one
    /// (RFC 9432 leaves where members come from to configuration; the catalog's primaries are
    /// BIND's and Knot's default too).
    pub fn member_table(&self, catalog: &LoadedConfig, member: &Name) -> toml::Table {
        let mut table = self.template.clone();
        table.insert("origin".into(), toml::Value::String(member.to_string()));
        if !table.contains_key("secondary") {
            if let Some(secondary) = catalog_secondary_table(catalog) {
                table.insert("secondary".into(), secondary);
            }
        }
        table
    }
}

/// The catalog's own `[secondary]` table, as a TOML value for a member's description.
fn catalog_secondary_table(catalog: &LoadedConfig) -> Option<toml::Value> {
    let s = catalog.secondary()?;
    let mut t = toml::Table::new();
    t.insert(
        "primaries".into(),
        toml::Value::Array(
            s.primaries
                .iter()
                .map(|p| toml::Value::String(p.clone()))
                .collect(),
        ),
    );
    t.insert(
        "state_directory".into(),
        toml::Value::String(s.state_directory.to_string_lossy().into_owned()),
    );
    t.insert(
        "max_transfer_bytes".into(),
        toml::Value::Integer(i64::try_from(s.max_transfer_bytes).unwrap_or(i64::MAX)),
    );
    t.insert(
        "transfer_timeout".into(),
        toml::Value::String(s.transfer_timeout.clone()),
    );
    Some(toml::Value::Table(t))
}

/// One member zone of a catalog (RFC 9432 §4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// The member zone's name (the PTR target).
    pub zone: Name,
    /// Its unique ID: the label left of `zones.$CATZ`.
    pub id: Vec<u8>,
    /// The `group` property (§4.4.2): TXT strings at `group.<id>.zones.$CATZ`.
    pub groups: Vec<Vec<u8>>,
    /// The change-of-ownership property (§4.4.1): the catalog the member may move to.
    pub coo: Option<Name>,
}

/// Why a catalog zone is not processed; nothing changes then.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogZoneError {
    /// No `version` TXT RRset, more than one RR in it, or a version other than
    /// [`VERSION`] (RFC 9432 §4.2.1).
    #[error("schema version: {0} (only version \"2\" is understood)")]
    Version(String),
    /// More members than the bound.
    #[error("{count} member zones, more than max_members {max}")]
    TooManyMembers {
        /// Members listed.
        count: usize,
        /// The bound.
        max: usize,
    },
}

/// The members of `catalog` (RFC 9432 §4), at most `max_members`, by member zone name.
///
/// RFC 9432 §4.2.1: catalog consumers "MUST NOT apply catalog zone processing" to a zone
/// without the version property, with more than one RR in it, or with a version they do not
/// implement: the whole catalog is an error then. A member entry that is not one PTR RR at
/// `<id>.zones.$CATZ` (§4.3), and a member zone listed under two IDs, are ignored with the
/// reason in `skipped`; records the schema does not define are ignored (§3).
///
/// # Errors
/// [`CatalogZoneError`]: wrong version, or too many members.
pub fn parse(
    catalog: &Zone,
    max_members: usize,
    skipped: &mut Vec<String>,
) -> Result<BTreeMap<Name, Member>, CatalogZoneError> {
    let origin = &catalog.origin;
    let label = |l: &str| origin.prepend_label(l.as_bytes()).ok();
    let version = label("version")
        .and_then(|n| catalog.rrset(&n, RrType::TXT))
        .ok_or_else(|| CatalogZoneError::Version("no version TXT record".into()))?;
    match version.rdatas.as_slice() {
        [one] if txt_strings(one).as_deref() == Some(&[VERSION.as_bytes().to_vec()][..]) => {}
        [one] => {
            return Err(CatalogZoneError::Version(format!(
                "TXT {:?}",
                txt_strings(one)
                    .unwrap_or_default()
                    .iter()
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect::<Vec<_>>()
            )))
        }
        more => {
            return Err(CatalogZoneError::Version(format!(
                "{} TXT records",
                more.len()
            )))
        }
    }
    let Some(zones) = label("zones") else {
        return Ok(BTreeMap::new());
    };
    let depth = zones.label_count() + 1;
    let mut by_id: BTreeMap<Vec<u8>, Member> = BTreeMap::new();
    for (owner, node) in catalog.nodes.range(zones.clone()..) {
        if !owner.is_subdomain_of(&zones) {
            break;
        }
        if owner.label_count() != depth {
            continue;
        }
        let Some(ptr) = node.get(&RrType::PTR) else {
            continue;
        };
        let id = owner.labels().next().unwrap_or_default().to_vec();
        let [target] = ptr.rdatas.as_slice() else {
            skipped.push(format!(
                "{owner}: {} PTR records, one expected",
                ptr.rdatas.len()
            ));
            continue;
        };
        let Ok(zone) = Name::from_wire(target) else {
            skipped.push(format!("{owner}: PTR target is not a name"));
            continue;
        };
        let property = |name: &str| owner.prepend_label(name.as_bytes()).ok();
        let groups = property("group")
            .and_then(|n| catalog.rrset(&n, RrType::TXT))
            .map(|set| {
                set.rdatas
                    .iter()
                    .filter_map(|rd| txt_strings(rd))
                    .flatten()
                    .filter(|g| g.len() <= MAX_GROUP_LEN)
                    .collect()
            })
            .unwrap_or_default();
        let coo = property("coo")
            .and_then(|n| catalog.rrset(&n, RrType::PTR))
            .and_then(|set| match set.rdatas.as_slice() {
                [one] => Name::from_wire(one).ok(),
                _ => None,
            });
        by_id.insert(
            id.clone(),
            Member {
                zone: zone.to_lowercase(),
                id,
                groups,
                coo,
            },
        );
    }
    let mut members: BTreeMap<Name, Member> = BTreeMap::new();
    let mut twice: Vec<Name> = Vec::new();
    for member in by_id.into_values() {
        if let Some(first) = members.insert(member.zone.clone(), member) {
            twice.push(first.zone);
        }
    }
    for zone in twice {
        if members.remove(&zone).is_some() {
            skipped.push(format!("{zone}: listed under more than one ID"));
        }
    }
    if members.len() > max_members {
        return Err(CatalogZoneError::TooManyMembers {
            count: members.len(),
            max: max_members,
        });
    }
    Ok(members)
}

/// The character-strings of TXT RDATA (RFC 1035 §3.3.14); `None` if malformed.
fn txt_strings(rdata: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut rest = rdata;
    while let Some((&len, tail)) = rest.split_first() {
        let s = tail.get(..usize::from(len))?;
        out.push(s.to_vec());
        rest = &tail[usize::from(len)..];
    }
    Some(out)
}

/// The unique ID a produced catalog gives `zone` (RFC 9432 §4.3 leaves the choice to the
/// producer): the first 16 bytes of SHA-256 of its canonical (lower-case) wire form, in
/// lower-case hex. Stable, so that a member keeps its ID across versions and restarts (a new
/// ID would make consumers reset the zone, §5.7).
pub fn member_id(zone: &Name) -> String {
    let digest = Sha256::digest(zone.to_lowercase().as_wire());
    data_encoding::HEXLOWER.encode(&digest[..16])
}

/// A catalog zone `origin` of `members` (RFC 9432 §4): SOA and NS `invalid.` at the apex
/// (§4.1), `version` TXT "2", and one PTR per member at `<member_id>.zones` with TTL 0, plus
/// a `group` TXT when `group` is given. `serial` is the SOA serial.
///
/// # Errors
/// A message if a member name is too long to sit under `zones.<origin>`.
pub fn produce<'a>(
    origin: &Name,
    members: impl IntoIterator<Item = &'a Name>,
    group: Option<&str>,
    serial: u32,
) -> Result<Zone, String> {
    let mut text = format!(
        "@ 0 IN SOA invalid. invalid. {serial} 3600 600 2419200 0\n@ 0 IN NS invalid.\n\
         version 0 IN TXT \"{VERSION}\"\n"
    );
    for member in members {
        let id = member_id(member);
        text.push_str(&format!("{id}.zones 0 IN PTR {member}\n"));
        if let Some(g) = group {
            let quoted: String = g
                .bytes()
                .map(|b| match b {
                    b'"' | b'\\' => format!("\\{}", char::from(b)),
                    0x20..=0x7e => char::from(b).to_string(),
                    _ => format!("\\{b:03}"),
                })
                .collect();
            text.push_str(&format!("group.{id}.zones 0 IN TXT \"{quoted}\"\n"));
        }
    }
    let records = ZoneFileReader::new(Some(origin.clone()), Some(0))
        .read_str(&text, "produced catalog")
        .map_err(|e| e.to_string())?;
    Zone::from_records(origin.clone(), records).map_err(|e| e.to_string())
}

/// The member zones a produced catalog `zone` lists (as [`parse`] reads them), for comparing
/// versions; `None` if it is no catalog.
pub fn members_of(zone: &Zone) -> Option<Vec<Name>> {
    parse(zone, usize::MAX, &mut Vec::new())
        .ok()
        .map(|m| m.into_keys().collect())
}

/// The SOA serial of a produced catalog's next version after `previous` at `now` (UNIX
/// seconds): `now`, or `previous + 1` when `now` is not newer (RFC 1982), so the serial
/// increases on every change and survives a restart without a state file as long as the
/// clock does not go back.
pub fn next_serial(previous: Option<u32>, now: u64) -> u32 {
    let now = u32::try_from(now).unwrap_or(u32::MAX);
    match previous {
        Some(p) if !Serial(now).is_newer_than(Serial(p)) => p.wrapping_add(1),
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(text: &str) -> Zone {
        let origin: Name = "cat.example.".parse().unwrap();
        let records = ZoneFileReader::new(Some(origin.clone()), Some(0))
            .read_str(text, "t")
            .unwrap();
        Zone::from_records(origin, records).unwrap()
    }

    const HEAD: &str = "@ SOA invalid. invalid. 1 60 60 600 0\n@ NS invalid.\n";

    fn n(s: &str) -> Name {
        s.parse().unwrap()
    }

    /// RFC 9432 §4.3 and §4.4: members by ID, with `group` and `coo`; other records ignored.
    #[test]
    fn members_with_properties() {
        let cat = zone(&format!(
            "{HEAD}version TXT \"2\"\n\
             a1.zones PTR Alpha.example.\n\
             group.a1.zones TXT \"signed\"\n\
             coo.a1.zones PTR other-cat.example.\n\
             b2.zones PTR beta.example.\n\
             ext.zones TXT \"unknown property\"\n\
             deep.b2.zones TXT \"ignored\"\n"
        ));
        let mut skipped = Vec::new();
        let m = parse(&cat, 10, &mut skipped).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(m.len(), 2);
        let a = &m[&n("alpha.example.")];
        assert_eq!(a.id, b"a1");
        assert_eq!(a.groups, vec![b"signed".to_vec()]);
        assert_eq!(a.coo, Some(n("other-cat.example.")));
        let b = &m[&n("beta.example.")];
        assert_eq!((b.id.as_slice(), b.coo.as_ref()), (&b"b2"[..], None));
    }

    /// §4.2.1: no version, version "1", two version records: not processed at all.
    #[test]
    fn wrong_version_is_an_error() {
        for version in [
            "",
            "version TXT \"1\"\n",
            "version TXT \"2\"\nversion TXT \"3\"\n",
        ] {
            let cat = zone(&format!("{HEAD}{version}a.zones PTR a.example.\n"));
            let e = parse(&cat, 10, &mut Vec::new()).unwrap_err();
            assert!(
                matches!(e, CatalogZoneError::Version(_)),
                "{version:?}: {e}"
            );
        }
    }

    /// A member under two IDs, or an ID with two PTRs, is skipped; the rest is read.
    #[test]
    fn ambiguous_members_are_skipped() {
        let cat = zone(&format!(
            "{HEAD}version TXT \"2\"\n\
             a.zones PTR twice.example.\nb.zones PTR twice.example.\n\
             c.zones PTR one.example.\nc.zones PTR two.example.\n\
             d.zones PTR fine.example.\n"
        ));
        let mut skipped = Vec::new();
        let m = parse(&cat, 10, &mut skipped).unwrap();
        assert_eq!(
            m.keys().cloned().collect::<Vec<_>>(),
            vec![n("fine.example.")]
        );
        assert_eq!(skipped.len(), 2, "{skipped:?}");
    }

    /// The bound on members: one more than `max_members` is an error.
    #[test]
    fn members_are_bounded() {
        let cat = zone(&format!(
            "{HEAD}version TXT \"2\"\na.zones PTR a.example.\nb.zones PTR b.example.\n"
        ));
        assert!(parse(&cat, 2, &mut Vec::new()).is_ok());
        assert_eq!(
            parse(&cat, 1, &mut Vec::new()),
            Err(CatalogZoneError::TooManyMembers { count: 2, max: 1 })
        );
    }

    /// A produced catalog reads back as the same members, with stable IDs and the group.
    #[test]
    fn produced_catalog_parses() {
        let members = [n("a.example."), n("b.example.")];
        let z = produce(&n("cat.example."), &members, Some("pq \"signed\""), 7).unwrap();
        assert_eq!(z.soa_serial(), 7);
        let m = parse(&z, 10, &mut Vec::new()).unwrap();
        assert_eq!(m.keys().cloned().collect::<Vec<_>>(), members.to_vec());
        let a = &m[&n("a.example.")];
        assert_eq!(a.id, member_id(&n("A.example.")).as_bytes());
        assert_eq!(a.groups, vec![b"pq \"signed\"".to_vec()]);
        assert_eq!(member_id(&n("a.example.")).len(), 32);
    }

    /// The serial follows the clock, and goes up by one when the clock does not.
    #[test]
    fn serial_increases() {
        assert_eq!(next_serial(None, 1_800_000_000), 1_800_000_000);
        assert_eq!(next_serial(Some(5), 1_800_000_000), 1_800_000_000);
        assert_eq!(
            next_serial(Some(1_800_000_000), 1_800_000_000),
            1_800_000_001
        );
        assert_eq!(
            next_serial(Some(2_000_000_000), 1_800_000_000),
            2_000_000_001
        );
        assert_eq!(
            next_serial(Some(u32::MAX), 10),
            10,
            "RFC 1982: 10 is after 2^32-1"
        );
    }
}

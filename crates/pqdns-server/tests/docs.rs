//! The operator's guide cannot drift from the code: every key of pqdns-server's `[server]`
//! table and of a zone description has a row of its own, the key in backticks in the first
//! column, on the configuration reference page (`docs/guide/configuration.md`), with the key
//! names taken from the serde types themselves; and every relative link of the guide and the
//! README points to a file that exists.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::{self, DeserializeOwned, Visitor};

/// The workspace root (two levels above this crate).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The configuration reference page.
fn reference_page() -> String {
    let path = workspace().join("docs/guide/configuration.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Struct name → its field names, as serde's derived `Deserialize` impls announce them.
type Found = BTreeMap<&'static str, &'static [&'static str]>;

/// Why exploring stopped: a value the explorer's placeholder cannot stand for. Everything
/// recorded before it is kept.
#[derive(Debug)]
struct Stop(String);

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Stop {}
impl de::Error for Stop {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Stop(msg.to_string())
    }
}

/// A deserializer that records the field names of every struct asked of it and walks into
/// their fields: `Some` for options, one element for sequences, an empty map for maps, zero,
/// false and "" for scalars, the first variant for enums. A field whose type refuses such a
/// placeholder ends the walk of the rest of that struct (its own field names are recorded
/// first), so the roots below list every struct of interest as well.
#[derive(Clone, Copy)]
struct Explorer<'a> {
    found: &'a RefCell<Found>,
    depth: usize,
}

impl<'a> Explorer<'a> {
    fn deeper(self) -> Result<Explorer<'a>, Stop> {
        if self.depth >= 16 {
            return Err(Stop("too deep".into()));
        }
        Ok(Explorer {
            found: self.found,
            depth: self.depth + 1,
        })
    }
}

macro_rules! placeholder {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
            visitor.$visit($($value)?)
        })*
    };
}

impl<'de, 'a> de::Deserializer<'de> for Explorer<'a> {
    type Error = Stop;

    placeholder! {
        deserialize_any => visit_unit(),
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i64(0),
        deserialize_i16 => visit_i64(0),
        deserialize_i32 => visit_i64(0),
        deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u64(0),
        deserialize_u16 => visit_u64(0),
        deserialize_u32 => visit_u64(0),
        deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f64(0.0),
        deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('a'),
        deserialize_str => visit_str(""),
        deserialize_string => visit_str(""),
        deserialize_bytes => visit_bytes(&[]),
        deserialize_byte_buf => visit_bytes(&[]),
        deserialize_unit => visit_unit(),
        deserialize_identifier => visit_str(""),
        deserialize_ignored_any => visit_unit(),
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_some(self.deeper()?)
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_newtype_struct(self.deeper()?)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_seq(Elements {
            explorer: self.deeper()?,
            left: 1,
        })
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_seq(Elements {
            explorer: self.deeper()?,
            left: len,
        })
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        len: usize,
        visitor: V,
    ) -> Result<V::Value, Stop> {
        self.deserialize_tuple(len, visitor)
    }
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_map(Fields {
            explorer: self.deeper()?,
            fields: &[],
        })
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        self.found.borrow_mut().insert(name, fields);
        visitor.visit_map(Fields {
            explorer: self.deeper()?,
            fields,
        })
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        let name = variants
            .first()
            .ok_or_else(|| Stop("enum without variants".into()))?;
        visitor.visit_enum(Variant {
            name,
            explorer: self.deeper()?,
        })
    }
    /// Compact forms: addresses as tuples of numbers rather than text a placeholder is not.
    fn is_human_readable(&self) -> bool {
        false
    }
}

/// An enum's first variant, of whatever kind, its contents placeholders.
struct Variant<'a> {
    name: &'static str,
    explorer: Explorer<'a>,
}

impl<'de, 'a> de::EnumAccess<'de> for Variant<'a> {
    type Error = Stop;
    type Variant = Self;
    fn variant_seed<V: de::DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Stop> {
        let value = seed.deserialize(de::value::StrDeserializer::<Stop>::new(self.name))?;
        Ok((value, self))
    }
}

impl<'de, 'a> de::VariantAccess<'de> for Variant<'a> {
    type Error = Stop;
    fn unit_variant(self) -> Result<(), Stop> {
        Ok(())
    }
    fn newtype_variant_seed<T: de::DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Stop> {
        seed.deserialize(self.explorer)
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, Stop> {
        visitor.visit_seq(Elements {
            explorer: self.explorer,
            left: len,
        })
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Stop> {
        visitor.visit_map(Fields {
            explorer: self.explorer,
            fields,
        })
    }
}

/// A sequence of `left` placeholder elements.
struct Elements<'a> {
    explorer: Explorer<'a>,
    left: usize,
}

impl<'de, 'a> de::SeqAccess<'de> for Elements<'a> {
    type Error = Stop;
    fn next_element_seed<T: de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Stop> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        seed.deserialize(self.explorer).map(Some)
    }
}

/// A map holding every field of a struct once, each with a placeholder value.
struct Fields<'a> {
    explorer: Explorer<'a>,
    fields: &'static [&'static str],
}

impl<'de, 'a> de::MapAccess<'de> for Fields<'a> {
    type Error = Stop;
    fn next_key_seed<K: de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Stop> {
        let Some((first, rest)) = self.fields.split_first() else {
            return Ok(None);
        };
        self.fields = rest;
        seed.deserialize(de::value::StrDeserializer::<Stop>::new(first))
            .map(Some)
    }
    fn next_value_seed<V: de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Stop> {
        seed.deserialize(self.explorer)
    }
}

/// Records the structs `T` is made of (`T` first), as far as placeholders let the walk go.
fn structs_of<T: DeserializeOwned>(found: &RefCell<Found>) {
    let explorer = Explorer { found, depth: 0 };
    // The walk ends with a value that is not a valid `T` (or a placeholder a field refused);
    // only what it recorded matters.
    let _ = T::deserialize(explorer);
}

/// Every struct of pqdns-server's `[server]` table and of a zone description, by name.
fn configuration_structs() -> Found {
    let found = RefCell::new(Found::new());
    structs_of::<pqdns_server::settings::ServerTable>(&found);
    structs_of::<pqdns_server::settings::TlsTable>(&found);
    structs_of::<pqdns_server::settings::InlineKey>(&found);
    structs_of::<pqdns_core::config::ZoneConfig>(&found);
    structs_of::<pqdns_core::config::SigningConfig>(&found);
    structs_of::<pqdns_core::config::SecondaryConfig>(&found);
    structs_of::<pqdns_core::config::CustomProfile>(&found);
    found.into_inner()
}

#[test]
fn the_explorer_finds_nested_structs_by_itself() {
    // Walking from the roots alone reaches the nested tables: a new nested table is
    // checked without being added to the list above.
    let found = RefCell::new(Found::new());
    structs_of::<pqdns_server::settings::ServerTable>(&found);
    structs_of::<pqdns_core::config::ZoneConfig>(&found);
    let found = found.into_inner();
    for name in [
        "ServerTable",
        "TlsTable",
        "InlineKey",
        "ZoneConfig",
        "SigningConfig",
    ] {
        assert!(
            found.contains_key(name),
            "{name} not reached: {:?}",
            found.keys()
        );
    }
    assert!(found["ServerTable"].contains(&"udp"));
    assert!(found["SigningConfig"].contains(&"algorithms"));
}

#[test]
fn every_configuration_key_is_in_the_reference() {
    let page = reference_page();
    let mut missing = Vec::new();
    let mut keys = 0;
    for (name, fields) in configuration_structs() {
        for field in fields {
            keys += 1;
            if !page.contains(&format!("\n| `{field}` |")) {
                missing.push(format!("{name}.{field}"));
            }
        }
    }
    assert!(keys > 60, "only {keys} keys found: the walk is broken");
    assert!(
        missing.is_empty(),
        "docs/guide/configuration.md has no table row (| `key` | …) for these keys: {missing:?}"
    );
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn link_targets(text: &str) -> Vec<&str> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let end = rest.find(')').unwrap_or(rest.len());
        targets.push(rest[..end].trim());
        rest = &rest[end..];
    }
    targets
}

#[test]
fn link_targets_are_read_from_markdown() {
    assert_eq!(
        link_targets("see [a](install.md#units), [b](https://x.org) and [c](../bench/)."),
        ["install.md#units", "https://x.org", "../bench/"]
    );
}

#[test]
fn relative_links_of_the_guide_and_readme_exist() {
    let root = workspace();
    let mut pages = vec![root.join("README.md")];
    let guide = root.join("docs/guide");
    for entry in std::fs::read_dir(&guide).expect("docs/guide") {
        let path = entry.expect("docs/guide entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    assert!(pages.len() > 10, "the guide has too few pages: {pages:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("page");
        let dir = page.parent().expect("page directory");
        for target in link_targets(&text) {
            let file = target.split('#').next().unwrap_or("");
            if file.is_empty() || file.contains("://") || file.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            if !dir.join(file).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} relative links: the link reader is broken"
    );
    assert!(broken.is_empty(), "links to missing files: {broken:?}");
}

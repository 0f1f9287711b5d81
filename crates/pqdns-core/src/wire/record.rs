//! Resource records inside a parsed message (RFC 1035 §4.1.3), and RDATA with compressed
//! names expanded as the RDATA layouts of `crate::rdata` allow (RFC 3597 §4).

use std::borrow::Cow;

use super::name::{walk_name, WireName};
use super::WireError;
use crate::rdata::{field_len, layout};
use crate::rr::{Class, Record, RrType};

/// The sections that hold records (RFC 1035 §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Section {
    /// Answer section.
    Answer = 0,
    /// Authority section.
    Authority = 1,
    /// Additional section.
    Additional = 2,
}

/// Length of ARRF's compact RRFRAG form after TYPE: FRAGSIZE u16, CURIDX u32, RRSIZE u32,
/// RRID u16 (`crate::frag::arrf`).
const COMPACT_FIXED: usize = 12;

/// One record of a message that [`super::MessageView`] has checked.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    msg: &'a [u8],
    owner: usize,
    rtype: RrType,
    class: Class,
    ttl: u32,
    rdata: usize,
    end: usize,
}

impl<'a> RecordView<'a> {
    /// Reads and checks the record at `msg[at..]`; returns it and the offset after it.
    /// `compact`: records of this type owned by the root are ARRF's compact form, with
    /// FRAGSIZE data bytes only when `with_data` (responses).
    pub(crate) fn read(
        msg: &'a [u8],
        at: usize,
        compact: Option<RrType>,
        with_data: bool,
    ) -> Result<(RecordView<'a>, usize), WireError> {
        let fixed = walk_name(msg, at, |_| {})?;
        let field = |i: usize, n: usize| {
            msg.get(fixed + i..fixed + i + n)
                .ok_or(WireError::Truncated)
        };
        let t = field(0, 2)?;
        let rtype = RrType(u16::from_be_bytes([t[0], t[1]]));
        if compact == Some(rtype) && msg[at] == 0 {
            let size = field(2, 2)?;
            let data = if with_data {
                usize::from(u16::from_be_bytes([size[0], size[1]]))
            } else {
                0
            };
            let end = fixed + 2 + COMPACT_FIXED + data;
            if end > msg.len() {
                return Err(WireError::Truncated);
            }
            let view = RecordView {
                msg,
                owner: at,
                rtype,
                class: Class(0),
                ttl: 0,
                rdata: fixed + 2,
                end,
            };
            return Ok((view, end));
        }
        let rest = field(2, 8)?;
        let class = Class(u16::from_be_bytes([rest[0], rest[1]]));
        let ttl = u32::from_be_bytes([rest[2], rest[3], rest[4], rest[5]]);
        let rdata = fixed + 10;
        let end = rdata + usize::from(u16::from_be_bytes([rest[6], rest[7]]));
        if end > msg.len() {
            return Err(WireError::Truncated);
        }
        expand_rdata(rtype, msg, rdata, end, None)?;
        let view = RecordView {
            msg,
            owner: at,
            rtype,
            class,
            ttl,
            rdata,
            end,
        };
        Ok((view, end))
    }

    /// The owner name.
    pub fn owner(&self) -> WireName<'a> {
        WireName::checked(self.msg, self.owner)
    }

    /// TYPE.
    pub fn rtype(&self) -> RrType {
        self.rtype
    }

    /// CLASS (0 for a compact RRFRAG; for OPT, the UDP payload size).
    pub fn class(&self) -> Class {
        self.class
    }

    /// TTL, seconds (0 for a compact RRFRAG; for OPT, the extended RCODE, version and flags).
    pub fn ttl(&self) -> u32 {
        self.ttl
    }

    /// Offset in the message of this record's 4-byte TTL field (RFC 1035 §4.1.3), for
    /// rewriting TTLs in place (a cached response served later). Not meaningful for a
    /// compact RRFRAG, which has no TTL field.
    pub fn ttl_offset(&self) -> usize {
        self.rdata - 6
    }

    /// RDATA as on the wire: names of the types that may be compressed can hold pointers
    /// into the message. For a compact RRFRAG: everything after TYPE.
    pub fn rdata_raw(&self) -> &'a [u8] {
        &self.msg[self.rdata..self.end]
    }

    /// The whole record as on the wire, owner included.
    pub fn wire(&self) -> &'a [u8] {
        &self.msg[self.owner..self.end]
    }

    /// RDATA in uncompressed wire format (borrowed when nothing was compressed).
    pub fn rdata(&self) -> Cow<'a, [u8]> {
        let raw = self.rdata_raw();
        if !may_hold_pointers(self.rtype, raw) {
            return Cow::Borrowed(raw);
        }
        let mut out = Vec::with_capacity(raw.len() + 32);
        // Checked by `read`: the error branch is never taken.
        match expand_rdata(self.rtype, self.msg, self.rdata, self.end, Some(&mut out)) {
            Ok(()) => Cow::Owned(out),
            Err(_) => Cow::Borrowed(raw),
        }
    }

    /// The owned record (owner and RDATA uncompressed).
    pub fn to_record(&self) -> Record {
        Record {
            owner: self.owner().to_name(),
            rtype: self.rtype,
            class: self.class,
            ttl: self.ttl,
            rdata: self.rdata().into_owned(),
        }
    }
}

/// True if `rtype`'s RDATA may contain compression pointers (its layout has a name that may
/// be received compressed) and `raw` has a byte that could start one.
fn may_hold_pointers(rtype: RrType, raw: &[u8]) -> bool {
    layout(rtype).is_some_and(|fields| {
        fields
            .iter()
            .any(|f| f.name_rule().is_some_and(|r| r.decompress))
    }) && raw.iter().any(|&b| b >= 0xc0)
}

/// Walks the RDATA of `rtype` at `msg[start..end]` by its layout, checking that every name
/// that may be compressed ends inside the RDATA and the fields fill it exactly; with `out`,
/// appends the RDATA with those names expanded. Types without such names are opaque here
/// (RFC 3597 §4) and copied as they are. Empty RDATA (RDLENGTH 0) has nothing to expand: RFC
/// 2136 §2.4–§2.5 send it for every type (prerequisites, RRset deletions); whether a type may
/// be empty is for the reader of the record to decide.
pub(crate) fn expand_rdata(
    rtype: RrType,
    msg: &[u8],
    start: usize,
    end: usize,
    mut out: Option<&mut Vec<u8>>,
) -> Result<(), WireError> {
    let fields = layout(rtype).filter(|fields| {
        fields
            .iter()
            .any(|f| f.name_rule().is_some_and(|r| r.decompress))
    });
    let Some(fields) = fields.filter(|_| start < end) else {
        if let Some(out) = out {
            out.extend_from_slice(&msg[start..end]);
        }
        return Ok(());
    };
    let mut pos = start;
    for &field in fields {
        let next = match field.name_rule() {
            Some(rule) if rule.decompress => walk_name(msg, pos, |l| {
                if let Some(out) = out.as_deref_mut() {
                    out.extend_from_slice(l);
                }
            })?,
            _ => {
                let n = field_len(field, &msg[pos..end]).ok_or(WireError::BadRdata)?;
                if let Some(out) = out.as_deref_mut() {
                    out.extend_from_slice(&msg[pos..pos + n]);
                }
                pos + n
            }
        };
        if next > end {
            return Err(WireError::BadRdata);
        }
        pos = next;
    }
    if pos != end {
        return Err(WireError::BadRdata);
    }
    Ok(())
}

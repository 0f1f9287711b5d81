//! Why a message could not be read.

use crate::name::NameError;

/// Why a message could not be parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// Fewer than the 12 bytes of the header (RFC 1035 §4.1.1).
    #[error("message shorter than the 12-byte header")]
    ShortHeader,
    /// The message ends inside a name, a fixed field or RDATA.
    #[error("message truncated")]
    Truncated,
    /// A name uses a reserved label type (RFC 6891 §5) or is longer than 255 bytes.
    #[error("bad name: {0}")]
    Name(NameError),
    /// A compression pointer that does not point strictly before the label run holding it,
    /// or more than [`super::MAX_POINTER_JUMPS`] pointers in one name.
    #[error("bad compression pointer")]
    BadPointer,
    /// RDATA of a type with embedded names that does not match its layout (a name running
    /// past the RDATA, or bytes left over).
    #[error("malformed RDATA")]
    BadRdata,
    /// Bytes after the last record counted in the header.
    #[error("trailing bytes after the last record")]
    Trailing,
    /// An OPT record outside the additional section or not owned by the root, or options
    /// that overrun its RDATA (RFC 6891 §6.1.1–§6.1.2).
    #[error("malformed OPT record")]
    BadOpt,
    /// More than one OPT record (RFC 6891 §6.1.1: FORMERR).
    #[error("more than one OPT record")]
    DuplicateOpt,
}

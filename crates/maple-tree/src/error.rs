//! Error types.

#[allow(unused_imports)]
use crate::prelude::*;

use core::fmt;

/// A node allocation failed. The tree is exactly as it was before the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AllocError;

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("out of memory while allocating a tree node")
    }
}

impl core::error::Error for AllocError {}

/// Why an operation failed. Every failure leaves the tree unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// Something is already stored in the range (the kernel's `EEXIST`).
    Occupied,
    /// The request makes no sense: `first > last`, an empty range, a size of
    /// zero, or a window smaller than the size (`EINVAL`).
    InvalidRange,
    /// No empty range of the requested size fits in the window (`EBUSY`).
    Busy,
    /// A node allocation failed (`ENOMEM`).
    NoMemory,
}

impl Error {
    /// The Linux errno name for this error, as printed by `maple ops`.
    pub fn errno_name(self) -> &'static str {
        match self {
            Error::Occupied => "EEXIST",
            Error::InvalidRange => "EINVAL",
            Error::Busy => "EBUSY",
            Error::NoMemory => "ENOMEM",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            Error::Occupied => "range already occupied",
            Error::InvalidRange => "invalid range or size",
            Error::Busy => "no empty range of that size in the window",
            Error::NoMemory => "out of memory",
        };
        write!(f, "{msg} ({})", self.errno_name())
    }
}

impl core::error::Error for Error {}

impl From<AllocError> for Error {
    fn from(_: AllocError) -> Error {
        Error::NoMemory
    }
}

/// A failed write that hands the value back.
///
/// Returned by [`insert_range`](crate::MapleTree::insert_range),
/// [`store_range`](crate::MapleTree::store_range) and the allocation calls:
/// the tree is unchanged and `value` is the value that was not stored.
pub struct InsertError<V> {
    /// The value that was not stored.
    pub value: V,
    /// Why.
    pub cause: Error,
}

impl<V> fmt::Debug for InsertError<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InsertError").field("cause", &self.cause).finish_non_exhaustive()
    }
}

impl<V> fmt::Display for InsertError<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl<V> core::error::Error for InsertError<V> {}

//! Linux error numbers, as the address-space calls return them.

use core::fmt;

/// Why a call failed: the error number Linux returns for the same call.
///
/// Every failing call leaves the address space exactly as it was, except
/// where Linux itself applies part of a call before failing (`mprotect`,
/// `madvise` and `set_anon_name` over a range with holes, which change the
/// mapped part and then report `ENOMEM`); those calls say so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Errno {
    /// Operation not permitted (a fixed mapping below the minimum address).
    EPERM,
    /// Bad file descriptor (naming a file-backed mapping).
    EBADF,
    /// Try again (a locked mapping that could not be locked).
    EAGAIN,
    /// Out of memory: no room for a mapping, a hole in a range that must be
    /// mapped, too many mappings, or an allocation that failed.
    ENOMEM,
    /// Permission denied (writing to a shared mapping of a read-only file).
    EACCES,
    /// Bad address (a range that is not mapped where it must be).
    EFAULT,
    /// Already exists (`MAP_FIXED_NOREPLACE` over a mapping).
    EEXIST,
    /// Invalid argument: unaligned address, zero or bad length, bad flags.
    EINVAL,
    /// Value too large (a file offset that overflows).
    EOVERFLOW,
    /// Operation not supported (unknown flags with `MAP_SHARED_VALIDATE`).
    EOPNOTSUPP,
}

impl Errno {
    /// The error number (as in `<errno.h>` on Linux).
    pub fn code(self) -> i32 {
        match self {
            Errno::EPERM => 1,
            Errno::EBADF => 9,
            Errno::EAGAIN => 11,
            Errno::ENOMEM => 12,
            Errno::EACCES => 13,
            Errno::EFAULT => 14,
            Errno::EEXIST => 17,
            Errno::EINVAL => 22,
            Errno::EOVERFLOW => 75,
            Errno::EOPNOTSUPP => 95,
        }
    }

    /// The error for a Linux error number, if it is one of ours.
    pub fn from_code(code: i32) -> Option<Errno> {
        [
            Errno::EPERM,
            Errno::EBADF,
            Errno::EAGAIN,
            Errno::ENOMEM,
            Errno::EACCES,
            Errno::EFAULT,
            Errno::EEXIST,
            Errno::EINVAL,
            Errno::EOVERFLOW,
            Errno::EOPNOTSUPP,
        ]
        .into_iter()
        .find(|e| e.code() == code)
    }

    /// The symbolic name, e.g. `"ENOMEM"`.
    pub fn name(self) -> &'static str {
        match self {
            Errno::EPERM => "EPERM",
            Errno::EBADF => "EBADF",
            Errno::EAGAIN => "EAGAIN",
            Errno::ENOMEM => "ENOMEM",
            Errno::EACCES => "EACCES",
            Errno::EFAULT => "EFAULT",
            Errno::EEXIST => "EEXIST",
            Errno::EINVAL => "EINVAL",
            Errno::EOVERFLOW => "EOVERFLOW",
            Errno::EOPNOTSUPP => "EOPNOTSUPP",
        }
    }

    /// The symbolic name of a number, e.g. `"ENOMEM"`; `None` if unknown.
    pub fn name_of(code: i32) -> Option<&'static str> {
        Errno::from_code(code).map(Errno::name)
    }

    fn message(self) -> &'static str {
        match self {
            Errno::EPERM => "Operation not permitted",
            Errno::EBADF => "Bad file descriptor",
            Errno::EAGAIN => "Resource temporarily unavailable",
            Errno::ENOMEM => "Cannot allocate memory",
            Errno::EACCES => "Permission denied",
            Errno::EFAULT => "Bad address",
            Errno::EEXIST => "File exists",
            Errno::EINVAL => "Invalid argument",
            Errno::EOVERFLOW => "Value too large for defined data type",
            Errno::EOPNOTSUPP => "Operation not supported",
        }
    }
}

/// `ENOMEM (Cannot allocate memory)`.
impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.message())
    }
}

impl std::error::Error for Errno {}

impl From<maple_tree::AllocError> for Errno {
    fn from(_: maple_tree::AllocError) -> Errno {
        Errno::ENOMEM
    }
}

impl From<maple_tree::Error> for Errno {
    fn from(e: maple_tree::Error) -> Errno {
        match e {
            maple_tree::Error::Occupied => Errno::EEXIST,
            maple_tree::Error::Busy => Errno::ENOMEM,
            maple_tree::Error::InvalidRange => Errno::EINVAL,
            _ => Errno::ENOMEM,
        }
    }
}

/// Result of an address-space call.
pub type Result<T, E = Errno> = core::result::Result<T, E>;

/// A failed tree write (node allocation): the call is undone.
#[derive(Debug)]
pub(crate) struct AllocFail;

impl From<AllocFail> for Errno {
    fn from(_: AllocFail) -> Errno {
        Errno::ENOMEM
    }
}

/// What went wrong with a file, in lower case and without the error
/// number (`no such file or directory`), for messages that name the file
/// first: `cannot read PATH: REASON`.
pub fn io_reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    let text = match e.kind() {
        K::NotFound => "no such file or directory",
        K::PermissionDenied => "permission denied",
        K::IsADirectory => "is a directory",
        K::NotADirectory => "a part of the path is not a directory",
        K::InvalidData => return format!("unreadable data ({e})"),
        _ => return e.to_string().split(" (os error").next().unwrap_or_default().to_lowercase(),
    };
    text.to_string()
}

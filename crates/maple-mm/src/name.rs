//! Anonymous VMA names (`prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, …)`),
//! shared by reference count.

use core::fmt;
use std::sync::Arc;

use crate::error::{Errno, Result};

/// Longest name in bytes, without the terminating NUL Linux counts
/// (`ANON_VMA_NAME_MAX_LEN` is 80 with it).
pub const MAX_NAME_LEN: usize = 79;

/// The name of an anonymous mapping, shown in `/proc/PID/maps` as
/// `[anon:NAME]`.
///
/// One name object is shared, by reference count, by every VMA that a
/// split or a fork made from the VMA it was given to: cloning an
/// `AnonName` copies no string. Renaming a range gives it a new object.
/// Two names are equal (and their VMAs may merge) when their text is.
///
/// ```
/// use maple_mm::AnonName;
/// let n = AnonName::new("jit code").unwrap();
/// let m = n.clone();
/// assert!(AnonName::ptr_eq(&n, &m)); // one object, two references
/// assert_eq!(AnonName::new("bad$name").unwrap_err(), maple_mm::Errno::EINVAL);
/// ```
#[derive(Clone)]
pub struct AnonName(Arc<String>);

impl AnonName {
    /// Checks `name` by the prctl rules: at most [`MAX_NAME_LEN`] bytes,
    /// printable ASCII except `\`, `` ` ``, `$`, `[` and `]` (`EINVAL`
    /// otherwise). An empty name is not a name (it clears one): `EINVAL`
    /// here; [`AddressSpace::set_anon_name`](crate::AddressSpace::set_anon_name)
    /// takes `None` or `""` to clear.
    pub fn new(name: &str) -> Result<AnonName> {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Errno::EINVAL);
        }
        if name.bytes().any(|b| !(0x20..0x7f).contains(&b) || b"\\`$[]".contains(&b)) {
            return Err(Errno::EINVAL);
        }
        Ok(AnonName(Arc::new(name.to_string())))
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True if both are the same object (not just the same text).
    pub fn ptr_eq(a: &AnonName, b: &AnonName) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// References to this name object (VMAs and clones holding it).
    pub fn ref_count(&self) -> usize {
        Arc::strong_count(&self.0)
    }
}

impl PartialEq for AnonName {
    fn eq(&self, other: &AnonName) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for AnonName {}

impl fmt::Debug for AnonName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl fmt::Display for AnonName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

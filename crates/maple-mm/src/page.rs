//! Page sizes and alignment.
//!
//! The page size is part of a space's [`Layout`](crate::Layout): x86-64
//! has 4 KiB pages, arm64 kernels are built with 4, 16 or 64 KiB. Every
//! rule that counts in pages (alignment, `vm_pgoff`, the stack guard gap,
//! resource limits, the huge-page size placement aligns to) takes the
//! space's size; the VMA records themselves keep byte offsets and do not
//! depend on it.

use core::fmt;

/// Bytes per page of the default x86-64 [`Layout`](crate::Layout) (4 KiB).
/// A space's own is [`AddressSpace::page_size`](crate::AddressSpace::page_size).
pub const PAGE_SIZE: u64 = 4096;

/// A page size Linux supports on the architectures modelled.
///
/// ```
/// use maple_mm::PageSize;
/// assert_eq!(PageSize::K16.bytes(), 16384);
/// assert_eq!(PageSize::K64.pmd_size(), 512 << 20); // arm64's huge page with 64 KiB pages
/// assert_eq!(PageSize::try_from(65536), Ok(PageSize::K64));
/// assert!(PageSize::try_from(8192).is_err());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(try_from = "u64", into = "u64"))]
pub enum PageSize {
    /// 4 KiB: x86-64, and arm64's most common build.
    #[default]
    K4,
    /// 16 KiB: arm64 (Apple silicon, some Android kernels).
    K16,
    /// 64 KiB: arm64 (some server distributions).
    K64,
}

impl PageSize {
    /// Every size, smallest first.
    pub const ALL: [PageSize; 3] = [PageSize::K4, PageSize::K16, PageSize::K64];

    /// `PAGE_SHIFT`.
    #[inline]
    pub const fn shift(self) -> u32 {
        match self {
            PageSize::K4 => 12,
            PageSize::K16 => 14,
            PageSize::K64 => 16,
        }
    }

    /// `PAGE_SIZE` in bytes.
    #[inline]
    pub const fn bytes(self) -> u64 {
        1 << self.shift()
    }

    /// `PMD_SIZE`: what one page-table page of entries maps (each entry
    /// eight bytes), the size of a transparent huge page: 2 MiB with 4 KiB
    /// pages, 32 MiB with 16 KiB, 512 MiB with 64 KiB.
    #[inline]
    pub const fn pmd_size(self) -> u64 {
        self.bytes() << (self.shift() - 3)
    }

    /// The running kernel's page size, if it is one of these (`None` on a
    /// machine that reports another, or off Linux).
    #[allow(unsafe_code)]
    pub fn host() -> Option<PageSize> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: sysconf has no preconditions; it reads a constant.
            let bytes = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            PageSize::try_from(u64::try_from(bytes).ok()?).ok()
        }
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// The host's page size in bytes, for reading a live process's pages
    /// (4 KiB where it cannot be read).
    pub(crate) fn host_bytes() -> u64 {
        PageSize::host().unwrap_or_default().bytes()
    }

    /// `len` rounded up to whole pages; `None` if that overflows.
    #[inline]
    pub(crate) fn align_up(self, len: u64) -> Option<u64> {
        let m = self.bytes() - 1;
        len.checked_add(m).map(|l| l & !m)
    }

    /// `addr` rounded down to its page.
    #[inline]
    pub(crate) fn align_down(self, addr: u64) -> u64 {
        addr & !(self.bytes() - 1)
    }

    /// Whether `addr` is page-aligned.
    #[inline]
    pub(crate) fn is_aligned(self, addr: u64) -> bool {
        addr & (self.bytes() - 1) == 0
    }

    /// Whole pages in `bytes`, rounded down.
    #[inline]
    pub(crate) fn pages(self, bytes: u64) -> u64 {
        bytes >> self.shift()
    }
}

/// A page size that is not 4, 16 or 64 KiB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadPageSize(pub u64);

impl fmt::Display for BadPageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a page size of {} bytes is not one of 4096, 16384 or 65536", self.0)
    }
}

impl std::error::Error for BadPageSize {}

impl TryFrom<u64> for PageSize {
    type Error = BadPageSize;

    fn try_from(bytes: u64) -> Result<PageSize, BadPageSize> {
        PageSize::ALL.into_iter().find(|p| p.bytes() == bytes).ok_or(BadPageSize(bytes))
    }
}

impl From<PageSize> for u64 {
    fn from(p: PageSize) -> u64 {
        p.bytes()
    }
}

impl fmt::Display for PageSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} KiB", self.bytes() >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_rounding() {
        for p in PageSize::ALL {
            let b = p.bytes();
            assert_eq!(p.align_up(1), Some(b));
            assert_eq!(p.align_up(b), Some(b));
            assert_eq!(p.align_up(u64::MAX - 1), None);
            assert_eq!(p.align_down(2 * b - 1), b);
            assert!(p.is_aligned(3 * b) && !p.is_aligned(b + b / 2));
            assert_eq!(p.pages(3 * b + 1), 3);
        }
        let pmd: Vec<u64> = PageSize::ALL.iter().map(|p| p.pmd_size() >> 20).collect();
        assert_eq!(pmd, [2, 32, 512]);
    }
}

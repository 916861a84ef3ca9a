//! Page size and alignment (x86-64).

/// Bytes per page (x86-64).
pub const PAGE_SIZE: u64 = 4096;
/// Bytes per PMD (a 2 MiB huge page).
pub(crate) const PMD_SIZE: u64 = 2 << 20;

/// `len` rounded up to whole pages; `None` if that overflows.
pub(crate) fn page_align(len: u64) -> Option<u64> {
    len.checked_add(PAGE_SIZE - 1).map(|l| l & !(PAGE_SIZE - 1))
}

/// Whether `addr` is page-aligned.
pub(crate) fn is_aligned(addr: u64) -> bool {
    addr % PAGE_SIZE == 0
}

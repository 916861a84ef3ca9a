//! Sealing memory: `mseal`.
//!
//! A seal is a VMA flag ([`VmFlags::SEALED`]), so sealing part of a
//! mapping cuts it. A sealed VMA can never be unmapped, moved, resized or
//! re-protected, and its data cannot be discarded where it is read-only
//! private anonymous memory; those calls fail with `EPERM`. The rules,
//! measured on Linux 6.18 and checked by the kernel oracle test:
//!
//! * `munmap`, `mmap(MAP_FIXED)` over it and `mremap` (of it, or onto it)
//!   fail before changing anything;
//! * `mprotect` fails at the first sealed VMA (even one it would not
//!   change), keeping the changes it made before it, as at a hole;
//! * `madvise` refuses, at the first such VMA, the advice that discards
//!   data (`MADV_DONTNEED`, `MADV_DONTNEED_LOCKED`, `MADV_FREE`,
//!   `MADV_REMOVE`, `MADV_DONTFORK`, `MADV_WIPEONFORK`,
//!   `MADV_GUARD_INSTALL`) on sealed private anonymous memory without
//!   write permission; everything else (locking, other advice) is allowed;
//! * a fork's child keeps the seals.

use crate::{
    edit::Holes,
    error::AllocFail,
    error::{Errno, Result},
    flags::VmFlags,
    space::AddressSpace,
    store::VmaStore,
    vma::VmaData,
};

impl<T: VmaStore> AddressSpace<T> {
    /// Seals `[addr, addr + len)`, as `mseal(2)`: its VMAs are cut to the
    /// range and marked sealed. See the [`VmFlags::SEALED`] flag for what
    /// a seal refuses; a fork's child keeps it, and it never goes.
    ///
    /// Errors: `EINVAL` (unaligned `addr`, flags other than 0, a range
    /// that wraps), `ENOMEM` (a hole in the range: nothing is sealed).
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Errno, MapFlags, Prot, VmFlags, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    /// mm.mseal(a + PAGE_SIZE, PAGE_SIZE, 0).unwrap();
    /// assert_eq!(mm.vma_count(), 3);
    /// assert_eq!(mm.munmap(a, 4 * PAGE_SIZE), Err(Errno::EPERM));
    /// assert_eq!(mm.mprotect(a + PAGE_SIZE, PAGE_SIZE, Prot::READ), Err(Errno::EPERM));
    /// assert!(mm.vma_at(a + PAGE_SIZE).unwrap().flags().contains(VmFlags::SEALED));
    /// ```
    pub fn mseal(&mut self, addr: u64, len: u64, flags: u64) -> Result<()> {
        if flags != 0 || !self.page_size().is_aligned(addr) {
            return Err(Errno::EINVAL);
        }
        let len = self.page_size().align_up(len).ok_or(Errno::EINVAL)?;
        let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
        if end == addr {
            return Ok(());
        }
        // The whole range must be mapped before anything is sealed.
        let mut pos = addr;
        for v in self.range(addr, end) {
            if v.start > pos {
                return Err(Errno::ENOMEM);
            }
            pos = v.end;
        }
        if pos < end {
            return Err(Errno::ENOMEM);
        }
        self.transact(&[(addr, end)], |mm| {
            mm.sealed = true;
            let seal = |d: &VmaData| {
                Ok((!d.flags.contains(VmFlags::SEALED))
                    .then(|| VmaData { flags: d.flags | VmFlags::SEALED, ..d.clone() }))
            };
            mm.modify_in(addr, end, Holes::Stop, &mut { seal }, false)
        })
    }

    /// True if a VMA in `[start, end)` is sealed (a cheap false for a
    /// space that never sealed anything).
    pub(crate) fn sealed_in(&self, start: u64, end: u64) -> bool {
        self.sealed && self.range(start, end).any(|v| v.flags().contains(VmFlags::SEALED))
    }

    /// An unmap of `[start, ..)` refused for a seal (`munmap`,
    /// `mmap(MAP_FIXED)`, `mremap` onto it, `brk`), as Linux refuses it:
    /// the kernel cuts the first VMA at `start` (if `start` lies inside
    /// it and it is not sealed itself) before it finds the seal, and the
    /// cut stays (found by the kernel oracle). Returns `EPERM`.
    pub(crate) fn refuse_unmap(&mut self, start: u64) -> Result<()> {
        let window = self.vma_at(start).map_or((start, start), |v| (v.start, v.end));
        self.transact(&[window], |mm| {
            mm.cut_before_refusal(start)?;
            Ok(Err(Errno::EPERM))
        })
    }

    /// Unmaps `[start, end)`, or, where a seal is in it, refuses as
    /// [`refuse_unmap`](Self::refuse_unmap) does.
    pub(crate) fn unmap_unless_sealed(&mut self, start: u64, end: u64) -> Result<()> {
        if self.sealed_in(start, end) {
            return self.refuse_unmap(start);
        }
        self.transact(&[(start, end)], |mm| {
            mm.clear(start, end)?;
            Ok(Ok(()))
        })
    }

    /// Cuts the VMA holding `at` in two there (if `at` lies inside it),
    /// both pieces keeping its record, within a caller's transaction.
    pub(crate) fn cut_at(&mut self, at: u64) -> core::result::Result<(), AllocFail> {
        match self.vma_at(at).filter(|v| v.start < at).map(|v| (v.end, v.data.clone())) {
            Some((e, data)) => self.put(at, e, data),
            None => Ok(()),
        }
    }

    /// The cut of [`refuse_unmap`](Self::refuse_unmap), within a caller's
    /// transaction.
    pub(crate) fn cut_before_refusal(&mut self, start: u64) -> core::result::Result<(), AllocFail> {
        if self.vma_at(start).is_some_and(|v| v.flags().contains(VmFlags::SEALED)) {
            return Ok(());
        }
        self.cut_at(start)
    }
}

//! Locking memory: `mlock`, `mlock2`, `munlock`, `mlockall`, `munlockall`.
//!
//! A lock is a VMA flag (`VM_LOCKED`, with `VM_LOCKONFAULT` for locks taken
//! as pages fault in), so locking part of a mapping cuts it, and unlocking
//! merges it back, as `mprotect` does. Locking also populates: Linux
//! faults every page in at once, writing the private writable ones, which
//! gives their VMAs an anon_vma and so decides later merges. The rules,
//! measured on Linux 6.18 and checked by the kernel oracle test:
//!
//! * the range is `addr` rounded down to a page, with `len` grown by as
//!   much and rounded up; a range that wraps is `EINVAL`, an empty one
//!   does nothing;
//! * a hole at the start is `ENOMEM` with nothing changed; a hole further
//!   on stops the call with `ENOMEM`, keeping what it did before;
//! * special mappings (`[vdso]`, device memory) are left unlocked;
//! * after locking, every page is faulted in, stopping at the first that
//!   cannot be: an inaccessible (`PROT_NONE`) mapping, a page past the
//!   end of its file, or a guard page; the call then fails with `ENOMEM`
//!   (Linux's `EFAULT` turned into what POSIX asks of `mlock`), the locks
//!   staying in place;
//! * `mlockall(MCL_CURRENT)` faults in what it can and ignores the rest;
//!   `MCL_FUTURE` locks every later mapping and heap growth (which are
//!   then populated); neither a fork's child nor `exec` keeps any of it.
//!
//! * `RLIMIT_MEMLOCK` ([`Layout::memlock_limit`](crate::Layout::memlock_limit);
//!   by default none, as for a process with `CAP_IPC_LOCK`): a limit of 0
//!   refuses every lock (`EPERM`); `mlock` fails (`ENOMEM`, nothing
//!   changed) where the locked memory, counting the range's pages not
//!   locked yet, would pass it; `mlockall(MCL_CURRENT)` where all the
//!   mapped memory would; locked mappings and growths (`EAGAIN`, or no
//!   growth) where the locked memory would.

use crate::{
    edit::Holes,
    error::AllocFail,
    error::{Errno, Result},
    flags::{MclFlags, MlockFlags, VmFlags},
    layout::within,
    space::AddressSpace,
    store::VmaStore,
    vma::VmaData,
};

impl<T: VmaStore> AddressSpace<T> {
    /// Locks `[addr, addr + len)` in memory, as `mlock(2)`: its VMAs are
    /// cut to the range and marked locked (special mappings are left
    /// alone), then every page is faulted in, private writable ones by a
    /// write (so their VMAs get an anon_vma, which decides later merges).
    /// `addr` is rounded down to a page and `len` grown by as much and
    /// rounded up. As in Linux 6.18 (checked by the kernel oracle test), a
    /// hole at the start changes nothing, a hole further on stops the call
    /// keeping what it locked, and a page that cannot be faulted in (an
    /// inaccessible mapping, a page past the end of its file, a guard
    /// page) fails the call with the locks in place.
    ///
    /// Errors: `EINVAL` (the range wraps), `ENOMEM` (a hole, a page that
    /// cannot be faulted in, or past `RLIMIT_MEMLOCK`:
    /// [`Layout::memlock_limit`](crate::Layout::memlock_limit)), `EPERM` (a
    /// locked-memory limit of 0).
    ///
    /// ```
    /// use maple_mm::{AddressSpace, MapFlags, Prot, VmFlags, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 4 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    /// mm.mlock(a + PAGE_SIZE, PAGE_SIZE).unwrap();
    /// assert_eq!(mm.vma_count(), 3);
    /// assert!(mm.vma_at(a + PAGE_SIZE).unwrap().flags().contains(VmFlags::LOCKED));
    /// mm.munlock(a, 4 * PAGE_SIZE).unwrap();
    /// assert_eq!(mm.vma_count(), 1);
    /// ```
    pub fn mlock(&mut self, addr: u64, len: u64) -> Result<()> {
        self.lock_range(addr, len, VmFlags::LOCKED)
    }

    /// `mlock2(2)`: [`mlock`](Self::mlock), or with
    /// [`MlockFlags::ONFAULT`] a lock taken as pages fault in (nothing is
    /// populated now).
    ///
    /// Errors: as `mlock`; `EINVAL` for unknown flags.
    pub fn mlock2(&mut self, addr: u64, len: u64, flags: MlockFlags) -> Result<()> {
        if flags.bits() & !MlockFlags::all().bits() != 0 {
            return Err(Errno::EINVAL);
        }
        let lock = if flags.contains(MlockFlags::ONFAULT) { VmFlags::LOCKED_MASK } else { VmFlags::LOCKED };
        self.lock_range(addr, len, lock)
    }

    /// Unlocks `[addr, addr + len)`, as `munlock(2)`: the VMAs lose their
    /// locks and merge with their neighbours where they can.
    ///
    /// Errors: `EINVAL` (the range wraps), `ENOMEM` (a hole: what came
    /// before it is unlocked).
    pub fn munlock(&mut self, addr: u64, len: u64) -> Result<()> {
        self.lock_range(addr, len, VmFlags::empty())
    }

    /// `mlockall(2)`: with [`MclFlags::CURRENT`] every mapping is locked
    /// (and populated, ignoring what cannot be), with
    /// [`MclFlags::FUTURE`] every mapping made later, and the heap as it
    /// grows; [`MclFlags::ONFAULT`] makes either lock as pages fault in.
    /// Each call replaces what an earlier `MCL_FUTURE` asked for.
    ///
    /// Errors: `EINVAL` (no flags, unknown ones, or `MCL_ONFAULT` alone),
    /// `EPERM` (a locked-memory limit of 0), `ENOMEM` (with `MCL_CURRENT`,
    /// all the mapped memory past the limit).
    pub fn mlockall(&mut self, flags: MclFlags) -> Result<()> {
        if flags.is_empty() || flags.bits() & !MclFlags::all().bits() != 0 || flags == MclFlags::ONFAULT {
            return Err(Errno::EINVAL);
        }
        if !self.can_do_mlock() {
            return Err(Errno::EPERM);
        }
        let limit = self.layout.memlock_limit;
        if limit != u64::MAX
            && flags.contains(MclFlags::CURRENT)
            && !within(self.total_vm(), 0, limit, self.page_size())
        {
            return Err(Errno::ENOMEM);
        }
        let lock = if flags.contains(MclFlags::ONFAULT) { VmFlags::LOCKED_MASK } else { VmFlags::LOCKED };
        let future = if flags.contains(MclFlags::FUTURE) { lock } else { VmFlags::empty() };
        if !flags.contains(MclFlags::CURRENT) {
            self.def_flags = future;
            return Ok(());
        }
        self.relock_all(lock, future)
    }

    /// `munlockall(2)`: every mapping unlocked, and later ones too.
    pub fn munlockall(&mut self) -> Result<()> {
        self.relock_all(VmFlags::empty(), VmFlags::empty())
    }

    /// The flags every new mapping gets (`VmFlags::LOCKED`, maybe with
    /// `LOCKONFAULT`, after `mlockall(MCL_FUTURE)`), as Linux's
    /// `mm->def_flags`.
    pub fn def_flags(&self) -> VmFlags {
        self.def_flags
    }

    /// `mlock`, `mlock2` and `munlock`: the range's VMAs get the lock bits
    /// `lock` (none to unlock), then are populated if locked now.
    fn lock_range(&mut self, addr: u64, len: u64, lock: VmFlags) -> Result<()> {
        let start = self.page_size().align_down(addr);
        let limit = self.layout.memlock_limit;
        if lock.contains(VmFlags::LOCKED) && limit != u64::MAX {
            if !self.can_do_mlock() {
                return Err(Errno::EPERM);
            }
            // Linux's do_mlock: the pages asked for (its page rounding may
            // wrap) with those locked already, less those of the range
            // locked already where that is over.
            let asked = len.wrapping_add(addr - start).wrapping_add(self.page_size().bytes() - 1)
                & !(self.page_size().bytes() - 1);
            let locked = self.locked_vm();
            if !within(locked, asked, limit, self.page_size()) {
                let end = start.saturating_add(asked);
                let again: u64 = self
                    .range(start, end)
                    .filter(|v| v.flags().contains(VmFlags::LOCKED))
                    .map(|v| v.end.min(end) - v.start.max(start))
                    .sum();
                if !within(locked, asked - again, limit, self.page_size()) {
                    return Err(Errno::ENOMEM);
                }
            }
        }
        let len = len.checked_add(addr - start).and_then(|l| self.page_size().align_up(l)).ok_or(Errno::EINVAL)?;
        let end = start.checked_add(len).ok_or(Errno::EINVAL)?;
        if end == start {
            return Ok(());
        }
        self.transact(&[(start, end)], |mm| {
            if let Err(e) = mm.modify_in(start, end, Holes::Stop, &mut |d| Ok(relocked(d, lock)), false)? {
                return Ok(Err(e));
            }
            // A lock populates the range (an unlock does not); VMAs locked
            // on fault are left as they are.
            if lock.is_empty() {
                return Ok(Ok(()));
            }
            mm.populate_locked(start, end, false)
        })
    }

    /// `mlockall(MCL_CURRENT)` and `munlockall`: every VMA gets the lock
    /// bits `lock`, new mappings `future`; a full lock is populated.
    fn relock_all(&mut self, lock: VmFlags, future: VmFlags) -> Result<()> {
        let top = self.layout.task_size;
        self.transact(&[(0, top)], |mm| {
            mm.def_flags = future;
            let vmas: Vec<(u64, u64)> = mm.iter().map(|v| (v.start, v.end)).collect();
            for (s, e) in vmas {
                // One VMA at a time, as Linux: each merges with the last.
                if let Err(e) = mm.modify_in(s, e, Holes::Skip, &mut |d| Ok(relocked(d, lock)), false)? {
                    return Ok(Err(e));
                }
            }
            if lock.is_empty() {
                return Ok(Ok(()));
            }
            mm.populate_locked(0, top, true)
        })
    }

    /// Linux's `__mm_populate` over `[start, end)` after a lock: each VMA
    /// (but special and lock-on-fault ones) is faulted in, private writable
    /// ones by writing (an anon_vma); it stops at the first page that
    /// cannot be (past its file, or a guard page: `ENOMEM`), or with
    /// `ignore_errors` goes on to the next VMA.
    fn populate_locked(
        &mut self,
        start: u64,
        end: u64,
        ignore_errors: bool,
    ) -> core::result::Result<Result<()>, AllocFail> {
        let vmas: Vec<(u64, u64, VmaData)> = self.range(start, end).map(|v| (v.start, v.end, v.data.clone())).collect();
        for (s, e, d) in vmas {
            // Linux populates every VMA of the range, also one the lock
            // left unlocked (droppable memory); a locked one only if it is
            // not locked on fault.
            let unlockable = d.flags.contains(VmFlags::DROPPABLE);
            if d.flags.contains(VmFlags::SPECIAL) || !(d.flags.locked_now() || unlockable) {
                continue;
            }
            let (ps, pe) = (s.max(start), e.min(end));
            if !d.flags.intersects(VmFlags::ACCESS) {
                if ignore_errors {
                    continue;
                }
                return Ok(Err(Errno::ENOMEM));
            }
            let past = d.past_object(ps, pe, self.page_size());
            let guard = self.guards.first_in(ps, past.unwrap_or(pe));
            // (A write fault past the end of a file prepares the anon_vma
            // before it fails; one on a guard page does not.)
            if d.flags.private_writable() && guard != Some(ps) {
                self.fault_in(s, e)?;
                self.written(ps, guard.or(past).unwrap_or(pe))?;
            }
            if (past.is_some() || guard.is_some()) && !ignore_errors {
                return Ok(Err(Errno::ENOMEM));
            }
        }
        Ok(Ok(()))
    }
}

/// `d` with the lock bits `lock` instead of its own (special and
/// droppable mappings keep theirs: none); `None` if that changes nothing.
fn relocked(d: &VmaData, lock: VmFlags) -> Option<VmaData> {
    if d.flags.intersects(VmFlags::SPECIAL | VmFlags::DROPPABLE) {
        return None;
    }
    let flags = (d.flags - VmFlags::LOCKED_MASK) | lock;
    (flags != d.flags).then(|| VmaData { flags, ..d.clone() })
}

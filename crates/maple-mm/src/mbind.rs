//! `mbind`: a range's memory policy, cut to the range and merged (the
//! policy itself, and what is modelled of it: [`MemPolicy`]).

use crate::{
    edit::Holes,
    error::{Errno, Result},
    policy::{sanitize, MbindFlags, MemPolicy},
    space::AddressSpace,
    store::VmaStore,
    vma::VmaData,
};

impl<T: VmaStore> AddressSpace<T> {
    /// Sets the memory policy of `[addr, addr + len)`, as `mbind(2)` with a
    /// node mask of 64 nodes: `mode` is the mode with its flags
    /// ([`MempolicyMode`](crate::MempolicyMode) codes,
    /// [`MempolicyFlags`](crate::MempolicyFlags) bits), `nodes` bit `n` for
    /// node `n`. Each VMA whose policy differs is cut to the range and
    /// given the policy, then merges with neighbours whose policy (and all
    /// else) is equal. See the module docs of [`MemPolicy`] for what is
    /// measured and what is not modelled.
    ///
    /// Errors: `EINVAL` (unknown `flags`, unaligned `addr`, overflow, a
    /// bad mode or node mask: see [`MemPolicy::from_mbind`]), `EFAULT` (a
    /// hole in the range; for the default policy, a range wholly in a
    /// hole), `ENOMEM` (too many VMAs).
    ///
    /// ```
    /// use maple_mm::{AddressSpace, MapFlags, MbindFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let a = mm.mmap(0, 4 * PAGE_SIZE, Prot::RW, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0)?;
    /// // Interleave the middle two pages over node 0: the VMA is cut.
    /// mm.mbind(a + PAGE_SIZE, 2 * PAGE_SIZE, 3, 0b1, MbindFlags::empty())?;
    /// assert_eq!(mm.vma_count(), 3);
    /// // Back to the default: one VMA again.
    /// mm.mbind(a, 4 * PAGE_SIZE, 0, 0, MbindFlags::empty())?;
    /// assert_eq!(mm.vma_count(), 1);
    /// # Ok::<(), maple_mm::Errno>(())
    /// ```
    pub fn mbind(&mut self, addr: u64, len: u64, mode: u32, nodes: u64, flags: MbindFlags) -> Result<()> {
        // In Linux's order: the mode, the flags, the range (an empty one
        // is done), then the policy itself.
        let (mode, mode_flags) = sanitize(mode)?;
        if flags.bits() & !MbindFlags::all().bits() != 0 || addr % self.page_size().bytes() != 0 {
            return Err(Errno::EINVAL);
        }
        let len = self.page_size().align_up(len).ok_or(Errno::EINVAL)?;
        let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
        if len == 0 {
            return Ok(());
        }
        let policy = MemPolicy::make(mode, mode_flags, nodes, self.layout.numa_nodes)?;
        // Holes are checked before anything changes: any hole for a
        // policy, only a range wholly in one for the default.
        let mut pos = addr;
        let mut any = false;
        for v in self.range(addr, end) {
            if v.start > pos && policy.is_some() {
                return Err(Errno::EFAULT);
            }
            any = true;
            pos = v.end;
        }
        if !any || (pos < end && policy.is_some()) {
            return Err(Errno::EFAULT);
        }
        let policy = policy.map(std::sync::Arc::new);
        self.modify(addr, end, Holes::Ignore, &mut |d| {
            if d.policy.as_deref() == policy.as_deref() {
                return Ok(None);
            }
            Ok(Some(VmaData { policy: policy.clone(), ..d.clone() }))
        })
    }
}

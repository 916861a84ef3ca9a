//! `mmap`, `munmap`, `brk` and placement (`get_unmapped_area`).

use std::sync::Arc;

use crate::{
    error::{Errno, Result},
    flags::{Advice, MapFlags, Prot, VmFlags},
    space::{AddressSpace, Brk},
    store::VmaStore,
    value::VmaValue,
    vma::{Backing, Extra, MappedFile, VmaData},
};

/// Linux's `LEGACY_MAP_MASK` on x86-64: the flags `MAP_SHARED_VALIDATE`
/// lets through (others are `EOPNOTSUPP`, `MAP_FIXED_NOREPLACE` and
/// `MAP_SYNC` among them: a file system that takes `MAP_SYNC` refuses it
/// but on DAX, which the model does not know). `MAP_32BIT`,
/// `MAP_ABOVE4G` and the huge page size field (bits 26 to 30, which
/// `MAP_UNINITIALIZED` shares) are in it.
const KNOWN_MAP_FLAGS: u32 = 0x03
    | 0x10
    | 0x20
    | 0x40
    | 0x80
    | 0x100
    | 0x800
    | 0x1000
    | 0x2000
    | 0x4000
    | 0x8000
    | 0x10000
    | 0x20000
    | 0x40000
    | 0x7c00_0000;

/// Where `mmap`'s flags hold the log2 of a huge page size (`MAP_HUGE_SHIFT`).
const MAP_HUGE_SHIFT: u32 = 26;

impl<T: VmaStore> AddressSpace<T> {
    /// Maps `len` bytes (rounded up to pages), as `mmap(2)` does, and
    /// returns the address.
    ///
    /// * Without `MAP_FIXED`, `addr` is a hint: used if the range is free,
    ///   else the mapping goes top-down below the layout's `mmap_base`
    ///   (bottom-up in the legacy layout), keeping the guard gap below a
    ///   grows-down mapping; found with the tree's O(log n) gap search.
    /// * `MAP_FIXED` replaces whatever is there; `MAP_FIXED_NOREPLACE`
    ///   fails with `EEXIST` instead.
    /// * `file` is required (`EBADF` without) unless `MAP_ANONYMOUS`;
    ///   `offset` must be page-aligned (`EINVAL`) and not overflow with
    ///   `len` (`EOVERFLOW`).
    /// * The new VMA merges with compatible neighbours.
    ///
    /// Errors: `EINVAL` (zero length, no or two mapping types, unaligned
    /// fixed address or offset), `ENOMEM` (no room, past the end of the
    /// address space, too many VMAs), `EACCES` (shared writable mapping of
    /// a read-only file), `EEXIST`, `EOVERFLOW`, `EOPNOTSUPP` (unknown flags
    /// with `MAP_SHARED_VALIDATE`). Unknown flags are otherwise ignored and
    /// protection bits other than `rwx` too, as by Linux.
    pub fn mmap(
        &mut self,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        file: Option<Arc<MappedFile>>,
        offset: u64,
    ) -> Result<u64> {
        self.mmap_carrying(addr, len, prot, flags, file, offset, None)
    }

    /// [`mmap`](Self::mmap), the new mapping carrying `value`. It merges
    /// only with neighbours whose values [join](VmaValue::joins) it.
    ///
    /// Errors: those of `mmap`.
    #[allow(clippy::too_many_arguments)]
    pub fn mmap_with<V: VmaValue>(
        &mut self,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        file: Option<Arc<MappedFile>>,
        offset: u64,
        value: V,
    ) -> Result<u64> {
        self.mmap_carrying(addr, len, prot, flags, file, offset, Extra::make(None, Some(Box::new(value))))
    }

    /// [`mmap`](Self::mmap) of a mapping that carries `extra` (the
    /// embedder's value).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn mmap_carrying(
        &mut self,
        addr: u64,
        len: u64,
        prot: Prot,
        flags: MapFlags,
        file: Option<Arc<MappedFile>>,
        mut offset: u64,
        extra: Option<Arc<Extra>>,
    ) -> Result<u64> {
        // The order of the checks is Linux's (sys_mmap, then do_mmap).
        let bits = flags.bits();
        if !self.page_size().is_aligned(offset) {
            return Err(Errno::EINVAL);
        }
        let anonymous = flags.contains(MapFlags::ANONYMOUS);
        let file = if anonymous { None } else { Some(file.ok_or(Errno::EBADF)?) };
        let droppable = bits & 0x0f == MapFlags::DROPPABLE.bits();
        // MAP_HUGETLB: anonymous memory from a hugetlbfs file of huge
        // pages of a size the machine has (a file other than hugetlbfs's
        // cannot give them).
        let huge = if flags.contains(MapFlags::HUGETLB) {
            if file.is_some() {
                return Err(Errno::EINVAL);
            }
            let log = (bits >> MAP_HUGE_SHIFT) & 0x3f;
            let size = if log == 0 { self.page_size().pmd_size() } else { 1u64 << log };
            if !self.huge_page_sizes().contains(&size) {
                return Err(Errno::EINVAL);
            }
            Some(size)
        } else {
            None
        };
        if len == 0 {
            return Err(Errno::EINVAL);
        }
        let fixed = flags.intersects(MapFlags::FIXED | MapFlags::FIXED_NOREPLACE);
        let len = match huge {
            // (Rounded up to whole huge pages first; a length that wraps
            // to 0 is no length.)
            Some(size) => len.checked_next_multiple_of(size).filter(|&l| l != 0).ok_or(Errno::EINVAL)?,
            None => self.page_size().align_up(len).filter(|&l| l != 0).ok_or(Errno::ENOMEM)?,
        };
        let pgoff = self.page_size().pages(offset);
        if pgoff.checked_add(self.page_size().pages(len)).is_none() {
            return Err(Errno::EOVERFLOW);
        }
        if self.vma_count() > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let probe = match &file {
            Some(f) => Backing::File(Arc::clone(f)),
            None => Backing::Anon,
        };
        let start = if fixed {
            // hugetlbfs places a fixed mapping only on a huge page.
            if huge.is_some_and(|size| len <= self.layout.task_size && addr % size != 0) {
                return Err(Errno::EINVAL);
            }
            if addr > self.layout.task_size || len > self.layout.task_size - addr {
                return Err(Errno::ENOMEM);
            }
            if !self.page_size().is_aligned(addr) {
                return Err(Errno::EINVAL);
            }
            if addr < self.layout.mmap_min_addr {
                return Err(Errno::EPERM);
            }
            addr
        } else {
            let hint = self.round_hint(addr);
            if flags.contains(MapFlags::BITS32) && self.layout.arch == crate::layout::Arch::X86_64 {
                self.area_below_2g(hint, len)?
            } else {
                self.unmapped_area(hint, len, &probe, offset)?
            }
        };
        if flags.contains(MapFlags::FIXED_NOREPLACE) && self.find_vma_intersection(start, start + len).is_some() {
            return Err(Errno::EEXIST);
        }
        if file.as_ref().is_some_and(|f| !f.anon_shmem) {
            // Linux's file_mmap_ok: the file range must fit in a file (a
            // length beyond the largest file is refused before the offset
            // is looked at; only a layout made by hand lets one through).
            let max = (i64::MAX as u64).checked_sub(len).ok_or(Errno::EOVERFLOW)?;
            if pgoff > self.page_size().pages(max) {
                return Err(Errno::EOVERFLOW);
            }
        }
        // A file on a disk file system (ext4, xfs) takes MAP_SYNC through
        // validation and then refuses it, not being on DAX (which the model
        // does not know); shmem (memfd) lets validation refuse it, and
        // ignores it otherwise.
        let sync = flags.contains(MapFlags::SYNC);
        let shmem = file.as_ref().is_some_and(|f| f.anon_shmem || f.path.starts_with("/memfd:"));
        let refuses_sync = sync && file.is_some() && !shmem;
        let known = if file.is_some() && !shmem { KNOWN_MAP_FLAGS | MapFlags::SYNC.bits() } else { KNOWN_MAP_FLAGS };
        let shared = match (bits & 0x0f, anonymous) {
            (0x01, _) => true,
            (0x02, _) => false,
            // Droppable memory cannot be locked nor grow.
            (0x08, true) if flags.intersects(MapFlags::LOCKED | MapFlags::GROWSDOWN) => return Err(Errno::EINVAL),
            // (A hugetlbfs file's mapping is private or shared.)
            (0x08, true) if huge.is_some() => return Err(Errno::EINVAL),
            (0x08, true) => false,
            (0x03, false) => {
                if bits & !known != 0 {
                    return Err(Errno::EOPNOTSUPP);
                }
                true
            }
            _ => return Err(Errno::EINVAL),
        };
        let grows = flags.contains(MapFlags::GROWSDOWN);
        let backing = match file {
            Some(f) => {
                if shared && prot.contains(Prot::WRITE) && !f.writable {
                    return Err(Errno::EACCES);
                }
                if grows {
                    return Err(Errno::EINVAL);
                }
                Backing::File(f)
            }
            // Only private anonymous memory can grow down.
            None if shared && grows => return Err(Errno::EINVAL),
            None if shared => {
                offset = 0;
                Backing::File(Arc::new(MappedFile::new_shmem(len)))
            }
            None => Backing::Anon,
        };
        let mut vm = VmFlags::from_prot(prot);
        vm.set(VmFlags::SHARED, shared);
        vm.set(VmFlags::GROWSDOWN, flags.contains(MapFlags::GROWSDOWN));
        vm.set(VmFlags::LOCKED, flags.contains(MapFlags::LOCKED));
        vm.set(VmFlags::NOHUGEPAGE, flags.contains(MapFlags::STACK));
        vm.set(VmFlags::NORESERVE, flags.contains(MapFlags::NORESERVE));
        vm.set(VmFlags::SYNC, sync);
        // `mlockall(MCL_FUTURE)` locks every new mapping (but a droppable
        // one, which is populated all the same).
        vm |= self.def_flags;
        let lock = vm & VmFlags::LOCKED_MASK;
        if droppable {
            vm = (vm - VmFlags::LOCKED_MASK)
                | VmFlags::DROPPABLE
                | VmFlags::NORESERVE
                | VmFlags::WIPEONFORK
                | VmFlags::DONTDUMP;
        }
        // RLIMIT_MEMLOCK, for a locked mapping.
        if flags.contains(MapFlags::LOCKED) && !self.can_do_mlock() {
            return Err(Errno::EPERM);
        }
        if !self.mlock_future_ok(vm, len) {
            return Err(Errno::EAGAIN);
        }
        // Linux's accountable_mapping: private and writable, not NORESERVE.
        if (vm & (VmFlags::NORESERVE | VmFlags::SHARED | VmFlags::WRITE)) == VmFlags::WRITE {
            vm |= VmFlags::ACCOUNT;
        }
        let end = start + len;
        self.check_splits(start, end)?;
        // A sealed mapping cannot be mapped over.
        if self.sealed_in(start, end) {
            return self.refuse_unmap(start).map(|()| start);
        }
        // RLIMIT_AS, counting what the mapping replaces as freed. Linux
        // has cut the VMAs it would replace at both ends by then, and the
        // cuts stay (found by the brk oracle).
        let limited = self.layout.as_limit != u64::MAX || self.layout.data_limit != u64::MAX;
        if limited && !self.may_expand_vm(vm, len, if fixed { self.mapped_in(start, end) } else { 0 }) {
            return self.transact(&[(start, end)], |mm| {
                mm.cut_at(start)?;
                mm.cut_at(end)?;
                Ok(Err(Errno::ENOMEM))
            });
        }
        if refuses_sync {
            // The file's own mmap refuses it, after a MAP_FIXED has
            // unmapped the range: Linux cannot put back what it unmapped
            // and leaves a hole.
            return self.transact(&[(start, end)], |mm| {
                if fixed {
                    mm.clear(start, end)?;
                }
                Ok(Err(Errno::EOPNOTSUPP))
            });
        }
        if let Some(size) = huge {
            // hugetlbfs's own mmap, where MAP_SYNC is refused (above): the
            // offset on a huge page, then the reservation of every huge
            // page, which fails: none are reserved (a default Linux,
            // `vm.nr_hugepages` 0).
            let err = if offset % size != 0 { Errno::EINVAL } else { Errno::ENOMEM };
            return self.transact(&[(start, end)], |mm| {
                if fixed {
                    mm.clear(start, end)?;
                }
                Ok(Err(err))
            });
        }
        if matches!(backing, Backing::Anon) {
            offset = start;
        }
        let data = VmaData {
            flags: vm,
            off_base: VmaData::base_for(start, offset),
            backing,
            name: None,
            anon: None,
            extra,
            policy: None,
        };
        // MAP_POPULATE (without MAP_NONBLOCK) and a lock prefault (but a
        // lock on fault); a private writable mapping is then written (Linux
        // ignores the prefault's failures; a write fault past the end of
        // the file prepares the anon_vma before it fails).
        let asked = flags & (MapFlags::POPULATE | MapFlags::NONBLOCK) == MapFlags::POPULATE;
        // (Asked by the lock bits the call would set, skipped by those the
        // VMA has: a droppable one populates under mlockall(MCL_ONFAULT).)
        let populate =
            (asked || lock.contains(VmFlags::LOCKED)) && !vm.contains(VmFlags::LOCKONFAULT) && vm.private_writable();
        self.transact(&[(start, end)], |mm| {
            mm.clear(start, end)?;
            mm.put(start, end, data)?;
            mm.merge_around(&[(start, end)])?;
            if populate {
                mm.populate_writes(start, end)?;
            }
            Ok(Ok(start))
        })
    }

    /// The huge page sizes Linux has on this layout's machine (the
    /// `hstate`s `MAP_HUGE_*` may name): the page-middle-directory size
    /// and, with 4 KiB pages, 1 GiB.
    fn huge_page_sizes(&self) -> [u64; 2] {
        let pmd = self.page_size().pmd_size();
        let pud = if self.page_size() == crate::PageSize::K4 { 1 << 30 } else { pmd };
        [pmd, pud]
    }

    /// Linux's `round_hint_to_min`: a hint below `mmap_min_addr` moves up to it.
    fn round_hint(&self, hint: u64) -> u64 {
        let hint = self.page_size().align_down(hint);
        if hint != 0 && hint < self.layout.mmap_min_addr {
            self.page_size().align_up(self.layout.mmap_min_addr).unwrap_or(hint)
        } else {
            hint
        }
    }

    /// Where `mmap` without `MAP_FIXED` would put `len` bytes with this
    /// hint (0 for none): the hint if the range is free, else the highest
    /// (or, bottom-up, lowest) free range, aligned to 2 MiB where Linux
    /// aligns it for huge pages.
    pub fn get_unmapped_area(&self, hint: u64, len: u64) -> Result<u64> {
        let len = self.page_size().align_up(len).filter(|&l| l != 0).ok_or(Errno::ENOMEM)?;
        self.unmapped_area(self.round_hint(hint), len, &Backing::Anon, 0)
    }

    pub(crate) fn unmapped_area(&self, hint: u64, len: u64, backing: &Backing, offset: u64) -> Result<u64> {
        if len > self.layout.task_size {
            return Err(Errno::ENOMEM);
        }
        let pmd = self.page_size().pmd_size();
        let thp = self.layout.thp_align
            && match backing {
                Backing::Anon => hint == 0 && len % pmd == 0,
                Backing::File(f) => {
                    // Regular files: when the file range covers an aligned
                    // huge-page block (Linux's __thp_get_unmapped_area).
                    let off_end = offset.wrapping_add(len);
                    let off_align = offset.div_ceil(pmd).wrapping_mul(pmd);
                    !f.anon_shmem && off_end > off_align && off_end - off_align >= pmd
                }
            };
        if thp {
            if let Some(pad) = len.checked_add(pmd) {
                if let Ok(ret) = self.search_area(hint, pad) {
                    if hint != 0 && ret == hint {
                        return Ok(ret);
                    }
                    let off = match backing {
                        Backing::Anon => 0,
                        Backing::File(_) => offset,
                    };
                    let off_sub = off.wrapping_sub(ret) & (pmd - 1);
                    if !self.layout.bottom_up && off_sub == 0 {
                        return Ok(ret + pmd);
                    }
                    return Ok(ret + off_sub);
                }
            }
        }
        self.search_area(hint, len)
    }

    /// x86-64's `arch_get_unmapped_area(_topdown)` and the generic
    /// `generic_get_unmapped_area(_topdown)` arm64 uses, which agree: a
    /// free hinted range that stays on its side of the map window, else
    /// top-down below `mmap_base` (raised by what lies above the window
    /// for a hint above it), else bottom-up from `legacy_base`.
    fn search_area(&self, hint: u64, len: u64) -> Result<u64> {
        let (l, page) = (&self.layout, self.page_size());
        // (Bounds on pages, whatever a layout made by hand holds.)
        let end = page.align_down(l.mmap_end(hint));
        if hint != 0 && len <= end && hint <= end - len && self.hint_free(hint, len) {
            return Ok(hint);
        }
        if !l.bottom_up {
            let low = page.align_up(l.mmap_min_addr).unwrap_or(u64::MAX).max(page.bytes());
            let high = page.align_down(l.mmap_base.saturating_add(end - l.map_window.min(end)).min(end));
            if let Ok(a) = self.topdown(low, high, len) {
                return Ok(a);
            }
            // Linux falls back to a bottom-up search.
        }
        let low = page.align_up(l.legacy_base.max(l.mmap_min_addr)).unwrap_or(u64::MAX);
        self.bottomup(low, end, len)
    }

    /// x86-64's placement for `MAP_32BIT`: the hint if the range is free
    /// and ends below 2 GiB, else the lowest free range in `[1 GiB,
    /// 2 GiB)` (Linux randomizes its start by up to 32 MiB where address
    /// space randomization is on; the model, as `setarch -R`, does not).
    fn area_below_2g(&self, hint: u64, len: u64) -> Result<u64> {
        const BEGIN: u64 = 0x4000_0000;
        const END: u64 = 0x8000_0000;
        if len > END {
            return Err(Errno::ENOMEM);
        }
        if hint != 0 && hint <= END - len && self.hint_free(hint, len) {
            return Ok(hint);
        }
        self.bottomup(BEGIN.max(self.layout.mmap_min_addr), END, len)
    }

    /// Whether `[hint, hint + len)` (within the address space) is free,
    /// keeping the guard gap below a grows-down mapping above it.
    fn hint_free(&self, hint: u64, len: u64) -> bool {
        let below_next = match self.find_vma(hint) {
            None => true,
            Some(v) => hint + len <= self.start_gap(&v),
        };
        below_next && self.reserved.first_in(hint, hint + len).is_none()
    }

    /// The lowest address a mapping may end at below `v` (its guard gap if
    /// it grows down).
    fn start_gap(&self, v: &crate::Vma<'_>) -> u64 {
        if v.flags().contains(VmFlags::GROWSDOWN) {
            v.start.saturating_sub(self.layout.stack_guard_gap)
        } else {
            v.start
        }
    }

    /// Highest free `[a, a + len)` inside `[low, high)`, keeping the guard
    /// gap below grows-down VMAs.
    fn topdown(&self, low: u64, mut high: u64, len: u64) -> Result<u64> {
        loop {
            if high <= low || high - low < len {
                return Err(Errno::ENOMEM);
            }
            let start = self.tree.empty_area_rev(low..high, len).ok_or(Errno::ENOMEM)?;
            // Below the lowest reserved range it would take, if any (any
            // fit ending above that takes it too).
            if let Some(r) = self.reserved.first_in(start, start + len) {
                high = r;
                continue;
            }
            match self.find_vma(start + len) {
                Some(next)
                    if next.start < (start + len).saturating_add(self.layout.stack_guard_gap)
                        && self.start_gap(&next) < start + len =>
                {
                    high = self.start_gap(&next);
                }
                _ => return Ok(start),
            }
        }
    }

    /// Lowest free `[a, a + len)` inside `[low, high)`, keeping the guard
    /// gap below grows-down VMAs.
    fn bottomup(&self, mut low: u64, high: u64, len: u64) -> Result<u64> {
        loop {
            if high <= low || high - low < len {
                return Err(Errno::ENOMEM);
            }
            let start = self.tree.empty_area(low..high, len).ok_or(Errno::ENOMEM)?;
            // Above the highest reserved range it would take, if any.
            if let Some(&(_, r)) = self.reserved.runs(start, start + len).last() {
                low = r;
                continue;
            }
            match self.find_vma(start + len) {
                Some(next) if self.start_gap(&next) < start + len => low = next.end,
                _ => return Ok(start),
            }
        }
    }

    /// `remap_file_pages(2)`: `size` bytes at `start` of a shared file
    /// mapping now show the file from page `pgoff` on. Linux emulates the
    /// old non-linear mappings with a new `MAP_FIXED` mapping of the same
    /// open file (a VMA of its own, populated), so the model does the same.
    ///
    /// `start` and `size` are rounded down to pages. The range must lie in
    /// one shared mapping of a file opened for writing (or run on through
    /// touching mappings of the same open file with the same flags).
    ///
    /// Errors: `EINVAL` (a non-zero `prot`, a flag other than
    /// `MAP_NONBLOCK`, an empty or wrapping range, an offset that wraps, a
    /// range not in such mappings), and those of [`mmap`](Self::mmap).
    pub fn remap_file_pages(&mut self, start: u64, size: u64, prot: u64, pgoff: u64, flags: u64) -> Result<()> {
        let nonblock = u64::from(MapFlags::NONBLOCK.bits());
        if prot != 0 || flags & !nonblock != 0 {
            return Err(Errno::EINVAL);
        }
        let (start, size) = (self.page_size().align_down(start), self.page_size().align_down(size));
        let end = start.checked_add(size).filter(|&e| e > start).ok_or(Errno::EINVAL)?;
        if pgoff.checked_add(self.page_size().pages(size)).is_none() {
            return Err(Errno::EINVAL);
        }
        let first = self.vma_at(start).ok_or(Errno::EINVAL)?;
        let file = match first.backing() {
            // Linux keeps a shared mapping of a file opened read-only as
            // "may share" only (`VM_SHARED` clear).
            Backing::File(f) if first.is_shared() && f.writable => Arc::clone(f),
            _ => return Err(Errno::EINVAL),
        };
        let flags_of = first.flags();
        let mut reach = first.end;
        while reach < end {
            match self.vma_at(reach) {
                Some(next) if next.file().is_some_and(|f| core::ptr::eq(f, &*file)) && next.flags() == flags_of => {
                    reach = next.end;
                }
                _ => return Err(Errno::EINVAL),
            }
        }
        let mut map = MapFlags::SHARED | MapFlags::FIXED | MapFlags::POPULATE;
        map.set(MapFlags::NONBLOCK, flags & nonblock != 0);
        map.set(MapFlags::LOCKED, flags_of.contains(VmFlags::LOCKED));
        let offset = pgoff.checked_mul(self.page_size().bytes()).ok_or(Errno::EINVAL)?;
        self.mmap(start, size, flags_of.prot(), map, Some(file), offset).map(|_| ())
    }

    /// `process_madvise(2)` on this space: `advice` to each range in
    /// turn (as `madvise`), stopping at the first refused. Returns the
    /// bytes advised; a refusal is the result only if nothing was advised
    /// before it.
    ///
    /// Errors: `EINVAL` (flags, or more than 1,024 ranges), and those of
    /// [`madvise`](Self::madvise).
    pub fn process_madvise(&mut self, ranges: &[(u64, u64)], advice: Advice, flags: u64) -> Result<u64> {
        const UIO_MAXIOV: usize = 1024;
        if flags != 0 || ranges.len() > UIO_MAXIOV {
            return Err(Errno::EINVAL);
        }
        let mut done = 0u64;
        for &(addr, len) in ranges {
            match self.madvise(addr, len, advice) {
                Ok(()) => done = done.saturating_add(len),
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        }
        Ok(done)
    }

    /// Unmaps `[addr, addr + len)` (rounded up to pages), as `munmap(2)`:
    /// VMAs at the edges are cut; holes are fine.
    ///
    /// Errors: `EINVAL` (unaligned `addr`, zero length, past the end of
    /// the address space), `ENOMEM` (cutting a VMA in two would exceed
    /// `max_map_count`, or an allocation failed).
    pub fn munmap(&mut self, addr: u64, len: u64) -> Result<()> {
        if !self.page_size().is_aligned(addr) {
            return Err(Errno::EINVAL);
        }
        let len = self.page_size().align_up(len).filter(|&l| l != 0).ok_or(Errno::EINVAL)?;
        if addr > self.layout.task_size || len > self.layout.task_size - addr {
            return Err(Errno::EINVAL);
        }
        let end = addr + len;
        if let Some(v) = self.vma_at(addr) {
            if v.start < addr && v.end > end && self.vma_count() >= self.layout.max_map_count {
                return Err(Errno::ENOMEM);
            }
        }
        self.unmap_unless_sealed(addr, end)
    }

    /// Moves the program break, as `brk(2)`: returns the new break, or the
    /// old one if the request is refused (below the heap's start, into the
    /// guard page of the next mapping, or out of memory). `brk(0)` asks for
    /// the current break. Growing extends `[heap]` (or makes it), shrinking
    /// unmaps the pages above the new break.
    ///
    /// Without a heap base ([`set_brk_base`](Self::set_brk_base)) every
    /// call returns 0 and changes nothing.
    pub fn brk(&mut self, new: u64) -> u64 {
        let Some(b) = self.brk else { return 0 };
        if new < b.start {
            return b.current;
        }
        // RLIMIT_DATA counts the heap with the program's data (Linux's
        // check_data_rlimit), before anything else, shrinks too.
        let data_limit = self.layout.data_limit;
        if data_limit != u64::MAX && (new - b.start).saturating_add(self.layout.data_segment) > data_limit {
            return b.current;
        }
        let (Some(newbrk), Some(oldbrk)) = (self.page_size().align_up(new), self.page_size().align_up(b.current))
        else {
            return b.current;
        };
        if newbrk > self.layout.task_size {
            return b.current;
        }
        if newbrk == oldbrk {
            self.brk = Some(Brk { current: new, ..b });
            return new;
        }
        if new <= b.current {
            // Linux shrinks only where something is mapped between the
            // two breaks (whatever it is): with the heap's top unmapped
            // already, the break stays where it was.
            if self.find_vma(newbrk).is_none_or(|v| v.start >= oldbrk) {
                return b.current;
            }
            if self.sealed_in(newbrk, oldbrk) {
                let _ = self.refuse_unmap(newbrk);
                return b.current;
            }
            let ok = self.transact(&[(newbrk, oldbrk)], |mm| {
                mm.clear(newbrk, oldbrk)?;
                Ok(Ok(()))
            });
            if ok.is_ok() {
                self.brk = Some(Brk { current: new, ..b });
                return new;
            }
            return b.current;
        }
        // Growing: keep a page (and a stack's guard gap) free below the
        // next mapping.
        if let Some(next) = self.find_vma(oldbrk) {
            if newbrk.saturating_add(self.page_size().bytes()) > self.start_gap(&next) {
                return b.current;
            }
        }
        let flags = VmFlags::READ | VmFlags::WRITE | VmFlags::ACCOUNT | self.def_flags;
        let fits = self.may_expand_vm(flags, newbrk - oldbrk, 0) && self.mlock_future_ok(flags, newbrk - oldbrk);
        if self.vma_count() > self.layout.max_map_count || !fits {
            return b.current;
        }
        let data =
            VmaData { flags, backing: Backing::Anon, off_base: 0, name: None, anon: None, extra: None, policy: None };
        let res = self.transact(&[(oldbrk, newbrk)], |mm| {
            // Linux's do_brk_flags: extend the VMA ending at the old break
            // if it is compatible, else a new VMA.
            let locked = data.flags.locked_now();
            mm.put(oldbrk, newbrk, data)?;
            mm.merge_at(oldbrk)?;
            // A heap locked by `mlockall(MCL_FUTURE)` is populated as it
            // grows.
            if locked {
                mm.populate_writes(oldbrk, newbrk)?;
            }
            Ok(Ok(()))
        });
        match res {
            Ok(()) => {
                self.brk = Some(Brk { current: new, ..b });
                new
            }
            Err(_) => b.current,
        }
    }
}

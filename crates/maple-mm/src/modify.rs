//! Calls that change the attributes of a range: `mprotect`, `madvise`,
//! naming, the embedder's values, and write faults (`touch`), on the
//! range-edit engine of `edit.rs`.

use crate::{
    edit::Holes,
    error::AllocFail,
    error::{Errno, Result},
    flags::{Advice, Prot, VmFlags},
    name::AnonName,
    space::AddressSpace,
    store::VmaStore,
    value::{ErasedValue, VmaValue},
    vma::{same_value, Backing, VmaData},
};

/// `MADV_POPULATE_READ`'s number.
const MADV_POPULATE_READ: i32 = 22;
/// `MADV_GUARD_INSTALL`'s number.
const MADV_GUARD_INSTALL: i32 = 102;
/// `MADV_GUARD_REMOVE`'s number.
const MADV_GUARD_REMOVE: i32 = 103;

/// What stops an access running through a range.
enum AccessStop {
    /// An address that is not mapped (`SIGSEGV`).
    Hole,
    /// A VMA without the access's permission (`SIGSEGV`).
    ReadOnly,
    /// A page wholly past the end of the file or shmem object its VMA
    /// maps (`SIGBUS`).
    PastObject,
    /// A guard page (`SIGSEGV`).
    Guard,
}

impl AccessStop {
    /// The error `MADV_POPULATE_READ` or `MADV_POPULATE_WRITE` gives when
    /// this stops it (Linux 6.18, measured): a hole `ENOMEM`, a permission
    /// `EINVAL`, a page past its file or a guard page `EFAULT`.
    fn populate_error(self) -> Result<()> {
        Err(match self {
            AccessStop::Hole => Errno::ENOMEM,
            AccessStop::ReadOnly => Errno::EINVAL,
            AccessStop::PastObject | AccessStop::Guard => Errno::EFAULT,
        })
    }
}

/// The advice numbers that discard data (Linux's `is_discard`).
const DISCARDS: [i32; 7] = [4, 24, 8, 9, 10, 18, 102];

/// Linux's `can_madvise_modify`: `EPERM` for advice `code` that discards
/// data, on a sealed VMA of private anonymous memory without write
/// permission.
pub(crate) fn madvise_sealed(code: i32, d: &VmaData) -> Result<()> {
    let read_only_anon = d.is_anonymous() && !d.flags.contains(VmFlags::WRITE);
    if d.flags.contains(VmFlags::SEALED) && read_only_anon && DISCARDS.contains(&code) {
        return Err(Errno::EPERM);
    }
    Ok(())
}

/// Linux's checks, per VMA, of the advice that changes no VMA (6.18,
/// checked against the kernel by the oracle test): dropping or reclaiming
/// pages (`MADV_DONTNEED`, `MADV_FREE`, `MADV_REMOVE`, `MADV_COLD`,
/// `MADV_PAGEOUT`) is refused on locked memory (`MADV_DONTNEED_LOCKED` is
/// not); `MADV_FREE` takes private anonymous memory only; `MADV_REMOVE`
/// punches a hole in a file, so it needs one (`EINVAL`) mapped shared and
/// writable (`EACCES`).
fn other_advice_allowed(code: i32, d: &VmaData) -> Result<()> {
    const LOCKED_REFUSES: [i32; 5] = [4, 8, 9, 20, 21];
    if d.flags.contains(VmFlags::LOCKED) && LOCKED_REFUSES.contains(&code) {
        return Err(Errno::EINVAL);
    }
    match code {
        8 if !d.is_anonymous() => Err(Errno::EINVAL),
        9 => match &d.backing {
            Backing::Anon => Err(Errno::EINVAL),
            Backing::File(f) if !(d.flags.contains(VmFlags::SHARED) && f.writable) => Err(Errno::EACCES),
            Backing::File(_) => Ok(()),
        },
        _ => Ok(()),
    }
}

/// What an advice does to the anonymous pages of a range it reaches
/// (measured on Linux 6.18; the kernel oracle compares smaps's
/// `Anonymous` after every call).
#[derive(Clone, Copy)]
enum PageEffect {
    /// `MADV_DONTNEED`, `MADV_DONTNEED_LOCKED`: thrown away.
    Zap,
    /// `MADV_FREE`: kept, lazily freeable until written again.
    Free,
    /// `MADV_PAGEOUT`: the lazily freeable ones thrown away, and all of a
    /// droppable VMA's (never swapped); the others stay (the model has no
    /// swap to write them to).
    PageOut,
}

impl PageEffect {
    fn of(advice: Advice) -> Option<PageEffect> {
        match advice {
            Advice::Other(4 | 24) => Some(PageEffect::Zap),
            Advice::Other(8) => Some(PageEffect::Free),
            Advice::Other(21) => Some(PageEffect::PageOut),
            _ => None,
        }
    }

    /// Applies the effect to `[s, e)`, a piece of one VMA (`droppable`:
    /// of droppable memory).
    fn apply<T: VmaStore>(
        self,
        mm: &mut AddressSpace<T>,
        s: u64,
        e: u64,
        droppable: bool,
    ) -> core::result::Result<(), AllocFail> {
        match self {
            PageEffect::Zap => mm.zap(s, e),
            PageEffect::PageOut if droppable => mm.zap(s, e),
            PageEffect::Free => mm.anon.copy_into(&mut mm.lazy, s, e),
            PageEffect::PageOut => {
                for (rs, re) in mm.lazy.runs(s, e) {
                    mm.zap(rs, re)?;
                }
                Ok(())
            }
        }
    }
}

impl<T: VmaStore> AddressSpace<T> {
    /// Changes the protection of `[addr, addr + len)`, as `mprotect(2)`:
    /// VMAs at the edges are cut and the pieces merge with compatible
    /// neighbours. A zero length does nothing.
    ///
    /// Like Linux, if the range runs into a hole, the part before the hole
    /// is changed and the call fails with `ENOMEM`; a hole at `addr`
    /// changes nothing. Adding write access to a private mapping charges
    /// it (`ACCOUNT`); removing it from a never-written private anonymous
    /// mapping drops the charge, so it can merge with an uncharged
    /// neighbour again. A locked private mapping made writable is written
    /// at once (Linux populates it), so it gets an anon_vma.
    ///
    /// Errors: `EINVAL` (unaligned `addr`, unknown `prot` bits,
    /// `PROT_GROWSUP`, `PROT_GROWSDOWN` on a mapping that does not grow
    /// down), `ENOMEM` (holes, overflow, too many VMAs), `EACCES` (write
    /// access to a shared mapping of a read-only file).
    pub fn mprotect(&mut self, addr: u64, len: u64, prot: Prot) -> Result<()> {
        if !self.page_size().is_aligned(addr) {
            return Err(Errno::EINVAL);
        }
        if prot.bits() & !Prot::all().bits() != 0 || prot.contains(Prot::GROWSUP) {
            return Err(Errno::EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let len = self.page_size().align_up(len).ok_or(Errno::ENOMEM)?;
        let mut start = addr;
        let end = addr.checked_add(len).ok_or(Errno::ENOMEM)?;
        if prot.contains(Prot::GROWSDOWN) {
            match self.find_vma(start) {
                Some(v) if v.start < end && v.flags().contains(VmFlags::GROWSDOWN) => start = v.start,
                Some(v) if v.start < end => return Err(Errno::EINVAL),
                _ => return Err(Errno::ENOMEM),
            }
        }
        let access = VmFlags::from_prot(prot);
        let mut visit = |d: &VmaData| {
            let old = d.flags;
            let mut new = access | old.difference(VmFlags::ACCESS);
            if new.contains(VmFlags::WRITE) {
                if !old.intersects(VmFlags::ACCOUNT | VmFlags::WRITE | VmFlags::SHARED | VmFlags::NORESERVE) {
                    new |= VmFlags::ACCOUNT;
                }
            } else if old.contains(VmFlags::ACCOUNT) && d.is_anonymous() && d.anon.is_none() {
                new.remove(VmFlags::ACCOUNT);
            }
            if let Backing::File(f) = &d.backing {
                if old.contains(VmFlags::SHARED) && new.contains(VmFlags::WRITE) && !f.writable {
                    return Err(Errno::EACCES);
                }
            }
            // A sealed VMA refuses even a change to what it has.
            if old.contains(VmFlags::SEALED) {
                return Err(Errno::EPERM);
            }
            Ok((new != old).then(|| VmaData { flags: new, ..d.clone() }))
        };
        let write = access.contains(VmFlags::WRITE);
        self.transact(&[(start, end)], |mm| mm.modify_in(start, end, Holes::Stop, &mut visit, write))
    }

    /// Checks an advice-style range (`madvise`, naming) and returns its end;
    /// `None` for an empty range (nothing to do).
    fn advice_range(&self, addr: u64, len: u64) -> Result<Option<u64>> {
        if !self.page_size().is_aligned(addr) {
            return Err(Errno::EINVAL);
        }
        let alen = self.page_size().align_up(len).ok_or(Errno::EINVAL)?;
        if len != 0 && alen == 0 {
            return Err(Errno::EINVAL);
        }
        let end = addr.checked_add(alen).ok_or(Errno::EINVAL)?;
        Ok((end != addr).then_some(end))
    }

    /// Gives advice about `[addr, addr + len)`, as `madvise(2)`. Advice
    /// that changes a mapping's flags (don't-fork, wipe-on-fork, random,
    /// sequential, dump, hugepage, KSM's mergeable) cuts and merges VMAs
    /// like `mprotect`; `MADV_POPULATE_WRITE` writes every page;
    /// `MADV_GUARD_INSTALL` makes every page a guard page (see
    /// [`guard_pages`](Self::guard_pages)), marks every VMA it reaches
    /// [`MAYBE_GUARD`](VmFlags::MAYBE_GUARD) and gives each private
    /// anonymous one an anon_vma as a write would, and
    /// `MADV_GUARD_REMOVE` removes guard pages; `MADV_DONTNEED` (and
    /// `_LOCKED`) throws the anonymous pages away, `MADV_FREE` makes them
    /// lazily freeable and `MADV_PAGEOUT` throws those away (see
    /// [`anon_pages`](Self::anon_pages)); the rest change no VMA but
    /// are checked as Linux checks them. Holes are skipped and reported as
    /// `ENOMEM` after the mapped parts were advised, as by Linux.
    ///
    /// Errors (each checked against Linux 6.18 by the kernel oracle test):
    /// `EINVAL` (unaligned `addr`, bad length, wipe-on-fork on a shared or
    /// file mapping, fork advice on a special mapping, populating a mapping
    /// without the permission, `MADV_DONTNEED`, `MADV_FREE`, `MADV_REMOVE`,
    /// `MADV_COLD`, `MADV_PAGEOUT` or guard markers on locked memory,
    /// `MADV_FREE` on anything but private anonymous memory, `MADV_REMOVE`
    /// on anonymous memory), `EACCES` (`MADV_REMOVE` on a file not mapped
    /// shared and writable), `ENOMEM` (holes), `EFAULT` (populating a page
    /// past the end of its file, where Linux would raise `SIGBUS`, or a
    /// guard page). The
    /// populating advice stops at the first page it cannot reach, keeping
    /// what it wrote before, as Linux does; the others stop at the first
    /// VMA that refuses them, keeping what they did before.
    pub fn madvise(&mut self, addr: u64, len: u64, advice: Advice) -> Result<()> {
        let Some(end) = self.advice_range(addr, len)? else { return Ok(()) };
        if advice == Advice::PopulateWrite {
            return self.populate_write(addr, end);
        }
        if matches!(advice, Advice::GuardInstall | Advice::GuardRemove) {
            return self.guard_advice(addr, end, advice == Advice::GuardInstall);
        }
        if advice == Advice::Other(MADV_POPULATE_READ) {
            // Read faults give no VMA an anon_vma: only the error is seen.
            return self.access_reach(addr, end, Prot::READ).2.map_or(Ok(()), AccessStop::populate_error);
        }
        let effect = PageEffect::of(advice);
        // The pieces the advice reaches: those before the first refusal.
        let accepted = core::cell::Cell::new(0);
        let mut visit = |d: &VmaData| {
            madvise_sealed(advice.code(), d)?;
            let old = d.flags;
            let special = old.contains(VmFlags::SPECIAL);
            let new = match advice {
                Advice::Normal => old - (VmFlags::SEQ_READ | VmFlags::RAND_READ),
                Advice::Random => (old - VmFlags::SEQ_READ) | VmFlags::RAND_READ,
                Advice::Sequential => (old - VmFlags::RAND_READ) | VmFlags::SEQ_READ,
                Advice::DontFork | Advice::DoFork if special => return Err(Errno::EINVAL),
                Advice::DontFork => old | VmFlags::DONTCOPY,
                Advice::DoFork => old - VmFlags::DONTCOPY,
                Advice::WipeOnFork if !d.is_anonymous() || old.contains(VmFlags::SHARED) => {
                    return Err(Errno::EINVAL);
                }
                Advice::WipeOnFork => old | VmFlags::WIPEONFORK,
                // Droppable memory is never kept on fork nor dumped.
                Advice::KeepOnFork | Advice::DoDump if old.contains(VmFlags::DROPPABLE) => return Err(Errno::EINVAL),
                Advice::KeepOnFork => old - VmFlags::WIPEONFORK,
                Advice::DontDump => old | VmFlags::DONTDUMP,
                Advice::DoDump if special => return Err(Errno::EINVAL),
                Advice::DoDump => old - VmFlags::DONTDUMP,
                Advice::HugePage => (old - VmFlags::NOHUGEPAGE) | VmFlags::HUGEPAGE,
                Advice::NoHugePage => (old - VmFlags::HUGEPAGE) | VmFlags::NOHUGEPAGE,
                // KSM takes private memory only, and ignores the rest.
                Advice::Mergeable if old.intersects(VmFlags::SHARED | VmFlags::SPECIAL | VmFlags::DROPPABLE) => old,
                Advice::Mergeable => old | VmFlags::MERGEABLE,
                Advice::Unmergeable => old - VmFlags::MERGEABLE,
                Advice::Other(code) => {
                    other_advice_allowed(code, d)?;
                    old
                }
                // (Handled above.)
                Advice::PopulateWrite | Advice::GuardInstall | Advice::GuardRemove => old,
            };
            accepted.set(accepted.get() + 1);
            Ok((new != old).then(|| VmaData { flags: new, ..d.clone() }))
        };
        let Some(effect) = effect else { return self.modify(addr, end, Holes::Skip, &mut visit) };
        // Advice that changes pages, not VMAs: the pieces it reached are
        // the first `accepted` ones.
        let pieces: Vec<(u64, u64, bool)> = self
            .range(addr, end)
            .map(|v| (v.start.max(addr), v.end.min(end), v.flags().contains(VmFlags::DROPPABLE)))
            .collect();
        self.transact(&[(addr, end)], |mm| {
            let res = mm.modify_in(addr, end, Holes::Skip, &mut visit, false)?;
            for &(s, e, droppable) in &pieces[..accepted.get()] {
                effect.apply(mm, s, e, droppable)?;
            }
            Ok(res)
        })
    }

    /// `MADV_POPULATE_WRITE`: Linux writes the pages in order and stops at
    /// the first that cannot be written, keeping what it wrote: a hole is
    /// `ENOMEM`, a VMA without write permission `EINVAL`, a page past the
    /// end of its file `EFAULT` (the access would raise `SIGBUS`).
    fn populate_write(&mut self, addr: u64, end: u64) -> Result<()> {
        let (vmas, reached, stop) = self.access_reach(addr, end, Prot::WRITE);
        self.fault_range(&vmas, addr, reached)?;
        stop.map_or(Ok(()), AccessStop::populate_error)
    }

    /// `MADV_GUARD_INSTALL` (`install`) or `MADV_GUARD_REMOVE` (Linux
    /// 6.18, measured): the guard pages of every VMA reached are put in or
    /// taken out. Installing is refused (`EINVAL`) on a locked or special
    /// mapping, and marks every VMA it reaches
    /// [`MAYBE_GUARD`](VmFlags::MAYBE_GUARD) (whole: the flag is sticky and
    /// cuts nothing) and gives a private anonymous one an anon_vma as a
    /// write fault would (the markers are page-table entries, which fork
    /// must copy); removing is refused on a special mapping. Holes are
    /// skipped and reported as `ENOMEM`. Either stops at the first
    /// refusal, keeping what it did before.
    fn guard_advice(&mut self, addr: u64, end: u64, install: bool) -> Result<()> {
        let code = if install { MADV_GUARD_INSTALL } else { MADV_GUARD_REMOVE };
        let vmas: Vec<(u64, u64, VmaData)> = self.range(addr, end).map(|v| (v.start, v.end, v.data.clone())).collect();
        let window = vmas.first().map_or((addr, addr), |f| (f.0, vmas[vmas.len() - 1].1));
        let refused = if install { VmFlags::LOCKED | VmFlags::SPECIAL } else { VmFlags::SPECIAL };
        self.transact(&[window], |mm| {
            let (mut pos, mut hole) = (addr, false);
            for (s, e, d) in vmas {
                hole |= s > pos;
                if let Err(e) = madvise_sealed(code, &d) {
                    return Ok(Err(e));
                }
                if d.flags.intersects(refused) {
                    return Ok(Err(Errno::EINVAL));
                }
                let (ps, pe) = (s.max(addr), e.min(end));
                if install {
                    if !d.flags.contains(VmFlags::MAYBE_GUARD) {
                        mm.put(s, e, VmaData { flags: d.flags | VmFlags::MAYBE_GUARD, ..d.clone() })?;
                    }
                    if d.is_anonymous() {
                        mm.fault_in(s, e)?;
                    }
                    mm.guards.install(ps, pe)?;
                    mm.zap(ps, pe)?;
                } else {
                    mm.guards.remove(ps, pe)?;
                }
                pos = e;
            }
            hole |= pos < end;
            Ok(if hole { Err(Errno::ENOMEM) } else { Ok(()) })
        })
    }

    /// How far an access (`need`: a read or a write) running from `start`
    /// towards `end` gets: the VMAs it reaches, in address order (whole,
    /// as `(start, end)`: a write fault gives the whole VMA its anon_vma,
    /// so one reached only up to the stop is listed too), the first page
    /// it does not reach (`end` if none), and what stops it, if anything.
    fn access_reach(&self, start: u64, end: u64, need: Prot) -> (Vec<(u64, u64)>, u64, Option<AccessStop>) {
        let mut vmas = Vec::new();
        let mut pos = start;
        for v in self.range(start, end) {
            if v.start > pos {
                return (vmas, pos, Some(AccessStop::Hole));
            }
            if !v.prot().contains(need) {
                return (vmas, pos, Some(AccessStop::ReadOnly));
            }
            let to = v.end.min(end);
            let past = v.data.past_object(pos, to, self.page_size());
            match (self.guards.first_in(pos, past.unwrap_or(to)), past) {
                // A guard page: its fault fails before any anon_vma is
                // made, so the VMA is reached only if pages before it were.
                (Some(g), _) => {
                    if g > pos {
                        vmas.push((v.start, v.end));
                    }
                    return (vmas, g, Some(AccessStop::Guard));
                }
                (None, Some(p)) => {
                    // Even the first page's fault gives a private file VMA
                    // its anon_vma before it fails.
                    vmas.push((v.start, v.end));
                    return (vmas, p, Some(AccessStop::PastObject));
                }
                (None, None) => {}
            }
            vmas.push((v.start, v.end));
            pos = v.end;
        }
        (vmas, pos.min(end), (pos < end).then_some(AccessStop::Hole))
    }

    /// Writes to the pages of `[start, end)`, which lie in these whole
    /// VMAs (each gets its anon_vma).
    fn fault_range(&mut self, vmas: &[(u64, u64)], start: u64, end: u64) -> Result<()> {
        self.transact(vmas, |mm| {
            for &(s, e) in vmas {
                mm.fault_in(s, e)?;
            }
            mm.written(start, end)?;
            Ok(Ok(()))
        })
    }

    /// Puts `value` on every VMA in `[start, start + len)` (`None` takes
    /// values off), splitting VMAs at the ends of the range and merging
    /// the pieces with neighbours that join, as setting a name does.
    /// Observers are told the pieces that changed.
    ///
    /// Errors, with nothing changed: `EINVAL` (an unaligned start, or a
    /// range past the end of the address space), `ENOMEM` (a part of the
    /// range not mapped), or a failed allocation.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, MapFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let a = mm.mmap(0, 4 * PAGE_SIZE, Prot::RW, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
    /// mm.set_value(a + PAGE_SIZE, PAGE_SIZE, Some(7u32)).unwrap();
    /// assert_eq!(mm.vma_count(), 3);
    /// assert_eq!(mm.find_vma(a + PAGE_SIZE).unwrap().value::<u32>(), Some(&7));
    /// mm.set_value::<u32>(a, 4 * PAGE_SIZE, None).unwrap();
    /// assert_eq!(mm.vma_count(), 1);
    /// ```
    pub fn set_value<V: VmaValue>(&mut self, start: u64, len: u64, value: Option<V>) -> Result<()> {
        if start % self.page_size().bytes() != 0 {
            return Err(Errno::EINVAL);
        }
        let end = self.page_size().align_up(len).and_then(|l| start.checked_add(l)).ok_or(Errno::EINVAL)?;
        if start == end {
            return Ok(());
        }
        let mut pos = start;
        for v in self.range(start, end) {
            if v.start > pos {
                return Err(Errno::ENOMEM);
            }
            pos = v.end;
        }
        if pos < end {
            return Err(Errno::ENOMEM);
        }
        self.modify(start, end, Holes::Ignore, &mut |d| {
            if same_value(d.value(), value.as_ref().map(|v| v as &dyn ErasedValue)) {
                return Ok(None);
            }
            Ok(Some(d.with_value(value.clone().map(|v| Box::new(v) as Box<dyn ErasedValue>))))
        })
    }

    /// Names the anonymous memory in `[addr, addr + len)`, as
    /// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`; `None`
    /// or `""` clears the name. All VMAs named by one call share one name
    /// object. Holes are skipped and reported as `ENOMEM`.
    ///
    /// Errors: `EINVAL` (bad name: longer than 79 bytes, unprintable or one
    /// of `` \`$[] ``; unaligned `addr`), `EBADF` (a file mapping in the
    /// range; shared anonymous memory may be named), `ENOMEM` (holes).
    pub fn set_anon_name(&mut self, addr: u64, len: u64, name: Option<&str>) -> Result<()> {
        let name = match name {
            None | Some("") => None,
            Some(n) => Some(AnonName::new(n)?),
        };
        let Some(end) = self.advice_range(addr, len)? else { return Ok(()) };
        self.modify(addr, end, Holes::Skip, &mut |d| {
            if let Backing::File(f) = &d.backing {
                if !f.anon_shmem {
                    return Err(Errno::EBADF);
                }
            }
            if d.name == name {
                return Ok(None);
            }
            Ok(Some(VmaData { name: name.clone(), ..d.clone() }))
        })
    }

    /// A write to every page of `[addr, addr + len)` (a write fault, as
    /// when a program first stores to memory): each private VMA touched
    /// gets an anon_vma, which decides later merges as in Linux (two
    /// separately written VMAs do not merge; a written VMA inherited by
    /// fork does not merge with a new one), and its pages become
    /// anonymous pages ([`anon_pages`](Self::anon_pages)).
    ///
    /// A hole below a stack (a grows-down mapping) that may grow down to
    /// it is written after the stack grows, as the faults would grow it
    /// (lowest page first; see [`fault`](Self::fault) for the rules).
    ///
    /// Errors: `EFAULT` if any page is unmapped (and no stack grows to
    /// it), not writable or a guard page (where Linux raises `SIGSEGV`),
    /// or lies wholly past the end of the file or shmem object it maps,
    /// where that size is known (`SIGBUS`; see
    /// [`MappedFile::size`](crate::MappedFile::size)). Nothing changes
    /// then (Linux keeps the pages written, and the stacks grown, before
    /// the faulting page).
    pub fn touch(&mut self, addr: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let start = self.page_size().align_down(addr);
        let end = addr.checked_add(len).and_then(|l| self.page_size().align_up(l)).ok_or(Errno::EFAULT)?;
        match self.access_reach(start, end, Prot::WRITE) {
            (vmas, _, None) => self.fault_range(&vmas, start, end),
            (_, pos, Some(AccessStop::Hole)) if self.stack_growth(pos).is_some() => self.touch_growing(start, end),
            (_, _, Some(_)) => Err(Errno::EFAULT),
        }
    }

    /// [`touch`](Self::touch) of a range with holes, each below a stack
    /// that may grow down to it.
    fn touch_growing(&mut self, start: u64, end: u64) -> Result<()> {
        // Each hole's stack, as the space stands: a stack's growth changes
        // neither another hole's stack nor the VMA below that hole.
        let mut growths: smallvec::SmallVec<[u64; 2]> = smallvec::SmallVec::new();
        let (mut pos, mut reach) = (start, end);
        let grow = |pos: u64, growths: &mut smallvec::SmallVec<[u64; 2]>| match self.stack_growth(pos) {
            Some((to, stack)) => {
                growths.push(to);
                Ok(stack.start)
            }
            None => Err(Errno::EFAULT),
        };
        for v in self.range(start, end) {
            if v.start > pos {
                grow(pos, &mut growths)?;
            }
            pos = v.end;
        }
        if pos < end {
            reach = grow(pos, &mut growths)?.max(end);
        }
        // The checks are made on the grown space; a failed one undoes the
        // growth as a failed allocation would.
        let mut denied = false;
        let done = self.transact(&[(start, reach)], |mm| {
            for &to in &growths {
                mm.grow_stack(to)?;
            }
            match mm.access_reach(start, end, Prot::WRITE) {
                (vmas, _, None) => {
                    for (s, e) in vmas {
                        mm.fault_in(s, e)?;
                    }
                    mm.written(start, end)?;
                    Ok(Ok(()))
                }
                (_, _, Some(_)) => {
                    denied = true;
                    Err(AllocFail)
                }
            }
        });
        if denied {
            Err(Errno::EFAULT)
        } else {
            done
        }
    }
}

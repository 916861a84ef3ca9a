//! Calls that change the attributes of a range: `mprotect`, `madvise`,
//! naming, and write faults (`touch`).

use crate::{
    error::{Errno, Result},
    flags::{Advice, Prot, VmFlags},
    name::AnonName,
    space::{is_aligned, page_align, AddressSpace, PAGE_SIZE},
    store::VmaStore,
    vma::{Backing, VmaData},
};

/// How a range walk treats holes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holes {
    /// `mprotect`: stop at the first hole (changes before it stay) with `ENOMEM`.
    Stop,
    /// `madvise`, naming: skip holes, then report `ENOMEM`.
    Skip,
}

/// What stops a write running through a range.
enum Unwritable {
    /// An address that is not mapped (`SIGSEGV`).
    Hole,
    /// A VMA that is not writable (`SIGSEGV`).
    ReadOnly,
    /// A page wholly past the end of the file or shmem object its VMA
    /// maps (`SIGBUS`).
    PastObject,
}

/// What a visit does with one VMA piece.
type Visit<'f> = &'f mut dyn FnMut(&VmaData) -> Result<Option<VmaData>>;

impl<T: VmaStore> AddressSpace<T> {
    /// Applies `visit` to every VMA piece in `[start, end)`: the piece is
    /// cut out and given the new attributes (`Some`), or left alone
    /// (`None`); then neighbours merge around every changed piece. An error
    /// from `visit` stops the walk, keeping what was changed before it, as
    /// Linux does.
    fn modify(&mut self, start: u64, end: u64, holes: Holes, visit: Visit<'_>) -> Result<()> {
        self.transact(&[(start, end)], |mm| {
            let mut changed: Vec<(u64, u64)> = Vec::new();
            let mut pos = start;
            let mut result = Ok(());
            let pieces = mm.entries(start, end);
            if pieces.is_empty() {
                return Ok(Err(Errno::ENOMEM));
            }
            for (s, e, data) in pieces {
                if s > pos {
                    result = Err(Errno::ENOMEM);
                    if holes == Holes::Stop {
                        break;
                    }
                }
                let (ps, pe) = (s.max(start), e.min(end));
                pos = pe;
                let new = match visit(&data) {
                    Ok(n) => n,
                    Err(err) => {
                        result = Err(err);
                        break;
                    }
                };
                let Some(new) = new else { continue };
                if let Err(err) = mm.check_splits(ps, pe) {
                    result = Err(err);
                    break;
                }
                mm.put(ps, pe, new)?;
                changed.push((ps, pe));
            }
            if result.is_ok() && pos < end {
                result = Err(Errno::ENOMEM);
            }
            mm.merge_around(&changed)?;
            Ok(result)
        })
    }

    /// Changes the protection of `[addr, addr + len)`, as `mprotect(2)`:
    /// VMAs at the edges are cut and the pieces merge with compatible
    /// neighbours. A zero length does nothing.
    ///
    /// Like Linux, if the range runs into a hole, the part before the hole
    /// is changed and the call fails with `ENOMEM`; a hole at `addr`
    /// changes nothing. Adding write access to a private mapping charges
    /// it (`ACCOUNT`); removing it from a never-written private anonymous
    /// mapping drops the charge, so it can merge with an uncharged
    /// neighbour again.
    ///
    /// Errors: `EINVAL` (unaligned `addr`, unknown `prot` bits,
    /// `PROT_GROWSUP`, `PROT_GROWSDOWN` on a mapping that does not grow
    /// down), `ENOMEM` (holes, overflow, too many VMAs), `EACCES` (write
    /// access to a shared mapping of a read-only file).
    pub fn mprotect(&mut self, addr: u64, len: u64, prot: Prot) -> Result<()> {
        if !is_aligned(addr) {
            return Err(Errno::EINVAL);
        }
        if prot.bits() & !Prot::all().bits() != 0 || prot.contains(Prot::GROWSUP) {
            return Err(Errno::EINVAL);
        }
        if len == 0 {
            return Ok(());
        }
        let len = page_align(len).ok_or(Errno::ENOMEM)?;
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
        self.modify(start, end, Holes::Stop, &mut |d| {
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
            Ok((new != old).then(|| VmaData { flags: new, ..d.clone() }))
        })
    }

    /// Checks an advice-style range (`madvise`, naming) and returns its end;
    /// `None` for an empty range (nothing to do).
    fn advice_range(addr: u64, len: u64) -> Result<Option<u64>> {
        if !is_aligned(addr) {
            return Err(Errno::EINVAL);
        }
        let alen = page_align(len).ok_or(Errno::EINVAL)?;
        if len != 0 && alen == 0 {
            return Err(Errno::EINVAL);
        }
        let end = addr.checked_add(alen).ok_or(Errno::EINVAL)?;
        Ok((end != addr).then_some(end))
    }

    /// Gives advice about `[addr, addr + len)`, as `madvise(2)`. Advice
    /// that changes a mapping's flags (don't-fork, wipe-on-fork, random,
    /// sequential, dump, hugepage) cuts and merges VMAs like `mprotect`;
    /// `MADV_POPULATE_WRITE` writes every page; the rest change no VMA.
    /// Holes are skipped and reported as `ENOMEM` after the mapped parts
    /// were advised, as by Linux.
    ///
    /// Errors: `EINVAL` (unaligned `addr`, bad length, wipe-on-fork on a
    /// shared or file mapping, fork advice on a special mapping,
    /// populating a mapping that is not writable), `ENOMEM` (holes),
    /// `EFAULT` (populating a page past the end of its file, where Linux
    /// would raise `SIGBUS`). `MADV_POPULATE_WRITE` stops at the first
    /// page it cannot write, keeping what it wrote before, as Linux does.
    pub fn madvise(&mut self, addr: u64, len: u64, advice: Advice) -> Result<()> {
        let Some(end) = Self::advice_range(addr, len)? else { return Ok(()) };
        if advice == Advice::PopulateWrite {
            return self.populate_write(addr, end);
        }
        self.modify(addr, end, Holes::Skip, &mut |d| {
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
                Advice::KeepOnFork => old - VmFlags::WIPEONFORK,
                Advice::DontDump => old | VmFlags::DONTDUMP,
                Advice::DoDump if special => return Err(Errno::EINVAL),
                Advice::DoDump => old - VmFlags::DONTDUMP,
                Advice::HugePage => (old - VmFlags::NOHUGEPAGE) | VmFlags::HUGEPAGE,
                Advice::NoHugePage => (old - VmFlags::HUGEPAGE) | VmFlags::NOHUGEPAGE,
                Advice::PopulateWrite | Advice::Other(_) => old,
            };
            Ok((new != old).then(|| VmaData { flags: new, ..d.clone() }))
        })
    }

    /// `MADV_POPULATE_WRITE`: Linux writes the pages in order and stops at
    /// the first that cannot be written, keeping what it wrote: a hole is
    /// `ENOMEM`, a VMA without write permission `EINVAL`, a page past the
    /// end of its file `EFAULT` (the access would raise `SIGBUS`).
    fn populate_write(&mut self, addr: u64, end: u64) -> Result<()> {
        let (vmas, stop) = self.write_reach(addr, end);
        self.fault_range(&vmas)?;
        match stop {
            None => Ok(()),
            Some(Unwritable::Hole) => Err(Errno::ENOMEM),
            Some(Unwritable::ReadOnly) => Err(Errno::EINVAL),
            Some(Unwritable::PastObject) => Err(Errno::EFAULT),
        }
    }

    /// How far a write running from `start` towards `end` gets: the VMAs
    /// it writes, in address order (whole, as `(start, end)`: a write
    /// fault gives the whole VMA its anon_vma, so one written only up to
    /// the stop is listed too), and what stops it, if anything.
    fn write_reach(&self, start: u64, end: u64) -> (Vec<(u64, u64)>, Option<Unwritable>) {
        let mut vmas = Vec::new();
        let mut pos = start;
        for v in self.range(start, end) {
            if v.start > pos {
                return (vmas, Some(Unwritable::Hole));
            }
            if !v.prot().contains(Prot::WRITE) {
                return (vmas, Some(Unwritable::ReadOnly));
            }
            if let Some(at) = v.data.past_object(pos, v.end.min(end)) {
                if at > pos {
                    vmas.push((v.start, v.end));
                }
                return (vmas, Some(Unwritable::PastObject));
            }
            vmas.push((v.start, v.end));
            pos = v.end;
        }
        (vmas, (pos < end).then_some(Unwritable::Hole))
    }

    /// A first write to each of these whole VMAs.
    fn fault_range(&mut self, vmas: &[(u64, u64)]) -> Result<()> {
        self.transact(vmas, |mm| {
            for &(s, e) in vmas {
                mm.fault_in(s, e)?;
            }
            Ok(Ok(()))
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
        let Some(end) = Self::advice_range(addr, len)? else { return Ok(()) };
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
    /// fork does not merge with a new one).
    ///
    /// Errors: `EFAULT` if any page is unmapped or not writable (where
    /// Linux raises `SIGSEGV`), or lies wholly past the end of the file
    /// or shmem object it maps, where that size is known (`SIGBUS`; see
    /// [`MappedFile::size`](crate::MappedFile::size)). Nothing changes
    /// then.
    pub fn touch(&mut self, addr: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let start = addr & !(PAGE_SIZE - 1);
        let end = addr.checked_add(len).and_then(page_align).ok_or(Errno::EFAULT)?;
        match self.write_reach(start, end) {
            (vmas, None) => self.fault_range(&vmas),
            (_, Some(_)) => Err(Errno::EFAULT),
        }
    }
}

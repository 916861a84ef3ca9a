//! `mremap`: shrink, grow in place, or move a mapping.

use crate::{
    error::AllocFail,
    error::{Errno, Result},
    flags::{MremapFlags, VmFlags},
    space::AddressSpace,
    store::VmaStore,
    vma::VmaData,
};

impl<T: VmaStore> AddressSpace<T> {
    /// Resizes and/or moves `[old, old + old_len)`, as `mremap(2)`, and
    /// returns the mapping's (possibly new) address.
    ///
    /// * Shrinking unmaps the tail, in place (it may span several VMAs).
    /// * Growing extends the VMA in place when the range ends at the VMA's
    ///   end and the space after it is free; otherwise, with
    ///   `MREMAP_MAYMOVE`, the range moves to a new place (`MREMAP_FIXED`:
    ///   to `new_addr`, replacing what is there) and the old range is
    ///   unmapped — or, with `MREMAP_DONTUNMAP`, left mapped and empty.
    /// * A moved range keeps its file offset; a never-written anonymous
    ///   range takes the page offset of its new address, so it can merge
    ///   there (a written one cannot).
    /// * Since Linux 6.17 a pure move (`MREMAP_FIXED`, same length) may span
    ///   several VMAs and the gaps between them; each VMA moves by the same
    ///   distance.
    /// * A zero `old_len` duplicates a shared mapping: `new_len` bytes of
    ///   what it maps, from the offset of `old` on (past the VMA's end if
    ///   need be), are mapped again at the new place (it needs
    ///   `MREMAP_MAYMOVE`), and the old mapping stays.
    ///
    /// Errors: `EINVAL` (unknown flags, `FIXED` or `DONTUNMAP` without
    /// `MAYMOVE`, `DONTUNMAP` with a size change, unaligned addresses, zero
    /// new length, overlapping old and new ranges, a zero old length on a
    /// private mapping),
    /// `EFAULT` (old range not mapped, or spanning VMAs where that is not
    /// allowed), `ENOMEM` (no room to grow and no `MAYMOVE`, no free range,
    /// too many VMAs).
    pub fn mremap(&mut self, old: u64, old_len: u64, new_len: u64, flags: MremapFlags, new_addr: u64) -> Result<u64> {
        if flags.bits() & !MremapFlags::all().bits() != 0 {
            return Err(Errno::EINVAL);
        }
        let maymove = flags.contains(MremapFlags::MAYMOVE);
        let fixed = flags.contains(MremapFlags::FIXED);
        let dontunmap = flags.contains(MremapFlags::DONTUNMAP);
        if (fixed || dontunmap) && !maymove {
            return Err(Errno::EINVAL);
        }
        if !self.page_size().is_aligned(old) {
            return Err(Errno::EINVAL);
        }
        let old_len = self.page_size().align_up(old_len).ok_or(Errno::EINVAL)?;
        let new_len = self.page_size().align_up(new_len).filter(|&l| l != 0).ok_or(Errno::EINVAL)?;
        if dontunmap && old_len != new_len {
            return Err(Errno::EINVAL);
        }
        let task = self.layout.task_size;
        if old > task || old_len > task - old {
            return Err(Errno::EFAULT);
        }
        let old_end = old + old_len;
        // A new address given (or, with DONTUNMAP alone, hinted) is checked
        // before the old range is looked at.
        if fixed || dontunmap {
            if !self.page_size().is_aligned(new_addr) || new_len > task || new_addr > task - new_len {
                return Err(Errno::EINVAL);
            }
            if new_addr < old_end && old < new_addr + new_len {
                return Err(Errno::EINVAL);
            }
        }
        let Some(vma) = self.vma_at(old) else { return Err(Errno::EFAULT) };
        let (vstart, vend, data) = (vma.start, vma.end, vma.data.clone());
        // A move of several VMAs starting with a System V segment fails
        // before the seal is looked at (see `move_many`; measured).
        let spans = old_end > vend;
        if spans && fixed && new_len == old_len && data.backing.file().is_some_and(|f| f.sysv_shm) {
            return Err(Errno::EFAULT);
        }
        // A sealed mapping can be neither resized nor moved.
        if data.flags.contains(VmFlags::SEALED) {
            return Err(Errno::EPERM);
        }
        // A zero old length duplicates a shared mapping (its pages from the
        // offset of `old` on) at the new place, leaving the old one; a
        // private mapping has nothing to share.
        if old_len == 0 && !data.flags.contains(VmFlags::SHARED) {
            return Err(Errno::EINVAL);
        }
        if !fixed && !dontunmap && new_len <= old_len {
            // Always allowed: unmap the tail (it may cut across VMAs).
            if new_len < old_len {
                self.unmap_unless_sealed(old + new_len, old_end)?;
            }
            return Ok(old);
        }
        if old_end.min(old + new_len) > vend || (!fixed && old_end > vend) {
            // A pure move may carry several VMAs and the gaps between them.
            if fixed && new_len == old_len {
                return self.move_many(old, old_len, new_addr, dontunmap);
            }
            return Err(Errno::EFAULT);
        }
        if data.flags.contains(VmFlags::SPECIAL) && new_len > old_len {
            return Err(Errno::EFAULT);
        }
        if dontunmap && data.flags.contains(VmFlags::SPECIAL) {
            return Err(Errno::EINVAL);
        }
        // RLIMIT_MEMLOCK (a locked mapping) and RLIMIT_AS: what a resize
        // adds, before anything moves or is unmapped (a fixed move's
        // target is counted as still there).
        if new_len > old_len && !self.mlock_future_ok(data.flags, new_len - old_len) {
            return Err(Errno::EAGAIN);
        }
        if new_len > old_len && !self.may_expand_vm(data.flags, new_len - old_len, 0) {
            return Err(Errno::ENOMEM);
        }
        if fixed {
            if old_len == 0 && new_addr == old {
                // The target is unmapped first, and with it the mapping to
                // duplicate, which is then not found (measured).
                self.unmap_unless_sealed(old, old + new_len)?;
                return Err(Errno::EFAULT);
            }
            return self.move_to(old, old_len, new_len, new_addr, dontunmap, data);
        }
        // Grow in place if the range ends the VMA and the space after it is
        // free (Linux checks only for overlap, not for guard gaps).
        let delta = new_len - old_len;
        if !dontunmap && old_end == vend {
            let fits = vend.checked_add(delta).is_some_and(|e| e <= task)
                && self.find_vma_intersection(vend, vend + delta).is_none();
            if fits {
                let (s, e) = (vstart, vend + delta);
                let populate = populates_growth(&data);
                return self.transact(&[(s, e)], |mm| {
                    mm.put(s, e, data)?;
                    mm.merge_around(&[(vend, e)])?;
                    if populate {
                        mm.populate_writes(vend, e)?;
                    }
                    Ok(Ok(old))
                });
            }
        }
        if !maymove {
            return Err(Errno::ENOMEM);
        }
        if self.vma_count() + 3 > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let hint = if dontunmap { new_addr } else { 0 };
        let dest = self.unmapped_area(hint, new_len, &data.backing, data.offset_at(old))?;
        self.move_to(old, old_len, new_len, dest, dontunmap, data)
    }

    /// Moves `[old, old + old_len)` of a VMA whose record is `data`
    /// to `[dest, dest + new_len)` (replacing what is there).
    fn move_to(
        &mut self,
        old: u64,
        old_len: u64,
        new_len: u64,
        dest: u64,
        dontunmap: bool,
        data: VmaData,
    ) -> Result<u64> {
        let old_end = old + old_len;
        let dest_end = dest + new_len;
        let moved = data.relocated(old, dest);
        // Nor mapped over.
        if self.sealed_in(dest, dest_end) {
            return self.refuse_unmap(dest).map(|()| dest);
        }
        // A shrinking move unmaps its target, then the old range's tail:
        // a seal there fails the call with the target gone.
        if new_len < old_len && self.sealed_in(old + new_len, old_end) {
            self.transact(&[(dest, dest_end)], |mm| {
                mm.clear(dest, dest_end)?;
                Ok(Ok(()))
            })?;
            return self.refuse_unmap(old + new_len).map(|()| dest);
        }
        self.transact(&[(dest, dest_end), (old, old_end)], |mm| {
            // MREMAP_FIXED unmaps the target first, then the tail of a shrink.
            mm.clear(dest, dest_end)?;
            // What DONTUNMAP leaves behind still counts against RLIMIT_AS:
            // the copy must fit, the target staying unmapped if not.
            if dontunmap && !mm.may_expand_vm(data.flags, old_len, 0) {
                return Ok(Err(Errno::ENOMEM));
            }
            if new_len < old_len {
                mm.clear(old + new_len, old_end)?;
            }
            let keep = old_len.min(new_len);
            // Guard pages and anonymous pages move with the page tables.
            mm.move_pages(old, old + keep, dest)?;
            let populate = new_len > old_len && populates_growth(&moved);
            mm.put(dest, dest_end, moved)?;
            mm.merge_around(&[(dest, dest_end)])?;
            if populate {
                mm.populate_writes(dest + old_len, dest_end)?;
            }
            if dontunmap {
                mm.leave_behind(old, old + keep)?;
            } else {
                mm.clear(old, old + keep)?;
            }
            Ok(Ok(dest))
        })
    }

    /// What `MREMAP_DONTUNMAP` does, after the move, to the VMA that now
    /// holds the range `[ps, pe)` moved out of (Linux's `vma` at that
    /// point, after the target was cleared and the copy merged): it stays
    /// mapped and loses its lock; if it is exactly the range, its pages
    /// went with it (no anon_vma left). It is bigger than the range when
    /// the copy merged with it: an unwritten VMA whose copy, with the page
    /// offset of its new place, landed beside it (found by the kernel
    /// oracle; the model cut the merged VMA in two again).
    fn leave_behind(&mut self, ps: u64, pe: u64) -> core::result::Result<(), AllocFail> {
        let Some(v) = self.vma_at(ps) else { return Ok(()) };
        let (s, e, d) = (v.start, v.end, v.data.clone());
        let whole = (s, e) == (ps, pe);
        if !whole && !d.flags.intersects(VmFlags::LOCKED_MASK) {
            return Ok(());
        }
        let anon = if whole { None } else { d.anon };
        let was_locked = d.flags.contains(VmFlags::LOCKED);
        self.put(s, e, VmaData { anon, flags: d.flags - VmFlags::LOCKED_MASK, ..d })?;
        // Linux goes on counting the pages it unlocked here as locked.
        if was_locked {
            self.lock_leak += e - s;
        }
        Ok(())
    }

    /// A pure move of a range spanning several VMAs and gaps (Linux 6.17+):
    /// each VMA piece moves by the same distance, replacing what is at its
    /// own target; the targets of the gaps are left alone, as by Linux.
    fn move_many(&mut self, old: u64, len: u64, dest: u64, dontunmap: bool) -> Result<u64> {
        let pieces = self.entries(old, old + len);
        if pieces.iter().any(|(_, _, d)| d.flags.contains(VmFlags::SPECIAL)) {
            return Err(Errno::EFAULT);
        }
        let old_end = old + len;
        self.transact(&[(dest, dest + len), (old, old_end)], |mm| {
            // One VMA after another, each merged at its target before the
            // next moves, as Linux moves them (a copy may merge with its
            // own source, which DONTUNMAP then leaves whole). A seal, on a
            // piece or at its target, stops the call there, what moved
            // before staying moved (the kernel oracle's seed 1,970).
            for (s, e, d) in &pieces {
                let (ps, pe) = ((*s).max(old), (*e).min(old_end));
                let (ns, ne) = (dest + (ps - old), dest + (pe - old));
                // A System V segment's file places its own mappings: Linux
                // moves it only alone, and stops at it, what moved before
                // staying moved (measured).
                if d.backing.file().is_some_and(|f| f.sysv_shm) {
                    return Ok(Err(Errno::EFAULT));
                }
                if d.flags.contains(VmFlags::SEALED) {
                    return Ok(Err(Errno::EPERM));
                }
                if mm.sealed_in(ns, ne) {
                    mm.cut_before_refusal(ns)?;
                    return Ok(Err(Errno::EPERM));
                }
                mm.clear(ns, ne)?;
                // Each piece's copy must fit RLIMIT_AS, after its target
                // is unmapped (the brk oracle's seed 16,381).
                if dontunmap && !mm.may_expand_vm(d.flags, pe - ps, 0) {
                    return Ok(Err(Errno::ENOMEM));
                }
                mm.move_pages(ps, pe, ns)?;
                mm.put(ns, ne, d.relocated(ps, ns))?;
                mm.merge_around(&[(ns, ne)])?;
                if dontunmap {
                    mm.leave_behind(ps, pe)?;
                } else {
                    mm.clear(ps, pe)?;
                }
            }
            Ok(Ok(dest))
        })
    }
}

/// Whether growing this VMA populates the new part with writes: Linux
/// faults in what a locked mapping grows by (not a lock on fault), and a
/// private writable one is written, which gives it an anon_vma (a
/// sequence in the kernel oracle's `KNOWN` checks it).
fn populates_growth(d: &VmaData) -> bool {
    d.flags.locked_now() && d.flags.private_writable()
}

#[cfg(test)]
mod tests {
    use crate::{
        layout::{each_page, test_layout},
        AddressSpace, MapFlags, MremapFlags, Prot,
    };

    #[test]
    fn grow_in_place_and_move() {
        each_page!(grow_in_place_and_move_at);
    }

    fn grow_in_place_and_move_at<const P: u64>() {
        let mut mm = AddressSpace::with_layout(test_layout::<P>());
        let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        let a = mm.mmap(0x100_0000, P * 2, Prot::RW, f, None, 0).unwrap();
        assert_eq!(mm.mremap(a, P * 2, P * 4, MremapFlags::empty(), 0), Ok(a));
        assert_eq!(mm.vma_at(a).unwrap().len(), 4 * P);
        mm.mmap(a + 5 * P, P, Prot::READ, f, None, 0).unwrap();
        assert_eq!(mm.mremap(a, 4 * P, 8 * P, MremapFlags::empty(), 0), Err(crate::Errno::ENOMEM));
        let b = mm.mremap(a, 4 * P, 8 * P, MremapFlags::MAYMOVE, 0).unwrap();
        assert_ne!(a, b);
        assert!(mm.vma_at(a).is_none());
        assert_eq!(mm.vma_at(b).unwrap().len(), 8 * P);
        mm.validate().unwrap();
    }
}

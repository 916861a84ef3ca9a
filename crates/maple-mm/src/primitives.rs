//! The steps every call is made of: storing a VMA over a range, clearing
//! one, moving and dropping anonymous pages, merging neighbours around
//! what changed, and first writes.

use crate::{
    error::{AllocFail, Errno, Result},
    flags::VmFlags,
    space::AddressSpace,
    store::VmaStore,
    vma::{AnonVma, VmaData},
    vma_slab::VmaRef,
};

impl<T: VmaStore> AddressSpace<T> {
    /// Stores `data` over `[start, end)`, cutting whatever is there. A
    /// reserved range refuses it like a failed allocation: the call under
    /// way is undone and fails with `ENOMEM`.
    pub(crate) fn put(&mut self, start: u64, end: u64, data: VmaData) -> core::result::Result<(), AllocFail> {
        if self.reserved.first_in(start, end).is_some() {
            return Err(AllocFail);
        }
        let r = VmaRef::new(data);
        match &mut self.events {
            None => self.tree.store(start..end, r).map_err(|_| AllocFail),
            Some(_) => {
                self.tree.store(start..end, r.clone()).map_err(|_| AllocFail)?;
                self.wrote(start, end, Some(r));
                Ok(())
            }
        }
    }

    /// Notes a write for the observer (see [`Events::writes`]).
    #[inline]
    pub(crate) fn wrote(&mut self, start: u64, end: u64, v: Option<VmaRef>) {
        if let Some(ev) = &mut self.events {
            ev.writes.push((start, end, v));
        }
    }

    /// Unmaps `[start, end)` (neighbours are cut, keeping their
    /// attributes), with its guard pages.
    pub(crate) fn clear(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        if start >= end {
            return Ok(());
        }
        // The VMAs first: a lock-free reader never sees a page of theirs
        // mapped but no longer guarded.
        self.tree.remove(start..end).map_err(|_| AllocFail)?;
        self.wrote(start, end, None);
        self.guards.remove(start, end)?;
        self.zap(start, end)
    }

    /// Throws away the anonymous pages of `[start, end)` (`MADV_DONTNEED`,
    /// a guard install, an unmap).
    pub(crate) fn zap(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        self.anon.remove(start, end)?;
        self.lazy.remove(start, end)
    }

    /// Every page of `[start, end)` written (all mapped and writable, as
    /// the caller checked): the pages in private VMAs become anonymous
    /// pages of their own, and no longer lazily freeable.
    pub(crate) fn written(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        if start >= end {
            return Ok(());
        }
        // Most often one VMA holds it all: one walk.
        if let Some(v) = self.vma_at(start).filter(|v| v.end >= end) {
            if v.flags().contains(VmFlags::SHARED) {
                return Ok(());
            }
            self.anon.install(start, end)?;
            return self.lazy.remove(start, end);
        }
        let private: smallvec::SmallVec<[(u64, u64); 4]> = self
            .range(start, end)
            .filter(|v| !v.flags().contains(VmFlags::SHARED))
            .map(|v| (v.start.max(start), v.end.min(end)))
            .collect();
        for (s, e) in private {
            self.anon.install(s, e)?;
            self.lazy.remove(s, e)?;
        }
        Ok(())
    }

    /// A populate writing `[start, end)` of the private writable VMA
    /// holding `start`: the VMA gets its anon_vma (even if the first write
    /// fails, past the end of its file), and its pages up to the first
    /// that cannot be written (a guard page, or one past the object)
    /// become anonymous pages.
    pub(crate) fn populate_writes(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        let Some(v) = self.vma_at(start) else { return Ok(()) };
        let end = end.min(v.end);
        let past = v.data.past_object(start, end, self.page_size()).unwrap_or(end);
        let stop = self.guards.first_in(start, past).unwrap_or(past);
        // (A write fault on a guard page fails before it makes an anon_vma.)
        if !self.is_guard_page(start) {
            self.fault_in_at(start)?;
        }
        self.written(start, stop)
    }

    /// Moves the pages' state (guard markers, anonymous pages) of
    /// `[start, end)` to start at `to`: an `mremap` moving page tables.
    pub(crate) fn move_pages(&mut self, start: u64, end: u64, to: u64) -> core::result::Result<(), AllocFail> {
        if let Some(ev) = &mut self.events {
            // The VMAs follow, written by the caller: an observer hears of
            // the pages as moved, not unmapped and mapped again.
            ev.moves.push((start, end, to));
        }
        self.guards.relocate(start, end, to)?;
        self.anon.relocate(start, end, to)?;
        self.lazy.relocate(start, end, to)
    }

    /// Merges compatible neighbours across every boundary of the changed
    /// ranges (sorted, `[start, end)`), as Linux's `vma_merge` does around
    /// the VMAs a call modified. Boundaries between two untouched VMAs are
    /// left alone.
    pub(crate) fn merge_around(&mut self, changed: &[(u64, u64)]) -> core::result::Result<(), AllocFail> {
        self.merge_around_keeping(changed, &[])
    }

    /// [`merge_around`](Self::merge_around), where Linux may not delete a
    /// VMA whose mapping has a `close` hook (a System V segment's pieces):
    /// `kept` are changed ranges that were whole such VMAs before the call,
    /// which no neighbour absorbs (one changed after them may still merge
    /// into them), and a changed range that merged with the VMA before it
    /// does not also absorb such a VMA after it.
    pub(crate) fn merge_around_keeping(
        &mut self,
        changed: &[(u64, u64)],
        kept: &[(u64, u64)],
    ) -> core::result::Result<(), AllocFail> {
        let mut bounds: smallvec::SmallVec<[u64; 8]> = changed.iter().flat_map(|&(s, e)| [s, e]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        // (Both lists are in address order, as the calls make them.)
        let starts = |list: &[(u64, u64)], b: u64| list.binary_search_by_key(&b, |r| r.0).is_ok();
        let ends = |list: &[(u64, u64)], b: u64| list.binary_search_by_key(&b, |r| r.1).ok();
        let mut merged_left: smallvec::SmallVec<[u64; 8]> = smallvec::SmallVec::new();
        for b in bounds {
            // The VMA a merge at `b` would absorb: the changed range after
            // `b`, else the one before it (into an untouched VMA after).
            let starts_here = starts(changed, b);
            if starts(kept, b) || (!starts_here && ends(kept, b).is_some()) {
                continue;
            }
            let joined_left = ends(changed, b).is_some_and(|i| merged_left.binary_search(&changed[i].0).is_ok());
            if joined_left && self.vma_at(b).is_some_and(|v| v.data.closes()) {
                continue;
            }
            if self.merge_at(b)? && starts_here {
                merged_left.push(b);
            }
        }
        Ok(())
    }

    /// Merges the VMA ending at `b` with the one starting there, if they
    /// are compatible; true if they merged.
    pub(crate) fn merge_at(&mut self, b: u64) -> core::result::Result<bool, AllocFail> {
        let Some(lb) = b.checked_sub(1) else { return Ok(false) };
        let (Some(left), Some(right)) = (self.tree.get_range(lb), self.tree.get_range(b)) else {
            return Ok(false);
        };
        if *left.0.end() != lb || *right.0.start() != b || !left.1.merges_with(right.1) {
            return Ok(false);
        }
        let (start, end) = (*left.0.start(), right.0.end() + 1);
        let merged = left.1.merged(right.1);
        self.put(start, end, merged)?;
        Ok(true)
    }

    /// Checks that splitting the VMAs at `start` and `end` would not make
    /// more VMAs than `max_map_count` allows (Linux checks before each
    /// split).
    pub(crate) fn check_splits(&self, start: u64, end: u64) -> Result<()> {
        let mut extra = 0;
        for at in [start, end] {
            if let Some(v) = self.vma_at(at) {
                if v.start < at {
                    extra += 1;
                }
            }
        }
        if extra > 0 && self.vma_count() + extra > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        Ok(())
    }

    /// [`fault_in`](Self::fault_in) of the whole VMA holding `addr`, if any.
    pub(crate) fn fault_in_at(&mut self, addr: u64) -> core::result::Result<(), AllocFail> {
        match self.vma_at(addr).map(|v| (v.start, v.end)) {
            Some((s, e)) => self.fault_in(s, e),
            None => Ok(()),
        }
    }

    /// A first write to every page of `[start, end)` of the VMA `v`: a
    /// private mapping gets an anon_vma (reusing a compatible neighbour's,
    /// as Linux's `find_mergeable_anon_vma` does).
    pub(crate) fn fault_in(&mut self, v_start: u64, v_end: u64) -> core::result::Result<(), AllocFail> {
        let Some((r, d)) = self.tree.get_range(v_start) else { return Ok(()) };
        if d.anon.is_some() || d.flags.contains(VmFlags::SHARED) {
            return Ok(());
        }
        debug_assert_eq!((*r.start(), r.end() + 1), (v_start, v_end));
        let mut reuse = None;
        // Linux looks at the next VMA first, then the previous one. (An
        // entry holding `v_end` or `v_start - 1` is adjacent: this VMA
        // covers everything in between.)
        for n in [self.tree.get_range(v_end), v_start.checked_sub(1).and_then(|s| self.tree.get_range(s))]
            .into_iter()
            .flatten()
        {
            if let Some(a) = n.1.anon {
                if !a.is_forked() && d.anon_compatible(n.1) {
                    reuse = Some(a);
                    break;
                }
            }
        }
        let data = VmaData { anon: Some(reuse.unwrap_or_else(AnonVma::new)), ..d.clone() };
        self.put(v_start, v_end, data)
    }
}

//! A call as a transaction: the window it may change is saved first, put
//! back if the call fails on an allocation, and compared with what the
//! call left to tell the observer its changes.

use crate::{
    change::{clip, diff_into, splice, Change, Changes, Piece},
    error::{AllocFail, Errno, Result},
    pages::Runs,
    space::AddressSpace,
    store::VmaStore,
    vma_slab::VmaRef,
};

/// The entries of a window before a call changed it, to put back if the
/// call fails on an allocation.
pub(crate) struct Undo {
    lo: u64,
    hi: u64,
    old: Saved,
    /// The guard, anonymous and lazily freeable runs of `[lo, hi)`.
    pages: [Runs; 3],
}

/// VMAs saved for an undo: a call's window and its neighbours are most
/// often a handful.
pub(crate) type Saved = smallvec::SmallVec<[(u64, u64, VmaRef); 4]>;

impl<T: VmaStore> AddressSpace<T> {
    /// Owned copies of the entries overlapping `[start, end)`.
    pub(crate) fn entries(&self, start: u64, end: u64) -> Saved {
        if start >= end {
            return Saved::new();
        }
        self.cloned(start..=end - 1)
    }

    /// Owned copies of the entries overlapping `range`, as `(start, end)`
    /// with `end` exclusive.
    pub(crate) fn cloned(&self, range: core::ops::RangeInclusive<u64>) -> Saved {
        let mut out = Saved::new();
        let mut it = self.tree.range_cloned(range);
        // In place: moving the iterator (as `collect` does) copies its path.
        for (r, d) in &mut it {
            out.push((*r.start(), r.end() + 1, d));
        }
        out
    }

    /// Saves every VMA touching `[start, end)` or adjacent to it (merge
    /// candidates), so that [`restore`](Self::restore) can undo a call.
    pub(crate) fn save(&self, start: u64, end: u64) -> Undo {
        // One walk over `[start - 1, end]` finds the window's VMAs and the
        // neighbours touching it: a VMA holding `start - 1` ends at or
        // after `start`, one holding `end` begins at or before it.
        let old = self.cloned(start.saturating_sub(1)..=end);
        let lo = old.first().map_or(start, |e| e.0.min(start));
        let hi = old.last().map_or(end, |e| e.1.max(end));
        let pages = [self.guards.runs(lo, hi), self.anon.runs(lo, hi), self.lazy.runs(lo, hi)];
        Undo { lo, hi, old, pages }
    }

    /// Puts a saved window back after a failed allocation. Each write is
    /// retried a few times; the allocation that failed is usually not the
    /// next one to be tried.
    pub(crate) fn restore(&mut self, undo: Undo) {
        let [guards, anon, lazy] = &undo.pages;
        self.guards.restore(undo.lo, undo.hi, guards);
        self.anon.restore(undo.lo, undo.hi, anon);
        self.lazy.restore(undo.lo, undo.hi, lazy);
        for _ in 0..8 {
            if self.tree.remove(undo.lo..undo.hi).is_ok() {
                self.wrote(undo.lo, undo.hi, None);
                break;
            }
        }
        for (s, e, d) in undo.old {
            let mut d = d;
            for _ in 0..8 {
                let told = self.events.is_some().then(|| d.clone());
                match self.tree.store(s..e, d) {
                    Ok(()) => {
                        if told.is_some() {
                            self.wrote(s, e, told);
                        }
                        break;
                    }
                    Err(err) => d = err.value,
                }
            }
        }
    }

    /// Runs `f`, undoing its tree writes over the windows if it fails on an
    /// allocation. `f` returns the call's result, which may be an error
    /// after a partial change that Linux keeps (not undone).
    pub(crate) fn transact<R>(
        &mut self,
        windows: &[(u64, u64)],
        f: impl FnOnce(&mut Self) -> core::result::Result<Result<R>, AllocFail>,
    ) -> Result<R> {
        let undo: smallvec::SmallVec<[Undo; 2]> = windows.iter().map(|&(s, e)| self.save(s, e)).collect();
        let (brk, stack, def_flags, lock_leak) = (self.brk, self.start_stack, self.def_flags, self.lock_leak);
        if let Some(ev) = &mut self.events {
            if ev.depth == 0 && !ev.writes.is_empty() {
                // (Writes made outside any call are not this call's.)
                ev.writes.clear();
            }
            ev.depth += 1;
        }
        let res = f(self);
        let report = self.events.as_mut().is_some_and(|ev| {
            ev.depth -= 1;
            ev.depth == 0
        });
        if report {
            if res.is_ok() {
                self.report(&undo);
            }
            if let Some(ev) = &mut self.events {
                ev.moves.clear();
                ev.writes.clear();
            }
        }
        match res {
            Ok(res) => res,
            Err(AllocFail) => {
                for u in undo.into_iter().rev() {
                    self.restore(u);
                }
                self.brk = brk;
                self.start_stack = stack;
                self.def_flags = def_flags;
                self.lock_leak = lock_leak;
                Err(Errno::ENOMEM)
            }
        }
    }

    /// Tells the observer what the call that saved `undo` changed.
    #[inline(never)]
    fn report(&mut self, undo: &[Undo]) {
        let Some(ev) = &self.events else { return };
        if let ([u], []) = (undo, &ev.moves[..]) {
            // One window and no move (most calls): told from the call's
            // writes, as they are found.
            #[cfg(debug_assertions)]
            let swept = self.swept(u, &ev.writes);
            let Some(ev) = &mut self.events else { return };
            let _told = ev.tell_writes(&u.old, u.lo, u.hi);
            #[cfg(debug_assertions)]
            assert_eq!(_told, swept, "changes told from the writes, and swept");
            return;
        }
        self.report_swept(undo);
    }

    /// Tells the observer what a call that moved pages or worked in more
    /// than one window changed, swept from its windows.
    #[inline(never)]
    fn report_swept(&mut self, undo: &[Undo]) {
        let changes = self.changes_since(undo);
        if let Some(ev) = &mut self.events {
            ev.tell(&changes);
        }
    }

    /// What the call that saved `undo` changed in its windows: the moves
    /// it recorded, then the difference between the windows' old entries,
    /// moved as the pages were, and what they hold now.
    fn changes_since(&self, undo: &[Undo]) -> Changes {
        let moves = self.events.as_ref().map_or(&[][..], |ev| &ev.moves[..]);
        let mut out = Changes::new();
        // The windows, joined where they overlap (a move's source and
        // target may share a neighbour).
        let mut windows: smallvec::SmallVec<[(u64, u64); 2]> = undo.iter().map(|u| (u.lo, u.hi)).collect();
        windows.sort_unstable();
        let mut joined: smallvec::SmallVec<[(u64, u64); 2]> = smallvec::SmallVec::new();
        for (lo, hi) in windows {
            match joined.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => joined.push((lo, hi)),
            }
        }
        let mut before = Saved::new();
        for &(lo, hi) in &joined {
            let mut old: Vec<Piece> = undo.iter().flat_map(|u| clip(&u.old, lo, hi)).collect();
            old.sort_unstable_by_key(|p| p.0);
            old.dedup_by_key(|p| p.0);
            before.extend(old);
        }
        for &(start, end, to) in moves {
            let target = to + (end - start);
            // The target is emptied first.
            diff_into(&clip(&before, to, target), &[], &mut out);
            let moved: Vec<Piece> = clip(&before, start, end)
                .into_iter()
                .map(|(s, e, d)| (s - start + to, e - start + to, VmaRef::new(d.relocated(s, s - start + to))))
                .collect();
            splice(&mut before, start, end, None);
            splice(&mut before, to, target, None);
            before.extend(moved);
            before.sort_unstable_by_key(|p| p.0);
            out.push(Change::Moved { from: start..end, to });
        }
        let mut after: Vec<Piece> = Vec::new();
        for &(lo, hi) in &joined {
            after.extend(clip(&self.entries(lo, hi), lo, hi));
        }
        diff_into(&before, &after, &mut out);
        out
    }

    /// The changes of a call's `writes` in one window, found the long way
    /// (to check [`Events::tell_writes`]): the writes applied to the
    /// window's old pieces give what the tree holds (no write went
    /// unnoted), and the difference between the two is the changes.
    #[cfg(debug_assertions)]
    fn swept(&self, u: &Undo, writes: &[crate::change::Write]) -> Vec<String> {
        let (after, swept) = crate::change::applied(&u.old, writes, u.lo, u.hi);
        let mut read = self.entries(u.lo, u.hi);
        if let Some(first) = read.first_mut() {
            first.0 = first.0.max(u.lo);
        }
        if let Some(last) = read.last_mut() {
            last.1 = last.1.min(u.hi);
        }
        let mut differ = Changes::new();
        diff_into(&after, &read, &mut differ);
        assert!(differ.is_empty(), "noted writes give {after:?}, the tree holds {read:?}");
        swept.iter().map(|c| format!("{c:?}")).collect()
    }
}

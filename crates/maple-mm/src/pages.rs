//! Page-level state kept beside the VMAs, as sets of page runs: the guard
//! markers and the anonymous pages.
//!
//! # Guard markers
//!
//! Linux 6.13 added *guard regions*: `madvise(MADV_GUARD_INSTALL)` puts a
//! marker in the page table for every page of a range, and any access to
//! such a page raises `SIGSEGV` — a guard page without a VMA of its own,
//! so a thread stack's or an allocator's guards cost no VMA (glibc and
//! allocators use them for that). The markers are page-table entries, not
//! VMAs: `/proc/PID/maps` does not show them (smaps's `gu` flag only says
//! a VMA may hold some), `/proc/PID/pagemap` does (bit 58).
//!
//! What moves or removes them, measured on Linux 6.18 (the kernel oracle
//! test compares every guard page with pagemap after each operation):
//!
//! * unmapping removes them (`munmap`, `mmap(MAP_FIXED)` over them, a
//!   shrinking `brk` or `mremap`), as does `MADV_GUARD_REMOVE`;
//! * `mremap` moves them with the pages (also with `MREMAP_DONTUNMAP`);
//! * a fork's child inherits them with the page tables it copies: in
//!   every VMA it inherits but wipe-on-fork ones;
//! * `MADV_DONTNEED`, `MADV_FREE`, `MADV_REMOVE`, `MADV_PAGEOUT` and
//!   `mprotect` leave them;
//! * an access stops at them: a load or store raises `SIGSEGV` with
//!   `SEGV_MAPERR`, a system call writing there fails with `EFAULT`,
//!   `MADV_POPULATE_READ`/`WRITE` stop with `EFAULT`, and `mlock` (which
//!   faults pages in) with `ENOMEM`, the lock kept.
//!
//! # Anonymous pages
//!
//! The pages a process has written in its private mappings (anonymous
//! ones, or copies of a file's pages) are its own, in memory or swap:
//! what `/proc/PID/smaps` counts as `Anonymous`, what a checkpoint must
//! save, what `MADV_DONTNEED` throws away. They are kept per page, with
//! the subset `MADV_FREE` made lazily freeable (smaps's `LazyFree`); see
//! [`AddressSpace::anon_pages`](crate::AddressSpace::anon_pages) for the
//! rules, measured on Linux 6.18 and compared by the kernel oracle, VMA by
//! VMA, with smaps after every operation.
//!
//! Each set is a maple tree of its own, runs `[start, end)` with adjacent
//! runs merged.

use maple_tree::{MapleTree, U63};

use crate::{error::AllocFail, store::TreeStore};

/// Runs `[start, end)` of pages. (A `Vec`: empty, as it nearly always
/// is, it costs no allocation and three words in every undo record.)
pub(crate) type Runs = Vec<(u64, u64)>;

/// The value every run holds: the tree is a set of ranges.
const MARK: U63 = U63::new_truncate(1);

/// A set of pages of an address space, as runs `[start, end)`, in a tree
/// of the kind `G` (the guard pages in one of the VMAs' kind: a plain tree,
/// or the writer's guard of the concurrent tree a
/// [`SharedAddressSpace`](crate::SharedAddressSpace)'s readers look them
/// up in).
#[derive(Default)]
pub(crate) struct PageSet<G = MapleTree<U63>> {
    pub(crate) tree: G,
}

impl Clone for PageSet {
    /// A copy. Aborts on allocation failure, like `MapleTree::clone`.
    fn clone(&self) -> PageSet {
        self.copy()
    }
}

impl<G: TreeStore<U63>> PageSet<G> {
    /// Adds the pages of `[start, end)`, joined with the runs they touch
    /// (one write: a lock-free reader sees the run before or after, whole).
    pub(crate) fn install(&mut self, start: u64, end: u64) -> Result<(), AllocFail> {
        if start >= end {
            return Ok(());
        }
        let t = self.tree.view();
        let first = start.checked_sub(1).and_then(|p| t.get_range(p)).map_or(start, |(r, _)| *r.start());
        let past = t.get_range(end).map_or(end, |(r, _)| r.end().saturating_add(1));
        self.tree.store(first..past, MARK).map_err(|_| AllocFail)
    }

    /// Removes the pages of `[start, end)`.
    pub(crate) fn remove(&mut self, start: u64, end: u64) -> Result<(), AllocFail> {
        if start >= end || self.first_in(start, end).is_none() {
            return Ok(());
        }
        self.tree.remove(start..end).map_err(|_| AllocFail)
    }

    /// The first page of the set at or after `start` and before `end`.
    pub(crate) fn first_in(&self, start: u64, end: u64) -> Option<u64> {
        let t = self.tree.view();
        if start >= end || t.is_empty() {
            return None;
        }
        // (A walk or two: cheaper than setting up a range iterator, which
        // most calls would not step.)
        t.first_in(start..end).map(|(r, _)| (*r.start()).max(start))
    }

    /// The runs overlapping `[start, end)`, cut to it.
    pub(crate) fn runs(&self, start: u64, end: u64) -> Runs {
        let t = self.tree.view();
        let mut out = Runs::new();
        if t.is_empty() {
            return out;
        }
        // Entry by entry (a walk each, most often one or two in all: no
        // iterator to set up).
        let mut pos = start;
        while pos < end {
            let Some((r, _)) = t.first_in(pos..end) else { break };
            let past = r.end().saturating_add(1);
            out.push(((*r.start()).max(start), past.min(end)));
            pos = past;
        }
        out
    }

    /// Every run, in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.tree.view().iter().map(|(r, _)| (*r.start(), r.end() + 1))
    }

    /// Moves the pages of `[start, end)` to start at `to` (an `mremap`
    /// moving the pages; the target holds none, having been unmapped).
    pub(crate) fn relocate(&mut self, start: u64, end: u64, to: u64) -> Result<(), AllocFail> {
        let runs = self.runs(start, end);
        if runs.is_empty() {
            return Ok(());
        }
        self.remove(start, end)?;
        for (s, e) in runs {
            self.install(to + (s - start), to + (e - start))?;
        }
        Ok(())
    }

    /// Adds the runs of `[start, end)` to `to`.
    pub(crate) fn copy_into(&self, to: &mut PageSet, start: u64, end: u64) -> Result<(), AllocFail> {
        for (s, e) in self.runs(start, end) {
            to.install(s, e)?;
        }
        Ok(())
    }

    /// A copy for a fork's child; fails if a node allocation does.
    pub(crate) fn try_dup(&self) -> Result<PageSet, AllocFail> {
        self.tree.view().try_dup().map(|tree| PageSet { tree }).map_err(|_| AllocFail)
    }

    /// A plain copy. Aborts on allocation failure, like `MapleTree::clone`.
    pub(crate) fn copy(&self) -> PageSet {
        PageSet { tree: self.tree.view().clone() }
    }

    /// Puts back the runs of `[start, end)` saved by [`runs`](Self::runs)
    /// (an undo after a failed allocation): each write is retried a few
    /// times, as the VMAs' undo does.
    pub(crate) fn restore(&mut self, start: u64, end: u64, saved: &[(u64, u64)]) {
        for _ in 0..8 {
            if self.remove(start, end).is_ok() {
                break;
            }
        }
        for &(s, e) in saved {
            for _ in 0..8 {
                if self.install(s, e).is_ok() {
                    break;
                }
            }
        }
    }
}

//! Guard markers: the pages `MADV_GUARD_INSTALL` fences off.
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
//! The model keeps them, as whole pages `[start, end)`, in a maple tree of
//! its own beside the VMAs' (adjacent runs merged into one entry).

use maple_tree::{MapleTree, U63};

use crate::space::AllocFail;

/// The value every guard run holds: the tree is a set of ranges.
const MARK: U63 = U63::new_truncate(1);

/// The guard pages of an address space, as runs `[start, end)`.
#[derive(Default)]
pub(crate) struct Guards {
    tree: MapleTree<U63>,
}

impl Clone for Guards {
    /// A copy. Aborts on allocation failure, like `MapleTree::clone`.
    fn clone(&self) -> Guards {
        Guards { tree: self.tree.clone() }
    }
}

impl Guards {
    /// Marks `[start, end)`.
    pub(crate) fn install(&mut self, start: u64, end: u64) -> Result<(), AllocFail> {
        if start >= end {
            return Ok(());
        }
        self.tree.store_range_merging(start..end, MARK).map(drop).map_err(|_| AllocFail)
    }

    /// Unmarks `[start, end)`.
    pub(crate) fn remove(&mut self, start: u64, end: u64) -> Result<(), AllocFail> {
        if start >= end || self.first_in(start, end).is_none() {
            return Ok(());
        }
        self.tree.remove_range(start..end).map_err(|_| AllocFail)
    }

    /// The first guard page at or after `start` and before `end`.
    pub(crate) fn first_in(&self, start: u64, end: u64) -> Option<u64> {
        if start >= end || self.tree.is_empty() {
            return None;
        }
        self.tree.range(start..end).next().map(|(r, _)| (*r.start()).max(start))
    }

    /// The runs overlapping `[start, end)`, cut to it. (A `Vec`: empty, as
    /// it nearly always is, it costs no allocation and three words in
    /// every undo record.)
    pub(crate) fn runs(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        if start >= end || self.tree.is_empty() {
            return Vec::new();
        }
        self.tree.range(start..end).map(|(r, _)| ((*r.start()).max(start), (r.end() + 1).min(end))).collect()
    }

    /// Every run, in address order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.tree.iter().map(|(r, _)| (*r.start(), r.end() + 1))
    }

    /// Moves the marks of `[start, end)` to start at `to` (an `mremap`
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

    /// A copy for a fork's child; fails if a node allocation does.
    pub(crate) fn try_dup(&self) -> Result<Guards, AllocFail> {
        self.tree.try_dup().map(|tree| Guards { tree }).map_err(|_| AllocFail)
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

//! The walk of a plain tree's last write, kept for its next one.
//!
//! A cursor carries its walk from one write to the next; the tree's own
//! write methods (`insert_range`, `store_range`, `erase`, …) had none and
//! walked from the root every time. In a tree of a hundred thousand
//! ranges that walk was about a third of an ascending insert's
//! instructions (session 18, callgrind). So the tree keeps the walk its
//! last write ended with: a write whose start lies in that walk's leaf
//! begins there, and any other walks afresh into the same storage.
//!
//! Soundness rests on one rule: the kept walk is used only while no change
//! to the tree's shape (its nodes, their bounds) has happened since the
//! write that left it, and that write reported it still good (see
//! [`store_walked`](RawTree::store_walked)'s result). Every change to a
//! tree's shape goes through [`store_walked`](RawTree::store_walked),
//! [`erase_in_leaf`](RawTree::erase_in_leaf),
//! [`erase_entry_in_leaf`](RawTree::erase_entry_in_leaf) and
//! [`store_in_empty`](RawTree::store_in_empty) (the plain tree's commonest
//! erases and store), [`build_sorted`](RawTree::build_sorted) or
//! [`clear_with`](RawTree::clear_with) (a duplicate is a new tree, which
//! starts with nothing kept), and each of them forgets the kept walk
//! before it changes anything; only the tree's own write (or an erase
//! that found nothing to erase) then marks it good again. So cursor
//! writes, the concurrent tree's writers, bulk builds and clears all leave
//! it forgotten, whichever path they take. Values replaced in their slots
//! (a cursor's `replace`, `get_mut`, `values_mut`) change no walk.
//!
//! The walk costs a kilobyte (a [`Path`] has room for the tallest tree),
//! taken from the global allocator the first time a tree three levels or
//! taller is written to; a tree that cannot get it walks from the root as
//! before.

#[allow(unused_imports)]
use crate::prelude::*;

use core::cell::Cell;

use crate::raw::{Path, RawTree};

/// Trees shorter than this walk through at most two nodes: too little to
/// be worth a kilobyte per tree.
const KEEP_FROM_HEIGHT: usize = 3;

/// A tree's kept walk (see the module docs).
pub(crate) struct KeptWalk {
    /// Storage for the walk, allocated on first use (see
    /// [`KEEP_FROM_HEIGHT`]); taken out while a write uses it.
    walk: Option<Box<[Path; 1]>>,
    /// True only while `walk` is a walk of the tree as it is now, to the
    /// leaf holding the start of the last write. A `Cell` because
    /// [`store_walked`](RawTree::store_walked), which forgets it, works
    /// through `&RawTree`; only the tree's single writer touches it.
    good: Cell<bool>,
}

impl KeptWalk {
    pub(crate) const fn new() -> KeptWalk {
        KeptWalk { walk: None, good: Cell::new(false) }
    }

    /// Marks the kept walk stale: called before any change to the nodes.
    #[inline]
    pub(crate) fn forget(&self) {
        self.good.set(false);
    }
}

impl core::fmt::Debug for KeptWalk {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("KeptWalk").field("good", &self.good.get()).finish_non_exhaustive()
    }
}

/// Room for a walk, or `None` if the allocator has none to give (the
/// caller then walks into a path of its own, as without a kept walk).
fn new_walk() -> Option<Box<[Path; 1]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(1).ok()?;
    v.push(Path::new());
    v.into_boxed_slice().try_into().ok()
}

impl RawTree {
    /// The kept walk, taken out of the tree and aimed at `first` for a
    /// write that starts there: within its leaf if it is good and its leaf
    /// holds `first` (no walk from the root), else by a fresh write walk.
    /// `None` for a tree under [`KEEP_FROM_HEIGHT`] levels, or when no
    /// room can be had for the walk. Give it back with
    /// [`put_kept_walk`](Self::put_kept_walk). (Through
    /// [`start_walk`](Self::start_walk).)
    #[inline(always)]
    fn take_kept_walk(&mut self, first: u64) -> Option<Box<[Path; 1]>> {
        if self.height.get() < KEEP_FROM_HEIGHT {
            return None;
        }
        let good = self.kept.good.replace(false);
        let mut walk = match self.kept.walk.take() {
            Some(w) => w,
            None => new_walk()?,
        };
        let path = &mut walk[0];
        match path.last() {
            // SAFETY: `good`: a walk of the tree as it is (the flag is
            // cleared before any change to the nodes and set only with
            // `put_kept_walk`'s promise), as `aim` asks.
            Some(leaf) if good && leaf.min <= first && first <= leaf.max => unsafe { self.aim(path, first) },
            _ => self.walk_to_write(first, path),
        }
        Some(walk)
    }

    /// The walk a write to `first` with no walk of its own starts from:
    /// the kept walk, taken out into `kept` and aimed at `first` (see
    /// [`take_kept_walk`](Self::take_kept_walk)), or else a fresh write
    /// walk into `own`. Give `kept` back with
    /// [`put_kept_walk`](Self::put_kept_walk) if it is `Some`.
    #[inline(always)]
    pub(crate) fn start_walk<'p>(
        &mut self,
        kept: &'p mut Option<Box<[Path; 1]>>,
        own: &'p mut Path,
        first: u64,
    ) -> &'p mut Path {
        *kept = self.take_kept_walk(first);
        match kept.as_deref_mut() {
            Some([path]) => path,
            None => {
                self.walk_to_write(first, own);
                own
            }
        }
    }

    /// Gives back the walk [`take_kept_walk`](Self::take_kept_walk) lent;
    /// `good` if the write made from it reported it still good, or no
    /// write was made.
    ///
    /// # Safety
    ///
    /// With `good`, `walk` is a walk of this tree as it is now (the next
    /// write may start from it without checking): the storage lent by
    /// this tree's `take_kept_walk`, and since then the tree changed only
    /// by a write from it that answered true.
    #[inline]
    pub(crate) unsafe fn put_kept_walk(&mut self, walk: Box<[Path; 1]>, good: bool) {
        self.kept.walk = Some(walk);
        self.kept.good.set(good);
    }
}

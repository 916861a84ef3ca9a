//! The walk of a plain tree's last write, kept for its next one.
//!
//! A cursor carries its walk from one write to the next; the tree's own
//! write methods (`insert_range`, `store_range`, `erase`, …) keep the walk
//! their last write ended with, so that a write whose start lies in that
//! walk's leaf begins there (ascending inserts, a region carved up), and
//! any other walks afresh into the same storage. In a big tree the walk
//! from the root is a good part of a short write.
//!
//! Soundness rests on one rule: the kept walk is used only while no change
//! to the tree's shape (its nodes, their bounds) has happened since the
//! write that left it, and that write reported it still good (see
//! [`store_walked`](RawTree::store_walked)'s result). A change to the
//! nodes needs one of three things, and each forgets the kept walk before
//! anything changes:
//!
//! * an [`Exclusive`](crate::raw::Exclusive), the only way to write in
//!   place: [`RawTree::exclusive`] forgets it as it makes one;
//! * the engine's entry, [`store_walked`](RawTree::store_walked), the
//!   only way to write in fresh nodes;
//! * `&mut` to replace the whole tree ([`build_sorted`](RawTree::build_sorted),
//!   [`clear_with`](RawTree::clear_with)); a duplicate is a new tree,
//!   which starts with nothing kept.
//!
//! Taking the walk out ([`take_kept_walk`](RawTree::take_kept_walk))
//! forgets it too, and only [`put_kept_walk`](RawTree::put_kept_walk),
//! after the write made from it answered that it is still good (or no
//! write was made), marks it good again. So cursor writes, the concurrent
//! tree's writers, bulk builds and clears all leave it forgotten, whichever
//! path they take. Values replaced in their slots (a cursor's `replace`,
//! `get_mut`, `values_mut`) change no walk.
//!
//! The walk costs a kilobyte (a [`Path`] has room for the tallest tree),
//! taken from the global allocator once a tree of two levels or more has
//! been written to [`ROOM_AFTER`] times without it; a tree that cannot get
//! it walks from the root as before. The delay spares short-lived small
//! trees (a small address space built by insertion) the allocation.

#[allow(unused_imports)]
use crate::prelude::*;

#[cfg(test)]
use core::cell::Cell;

use crate::raw::{Path, RawTree};

/// Trees shorter than this (a root leaf) walk through one node: nothing
/// to keep.
const KEEP_FROM_HEIGHT: usize = 2;

/// Writes a tree of [`KEEP_FROM_HEIGHT`] levels or more makes from the
/// root before it takes room to keep its walk in (see the module docs).
const ROOM_AFTER: u32 = 32;

/// Room for a walk, or `None` if the allocator has none to give (the
/// caller then walks into a path of its own, as without a kept walk).
fn new_walk() -> Option<Box<[Path; 1]>> {
    #[cfg(test)]
    if tests::NO_ROOM.with(Cell::get) {
        return None;
    }
    let mut v = Vec::new();
    v.try_reserve_exact(1).ok()?;
    v.push(Path::new());
    v.into_boxed_slice().try_into().ok()
}

impl RawTree {
    /// The kept walk, taken out of the tree and aimed at `first` for a
    /// write that starts there: within its leaf if it is good and its leaf
    /// holds `first` (no walk from the root), else by a fresh write walk.
    /// `None` for a tree under [`KEEP_FROM_HEIGHT`] levels, before its
    /// [`ROOM_AFTER`]th write, or when no room can be had for the walk.
    /// Give it back with [`put_kept_walk`](Self::put_kept_walk). (Through
    /// [`start_walk`](Self::start_walk).)
    #[inline(always)]
    fn take_kept_walk(&mut self, first: u64) -> Option<Box<[Path; 1]>> {
        if self.height.get() < KEEP_FROM_HEIGHT {
            return None;
        }
        let mut walk = match self.kept.walk.take() {
            Some(w) => w,
            // Room only after `ROOM_AFTER` writes without it.
            None if self.kept.unkept < ROOM_AFTER => {
                self.kept.unkept += 1;
                return None;
            }
            None => new_walk()?,
        };
        let good = self.kept.good.replace(false);
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

#[cfg(test)]
mod tests {
    #[cfg(test)]
    use core::cell::Cell;

    use super::{Vec, ROOM_AFTER};
    use crate::{MapleTree, U63};

    std::thread_local! {
        /// Makes the room for a kept walk unobtainable, as an allocator
        /// with nothing to give would.
        pub(super) static NO_ROOM: Cell<bool> = const { Cell::new(false) };
    }

    /// A tree that cannot get room for its walk walks from the root on
    /// every write and ends up exactly as one that can: the same writes
    /// (stores, inserts, removals and erases around a drifting point, in
    /// trees of one to three levels), compared entry for entry and
    /// validated after each.
    // (Not under Miri: the tree walking from the root is what every
    // other test's first writes do, and 300 steps are slow there.)
    #[test]
    #[cfg_attr(miri, ignore)]
    fn a_tree_without_room_for_its_walk_writes_alike() {
        let mut with: MapleTree<U63> = MapleTree::new();
        let mut without: MapleTree<U63> = MapleTree::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let steps = 6000;
        let mut at = 0;
        let mut tallest = 0;
        for step in 0..steps {
            // Grow for a while, then shrink, twice over.
            let span = if step % (steps / 2) < steps / 4 { 4000 } else { 400 };
            at = (at + rand(40)) % span;
            let (f, l) = (at, at + rand(12));
            let v = U63::from(step as u32);
            let op = rand(4);
            let write = |t: &mut MapleTree<U63>| match op {
                0 => t.store_range(f..=l, v).map(|_| None).unwrap(),
                1 => t.insert_range(f..=l, v).ok().map(|()| 0),
                2 => t.remove_range(f..=l + 30).map(|_| None).unwrap(),
                _ => t.erase(f).map(U63::get),
            };
            let got = write(&mut with);
            NO_ROOM.with(|n| n.set(true));
            let want = write(&mut without);
            NO_ROOM.with(|n| n.set(false));
            assert_eq!(got, want, "step {step}");
            without.validate().unwrap();
            assert!(without.raw.kept.walk.is_none(), "step {step}: room taken");
            let a: Vec<_> = with.iter().map(|(r, v)| (r, v.get())).collect();
            let b: Vec<_> = without.iter().map(|(r, v)| (r, v.get())).collect();
            assert_eq!(a, b, "step {step}");
            tallest = tallest.max(with.height());
        }
        assert!(with.raw.kept.walk.is_some(), "the other tree never took room");
        assert!(tallest >= 3, "the trees stayed {tallest} levels tall");
    }

    /// A two-level tree keeps its walk, but only after `ROOM_AFTER` writes
    /// from the root; a root leaf never does. Then writes within the kept
    /// leaf start there and the tree stays right.
    #[test]
    fn a_two_level_tree_takes_room_after_its_first_writes() {
        let mut t: MapleTree<U63> = MapleTree::new();
        let mut i = 0u64;
        while t.height() < 2 {
            t.insert_range(i * 16..=i * 16 + 9, U63::from(i as u32)).unwrap();
            i += 1;
        }
        assert!(t.raw.kept.walk.is_none(), "no room in a root leaf");
        // A write that found nothing to erase counts as one too.
        for k in 0..ROOM_AFTER {
            assert!(t.raw.kept.walk.is_none(), "room after {k} writes");
            let _ = t.erase(u64::MAX - 1);
        }
        t.store_range(0..=3, U63::from(1u32)).unwrap();
        assert!(t.raw.kept.walk.is_some(), "no room after {} writes", ROOM_AFTER + 1);
        // Rewrites of entries of the first leaf, from the kept walk (an
        // exact fit changes no node).
        for k in 0..40u64 {
            let f = k % 4 * 16;
            t.store_range(f..=f + 9, U63::from(k as u32)).unwrap();
            assert!(t.raw.kept.good.get(), "walk not kept after rewrite {k}");
            t.validate().unwrap();
            assert_eq!(t.load(f + 2).map(U63::get), Some(k));
        }
        assert_eq!(t.height(), 2);
    }
}

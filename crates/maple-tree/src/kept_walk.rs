//! The walk of a plain tree's last write, kept for its next one.
//!
//! A cursor carries its walk from one write to the next; the tree's own
//! write methods (`insert_range`, `store_range`, `erase`, …) keep the walk
//! their last write ended with, so that a write whose start lies in that
//! walk's leaf begins there (ascending inserts, a region carved up), and
//! any other walks afresh into the same storage. In a big tree the walk
//! from the root is a good part of a short write.
//!
//! The walk is valid only while the tree has not changed since the write
//! that left it, and that write answered that the walk is still good (see
//! [`store_walked`](RawTree::store_walked)'s result). That rule is kept by
//! where the walk lives, not by a flag each writer must remember to clear:
//! it is a state of [`KeptTree`], the plain tree's raw tree together with
//! its walk, and the only ways to change a tree are through `&mut
//! RawTree` (in place, through an [`Exclusive`](crate::raw::Exclusive), or
//! `build_sorted`, `clear_with`) or through the engine's entry, which
//! also needs the only writer. `&mut RawTree` comes out of a `KeptTree`
//! only through [`DerefMut`], which turns a current walk stale first; the
//! one other way in, [`write_from_walk`](KeptTree::write_from_walk), lends
//! the walk to a single write and keeps it current only on that write's
//! word. The concurrent tree has no kept walk at all, and a tree that
//! becomes concurrent (or goes back) leaves its walk behind.
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
use core::ops::{Deref, DerefMut};

use crate::raw::{rebind, Path, RawTree};

/// Trees shorter than this (a root leaf) walk through one node: nothing
/// to keep.
const KEEP_FROM_HEIGHT: usize = 2;

/// Writes a tree of [`KEEP_FROM_HEIGHT`] levels or more makes from the
/// root before it takes room to keep its walk in (see the module docs).
const ROOM_AFTER: u32 = 32;

/// Room for a walk, or `None` if the allocator has none to give (the
/// caller then walks into a path of its own, as without a kept walk).
fn new_walk() -> Option<Box<[Path<'static>; 1]>> {
    #[cfg(test)]
    if tests::NO_ROOM.with(Cell::get) {
        return None;
    }
    let mut v = Vec::new();
    v.try_reserve_exact(1).ok()?;
    v.push(Path::new());
    v.into_boxed_slice().try_into().ok()
}

/// A plain tree's raw tree with the walk of its last write (see the
/// module docs). Reads go to the tree through [`Deref`]; anything that
/// needs `&mut RawTree` gets it through [`DerefMut`], which makes the walk
/// stale. (`repr(C)`, the tree first: the concurrent tree pads around
/// the tree's fields by their offsets.)
#[repr(C)]
pub(crate) struct KeptTree {
    tree: RawTree,
    walk: Kept,
}

/// What a [`KeptTree`] keeps of its last write's walk.
#[derive(Debug)]
enum Kept {
    /// No room yet: the writes made without it (counted up to
    /// [`ROOM_AFTER`]).
    NoRoom(u32),
    /// Room, holding a walk of the tree as it was: not to be followed.
    /// (The kept walks' nodes are typed as living for good: the tree
    /// beside them is what keeps them alive, as long as they are current;
    /// see [`rebind`].)
    Stale(Box<[Path<'static>; 1]>),
    /// A walk of the tree as it is now, to the leaf holding the start of
    /// the last write.
    Current(Box<[Path<'static>; 1]>),
}

impl Deref for KeptTree {
    type Target = RawTree;

    #[inline(always)]
    fn deref(&self) -> &RawTree {
        &self.tree
    }
}

impl DerefMut for KeptTree {
    /// The tree, to change as the caller likes: the kept walk goes stale.
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut RawTree {
        self.walk.stale();
        &mut self.tree
    }
}

impl Kept {
    /// Marks the walk in the room a walk of the tree as it is.
    #[inline(always)]
    fn current(&mut self) {
        if let Kept::Stale(_) = self {
            let Kept::Stale(w) = core::mem::replace(self, Kept::NoRoom(0)) else { unreachable!() };
            *self = Kept::Current(w);
        }
    }

    #[inline(always)]
    fn stale(&mut self) {
        if let Kept::Current(_) = self {
            let Kept::Current(w) = core::mem::replace(self, Kept::NoRoom(0)) else { unreachable!() };
            *self = Kept::Stale(w);
        }
    }
}

impl KeptTree {
    pub(crate) const fn new(tree: RawTree) -> KeptTree {
        KeptTree { tree, walk: Kept::NoRoom(0) }
    }

    /// The tree, without its walk.
    #[cfg(any(test, feature = "testing", feature = "std"))]
    pub(crate) fn into_inner(self) -> RawTree {
        self.tree
    }

    /// Makes one write to `first` from the kept walk: `write` is given the
    /// tree and a walk of it to the leaf slot holding `first` (the kept
    /// walk, aimed within its leaf if it is current and the leaf holds
    /// `first`; else a fresh write walk, into the kept room or, in a tree
    /// under [`KEEP_FROM_HEIGHT`] levels, before its [`ROOM_AFTER`]th write
    /// or with no room to be had, into a path of its own). The walk stays
    /// current only if `write` answers `Ok(true)`.
    ///
    /// # Safety
    ///
    /// `write` answers `Ok(true)` only if, when it returns, the walk it
    /// was given is a walk of the tree as it then is (the engine's answer
    /// for a write made from it, or no change at all).
    #[inline(always)]
    pub(crate) unsafe fn write_from_walk<R, E>(
        &mut self,
        first: u64,
        write: impl FnOnce(&mut RawTree, &mut Path<'_>) -> Result<(R, bool), E>,
    ) -> Result<R, E> {
        let KeptTree { tree, walk } = self;
        let mut own: Path<'static> = Path::new();
        // (Only a tall tree's walk is ever made current: a write that
        // leaves the walk good keeps the tree's height.)
        let (path, kept) = match walk {
            Kept::Current(w) => {
                let path = &mut w[0];
                match path.last() {
                    // SAFETY: `Current`: a walk of the tree as it is, as
                    // `aim` asks.
                    Some(leaf) if leaf.min <= first && first <= leaf.max => unsafe { tree.aim(path, first) },
                    // SAFETY: walked afresh here, and read only as a walk of
                    // the tree as it then is (by the write below, the one
                    // change).
                    _ => tree.walk_to_write(first, unsafe { rebind(path) }),
                }
                (path, true)
            }
            _ => {
                let tall = tree.height.get() >= KEEP_FROM_HEIGHT;
                match walk {
                    Kept::NoRoom(n) if tall && *n < ROOM_AFTER => *n += 1,
                    Kept::NoRoom(_) if tall => {
                        if let Some(w) = new_walk() {
                            *walk = Kept::Stale(w);
                        }
                    }
                    _ => {}
                }
                match walk {
                    Kept::Stale(w) if tall => {
                        // SAFETY: as above.
                        tree.walk_to_write(first, unsafe { rebind(&mut w[0]) });
                        (&mut w[0], true)
                    }
                    // A short tree walks through one node: nothing to
                    // keep (what room it has goes unused, and stays
                    // stale).
                    _ => {
                        // SAFETY: as above.
                        tree.walk_to_write(first, unsafe { rebind(&mut own) });
                        (&mut own, false)
                    }
                }
            }
        };
        let res = write(tree, path);
        match res {
            // The caller's contract: the walk is one of the tree as it is.
            Ok((_, true)) if kept => walk.current(),
            _ => walk.stale(),
        }
        res.map(|(r, _)| r)
    }
}

#[cfg(test)]
mod tests {
    #[cfg(test)]
    use core::cell::Cell;

    use super::{Kept, Vec, ROOM_AFTER};
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
            assert!(matches!(without.raw.walk, Kept::NoRoom(_)), "step {step}: room taken");
            let a: Vec<_> = with.iter().map(|(r, v)| (r, v.get())).collect();
            let b: Vec<_> = without.iter().map(|(r, v)| (r, v.get())).collect();
            assert_eq!(a, b, "step {step}");
            tallest = tallest.max(with.height());
        }
        assert!(!matches!(with.raw.walk, Kept::NoRoom(_)), "the other tree never took room");
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
        assert!(matches!(t.raw.walk, Kept::NoRoom(_)), "no room in a root leaf");
        // A write that found nothing to erase counts as one too.
        for k in 0..ROOM_AFTER {
            assert!(matches!(t.raw.walk, Kept::NoRoom(_)), "room after {k} writes");
            let _ = t.erase(u64::MAX - 1);
        }
        t.store_range(0..=3, U63::from(1u32)).unwrap();
        assert!(!matches!(t.raw.walk, Kept::NoRoom(_)), "no room after {} writes", ROOM_AFTER + 1);
        // Rewrites of entries of the first leaf, from the kept walk (an
        // exact fit changes no node).
        for k in 0..40u64 {
            let f = k % 4 * 16;
            t.store_range(f..=f + 9, U63::from(k as u32)).unwrap();
            assert!(matches!(t.raw.walk, Kept::Current(_)), "walk not kept after rewrite {k}");
            t.validate().unwrap();
            assert_eq!(t.load(f + 2).map(U63::get), Some(k));
        }
        assert_eq!(t.height(), 2);
    }
}

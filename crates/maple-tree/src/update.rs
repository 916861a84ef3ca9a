//! Changing values where they are stored: [`MapleTree::update`] and
//! [`MapleTree::for_each_mut`], for every kind of value.
//!
//! A slot holds a value's word, not the value, so a `&mut V` cannot point
//! into the tree. Instead the handle is taken out of its slot for the
//! length of one call of the closure and its word written back after (or
//! on unwinding, so that the slot never holds a word whose handle was
//! dropped). For a value stored inline (`u32`, `bool`, your own `Inline`
//! types) that is a decode and an encode, and the traversal reads no value
//! memory at all; for `Box` and `Arc` the word is the pointer, unchanged
//! unless the closure replaces the handle. (For the values the tree boxes
//! itself, `u64` or `String`, taking the handle out unboxes the value and
//! putting it back boxes it again: [`get_mut`](MapleTree::get_mut) and
//! [`values_mut`](MapleTree::values_mut) change those in place.)

#[allow(unused_imports)]
use crate::prelude::*;

use core::{mem::ManuallyDrop, ops::RangeInclusive, ptr::NonNull};

use crate::{
    handle::{is_value, Handle},
    iter::scan_whole,
    key::{self, Key},
    node::{LeafRef, NodeRef},
    raw::LeafWalk,
    tree::{MapleTree, Writes},
};

/// A handle taken out of slot `off` of `leaf` for a closure to change;
/// its word goes back into the slot when this is dropped, closure
/// finished or unwinding.
struct Lent<'t, V: Handle> {
    leaf: LeafRef<'t>,
    off: usize,
    value: ManuallyDrop<V>,
}

impl<V: Handle> Drop for Lent<'_, V> {
    fn drop(&mut self) {
        // SAFETY: taken once, here; the field is not used again.
        let value = unsafe { ManuallyDrop::take(&mut self.value) };
        // SAFETY: a used slot of a live leaf of a tree borrowed `&mut` (no
        // reader, no other writer: `lend`'s contract), given back the word
        // of the handle that was taken out of it (the handle's word, so a
        // value word: never null, never the reserved marker), which the
        // tree owns again.
        unsafe { NodeRef::from(self.leaf).set_slot(self.off, value.into_raw().as_ptr()) };
    }
}

/// Takes the handle out of slot `off` of `leaf`, whose word `w` is a
/// value's, for as long as the result lives.
///
/// # Safety
///
/// The leaf is live and in a tree borrowed `&mut` (nothing else reads or
/// writes it meanwhile); `w` is the slot's word, a value the tree owns.
unsafe fn lend<V: Handle>(leaf: LeafRef<'_>, off: usize, w: *mut ()) -> Lent<'_, V> {
    // SAFETY: a value word the tree owns (the caller's contract): the
    // handle is ours until `Lent` writes its word back.
    let value = ManuallyDrop::new(unsafe { V::from_raw(NonNull::new_unchecked(w)) });
    Lent { leaf, off, value }
}

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// Calls `f` with the value of the entry holding `index`, mutably, and
    /// returns what it returns; `None` (and `f` not called) if no value is
    /// stored there. Works for every kind of value, small ones stored
    /// inline included, which [`get_mut`](Self::get_mut) cannot reach.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = MapleTree::new();
    /// t.insert_range(10..=19, 1).unwrap();
    /// assert_eq!(t.update(15, |v| { *v += 41; *v }), Some(42));
    /// assert_eq!(t.load(10), Some(42));
    /// assert_eq!(t.update(20, |v| *v), None);
    /// ```
    pub fn update<R>(&mut self, index: K, f: impl FnOnce(&mut V) -> R) -> Option<R> {
        let walk = LeafWalk::new(&self.raw, index.to_index());
        let lv = *walk.path.last()?;
        let leaf = lv.leaf();
        let w = leaf.slot(lv.off);
        if !is_value(w) {
            return None;
        }
        // SAFETY: the slot's own word, a value; `&mut self`: nothing else
        // reads or writes the tree while the handle is out.
        let mut lent = unsafe { lend::<V>(leaf, lv.off, w) };
        Some(f(&mut lent.value))
    }

    /// Calls `f` on every entry in ascending order with its range and its
    /// value, mutably: the `values_mut` of every kind of value, small ones
    /// stored inline included. Reserved ranges are skipped.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = (0..4u64).map(|i| (i * 10..=i * 10 + 4, i as u32)).collect();
    /// t.for_each_mut(|range, v| *v += *range.start() as u32);
    /// assert_eq!(t.iter().map(|(_, v)| v).collect::<Vec<_>>(), [0, 11, 22, 33]);
    /// ```
    pub fn for_each_mut(&mut self, mut f: impl FnMut(RangeInclusive<K>, &mut V)) {
        self.lend_each::<true>(|lo, hi, v| f(key::span(lo, hi), v));
    }

    /// Calls `f` on every value in ascending order, mutably, without its
    /// range: the `values_mut` of every kind of value, small ones stored
    /// inline included. A leaf's slots are read straight through, with no
    /// bounds worked out. Reserved ranges are skipped.
    ///
    /// ```
    /// use maple_tree::MapleTree;
    ///
    /// let mut t: MapleTree<u32> = (0..4u64).map(|i| (i * 10..=i * 10 + 4, i as u32)).collect();
    /// t.for_each_value_mut(|v| *v *= 10);
    /// assert_eq!(t.iter().map(|(_, v)| v).collect::<Vec<_>>(), [0, 10, 20, 30]);
    /// ```
    pub fn for_each_value_mut(&mut self, mut f: impl FnMut(&mut V)) {
        self.lend_each::<false>(|_, _, v| f(v));
    }

    /// Lends every value in ascending order to `f` with its bounds (with
    /// `BOUNDS`; `0, 0` without, and none are read): the iterators' scan
    /// of the leaves wanted whole, over every leaf.
    fn lend_each<const BOUNDS: bool>(&mut self, mut f: impl FnMut(u64, u64, &mut V)) {
        let mut walk = LeafWalk::new(&self.raw, 0);
        loop {
            let ((), end) = walk.fold_whole(u64::MAX, (), |(), leaf, min, max| {
                // SAFETY: the tree is borrowed mutably: nothing else writes
                // its pivots meanwhile.
                unsafe {
                    scan_whole::<BOUNDS, false, ()>(leaf, min, max, (), &mut |(), i, lo, hi, w| {
                        // SAFETY: as in `update`.
                        let mut lent = lend::<V>(leaf, i, w.as_ptr());
                        f(lo, hi, &mut lent.value);
                    });
                }
            });
            if end || !walk.next_leaf() {
                return;
            }
        }
    }
}

//! Cursors: the advanced API (the kernel's `ma_state`).
//!
//! A cursor sits on one range of the tree: an entry, or an empty range
//! between entries, with its exact bounds. It can step over entries only
//! (`next`/`prev`) or over every range including empty ones
//! (`next_range`/`prev_range`), and a [`CursorMut`] can write where it
//! stands and stays usable afterwards.
//!
//! A cursor keeps its walk (the nodes from the root to its leaf, with
//! their bounds): stepping moves within the leaf and climbs only as far as
//! the next leaf needs, and a write through a [`CursorMut`] starts from the
//! walk instead of the root. Replacing the entry it stands on writes one
//! word; a write that stays inside its leaf keeps the walk good, so the
//! cursor goes on without walking again (other writes re-walk once). The
//! tree's own write methods keep a walk of their own (`kept_walk.rs`).
//!
//! ```
//! use maple_tree::{MapleTree, U63};
//! let mut t = MapleTree::new();
//! t.insert_range(10..=19, U63::from(1u32)).unwrap();
//! t.insert_range(30..=39, U63::from(2u32)).unwrap();
//! let mut c = t.cursor(0);
//! assert_eq!(c.range(), 0..=9); // the empty range before the first entry
//! assert_eq!(c.next_range(), Some((10..=19, Some(U63::from(1u32)))));
//! assert_eq!(c.next_range(), Some((20..=29, None)));
//! assert_eq!(c.next().map(|(r, v)| (r, v.get())), Some((30..=39, 2)));
//! ```

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    marker::PhantomData,
    ops::{RangeBounds, RangeInclusive},
    ptr::{self, NonNull},
};

use crate::{
    error::{Error, InsertError},
    handle::{is_value, Handle},
    key::Key,
    node::PIVOT_UNUSED,
    raw::{rebind, Entrance, LeafWalk, Level, Path, RawTree},
    store::{Store, Stored},
    sync::Ordering,
    tree::{InPlace, MapleTree, Writes},
};

/// Position shared by every cursor: the walk to the current leaf slot.
///
/// A position moves only through the nodes its walk has reached: its
/// steps take no tree, so none of them can walk from the root again. That
/// is what keeps a cursor on a concurrent tree consistent under one guard:
/// a walk from the root would land in a newer tree than the one the
/// cursor was reading, where its range may have other bounds. (The one
/// fresh walk is [`seek`](Pos::seek), which goes to a new index and so
/// starts a new picture.)
#[derive(Clone)]
pub(crate) struct Pos<'t> {
    pub(crate) walk: LeafWalk<'t>,
}

impl<'t> Pos<'t> {
    pub(crate) fn seek(raw: &'t RawTree, index: u64) -> Pos<'t> {
        Pos { walk: LeafWalk::new(raw, index) }
    }

    /// The same position, its nodes taken as live for `'u` (a write
    /// cursor's, kept beside the tree it changes).
    ///
    /// # Safety
    ///
    /// As for [`rebind`](crate::raw::rebind).
    pub(crate) unsafe fn rebind<'u>(mut self) -> Pos<'u> {
        // SAFETY: the caller's contract.
        let path = unsafe { rebind(&mut self.walk.path) };
        Pos { walk: LeafWalk { path: core::mem::take(path) } }
    }

    /// Current range and value word.
    pub(crate) fn current(&self) -> (u64, u64, *mut ()) {
        self.walk.current().unwrap_or((0, u64::MAX, ptr::null_mut()))
    }

    pub(crate) fn step(&mut self, forward: bool) -> bool {
        if forward {
            self.walk.next()
        } else {
            self.walk.prev()
        }
    }

    /// Steps to the next (or previous) non-empty range; if there is none,
    /// the cursor stays where it was.
    #[inline]
    pub(crate) fn step_entry(&mut self, forward: bool) -> Option<(u64, u64, NonNull<()>)> {
        // Within the current leaf first (inlined into the caller: the
        // common step): nothing to undo if it finds nothing.
        let lv = self.walk.path.last_mut()?;
        let next = if forward { lv.node.has_next(lv.off).then(|| lv.off + 1) } else { lv.off.checked_sub(1) };
        if let Some(found) = next.and_then(|from| value_in_leaf(lv, from, forward)) {
            return Some(found);
        }
        self.step_entry_across(forward)
    }

    /// [`step_entry`](Self::step_entry) past the current leaf. A search
    /// that finds nothing (only at either end of the tree, in practice)
    /// must leave the cursor where it was, so the walk's levels that a step
    /// changes are kept first: the last two for a step to the leaf beside
    /// under the same parent, where a value nearly always is; the whole
    /// walk (the levels in use) before going farther.
    #[inline(never)]
    pub(crate) fn step_entry_across(&mut self, forward: bool) -> Option<(u64, u64, NonNull<()>)> {
        let path = &mut self.walk.path;
        if let [.., parent, leaf] = **path {
            if self.walk.step_to_sibling(forward) {
                let lv = self.walk.path.last_mut().expect("a walk that stepped is not empty");
                if let Some(found) = value_in_leaf(lv, lv.off, forward) {
                    return Some(found);
                }
                let n = self.walk.path.len();
                self.walk.path[n - 2] = parent;
                self.walk.path[n - 1] = leaf;
            }
        }
        let mut saved = Path::new();
        saved.extend(self.walk.path.iter().copied());
        while if forward { self.walk.next_leaf() } else { self.walk.prev_leaf() } {
            let lv = self.walk.path.last_mut().expect("a walk that stepped is not empty");
            if let Some(found) = value_in_leaf(lv, lv.off, forward) {
                return Some(found);
            }
        }
        self.walk.path = saved;
        None
    }
}

/// The first slot holding a value of the leaf level `lv`, from slot
/// `from` on (`forward`) or back, read straight on the leaf's arrays (a
/// leaf has one layout: no dispatch on the node kind per slot); the level
/// then points at it. `None` (the level unmoved) if there is none.
#[inline]
fn value_in_leaf(lv: &mut Level<'_>, from: usize, forward: bool) -> Option<(u64, u64, NonNull<()>)> {
    let leaf = lv.leaf();
    let (piv, slots) = (leaf.pivots(), leaf.slots());
    let mut i = from;
    loop {
        let v = slots[i].load(Ordering::Acquire);
        if is_value(v) {
            lv.off = i;
            let (lo, hi) = lv.leaf_range();
            // SAFETY: value words are non-null.
            return Some((lo, hi, unsafe { NonNull::new_unchecked(v) }));
        }
        if forward {
            // Slot `i` has a successor while its pivot is in use.
            if i >= piv.len() || piv[i].load(Ordering::Relaxed) == PIVOT_UNUSED {
                return None;
            }
            i += 1;
        } else {
            i = i.checked_sub(1)?;
        }
    }
}

macro_rules! read_methods {
    ($lt:lifetime, $K:ty) => {
        /// Bounds of the range the cursor is on (an entry or an empty range).
        pub fn range(&self) -> RangeInclusive<$K> {
            let (lo, hi, _) = self.pos.current();
            $crate::key::keys(lo, hi)
        }

        /// The value of the range the cursor is on (`None` if it is empty).
        pub fn get(&self) -> Option<V::Borrowed<$lt>> {
            let (_, _, v) = self.pos.current();
            self.borrow(v)
        }

        /// True if the current range is reserved (see
        /// [`MapleTree::reserve_range`]($crate::MapleTree::reserve_range)): occupied, but with no value.
        pub fn is_reserved(&self) -> bool {
            self.pos.current().2 == $crate::handle::reserved_word()
        }

        /// The current range with its value, if it holds one.
        pub fn get_entry(&self) -> Option<(RangeInclusive<$K>, V::Borrowed<$lt>)> {
            let (lo, hi, v) = self.pos.current();
            self.borrow(v).map(|b| ($crate::key::keys(lo, hi), b))
        }

        /// Moves to the range containing `index` and returns its value.
        pub fn seek(&mut self, index: $K) -> Option<V::Borrowed<$lt>> {
            self.reseek($crate::Key::to_index(index));
            self.get()
        }

        /// Moves to the next range, empty or not. `None` (cursor unmoved) at
        /// the end of the key space.
        pub fn next_range(&mut self) -> Option<(RangeInclusive<$K>, Option<V::Borrowed<$lt>>)> {
            if !self.pos.step(true) {
                return None;
            }
            let (lo, hi, v) = self.pos.current();
            if $crate::key::past_last::<$K>(lo) {
                // The empty range past the key type's last key.
                self.pos.step(false);
                return None;
            }
            Some(($crate::key::keys(lo, hi), self.borrow(v)))
        }

        /// Moves to the previous range, empty or not. `None` (cursor
        /// unmoved) at the first key.
        pub fn prev_range(&mut self) -> Option<(RangeInclusive<$K>, Option<V::Borrowed<$lt>>)> {
            if !self.pos.step(false) {
                return None;
            }
            let (lo, hi, v) = self.pos.current();
            Some(($crate::key::keys(lo, hi), self.borrow(v)))
        }

        /// Moves to the next entry after the current range. `None` (cursor
        /// unmoved) if there is none.
        #[allow(clippy::should_implement_trait)]
        pub fn next(&mut self) -> Option<(RangeInclusive<$K>, V::Borrowed<$lt>)> {
            let (lo, hi, nn) = self.pos.step_entry(true)?;
            self.borrow(nn.as_ptr()).map(|b| ($crate::key::keys(lo, hi), b))
        }

        /// Moves to the previous entry before the current range. `None`
        /// (cursor unmoved) if there is none.
        pub fn prev(&mut self) -> Option<(RangeInclusive<$K>, V::Borrowed<$lt>)> {
            let (lo, hi, nn) = self.pos.step_entry(false)?;
            self.borrow(nn.as_ptr()).map(|b| ($crate::key::keys(lo, hi), b))
        }

        /// The first entry at or after the cursor (the current range
        /// included) that starts at or before `limit`; the cursor moves to it.
        /// `None` (cursor unmoved) if there is none.
        pub fn find(&mut self, limit: $K) -> Option<(RangeInclusive<$K>, V::Borrowed<$lt>)> {
            let limit = $crate::Key::to_index(limit);
            let (lo, _, v) = self.pos.current();
            if lo > limit {
                return None;
            }
            if !is_value(v) {
                let mut saved = $crate::raw::Path::new();
                saved.extend(self.pos.walk.path.iter().copied());
                match self.pos.step_entry(true) {
                    Some((start, _, _)) if start <= limit => {}
                    Some(_) => {
                        // Too far: back to where the cursor was.
                        self.pos.walk.path = saved;
                        return None;
                    }
                    None => return None,
                }
            }
            self.get_entry()
        }
    };
}
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use read_methods;

/// `insert_range`, `store_range` and `remove_range` of a write cursor,
/// through the shared typed write layer (`write.rs`) to the tree or guard
/// in field `$target` (of type `$ty`, for the docs), starting from the
/// cursor's walk; afterwards the cursor stands on the range containing the
/// first index written (where it was, if the write failed). A write that
/// stays in the cursor's leaf walks nothing.
macro_rules! range_write_methods {
    ($target:ident, $ty:ident, $K:ty) => {
        /// After a write through the cursor's walk: `Some(true)` (the walk
        /// still leads to the leaf holding `first`) needs the slot found
        /// within the leaf, `Some(false)` a fresh walk to `first`; a failed
        /// write (`None`, tree unchanged) puts the cursor back on the range
        /// it was on.
        fn settle(&mut self, was: u64, first: u64, kept: Option<bool>) {
            let (raw, pos) = self.parts();
            match kept {
                // SAFETY: the cursor's walk was one of the tree as it was
                // (the cursor holds the tree, or its writer lock, for its
                // whole life, and keeps its walk current), the write made
                // from it was the only change, and the engine answered
                // that the walk is still good.
                Some(true) => unsafe { raw.aim(&mut pos.walk.path, first) },
                // SAFETY: walked afresh, of the tree as it is; the tree
                // changes only through the cursor, which keeps its walk
                // current.
                Some(false) => raw.walk_into(first, unsafe { $crate::raw::rebind(&mut pos.walk.path) }),
                // SAFETY: as above, and a failed write changed nothing.
                None => unsafe { raw.aim(&mut pos.walk.path, was) },
            }
        }

        #[doc = concat!("[`", stringify!($ty), "::insert_range`] through the cursor.")]
        pub fn insert_range(&mut self, range: impl RangeBounds<$K>, value: V) -> Result<(), InsertError<V>> {
            let was = self.pos.current().0;
            let range = $crate::key::inclusive::<$K>(&range);
            let first = range.map_or(was, |r| r.0);
            use $crate::write;
            // SAFETY: the cursor's walk, of the tree it borrows mutably,
            // kept current by every write through it (`settle`).
            let res = unsafe { write::insert_range(&mut *self.$target, Some(&mut self.pos.walk.path), range, value) };
            self.settle(was, first, res.as_ref().ok().copied());
            res.map(drop)
        }

        #[doc = concat!("[`", stringify!($ty), "::store_range`] through the cursor.")]
        pub fn store_range(&mut self, range: impl RangeBounds<$K>, value: V) -> Result<(), InsertError<V>>
        where
            V: Clone,
        {
            let was = self.pos.current().0;
            let range = $crate::key::inclusive::<$K>(&range);
            let first = range.map_or(was, |r| r.0);
            use $crate::write;
            // SAFETY: as in `insert_range`.
            let res = unsafe { write::store_range(&mut *self.$target, Some(&mut self.pos.walk.path), range, value) };
            self.settle(was, first, res.as_ref().ok().copied());
            res.map(drop)
        }

        #[doc = concat!("[`", stringify!($ty), "::remove_range`] through the cursor.")]
        pub fn remove_range(&mut self, range: impl RangeBounds<$K>) -> Result<(), Error>
        where
            V: Clone,
        {
            let was = self.pos.current().0;
            let range = $crate::key::inclusive::<$K>(&range);
            let first = range.map_or(was, |r| r.0);
            // SAFETY: as in `insert_range`.
            let res = unsafe { $crate::write::remove_range(&mut *self.$target, Some(&mut self.pos.walk.path), range) };
            self.settle(was, first, res.as_ref().ok().copied());
            res.map(drop)
        }
    };
}
#[cfg(all(feature = "std", not(loom)))]
pub(crate) use range_write_methods;

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// A read cursor positioned at the range containing `index`.
    pub fn cursor(&self, index: K) -> Cursor<'_, V, K> {
        // SAFETY: `&'a self` keeps the tree, its nodes and values alive and
        // unchanged for the cursor's lifetime.
        unsafe { Cursor::on_raw(&self.raw, index.to_index()) }
    }

    /// A write cursor positioned at the range containing `index`.
    pub fn cursor_mut(&mut self, index: K) -> CursorMut<'_, V, K, W> {
        CursorMut::new(self, index.to_index())
    }
}

/// A read cursor over a borrowed tree (or, for a
/// [`ConcurrentMapleTree`](crate::ConcurrentMapleTree), a tree read under a
/// guard); see "Normal and advanced API" in the [crate docs](crate).
pub struct Cursor<'a, V: Handle, K: Key = u64> {
    /// All the cursor keeps of its tree: the way in for a fresh walk
    /// (`seek`). Its steps move through the nodes its walk reached.
    entrance: Entrance<'a>,
    pos: Pos<'a>,
    _values: PhantomData<&'a V>,
    _keys: PhantomData<fn() -> K>,
}

impl<'a, V: Handle, K: Key> Cursor<'a, V, K> {
    /// The current range's word, if it holds a value.
    pub(crate) fn word(&self) -> Option<NonNull<()>> {
        let (_, _, v) = self.pos.current();
        NonNull::new(v).filter(|_| is_value(v))
    }

    /// A cursor on `raw`.
    ///
    /// # Safety
    ///
    /// `raw`'s nodes and values stay alive for `'a` and change only as RCU
    /// publication allows (single-word updates, fresh nodes): a
    /// `&'a MapleTree`, or a concurrent tree read under a guard that lives
    /// for `'a`.
    pub(crate) unsafe fn on_raw(raw: &'a RawTree, index: u64) -> Self {
        Cursor { entrance: Entrance::of(raw), pos: Pos::seek(raw, index), _values: PhantomData, _keys: PhantomData }
    }

    fn reseek(&mut self, index: u64) {
        self.pos = Pos { walk: self.entrance.walk(index) };
    }

    fn borrow(&self, raw: *mut ()) -> Option<V::Borrowed<'a>> {
        if !is_value(raw) {
            return None;
        }
        // SAFETY: per `on_raw`, value words of the tree stay alive for 'a.
        Some(unsafe { V::borrow(NonNull::new_unchecked(raw)) })
    }

    read_methods!('a, K);
}

impl<V: Handle, K: Key> Clone for Cursor<'_, V, K> {
    fn clone(&self) -> Self {
        Cursor { entrance: self.entrance, pos: self.pos.clone(), _values: PhantomData, _keys: PhantomData }
    }
}

impl<V: Handle, K: Key + fmt::Debug> fmt::Debug for Cursor<'_, V, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cursor").field("range", &self.range()).finish_non_exhaustive()
    }
}

/// A write cursor; see "Normal and advanced API" in the [crate docs](crate).
/// After any write it stands on
/// the range containing the first index written.
pub struct CursorMut<'a, V: Handle, K: Key = u64, W: Writes = InPlace> {
    tree: &'a mut MapleTree<V, K, W>,
    /// A walk of `tree` as it is: every change to the tree is a write
    /// through this cursor, which keeps the walk current (`settle`).
    pos: Pos<'a>,
}

impl<'a, V: Handle, K: Key, W: Writes> CursorMut<'a, V, K, W> {
    pub(crate) fn new(tree: &'a mut MapleTree<V, K, W>, index: u64) -> Self {
        // SAFETY: a walk of the tree just made; the tree changes only
        // through this cursor (it holds it `&mut`), which keeps the walk
        // current.
        let pos = unsafe { Pos::seek(&tree.raw, index).rebind() };
        CursorMut { tree, pos }
    }

    fn borrow(&self, raw: *mut ()) -> Option<V::Borrowed<'_>> {
        self.tree.borrow(raw)
    }

    read_methods!('_, K);

    fn reseek(&mut self, index: u64) {
        // SAFETY: as in `new`.
        self.pos = unsafe { Pos::seek(&self.tree.raw, index).rebind() };
    }

    fn parts(&mut self) -> (&RawTree, &mut Pos<'a>) {
        (&self.tree.raw, &mut self.pos)
    }

    /// Replaces the current range (entry or empty range) with `value` and
    /// returns the old value. This is an exact-fit store: replacing one
    /// entry by another never allocates, and writes one word where the
    /// cursor stands (no walk).
    #[inline]
    pub fn replace(&mut self, value: V) -> Result<Option<V>, InsertError<V>> {
        let e = value.into_raw().as_ptr();
        // An entry replaced by an entry is the table's exact-fit row, one
        // word where the cursor stands, asked of the classifier alone.
        // SAFETY: the cursor's walk is current (every write through it
        // re-aims or re-walks it) and the cursor holds the tree `&mut`; the
        // handle `e` passes to the tree if the row is taken.
        if let Some(old) = unsafe { RawTree::replace_here(&*self.tree.raw, &self.pos.walk.path, e) } {
            // SAFETY: the word just taken out of the tree; ours now (a
            // reserved marker is no value and is not handed out).
            return Ok(is_value(old).then(|| unsafe { V::from_raw(NonNull::new_unchecked(old)) }));
        }
        let (lo, hi, _) = self.pos.current();
        let mut out = Stored::default();
        // SAFETY: [lo, hi] is the current range, so no entry is cut in two;
        // `e` is a fresh handle; the cursor's walk leads to `lo` in this
        // tree (it is redone after any write that moves nodes).
        let res = unsafe {
            self.tree.raw.store_mut_walked(
                W::FRESH,
                &mut self.pos.walk.path,
                Store::new(lo, hi).exact().entry(e),
                &mut out,
            )
        };
        match res {
            Ok(kept) => {
                self.settle(lo, lo, Some(kept));
                debug_assert!(out.removed.len() <= 1);
                // SAFETY: the word the store took out; ours now.
                Ok(out.removed.single().map(|nn| unsafe { V::from_raw(nn) }))
            }
            Err(_) => Err(InsertError {
                // SAFETY: the failed store did not keep `e`.
                value: unsafe { V::from_raw(NonNull::new_unchecked(e)) },
                cause: Error::NoMemory,
            }),
        }
    }

    /// Removes the entry the cursor is on and returns it; the cursor then
    /// stands on the empty range that replaced it.
    pub fn erase(&mut self) -> Option<V> {
        let (lo, hi, v) = self.pos.current();
        if v.is_null() {
            return None;
        }
        let mut out = Stored::default();
        // SAFETY: as in `replace`; storing nothing over exactly the current
        // range cuts nothing.
        let res = unsafe {
            self.tree.raw.store_mut_walked(W::FRESH, &mut self.pos.walk.path, Store::new(lo, hi).exact(), &mut out)
        };
        let Ok(kept) = res else { crate::tree::abort_oom() };
        self.settle(lo, lo, Some(kept));
        // SAFETY: the one value the write took out; ours now.
        out.removed.single().map(|nn| unsafe { V::from_raw(nn) })
    }

    range_write_methods!(tree, MapleTree, K);
}

impl<V: Handle, K: Key + fmt::Debug, W: Writes> fmt::Debug for CursorMut<'_, V, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CursorMut").field("range", &self.range()).finish_non_exhaustive()
    }
}

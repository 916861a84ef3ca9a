//! The entry API: look at a range once, then fill it if it is free or see
//! (and take out) what occupies it — "insert if this range is free, else
//! give me what is there" without a second walk by the caller.

#[allow(unused_imports)]
use crate::prelude::*;

use core::{
    fmt,
    ops::{RangeBounds, RangeInclusive},
};

use crate::{
    error::{Error, InsertError},
    handle::{is_value, Handle},
    key::{self, Key},
    tree::{InPlace, MapleTree, Writes},
    write,
};

/// A range of a tree, vacant or occupied; made by [`MapleTree::entry`].
pub enum RangeEntry<'a, V: Handle, K: Key = u64, W: Writes = InPlace> {
    /// Every index of the range is empty.
    Vacant(VacantRange<'a, V, K, W>),
    /// Something occupies part of the range.
    Occupied(OccupiedRange<'a, V, K, W>),
}

/// An empty range, ready to be filled.
pub struct VacantRange<'a, V: Handle, K: Key = u64, W: Writes = InPlace> {
    tree: &'a mut MapleTree<V, K, W>,
    first: u64,
    last: u64,
}

/// The lowest entry (or reserved range) overlapping the range asked for.
pub struct OccupiedRange<'a, V: Handle, K: Key = u64, W: Writes = InPlace> {
    tree: &'a mut MapleTree<V, K, W>,
    first: u64,
    last: u64,
}

impl<V: Handle, K: Key, W: Writes> MapleTree<V, K, W> {
    /// The range as an entry: [`Vacant`](RangeEntry::Vacant) if
    /// every index in it is empty (fill it with
    /// [`insert`](crate::VacantRange::insert)), else
    /// [`Occupied`](RangeEntry::Occupied) by the lowest entry
    /// overlapping it (see it, or take it out). Errors: an invalid range.
    ///
    /// ```
    /// use maple_tree::{MapleTree, RangeEntry, U63};
    ///
    /// let mut t = MapleTree::new();
    /// t.insert_range(10..=19, U63::new(1).unwrap()).unwrap();
    /// match t.entry(15..=30).unwrap() {
    ///     RangeEntry::Occupied(o) => assert_eq!((o.range(), o.get().map(U63::get)), (10..=19, Some(1))),
    ///     RangeEntry::Vacant(_) => unreachable!(),
    /// }
    /// if let RangeEntry::Vacant(v) = t.entry(20..=30).unwrap() {
    ///     v.insert(U63::new(2).unwrap()).unwrap();
    /// }
    /// assert_eq!(t.load(25).map(U63::get), Some(2));
    /// ```
    pub fn entry(&mut self, range: impl RangeBounds<K>) -> Result<RangeEntry<'_, V, K, W>, Error> {
        let (first, last) = key::inclusive(&range)?;
        Ok(RangeEntry::new(self, first, last))
    }
}

impl<V: Handle, K: Key + fmt::Debug, W: Writes> fmt::Debug for RangeEntry<'_, V, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeEntry::Vacant(v) => f.debug_tuple("Vacant").field(&v.range()).finish(),
            RangeEntry::Occupied(o) => f.debug_tuple("Occupied").field(&o.range()).finish(),
        }
    }
}

impl<'a, V: Handle, K: Key, W: Writes> RangeEntry<'a, V, K, W> {
    pub(crate) fn new(tree: &'a mut MapleTree<V, K, W>, first: u64, last: u64) -> RangeEntry<'a, V, K, W> {
        // The slot at `first`, then (if it is empty and ends early) the
        // next entry: the lowest thing overlapping the range.
        let (lo, hi, w) = tree.raw.lookup(first);
        if !w.is_null() {
            return RangeEntry::Occupied(OccupiedRange { tree, first: lo, last: hi });
        }
        if hi < last {
            let (nlo, nhi, _) = tree.raw.lookup(hi + 1);
            return RangeEntry::Occupied(OccupiedRange { tree, first: nlo, last: nhi });
        }
        RangeEntry::Vacant(VacantRange { tree, first, last })
    }
}

impl<'a, V: Handle, K: Key, W: Writes> VacantRange<'a, V, K, W> {
    /// The range.
    pub fn range(&self) -> RangeInclusive<K> {
        key::keys(self.first, self.last)
    }

    /// Stores `value` over the range and returns a borrow of it. Fails
    /// only for want of memory, giving the value back.
    pub fn insert(self, value: V) -> Result<V::Borrowed<'a>, InsertError<V>> {
        let (first, last) = (self.first, self.last);
        // SAFETY: no walk is given.
        unsafe { write::insert_range(&mut *self.tree, None, Ok((first, last)), value) }?;
        let tree: &'a MapleTree<V, K, W> = self.tree;
        Ok(tree.borrow(tree.raw.load(first)).expect("just inserted"))
    }
}

impl<'a, V: Handle, K: Key, W: Writes> OccupiedRange<'a, V, K, W> {
    /// The occupying entry's whole range (it may stick out of the range
    /// asked for).
    pub fn range(&self) -> RangeInclusive<K> {
        key::keys(self.first, self.last)
    }

    /// Its value; `None` for a reserved range.
    pub fn get(&self) -> Option<V::Borrowed<'_>> {
        self.tree.borrow(self.tree.raw.load(self.first))
    }

    /// Whether it is a reserved range (occupied, no value).
    pub fn is_reserved(&self) -> bool {
        !is_value(self.tree.raw.load(self.first))
    }

    /// Takes the entry out of the tree (a reserved range is emptied) and
    /// returns its value.
    pub fn remove(self) -> Result<Option<V>, Error> {
        self.tree.try_erase(K::from_index(self.first)).map_err(Error::from)
    }
}

impl<V: Handle, K: Key + fmt::Debug, W: Writes> fmt::Debug for VacantRange<'_, V, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("VacantRange").field(&self.range()).finish()
    }
}

impl<V: Handle, K: Key + fmt::Debug, W: Writes> fmt::Debug for OccupiedRange<'_, V, K, W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("OccupiedRange").field(&self.range()).finish()
    }
}

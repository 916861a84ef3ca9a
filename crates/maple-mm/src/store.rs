//! Where an address space keeps its VMAs: a plain [`MapleTree`] (an
//! [`AddressSpace`](crate::AddressSpace) of its own), the writer's guard
//! of the [`ConcurrentMapleTree`](maple_tree::ConcurrentMapleTree) behind a
//! [`SharedAddressSpace`](crate::SharedAddressSpace), or, as a baseline,
//! the red-black tree Linux used before the maple tree
//! ([`RbTree`](crate::rbtree::RbTree)). Every call is written once,
//! against [`VmaStore`].

use core::ops::{Range, RangeInclusive};

use maple_tree::{DupError, Handle, InsertError, Iter, MapleTree, RangeCloned, WriteGuard, U63};

use crate::{error::Errno, vma::VmaData, vma_slab::VmaRef};

pub(crate) mod sealed {
    pub trait Sealed {}
}

/// A maple tree an address space writes page sets to: a plain
/// [`MapleTree`] or the writer's guard of a
/// [`ConcurrentMapleTree`](maple_tree::ConcurrentMapleTree). Sealed; its
/// methods are the crate's own.
pub trait TreeStore<V: Handle + Clone + Send + Sync + 'static>: sealed::Sealed {
    /// The tree as it stands, for reading.
    #[doc(hidden)]
    fn view(&self) -> &MapleTree<V>;
    /// Stores `v` over `r`, cutting what is there.
    #[doc(hidden)]
    fn store(&mut self, r: Range<u64>, v: V) -> Result<(), InsertError<V>>;
    /// Empties `r`.
    #[doc(hidden)]
    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error>;
}

/// An entry as a store lends it: its range and its attributes.
pub(crate) type Entry<'a> = (RangeInclusive<u64>, &'a VmaData);

/// The structure an address space keeps its VMAs in: a `MapleTree`, the
/// concurrent tree's `WriteGuard`, or the old design's `RbTree` (a
/// baseline). Sealed; its methods are the crate's own. Its guard pages
/// go in a maple tree of the matching kind
/// ([`GuardTree`](VmaStore::GuardTree)), so that a
/// [`SharedAddressSpace`](crate::SharedAddressSpace)'s lock-free readers
/// see them too.
pub trait VmaStore: sealed::Sealed {
    /// Where the guard pages are kept.
    #[doc(hidden)]
    type GuardTree: TreeStore<U63>;
    /// What a fork's child keeps its VMAs in.
    #[doc(hidden)]
    type Owned: VmaStore<GuardTree = MapleTree<U63>>;
    /// Entries in order.
    #[doc(hidden)]
    type Iter<'a>: Iterator<Item = Entry<'a>>
    where
        Self: 'a;
    /// Owned entries in order.
    #[doc(hidden)]
    type Cloned<'a>: Iterator<Item = (RangeInclusive<u64>, VmaRef)>
    where
        Self: 'a;

    /// The entry holding `addr`.
    #[doc(hidden)]
    fn get_range(&self, addr: u64) -> Option<Entry<'_>>;
    /// The entry holding `addr`, or the hole around it.
    #[doc(hidden)]
    fn range_at(&self, addr: u64) -> (RangeInclusive<u64>, Option<&VmaData>);
    /// The first entry ending at or after `addr`.
    #[doc(hidden)]
    fn next_after(&self, addr: u64) -> Option<Entry<'_>>;
    /// The last entry starting at or before `addr`.
    #[doc(hidden)]
    fn prev_before(&self, addr: u64) -> Option<Entry<'_>>;
    /// The entries overlapping `r`.
    #[doc(hidden)]
    fn range(&self, r: RangeInclusive<u64>) -> Self::Iter<'_>;
    /// Owned copies of the entries overlapping `r`.
    #[doc(hidden)]
    fn range_cloned(&self, r: RangeInclusive<u64>) -> Self::Cloned<'_>;
    /// Entries stored.
    #[doc(hidden)]
    fn count(&self) -> usize;
    /// Lowest start of `len` free bytes inside `window`.
    #[doc(hidden)]
    fn empty_area(&self, window: Range<u64>, len: u64) -> Option<u64>;
    /// Highest start of `len` free bytes inside `window`.
    #[doc(hidden)]
    fn empty_area_rev(&self, window: Range<u64>, len: u64) -> Option<u64>;
    /// Stores `v` over `r`, cutting what is there.
    #[doc(hidden)]
    fn store(&mut self, r: Range<u64>, v: VmaRef) -> Result<(), InsertError<VmaRef>>;
    /// Empties `r`.
    #[doc(hidden)]
    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error>;
    /// A copy for a fork's child: each entry's record from `f`, or (for
    /// `None`) the same record shared.
    #[doc(hidden)]
    fn dup_with(
        &self,
        f: impl FnMut(RangeInclusive<u64>, &VmaData) -> Result<Option<VmaRef>, Errno>,
    ) -> Result<Self::Owned, Errno>;
    /// The structure's own invariants.
    #[doc(hidden)]
    fn check(&self) -> Result<(), String>;
}

impl<V: Handle + Clone + Send + Sync + 'static> sealed::Sealed for MapleTree<V> {}

impl<V: Handle + Clone + Send + Sync + 'static> TreeStore<V> for MapleTree<V> {
    fn view(&self) -> &MapleTree<V> {
        self
    }

    fn store(&mut self, r: Range<u64>, v: V) -> Result<(), InsertError<V>> {
        self.store_range(r, v)
    }

    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        self.remove_range(r)
    }
}

impl<V: Handle + Clone + Send + Sync + 'static> sealed::Sealed for WriteGuard<'_, V> {}

impl<V: Handle + Clone + Send + Sync + 'static> TreeStore<V> for WriteGuard<'_, V> {
    fn view(&self) -> &MapleTree<V> {
        self.tree()
    }

    fn store(&mut self, r: Range<u64>, v: V) -> Result<(), InsertError<V>> {
        self.store_range(r, v)
    }

    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        self.remove_range(r)
    }
}

/// The maple stores read through their tree. (Each method is `#[inline]`:
/// the calls are generic over the store and monomorphised in the caller's
/// crate, where these concrete methods would otherwise be out-of-line.)
macro_rules! maple_reads {
    () => {
        #[inline]
        fn get_range(&self, addr: u64) -> Option<Entry<'_>> {
            TreeStore::<VmaRef>::view(self).get_range(addr)
        }

        #[inline]
        fn range_at(&self, addr: u64) -> (RangeInclusive<u64>, Option<&VmaData>) {
            TreeStore::<VmaRef>::view(self).range_at(addr)
        }

        #[inline]
        fn next_after(&self, addr: u64) -> Option<Entry<'_>> {
            TreeStore::<VmaRef>::view(self).next_after(addr)
        }

        #[inline]
        fn prev_before(&self, addr: u64) -> Option<Entry<'_>> {
            TreeStore::<VmaRef>::view(self).prev_before(addr)
        }

        #[inline]
        fn range(&self, r: RangeInclusive<u64>) -> Self::Iter<'_> {
            TreeStore::<VmaRef>::view(self).range(r)
        }

        #[inline]
        fn range_cloned(&self, r: RangeInclusive<u64>) -> Self::Cloned<'_> {
            TreeStore::<VmaRef>::view(self).range_cloned(r)
        }

        #[inline]
        fn count(&self) -> usize {
            TreeStore::<VmaRef>::view(self).len()
        }

        #[inline]
        fn empty_area(&self, window: Range<u64>, len: u64) -> Option<u64> {
            TreeStore::<VmaRef>::view(self).empty_area(window, len).ok()
        }

        #[inline]
        fn empty_area_rev(&self, window: Range<u64>, len: u64) -> Option<u64> {
            TreeStore::<VmaRef>::view(self).empty_area_rev(window, len).ok()
        }

        #[inline]
        fn store(&mut self, r: Range<u64>, v: VmaRef) -> Result<(), InsertError<VmaRef>> {
            self.store_range(r, v)
        }

        #[inline]
        fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
            self.remove_range(r)
        }

        #[inline]
        fn dup_with(
            &self,
            f: impl FnMut(RangeInclusive<u64>, &VmaData) -> Result<Option<VmaRef>, Errno>,
        ) -> Result<MapleTree<VmaRef>, Errno> {
            TreeStore::<VmaRef>::view(self).try_dup_share_or_map(f).map_err(|e| match e {
                DupError::Alloc(_) => Errno::ENOMEM,
                DupError::Map { error, .. } => error,
            })
        }

        #[inline]
        fn check(&self) -> Result<(), String> {
            TreeStore::<VmaRef>::view(self).validate().map_err(|e| e.to_string())
        }
    };
}

impl VmaStore for MapleTree<VmaRef> {
    type GuardTree = MapleTree<U63>;
    type Owned = MapleTree<VmaRef>;
    type Iter<'a> = Iter<'a, VmaRef>;
    type Cloned<'a> = RangeCloned<'a, VmaRef>;

    maple_reads!();
}

impl<'g> VmaStore for WriteGuard<'g, VmaRef> {
    type GuardTree = WriteGuard<'g, U63>;
    type Owned = MapleTree<VmaRef>;
    type Iter<'a>
        = Iter<'a, VmaRef>
    where
        Self: 'a;
    type Cloned<'a>
        = RangeCloned<'a, VmaRef>
    where
        Self: 'a;

    maple_reads!();
}

//! Where an address space keeps its VMAs: a plain [`MapleTree`] (an
//! [`AddressSpace`](crate::AddressSpace) of its own), or the writer's guard
//! of the [`ConcurrentMapleTree`](maple_tree::ConcurrentMapleTree) behind a
//! [`SharedAddressSpace`](crate::SharedAddressSpace). Every call is written
//! once, against this trait.

use core::ops::Range;

use maple_tree::{Handle, InsertError, MapleTree, WriteGuard, U63};

use crate::vma_slab::VmaRef;

mod sealed {
    pub trait Sealed {}
}

/// A tree an address space writes to: a plain [`MapleTree`] or the
/// writer's guard of a [`ConcurrentMapleTree`](maple_tree::ConcurrentMapleTree).
/// Sealed; its methods are the crate's own.
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

/// The tree an address space keeps its VMAs in. Implemented for
/// `MapleTree<VmaRef>` and for the concurrent tree's `WriteGuard`;
/// sealed. Its guard pages go in a tree of the same kind
/// ([`GuardTree`](VmaStore::GuardTree)), so that a
/// [`SharedAddressSpace`](crate::SharedAddressSpace)'s lock-free readers
/// see them too.
pub trait VmaStore: TreeStore<VmaRef> {
    /// Where the guard pages are kept.
    #[doc(hidden)]
    type GuardTree: TreeStore<U63>;
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

impl VmaStore for MapleTree<VmaRef> {
    type GuardTree = MapleTree<U63>;
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

impl<'a> VmaStore for WriteGuard<'a, VmaRef> {
    type GuardTree = WriteGuard<'a, U63>;
}

//! Where an address space keeps its VMAs: a plain [`MapleTree`] (an
//! [`AddressSpace`](crate::AddressSpace) of its own), or the writer's guard
//! of the [`ConcurrentMapleTree`](maple_tree::ConcurrentMapleTree) behind a
//! [`SharedAddressSpace`](crate::SharedAddressSpace). Every call is written
//! once, against this trait.

use core::ops::Range;

use maple_tree::{InsertError, MapleTree, WriteGuard};

use crate::record::VmaRef;

mod sealed {
    pub trait Sealed {}
}

/// The tree an address space writes to. Implemented for
/// `MapleTree<VmaRef>` and for the concurrent tree's `WriteGuard`;
/// sealed.
pub trait VmaStore: sealed::Sealed {
    /// The tree as it stands, for reading.
    #[doc(hidden)]
    fn view(&self) -> &MapleTree<VmaRef>;
    /// Stores `v` over `r`, cutting what is there.
    #[doc(hidden)]
    fn store(&mut self, r: Range<u64>, v: VmaRef) -> Result<(), InsertError<VmaRef>>;
    /// Empties `r`.
    #[doc(hidden)]
    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error>;
}

impl sealed::Sealed for MapleTree<VmaRef> {}

impl VmaStore for MapleTree<VmaRef> {
    fn view(&self) -> &MapleTree<VmaRef> {
        self
    }

    fn store(&mut self, r: Range<u64>, v: VmaRef) -> Result<(), InsertError<VmaRef>> {
        self.store_range(r, v)
    }

    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        self.remove_range(r)
    }
}

impl sealed::Sealed for WriteGuard<'_, VmaRef> {}

impl VmaStore for WriteGuard<'_, VmaRef> {
    fn view(&self) -> &MapleTree<VmaRef> {
        self.tree()
    }

    fn store(&mut self, r: Range<u64>, v: VmaRef) -> Result<(), InsertError<VmaRef>> {
        self.store_range(r, v)
    }

    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        self.remove_range(r)
    }
}

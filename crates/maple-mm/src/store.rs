//! Where an address space keeps its VMAs: a plain [`MapleTree`] (an
//! [`AddressSpace`](crate::AddressSpace) of its own), or the writer's guard
//! of the [`ConcurrentMapleTree`](maple_tree::ConcurrentMapleTree) behind a
//! [`SharedAddressSpace`](crate::SharedAddressSpace). Every call is written
//! once, against this trait.

use core::ops::Range;
use std::sync::Arc;

use maple_tree::{InsertError, MapleTree, WriteGuard};

use crate::vma::VmaData;

mod sealed {
    pub trait Sealed {}
}

/// The tree an address space writes to. Implemented for
/// `MapleTree<Arc<VmaData>>` and for the concurrent tree's `WriteGuard`;
/// sealed.
pub trait VmaStore: sealed::Sealed {
    /// The tree as it stands, for reading.
    #[doc(hidden)]
    fn view(&self) -> &MapleTree<Arc<VmaData>>;
    /// Stores `v` over `r`, cutting what is there.
    #[doc(hidden)]
    fn store(&mut self, r: Range<u64>, v: Arc<VmaData>) -> Result<(), InsertError<Arc<VmaData>>>;
    /// Empties `r`.
    #[doc(hidden)]
    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error>;
}

impl sealed::Sealed for MapleTree<Arc<VmaData>> {}

impl VmaStore for MapleTree<Arc<VmaData>> {
    fn view(&self) -> &MapleTree<Arc<VmaData>> {
        self
    }

    fn store(&mut self, r: Range<u64>, v: Arc<VmaData>) -> Result<(), InsertError<Arc<VmaData>>> {
        self.store_range(r, v)
    }

    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        self.remove_range(r)
    }
}

impl sealed::Sealed for WriteGuard<'_, Arc<VmaData>> {}

impl VmaStore for WriteGuard<'_, Arc<VmaData>> {
    fn view(&self) -> &MapleTree<Arc<VmaData>> {
        self.tree()
    }

    fn store(&mut self, r: Range<u64>, v: Arc<VmaData>) -> Result<(), InsertError<Arc<VmaData>>> {
        self.store_range(r, v)
    }

    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        self.remove_range(r)
    }
}

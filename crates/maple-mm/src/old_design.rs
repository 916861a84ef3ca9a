//! The old design as a store of an address space: Linux's VMA structures
//! before the maple tree ([`RbTree`]) under the same calls, a baseline
//! for comparisons. The core does not use it; it uses the core.

use core::ops::{Range, RangeInclusive};

use maple_tree::{InsertError, MapleTree, U63};

use crate::{
    error::Errno,
    layout::Layout,
    rbtree::RbTree,
    space::AddressSpace,
    store::{sealed::Sealed, Entry, VmaStore},
    vma::VmaData,
    vma_slab::VmaRef,
};

impl AddressSpace<RbTree<VmaRef>> {
    /// An empty address space of the old design (Linux before 6.1): its
    /// VMAs in a red-black tree with subtree gaps, a list and a lookup
    /// cache ([`RbTree`]), under the same calls as every other space. A
    /// baseline for comparisons; fork copies it VMA by VMA.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Layout, MapFlags, Prot, PAGE_SIZE};
    /// let mut old = AddressSpace::old_design(Layout::default());
    /// let mut new = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = old.mmap(0, 4 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    /// let b = new.mmap(0, 4 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    /// old.mprotect(a + PAGE_SIZE, PAGE_SIZE, Prot::READ).unwrap();
    /// new.mprotect(b + PAGE_SIZE, PAGE_SIZE, Prot::READ).unwrap();
    /// assert_eq!((a, old.maps()), (b, new.maps()));
    /// ```
    pub fn old_design(layout: Layout) -> AddressSpace<RbTree<VmaRef>> {
        AddressSpace::empty(RbTree::new(), layout)
    }

    /// The same space in the old design: every VMA (its record shared),
    /// page, limit and the break of `space`, its VMAs linked into a
    /// red-black tree one by one. Observers are not carried over.
    pub fn old_design_from(space: &AddressSpace) -> AddressSpace<RbTree<VmaRef>> {
        let mut tree = RbTree::new();
        for (r, d) in space.tree.range_cloned(0..=u64::MAX) {
            tree.store(*r.start()..r.end() + 1, d);
        }
        AddressSpace {
            tree,
            layout: space.layout.clone(),
            brk: space.brk,
            start_stack: space.start_stack,
            def_flags: space.def_flags,
            sealed: space.sealed,
            guards: space.guards.copy(),
            anon: space.anon.copy(),
            lazy: space.lazy.copy(),
            lock_leak: space.lock_leak,
            events: None,
            reserved: space.reserved.copy(),
        }
    }

    /// [`AddressSpace::exec`] for the old design.
    pub fn exec(&mut self) {
        let fresh = AddressSpace::old_design(self.layout.clone());
        self.exec_as(fresh);
    }

    /// The calling thread's lookup cache: its hits and misses so far, in
    /// every old-design space (see [`RbTree::find_vma`]).
    pub fn cache_stats(&self) -> crate::rbtree::CacheStats {
        self.tree.cache_stats()
    }

    /// Bytes the VMA structure holds (its nodes, with their list links and
    /// subtree gaps, and free slots; the lookup cache is the thread's).
    pub fn store_memory(&self) -> usize {
        self.tree.memory()
    }
}

impl Sealed for RbTree<VmaRef> {}

/// An rbtree entry as the maple stores lend theirs.
#[inline]
fn lent<'a>((r, v): (Range<u64>, &'a VmaRef)) -> Entry<'a> {
    (r.start..=r.end - 1, v)
}

/// An rbtree entry, owned.
#[inline]
fn owned((r, v): (Range<u64>, &VmaRef)) -> (RangeInclusive<u64>, VmaRef) {
    (r.start..=r.end - 1, v.clone())
}

/// The old design: Linux's VMA structures before the maple tree, as a
/// baseline for the same address-space code. Lookups go through the
/// four-entry cache as `find_vma` did; a fork links every VMA into a new
/// tree one by one, as `dup_mmap` did.
impl VmaStore for RbTree<VmaRef> {
    type GuardTree = MapleTree<U63>;
    type Owned = RbTree<VmaRef>;
    type Iter<'a> = core::iter::Map<crate::rbtree::Iter<'a, VmaRef>, fn((Range<u64>, &'a VmaRef)) -> Entry<'a>>;
    type Cloned<'a> =
        core::iter::Map<crate::rbtree::Iter<'a, VmaRef>, fn((Range<u64>, &'a VmaRef)) -> (RangeInclusive<u64>, VmaRef)>;

    #[inline]
    fn get_range(&self, addr: u64) -> Option<Entry<'_>> {
        self.find(addr).map(lent)
    }

    #[inline]
    fn range_at(&self, addr: u64) -> (RangeInclusive<u64>, Option<&VmaData>) {
        match self.find_vma_prev(addr) {
            (Some((r, v)), _) if r.start <= addr => (r.start..=r.end - 1, Some(v)),
            (next, prev) => {
                let lo = prev.map_or(0, |(r, _)| r.end);
                let hi = next.map_or(u64::MAX, |(r, _)| r.start - 1);
                (lo..=hi, None)
            }
        }
    }

    #[inline]
    fn next_after(&self, addr: u64) -> Option<Entry<'_>> {
        self.find_vma(addr).map(lent)
    }

    #[inline]
    fn prev_before(&self, addr: u64) -> Option<Entry<'_>> {
        self.last_at_or_below(addr).map(lent)
    }

    #[inline]
    fn range(&self, r: RangeInclusive<u64>) -> Self::Iter<'_> {
        RbTree::range(self, *r.start()..r.end().saturating_add(1)).map(lent as fn(_) -> _)
    }

    #[inline]
    fn range_cloned(&self, r: RangeInclusive<u64>) -> Self::Cloned<'_> {
        RbTree::range(self, *r.start()..r.end().saturating_add(1)).map(owned as fn(_) -> _)
    }

    #[inline]
    fn count(&self) -> usize {
        RbTree::len(self)
    }

    #[inline]
    fn empty_area(&self, window: Range<u64>, len: u64) -> Option<u64> {
        RbTree::empty_area(self, window, len)
    }

    #[inline]
    fn empty_area_rev(&self, window: Range<u64>, len: u64) -> Option<u64> {
        RbTree::empty_area_rev(self, window, len)
    }

    #[inline]
    fn store(&mut self, r: Range<u64>, v: VmaRef) -> Result<(), InsertError<VmaRef>> {
        RbTree::store(self, r, v);
        Ok(())
    }

    #[inline]
    fn remove(&mut self, r: Range<u64>) -> Result<(), maple_tree::Error> {
        RbTree::remove(self, r);
        Ok(())
    }

    #[inline]
    fn dup_with(
        &self,
        mut f: impl FnMut(RangeInclusive<u64>, &VmaData) -> Result<Option<VmaRef>, Errno>,
    ) -> Result<RbTree<VmaRef>, Errno> {
        let mut child = RbTree::new();
        for (r, v) in self.iter() {
            let record = f(r.start..=r.end - 1, v)?.unwrap_or_else(|| v.clone());
            child.store(r, record);
        }
        Ok(child)
    }

    #[inline]
    fn check(&self) -> Result<(), String> {
        self.validate()
    }
}

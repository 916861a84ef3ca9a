//! `fork`: the child's address space by O(n) duplication of the tree.

use std::ops::RangeInclusive;

use maple_tree::{MapleTree, U63};

use crate::{
    error::{Errno, Result},
    flags::VmFlags,
    space::AddressSpace,
    store::VmaStore,
    vma::{AnonVma, VmaData},
    vma_slab::{with_maker, Maker, VmaRef},
};

impl<T: VmaStore> AddressSpace<T> {
    /// The child's address space after `fork(2)`.
    ///
    /// The tree is duplicated node by node (Linux's `__mt_dup`: no
    /// per-VMA insertion), and each entry of the copy is replaced in place
    /// by a copy of its VMA — or, for a VMA never written (whose copy would
    /// be identical), shares the parent's record. Names are shared with the
    /// parent, never copied. Locks are not inherited (the child's VMAs
    /// are unlocked). Don't-fork ranges are then removed from the
    /// child; wipe-on-fork ranges start without pages (no anon_vma); a
    /// written private VMA gets its own anon_vma linked to the parent's,
    /// so it will not merge with a new neighbour (as in Linux). Guard
    /// pages are inherited with the VMAs that hold them, but for
    /// wipe-on-fork ones, whose page tables the child does not get.
    ///
    /// If copying a VMA fails part way, the child's tree is marked at that
    /// point with the tree's reserved marker, torn down up to it, and the
    /// call returns `ENOMEM`; the parent is untouched and nothing leaks.
    ///
    /// The old design's store (the `baseline` feature's red-black tree)
    /// copies VMA by VMA instead, as Linux's `dup_mmap` did.
    pub fn fork(&self) -> Result<AddressSpace<T::Owned>> {
        self.fork_impl(false)
    }

    fn fork_impl(&self, copy_names: bool) -> Result<AddressSpace<T::Owned>> {
        // VMAs whose page tables the child does not get (don't-fork ones,
        // removed from the child afterwards, and wipe-on-fork ones), noted
        // during the copy, which reads every VMA anyway.
        let mut uncopied: Vec<(u64, u64, bool)> = Vec::new();
        let tree = with_maker(|maker| {
            self.tree.dup_with(|r, d| {
                uncopied.extend(pages_not_copied(&r, d.flags));
                child_record(d, copy_names, maker)
            })
        })?;
        self.child_with(tree, &uncopied)
    }

    /// A fork's child holding `tree` (the parent's VMAs copied, but for
    /// don't-fork ones, removed here if present): the parent's layout,
    /// heap, stack and seals, but not `mlockall(MCL_FUTURE)` (locks are not
    /// inherited); its guard and anonymous pages (which go with the page
    /// tables the child copies, measured on Linux 6.18) duplicated from the
    /// parent's, but for the `uncopied` ranges (start, end, remove), whose
    /// page tables the child does not get (and whose VMAs it does not get
    /// either, where `remove`).
    fn child_with<C: VmaStore<GuardTree = MapleTree<U63>>>(
        &self,
        tree: C,
        uncopied: &[(u64, u64, bool)],
    ) -> Result<AddressSpace<C>> {
        let nomem = |_| Errno::ENOMEM;
        let mut child = AddressSpace {
            tree,
            layout: self.layout.clone(),
            brk: self.brk,
            start_stack: self.start_stack,
            def_flags: VmFlags::empty(),
            sealed: self.sealed,
            lock_leak: 0,
            guards: self.guards.try_dup().map_err(nomem)?,
            anon: self.anon.try_dup().map_err(nomem)?,
            lazy: self.lazy.try_dup().map_err(nomem)?,
            events: None,
            reserved: self.reserved.try_dup().map_err(nomem)?,
        };
        for &(s, e, remove) in uncopied {
            child.guards.remove(s, e).map_err(nomem)?;
            child.zap(s, e).map_err(nomem)?;
            if remove {
                child.tree.remove(s..e).map_err(|_| Errno::ENOMEM)?;
            }
        }
        Ok(child)
    }

    /// [`fork`](Self::fork) as Linux did before names were reference
    /// counted: every name string is copied for the child. Only for the
    /// benchmark that measures what sharing saves.
    #[cfg(feature = "baseline")]
    pub fn fork_copying_names(&self) -> Result<AddressSpace<T::Owned>> {
        self.fork_impl(true)
    }
}

impl AddressSpace {
    /// [`fork`](Self::fork) the way Linux did before `__mt_dup`: every VMA
    /// copied and inserted one by one into a new tree. Same result; kept as
    /// the benchmark baseline.
    #[cfg(feature = "baseline")]
    pub fn fork_by_insertion(&self) -> Result<AddressSpace> {
        let mut tree = MapleTree::with_gaps();
        let mut uncopied: Vec<(u64, u64, bool)> = Vec::new();
        let parent = &self.tree;
        with_maker(|maker| {
            for (r, d) in parent.iter() {
                if let Some((start, end, dontfork)) = pages_not_copied(&r, d.flags) {
                    // A don't-fork VMA is not inserted: nothing to remove.
                    uncopied.push((start, end, false));
                    if dontfork {
                        continue;
                    }
                }
                let record = match child_record(d, false, maker)? {
                    Some(copy) => copy,
                    // Shared, as `fork` shares it (only then is the parent's
                    // reference taken: a copied VMA costs no extra count).
                    None => parent.get_range_cloned(*r.start()).ok_or(Errno::ENOMEM)?.1,
                };
                tree.insert_range(r, record).map_err(|_| Errno::ENOMEM)?;
            }
            Ok::<(), Errno>(())
        })?;
        // The pages as `fork` copies them: the two differ only in how the
        // VMA tree is made, which is what the benchmark compares.
        self.child_with(tree, &uncopied)
    }
}

/// The flags of a VMA whose page tables (guard pages included) a fork's
/// child does not get: don't-fork (no VMA either) and wipe-on-fork.
const PAGES_NOT_COPIED: VmFlags = VmFlags::DONTCOPY.union(VmFlags::WIPEONFORK);

/// For a VMA over `r` whose page tables the child does not get (see
/// [`PAGES_NOT_COPIED`]): its range as (start, end), and whether it is a
/// don't-fork one.
fn pages_not_copied(r: &RangeInclusive<u64>, flags: VmFlags) -> Option<(u64, u64, bool)> {
    flags.intersects(PAGES_NOT_COPIED).then(|| (*r.start(), r.end() + 1, flags.contains(VmFlags::DONTCOPY)))
}

/// The child's record for a VMA (Linux's `vm_area_dup` + `anon_vma_fork`):
/// `None` to share the parent's, which the copy of a never-written,
/// unlocked VMA would equal (records are never changed in place). Locks
/// are not inherited: the child's copy is unlocked, as in Linux.
fn child_record(d: &VmaData, copy_names: bool, maker: &mut Maker<'_>) -> Result<Option<VmaRef>> {
    fault::vma_copy()?;
    if d.anon.is_none() && !copy_names && !d.flags.intersects(VmFlags::LOCKED_MASK) {
        return Ok(None);
    }
    let anon = if d.flags.contains(VmFlags::WIPEONFORK) { None } else { d.anon.map(|_| AnonVma::forked()) };
    let mut copy = VmaData { anon, flags: d.flags - VmFlags::LOCKED_MASK, ..d.clone() };
    if copy_names {
        copy.name = d.name.as_ref().map(|n| crate::AnonName::new(n.as_str())).transpose()?;
    }
    Ok(Some(maker.make(copy)))
}

#[cfg(feature = "fault-injection")]
pub mod fault {
    //! Test hook: fail the N-th VMA copy made by `fork` on this thread, as
    //! an allocation failure of `vm_area_dup` would.
    use std::cell::Cell;

    use crate::Errno;

    thread_local! {
        static FAIL_AT: Cell<u64> = const { Cell::new(0) };
    }

    /// Makes the `n`-th next VMA copy on this thread fail (1 = the next);
    /// 0 disarms.
    pub fn fail_nth_vma_copy(n: u64) {
        FAIL_AT.with(|f| f.set(n));
    }

    pub(crate) fn vma_copy() -> Result<(), Errno> {
        FAIL_AT.with(|f| match f.get() {
            0 => Ok(()),
            1 => {
                f.set(0);
                Err(Errno::ENOMEM)
            }
            n => {
                f.set(n - 1);
                Ok(())
            }
        })
    }
}

#[cfg(not(feature = "fault-injection"))]
mod fault {
    #[inline(always)]
    pub(crate) fn vma_copy() -> Result<(), crate::Errno> {
        Ok(())
    }
}

//! An address space whose lookups never wait: the VMAs live in a
//! [`ConcurrentMapleTree`], readers look them up under an epoch guard
//! without any lock, and one writer at a time changes them with every call
//! of [`AddressSpace`].
//!
//! This is what the maple tree was built for in Linux: page faults look up
//! their VMA without taking `mmap_lock` while `mmap`/`munmap` go on. The
//! guard pages live in a second concurrent tree, so a reader's
//! [`check_access`](SharedAddressSpace::check_access) decides a fault as
//! the plain space's does, guard pages included.

use core::{
    fmt,
    ops::{Deref, DerefMut, Range},
};
use std::sync::Mutex;

use core::sync::atomic::{AtomicU64, Ordering};

use maple_tree::{ConcurrentMapleTree, MapleTree, ReadGuard, WriteGuard, U63};

use crate::{
    access::{decide, Access, Fault},
    change::Events,
    flags::VmFlags,
    layout::{vm_counts, Layout},
    pages::PageSet,
    space::{AddressSpace, Brk},
    stack::{grown, grows_to, growth_fits},
    vma::{Vma, VmaData},
    vma_slab::VmaRef,
};

/// An address space shared between threads: lock-free lookups, one writer
/// at a time.
///
/// A lookup sees every VMA whole, as it was before or after any concurrent
/// call, never torn or freed: each tree write publishes a VMA's range and
/// attributes together, and what a reader holds stays allocated until its
/// guard drops. A call that changes several VMAs (an `mprotect` over a
/// range, say) is made of several such writes, so a reader may see some of
/// them done and others not yet — as a Linux page fault under the per-VMA
/// lock may.
///
/// ```
/// use std::sync::Arc;
/// use maple_mm::{MapFlags, Prot, SharedAddressSpace, PAGE_SIZE};
/// let mm = Arc::new(SharedAddressSpace::new());
/// let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
/// mm.write().mmap(0x10_0000, 4 * PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
/// let reader = {
///     let mm = Arc::clone(&mm);
///     std::thread::spawn(move || {
///         let g = mm.pin();
///         mm.find_vma(0x10_1000, &g).map(|v| v.start())
///     })
/// };
/// mm.write().mprotect(0x10_1000, PAGE_SIZE, Prot::READ).unwrap();
/// let seen = reader.join().unwrap();
/// assert!(seen == Some(0x10_0000) || seen == Some(0x10_1000));
/// ```
pub struct SharedAddressSpace {
    tree: ConcurrentMapleTree<VmaRef>,
    /// The guard pages, as runs (see [`PageSet`]); locked after `tree`.
    guards: ConcurrentMapleTree<U63>,
    /// Writer-side state that is not in the tree (taken after the tree's
    /// writer lock, always).
    state: Mutex<State>,
    /// Fixed for the space's life; readers need it for a stack's growth.
    layout: Layout,
    /// The writer's count of locked memory no VMA holds locked (see
    /// [`AddressSpace::locked_vm`]), published as each writer finishes:
    /// readers need it for a locked stack's growth.
    lock_leak: AtomicU64,
}

struct State {
    brk: Option<Brk>,
    start_stack: Option<u64>,
    def_flags: VmFlags,
    sealed: bool,
    lock_leak: u64,
    /// Lent to the writer's address space while it lives.
    anon: PageSet,
    lazy: PageSet,
    /// The observer, lent to the writer's address space while it lives.
    events: Option<Box<Events>>,
    /// The reserved ranges, lent likewise.
    reserved: PageSet,
}

impl Default for SharedAddressSpace {
    fn default() -> Self {
        SharedAddressSpace::new()
    }
}

impl fmt::Debug for SharedAddressSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedAddressSpace").field("vmas", &self.tree.len()).finish_non_exhaustive()
    }
}

impl From<AddressSpace> for SharedAddressSpace {
    fn from(mm: AddressSpace) -> SharedAddressSpace {
        let state = State {
            brk: mm.brk,
            start_stack: mm.start_stack,
            def_flags: mm.def_flags,
            sealed: mm.sealed,
            lock_leak: mm.lock_leak,
            anon: mm.anon,
            lazy: mm.lazy,
            events: mm.events,
            reserved: mm.reserved,
        };
        SharedAddressSpace {
            tree: ConcurrentMapleTree::from(mm.tree),
            guards: ConcurrentMapleTree::from(mm.guards.tree),
            state: Mutex::new(state),
            lock_leak: AtomicU64::new(mm.lock_leak),
            layout: mm.layout,
        }
    }
}

impl SharedAddressSpace {
    /// An empty address space with the default layout.
    pub fn new() -> SharedAddressSpace {
        SharedAddressSpace::from(AddressSpace::new())
    }

    /// Pins the current epoch for lookups.
    pub fn pin(&self) -> ReadGuard {
        self.tree.pin()
    }

    fn vma<'g>(r: core::ops::RangeInclusive<u64>, d: &'g VmaData) -> Vma<'g> {
        Vma { start: *r.start(), end: r.end() + 1, data: d }
    }

    /// The VMA containing `addr`, without a lock.
    pub fn vma_at<'g>(&'g self, addr: u64, guard: &'g ReadGuard) -> Option<Vma<'g>> {
        self.tree.get_range(addr, guard).map(|(r, d)| Self::vma(r, d))
    }

    /// The VMA containing `addr` or the first above it (Linux's
    /// `find_vma`), without a lock.
    pub fn find_vma<'g>(&'g self, addr: u64, guard: &'g ReadGuard) -> Option<Vma<'g>> {
        // Most lookups hit a VMA (a fault at a mapped address): one walk.
        self.vma_at(addr, guard).or_else(|| self.tree.range(addr.., guard).next().map(|(r, d)| Self::vma(r, d)))
    }

    /// The first VMA overlapping `[start, end)`, without a lock.
    pub fn find_vma_intersection<'g>(&'g self, start: u64, end: u64, guard: &'g ReadGuard) -> Option<Vma<'g>> {
        if start >= end {
            return None;
        }
        self.tree.range(start..end, guard).next().map(|(r, d)| Self::vma(r, d))
    }

    /// Whether an `access` at `addr` would succeed, and if not, why,
    /// without a lock: the rules of [`AddressSpace::check_access`] (a page
    /// fault under Linux's per-VMA lock decides the same way). The VMA and
    /// the guard page are looked up one after the other, each as it stands
    /// before or after any concurrent write. Below a stack (a grows-down
    /// mapping), the stack and the VMA below the address are looked up the
    /// same way, one after the other (Linux takes `mmap_lock` for that
    /// case; take [`write`](Self::write) and call
    /// [`fault`](AddressSpace::fault) to grow the stack).
    ///
    /// ```
    /// use maple_mm::{Access, Advice, Fault, MapFlags, Prot, SharedAddressSpace, PAGE_SIZE};
    /// let mm = SharedAddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let stack = {
    ///     let mut w = mm.write();
    ///     let stack = w.mmap(0, 8 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    ///     w.madvise(stack, PAGE_SIZE, Advice::GuardInstall).unwrap();
    ///     stack
    /// };
    /// let g = mm.pin();
    /// assert_eq!(mm.check_access(stack, Access::Write, &g), Err(Fault::Guard));
    /// assert_eq!(mm.check_access(stack + PAGE_SIZE, Access::Write, &g), Ok(()));
    /// assert_eq!(mm.check_access(stack, Access::Exec, &g), Err(Fault::Denied));
    /// ```
    pub fn check_access(&self, addr: u64, access: Access, guard: &ReadGuard) -> Result<(), Fault> {
        let vma = self.vma_at(addr, guard).or_else(|| self.growing_stack(addr, guard));
        decide(vma, addr, access, self.layout.page_size, |page| self.is_guard_page(page, guard))
    }

    /// The stack above `addr` (which no VMA holds), grown down to it, if a
    /// fault there would grow it (see [`AddressSpace::fault`]).
    fn growing_stack<'g>(&'g self, addr: u64, guard: &'g ReadGuard) -> Option<Vma<'g>> {
        let next = self.tree.range(addr.., guard).next().map(|(r, d)| Self::vma(r, d))?;
        if !next.flags().contains(VmFlags::GROWSDOWN) {
            return None;
        }
        // Only the last VMA within the guard gap below can refuse it.
        let page = self.layout.page_size.align_down(addr);
        let fence = page.saturating_sub(self.layout.stack_guard_gap)..page;
        let prev = self.tree.range(fence, guard).last().map(|(r, d)| Self::vma(r, d));
        let to = grows_to(prev, Some(next), addr, &self.layout)?;
        // The limits, as the writer's fault checks them, from a lock-free
        // walk (each VMA as it stands before or after any concurrent write).
        let counts = |locked| {
            let (total, lck) =
                vm_counts(self.tree.iter(guard).map(|(r, d)| Self::vma(r, d)), self.layout.task_size, locked);
            (total, lck + self.lock_leak.load(Ordering::Relaxed))
        };
        growth_fits(&self.layout, next, to, counts).then(|| grown(next, to))
    }

    /// [`AddressSpace::total_vm`] without a lock: the VMAs' bytes as the
    /// walk meets them (each as it stands before or after any concurrent
    /// write).
    pub fn total_vm(&self, guard: &ReadGuard) -> u64 {
        vm_counts(self.tree.iter(guard).map(|(r, d)| Self::vma(r, d)), self.layout.task_size, false).0
    }

    /// True if the page holding `addr` is a guard page (see
    /// [`AddressSpace::guard_pages`]), without a lock.
    pub fn is_guard_page(&self, addr: u64, guard: &ReadGuard) -> bool {
        self.guards.get_range(addr, guard).is_some()
    }

    /// The guard pages, as runs of whole pages in address order (see
    /// [`AddressSpace::guard_pages`]), without a lock; a run as it stands
    /// before or after any concurrent write.
    pub fn guard_pages<'g>(&'g self, guard: &'g ReadGuard) -> impl Iterator<Item = Range<u64>> + 'g {
        self.guards.iter(guard).map(|(r, _)| *r.start()..r.end() + 1)
    }

    /// VMAs (a snapshot that may be stale by the time it is read).
    pub fn vma_count(&self) -> usize {
        self.tree.len()
    }

    /// Takes the writer's side: every [`AddressSpace`] call, made on the
    /// shared tree. Waits for another writer, never for readers.
    pub fn write(&self) -> SpaceWriter<'_> {
        let guard = self.tree.lock();
        let guards = PageSet { tree: self.guards.lock() };
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let space = AddressSpace {
            tree: guard,
            layout: self.layout.clone(),
            brk: state.brk,
            start_stack: state.start_stack,
            def_flags: state.def_flags,
            sealed: state.sealed,
            lock_leak: state.lock_leak,
            guards,
            anon: core::mem::take(&mut state.anon),
            lazy: core::mem::take(&mut state.lazy),
            events: state.events.take(),
            reserved: core::mem::take(&mut state.reserved),
        };
        SpaceWriter { space, state, leak: &self.lock_leak }
    }

    /// A plain copy of the address space as it stands (under the writer
    /// lock; readers go on).
    pub fn snapshot(&self) -> AddressSpace {
        let w = self.write();
        AddressSpace {
            tree: w.space.tree.tree().clone(),
            layout: w.space.layout.clone(),
            brk: w.space.brk,
            start_stack: w.space.start_stack,
            def_flags: w.space.def_flags,
            sealed: w.space.sealed,
            lock_leak: w.space.lock_leak,
            guards: w.space.guards.copy(),
            anon: w.space.anon.clone(),
            lazy: w.space.lazy.clone(),
            events: None,
            reserved: w.space.reserved.clone(),
        }
    }

    /// Back to a plain address space.
    pub fn into_inner(self) -> AddressSpace {
        let state = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        let tree: MapleTree<VmaRef> = self.tree.into_inner();
        let guards = PageSet { tree: self.guards.into_inner() };
        AddressSpace {
            tree,
            layout: self.layout,
            brk: state.brk,
            start_stack: state.start_stack,
            def_flags: state.def_flags,
            sealed: state.sealed,
            lock_leak: state.lock_leak,
            guards,
            anon: state.anon,
            lazy: state.lazy,
            events: state.events,
            reserved: state.reserved,
        }
    }
}

/// The writer of a [`SharedAddressSpace`]: derefs to an [`AddressSpace`]
/// whose calls publish their changes to concurrent readers. Dropping it
/// lets the next writer in.
pub struct SpaceWriter<'a> {
    space: AddressSpace<WriteGuard<'a, VmaRef>>,
    state: std::sync::MutexGuard<'a, State>,
    leak: &'a AtomicU64,
}

impl<'a> Deref for SpaceWriter<'a> {
    type Target = AddressSpace<WriteGuard<'a, VmaRef>>;
    fn deref(&self) -> &Self::Target {
        &self.space
    }
}

impl DerefMut for SpaceWriter<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.space
    }
}

impl Drop for SpaceWriter<'_> {
    fn drop(&mut self) {
        self.state.brk = self.space.brk;
        self.state.start_stack = self.space.start_stack;
        self.state.def_flags = self.space.def_flags;
        self.state.sealed = self.space.sealed;
        self.state.lock_leak = self.space.lock_leak;
        self.leak.store(self.space.lock_leak, Ordering::Relaxed);
        self.state.anon = core::mem::take(&mut self.space.anon);
        self.state.lazy = core::mem::take(&mut self.space.lazy);
        self.state.events = self.space.events.take();
        self.state.reserved = core::mem::take(&mut self.space.reserved);
    }
}

impl fmt::Debug for SpaceWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpaceWriter").field("vmas", &self.space.vma_count()).finish_non_exhaustive()
    }
}

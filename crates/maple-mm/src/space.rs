//! The address space: the VMAs in a gap-tracking maple tree, the program
//! break and stack, accounting against the limits, lookups and the
//! structure check. The calls are in a file per family; the steps they
//! share in `primitives.rs`, their undo and reports in `transact.rs`.

use core::fmt;

use maple_tree::{MapleTree, U63};

use crate::{
    change::{diff_into, Change, Changes, Events, Observer},
    error::{Errno, Result},
    flags::VmFlags,
    layout::{is_data, vm_counts, within, Layout},
    page::PageSize,
    pages::PageSet,
    store::VmaStore,
    vma::{Vma, VmaData},
    vma_slab::VmaRef,
    Prot,
};

/// What decides the labels `/proc/PID/maps` gives VMAs without a file or
/// name of their own: the program break and the stack's start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shown {
    brk: Option<Brk>,
    start_stack: Option<u64>,
}

impl Shown {
    /// `[heap]`, `[stack]` or none.
    pub(crate) fn label(&self, vma: &Vma<'_>) -> Option<&'static str> {
        if vma.file().is_some() || vma.data.label().is_some() {
            return None;
        }
        // Linux's vma_is_initial_heap: a VMA that merely touches the heap's
        // ends (a mapping made at the break) is not the heap.
        if let Some(b) = self.brk {
            if vma.start < b.current && vma.end > b.start {
                return Some("[heap]");
            }
        }
        match self.start_stack {
            Some(s) if vma.start <= s && s <= vma.end => Some("[stack]"),
            _ => None,
        }
    }
}

/// The program break: `[heap]` runs from `start` up to `current`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Brk {
    /// `mm->start_brk`: where the heap starts.
    pub start: u64,
    /// `mm->brk`: the current break (not necessarily page-aligned).
    pub current: u64,
}

/// A process's address space with Linux semantics: the VMAs in one
/// gap-tracking [`MapleTree`], as Linux keeps them since 6.1.
///
/// ```
/// use maple_mm::{AddressSpace, MapFlags, Prot, PAGE_SIZE};
/// let mut mm = AddressSpace::new();
/// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
/// let a = mm.mmap(0, 3 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
/// // Protecting the middle page splits the VMA in three...
/// mm.mprotect(a + PAGE_SIZE, PAGE_SIZE, Prot::READ).unwrap();
/// assert_eq!(mm.vma_count(), 3);
/// // ...and restoring it merges them again.
/// mm.mprotect(a + PAGE_SIZE, PAGE_SIZE, Prot::RW).unwrap();
/// assert_eq!(mm.vma_count(), 1);
/// let child = mm.fork().unwrap();
/// assert_eq!(child.maps(), mm.maps());
/// ```
pub struct AddressSpace<T: VmaStore = MapleTree<VmaRef>> {
    pub(crate) tree: T,
    pub(crate) layout: Layout,
    pub(crate) brk: Option<Brk>,
    pub(crate) start_stack: Option<u64>,
    /// Linux's `mm->def_flags`: flags every new mapping gets (the locks of
    /// `mlockall(MCL_FUTURE)`).
    pub(crate) def_flags: VmFlags,
    /// Whether any VMA was ever sealed (`mseal`): until then unmapping
    /// need not look for seals.
    pub(crate) sealed: bool,
    /// The guard pages (`MADV_GUARD_INSTALL`): page-table entries, kept
    /// apart from the VMAs, in a tree of the VMAs' kind.
    pub(crate) guards: PageSet<T::GuardTree>,
    /// The anonymous pages (written in private mappings).
    pub(crate) anon: PageSet,
    /// The anonymous pages `MADV_FREE` made lazily freeable (a subset).
    pub(crate) lazy: PageSet,
    /// Bytes Linux still counts as locked (`mm->locked_vm`) that no VMA
    /// holds locked: `MREMAP_DONTUNMAP` clears the old VMA's lock without
    /// taking its pages off the count (measured by the brk oracle).
    pub(crate) lock_leak: u64,
    /// The observer told each call's changes, if one is set.
    pub(crate) events: Option<Box<Events>>,
    /// Ranges no VMA may take (see [`reserve`](AddressSpace::reserve)).
    pub(crate) reserved: PageSet,
}

impl Default for AddressSpace {
    fn default() -> Self {
        AddressSpace::new()
    }
}

impl Clone for AddressSpace {
    /// An exact copy (all VMAs, hidden state included), unlike
    /// [`fork`](AddressSpace::fork). Aborts on allocation failure.
    fn clone(&self) -> AddressSpace {
        AddressSpace {
            tree: self.tree.clone(),
            layout: self.layout.clone(),
            brk: self.brk,
            start_stack: self.start_stack,
            def_flags: self.def_flags,
            sealed: self.sealed,
            guards: self.guards.clone(),
            anon: self.anon.clone(),
            lazy: self.lazy.clone(),
            lock_leak: self.lock_leak,
            events: None,
            reserved: self.reserved.clone(),
        }
    }
}

impl<T: VmaStore> fmt::Debug for AddressSpace<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressSpace")
            .field("vmas", &self.vma_count())
            .field("brk", &self.brk)
            .field("start_stack", &self.start_stack.map(|s| format!("{s:#x}")))
            .finish_non_exhaustive()
    }
}

/// Totals over an address space; see [`AddressSpace::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpaceStats {
    /// VMAs.
    pub vmas: usize,
    /// Bytes mapped.
    pub mapped: u64,
    /// Bytes of private anonymous memory.
    pub anon: u64,
    /// Bytes backed by files (shared anonymous memory included).
    pub file: u64,
    /// Bytes of shared mappings.
    pub shared: u64,
    /// Bytes mapped with each protection, indexed by the `rwx` bits
    /// (`Prot::bits() & 7`).
    pub by_prot: [u64; 8],
}

impl AddressSpace {
    /// The tree itself (for benchmarks that separate the tree's cost from
    /// the VMAs').
    #[cfg(feature = "baseline")]
    pub fn vma_tree(&self) -> &MapleTree<VmaRef> {
        &self.tree
    }

    /// Node statistics of the tree holding the VMAs (height, nodes, bytes).
    pub fn tree_stats(&self) -> maple_tree::Stats {
        self.tree.stats()
    }

    /// Sets the address-space limit ([`Layout::as_limit`], in bytes;
    /// `u64::MAX` for none), as `setrlimit(RLIMIT_AS)` does: mappings
    /// already made stay, and a limit below what they take refuses every
    /// growth, even by nothing (Linux's check is `total + grow > limit`).
    /// (A [`SharedAddressSpace`](crate::SharedAddressSpace) keeps the
    /// limits it was made with: its lock-free readers use them.)
    pub fn set_as_limit(&mut self, bytes: u64) {
        self.layout.as_limit = bytes;
    }

    /// Sets the private writable memory limit ([`Layout::data_limit`], in
    /// bytes; `u64::MAX` for none), as `setrlimit(RLIMIT_DATA)` does.
    pub fn set_data_limit(&mut self, bytes: u64) {
        self.layout.data_limit = bytes;
    }

    /// Sets the size of the program's initialised data
    /// ([`Layout::data_segment`], `end_data - start_data`), which `brk`
    /// counts against `RLIMIT_DATA`, as `execve` sets it.
    pub fn set_data_segment(&mut self, bytes: u64) {
        self.layout.data_segment = bytes;
    }

    /// Sets the locked-memory limit ([`Layout::memlock_limit`], in bytes;
    /// `u64::MAX` for none, or for a process with `CAP_IPC_LOCK`), as
    /// `setrlimit(RLIMIT_MEMLOCK)` does for a process without it.
    pub fn set_memlock_limit(&mut self, bytes: u64) {
        self.layout.memlock_limit = bytes;
    }

    /// Sets the stack limit ([`Layout::stack_limit`], in bytes; `u64::MAX`
    /// for none), as `setrlimit(RLIMIT_STACK)` does.
    pub fn set_stack_limit(&mut self, bytes: u64) {
        self.layout.stack_limit = bytes;
    }

    /// An empty address space with the default [`Layout`].
    pub fn new() -> AddressSpace {
        AddressSpace::with_layout(Layout::default())
    }

    /// An empty address space.
    pub fn with_layout(layout: Layout) -> AddressSpace {
        AddressSpace::empty(MapleTree::with_gaps(), layout)
    }

    /// Replaces everything with an empty space of the same layout, as
    /// `execve` does before loading a program. An observer stays, and
    /// hears every page unmapped; reserved ranges stay.
    pub fn exec(&mut self) {
        let fresh = AddressSpace::with_layout(self.layout.clone());
        self.exec_as(fresh);
    }
}

impl<T: VmaStore<GuardTree = MapleTree<U63>>> AddressSpace<T> {
    /// An empty space keeping its VMAs in `tree` (empty).
    pub(crate) fn empty(tree: T, layout: Layout) -> AddressSpace<T> {
        AddressSpace {
            tree,
            layout,
            brk: None,
            start_stack: None,
            def_flags: VmFlags::empty(),
            sealed: false,
            guards: PageSet::default(),
            anon: PageSet::default(),
            lazy: PageSet::default(),
            lock_leak: 0,
            events: None,
            reserved: PageSet::default(),
        }
    }
}

impl<T: VmaStore> AddressSpace<T> {
    /// Becomes `fresh` (an empty space of the same kind and layout) as
    /// `execve` does; an observer stays and hears every page unmapped,
    /// reserved ranges stay.
    pub(crate) fn exec_as(&mut self, fresh: AddressSpace<T>) {
        let events = self.events.take();
        let reserved = core::mem::take(&mut self.reserved);
        let old = events.as_ref().map(|_| self.cloned(0..=u64::MAX));
        *self = fresh;
        self.events = events;
        self.reserved = reserved;
        if let (Some(ev), Some(old)) = (&mut self.events, old) {
            let mut changes = Changes::new();
            diff_into(&old, &[], &mut changes);
            ev.tell(&changes);
        }
    }

    /// Sets the observer told every change each later call makes, in
    /// order, once the call has made them all (nothing for a call that
    /// fails having changed nothing); replaces one set before. Its changes
    /// applied to a map of ranges reproduce this space's pages and
    /// attributes after every call (see [`Change`] for an example).
    ///
    /// Calls that change no VMA (`fork`, which changes the child only;
    /// anonymous pages written, guard pages) tell it nothing; `exec`
    /// tells it every page unmapped. A copy ([`Clone`], `fork`) has no
    /// observer; a [`SharedAddressSpace`](crate::SharedAddressSpace) made
    /// from this space keeps it for its writers.
    pub fn set_observer(&mut self, observer: impl Observer + 'static) {
        self.events = Some(Box::new(Events::new(Box::new(observer))));
    }

    /// Takes the observer away: later calls tell no one.
    pub fn clear_observer(&mut self) {
        self.events = None;
    }

    /// Reserves `[start, end)` (whole pages): no call places a mapping
    /// there, and none maps over it, grows into it or moves into it (they
    /// fail with `ENOMEM`, changing nothing). What an emulator keeps for
    /// itself in the guest's address space (QEMU's `reserved_va` limit,
    /// the host's own mappings). The range must be unmapped: `EEXIST` if a
    /// VMA is there, `EINVAL` for an empty or unaligned range.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Errno, MapFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let top = mm.layout().mmap_base;
    /// mm.reserve(top - 16 * PAGE_SIZE, top)?;
    /// // Placement goes below it; a fixed mapping over it fails.
    /// let a = mm.mmap(0, PAGE_SIZE, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0)?;
    /// assert!(a < top - 16 * PAGE_SIZE);
    /// let fixed = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    /// assert_eq!(mm.mmap(top - PAGE_SIZE, PAGE_SIZE, Prot::READ, fixed, None, 0), Err(Errno::ENOMEM));
    /// # Ok::<(), Errno>(())
    /// ```
    pub fn reserve(&mut self, start: u64, end: u64) -> Result<()> {
        if start >= end || !self.page_size().is_aligned(start) || !self.page_size().is_aligned(end) {
            return Err(Errno::EINVAL);
        }
        if self.find_vma_intersection(start, end).is_some() {
            return Err(Errno::EEXIST);
        }
        self.reserved.install(start, end).map_err(|_| Errno::ENOMEM)
    }

    /// Gives `[start, end)` back to placement and mappings.
    pub fn unreserve(&mut self, start: u64, end: u64) -> Result<()> {
        if start >= end || !self.page_size().is_aligned(start) || !self.page_size().is_aligned(end) {
            return Err(Errno::EINVAL);
        }
        self.reserved.remove(start, end).map_err(|_| Errno::ENOMEM)
    }

    /// The reserved ranges, in address order.
    pub fn reserved(&self) -> impl Iterator<Item = core::ops::Range<u64>> + '_ {
        self.reserved.iter().map(|(s, e)| s..e)
    }
    /// The changes that turn `self` into `other`, lowest address first, in
    /// the vocabulary an observer hears ([`Change`]): what a call did is
    /// `before.diff(&after)`, but for a move, which a diff sees as an
    /// unmap and a map.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Change, MapFlags, Prot, PAGE_SIZE};
    ///
    /// let mut mm = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    /// mm.mmap(0x10000, 2 * PAGE_SIZE, Prot::RW, anon, None, 0)?;
    /// let before = mm.clone();
    /// mm.mprotect(0x10000, PAGE_SIZE, Prot::NONE)?;
    /// mm.mmap(0x20000, PAGE_SIZE, Prot::READ, anon, None, 0)?;
    /// let lines: Vec<String> = before.diff(&mm).map(|c| c.to_string()).collect();
    /// assert_eq!(lines, ["changed 10000-11000 rw-p -> ---p", "mapped 20000-21000 r--p"]);
    /// # Ok::<(), maple_mm::Errno>(())
    /// ```
    pub fn diff<U: VmaStore>(&self, other: &AddressSpace<U>) -> impl Iterator<Item = Change> {
        let (before, after) = (self.cloned(0..=u64::MAX), other.cloned(0..=u64::MAX));
        let mut out = Changes::new();
        diff_into(&before, &after, &mut out);
        out.into_iter()
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The page size (the layout's).
    #[inline]
    pub fn page_size(&self) -> PageSize {
        self.layout.page_size
    }

    /// The program break, if one has been set (see [`set_brk_base`](Self::set_brk_base)).
    pub fn brk_state(&self) -> Option<Brk> {
        self.brk
    }

    /// Sets where the heap starts (`mm->start_brk`, page-aligned up), as
    /// `exec` does after loading the program; the break starts there.
    pub fn set_brk_base(&mut self, start: u64) -> Result<()> {
        let start = self.page_size().align_up(start).filter(|&s| s < self.layout.task_size).ok_or(Errno::EINVAL)?;
        self.brk = Some(Brk { start, current: start });
        Ok(())
    }

    /// Sets the program break as a running process has it: where the heap
    /// starts (`mm->start_brk`) and the break itself (`mm->brk`, not
    /// necessarily page-aligned), as a debugger that attaches to a process
    /// reads them (`/proc/PID/stat` shows the start; `brk(0)` in the
    /// process gives the break). The mappings are left as they are: the
    /// `[heap]` VMA, if any, is whatever is mapped there.
    ///
    /// Errors: `EINVAL` if the start is not page-aligned, the break lies
    /// below it, or either lies above the top of user space.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Brk};
    /// let mut mm = AddressSpace::new();
    /// mm.set_brk(Brk { start: 0x5555_0000, current: 0x5555_0000 }).unwrap();
    /// assert_eq!(mm.brk(0x5555_1234), 0x5555_1234); // one page of heap
    /// assert_eq!(mm.brk_state().unwrap().current, 0x5555_1234);
    /// ```
    pub fn set_brk(&mut self, brk: Brk) -> Result<()> {
        let top = self.layout.task_size;
        if !self.page_size().is_aligned(brk.start) || brk.current < brk.start || brk.current > top {
            return Err(Errno::EINVAL);
        }
        self.brk = Some(brk);
        Ok(())
    }

    /// The initial stack pointer's address (`mm->start_stack`): the VMA
    /// containing it is shown as `[stack]`.
    pub fn start_stack(&self) -> Option<u64> {
        self.start_stack
    }

    /// Sets `mm->start_stack`.
    pub fn set_start_stack(&mut self, addr: u64) {
        self.start_stack = Some(addr);
    }

    // ---- lookups ----

    pub(crate) fn vma_of<'a>(r: core::ops::RangeInclusive<u64>, d: &'a VmaData) -> Vma<'a> {
        Vma { start: *r.start(), end: r.end() + 1, data: d }
    }

    /// The VMA containing `addr` (Linux's `vma_lookup`).
    pub fn vma_at(&self, addr: u64) -> Option<Vma<'_>> {
        self.tree.get_range(addr).map(|(r, d)| Self::vma_of(r, d))
    }

    /// The VMA containing `addr`, or else the first one above it (Linux's
    /// `find_vma`).
    pub fn find_vma(&self, addr: u64) -> Option<Vma<'_>> {
        self.vma_at(addr).or_else(|| self.tree.next_after(addr).map(|(r, d)| Self::vma_of(r, d)))
    }

    /// [`find_vma`](Self::find_vma) and the VMA before it (Linux's
    /// `find_vma_prev`).
    pub fn find_vma_prev(&self, addr: u64) -> (Option<Vma<'_>>, Option<Vma<'_>>) {
        let vma = self.find_vma(addr);
        let below = vma.map_or(addr, |v| v.start);
        let prev = below.checked_sub(1).and_then(|b| self.tree.prev_before(b)).map(|(r, d)| Self::vma_of(r, d));
        (prev, vma)
    }

    /// The first VMA that overlaps `[start, end)`.
    pub fn find_vma_intersection(&self, start: u64, end: u64) -> Option<Vma<'_>> {
        if start >= end {
            return None;
        }
        self.find_vma(start).filter(|v| v.start < end)
    }

    /// Every VMA, ascending.
    pub fn iter(&self) -> impl Iterator<Item = Vma<'_>> + '_ {
        self.tree.range(0..=u64::MAX).map(|(r, d)| Self::vma_of(r, d))
    }

    /// The VMAs overlapping `[start, end)`, ascending.
    pub fn range(&self, start: u64, end: u64) -> impl Iterator<Item = Vma<'_>> + '_ {
        let it = (start < end).then(|| self.tree.range(start..=end - 1)).into_iter().flatten();
        it.map(|(r, d)| Self::vma_of(r, d))
    }

    /// Number of VMAs.
    pub fn vma_count(&self) -> usize {
        self.tree.count()
    }

    /// Totals: VMAs, bytes mapped by kind and by protection.
    pub fn stats(&self) -> SpaceStats {
        let mut s = SpaceStats::default();
        for v in self.iter() {
            let len = v.len();
            s.vmas += 1;
            s.mapped += len;
            if v.is_anonymous() {
                s.anon += len;
            } else {
                s.file += len;
            }
            if v.is_shared() {
                s.shared += len;
            }
            s.by_prot[(v.prot().bits() & 7) as usize] += len;
        }
        s
    }

    /// Bytes of address space the VMAs take, as Linux counts them against
    /// `RLIMIT_AS` ([`Layout::as_limit`]): `mm->total_vm`, the `VmSize` of
    /// `/proc/PID/status`. Every VMA counts, inaccessible ones too, but the
    /// vsyscall page (above user space, not a VMA in Linux). It walks every
    /// VMA: O(n).
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Errno, Layout, MapFlags, Prot, PAGE_SIZE};
    /// let layout = Layout { as_limit: 16 * PAGE_SIZE, ..Layout::default() };
    /// let mut mm = AddressSpace::with_layout(layout);
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 12 * PAGE_SIZE, Prot::NONE, anon, None, 0).unwrap();
    /// assert_eq!(mm.total_vm(), 12 * PAGE_SIZE);
    /// assert_eq!(mm.mmap(0, 8 * PAGE_SIZE, Prot::RW, anon, None, 0), Err(Errno::ENOMEM));
    /// // Mapping over pages already counted takes nothing more.
    /// mm.mmap(a, 8 * PAGE_SIZE, Prot::RW, anon | MapFlags::FIXED, None, 0).unwrap();
    /// ```
    pub fn total_vm(&self) -> u64 {
        vm_counts(self.iter(), self.layout.task_size, false).0
    }

    /// Bytes of private writable memory, as Linux counts them against
    /// `RLIMIT_DATA` ([`Layout::data_limit`]): `mm->data_vm`, the `VmData`
    /// of `/proc/PID/status`, the VMAs that are writable, private and do
    /// not grow down (stacks count apart). O(n).
    pub fn data_vm(&self) -> u64 {
        self.iter().filter(|v| is_data(v.flags())).map(|v| v.len()).sum()
    }

    /// Bytes of locked memory, as Linux counts them against
    /// `RLIMIT_MEMLOCK` ([`Layout::memlock_limit`]): `mm->locked_vm`, the
    /// `VmLck` of `/proc/PID/status`: the VMAs locked (`VM_LOCKED`, with
    /// or without lock-on-fault), and what `MREMAP_DONTUNMAP` unlocked,
    /// which Linux goes on counting (measured). O(n).
    pub fn locked_vm(&self) -> u64 {
        vm_counts(self.iter(), self.layout.task_size, true).1 + self.lock_leak
    }

    /// Linux's `can_do_mlock`: a locked-memory limit of 0 refuses every
    /// lock (`EPERM`).
    pub(crate) fn can_do_mlock(&self) -> bool {
        self.layout.memlock_limit != 0
    }

    /// Linux's `mlock_future_ok`: whether a mapping with `flags` may take
    /// `bytes` more, if locked, within `RLIMIT_MEMLOCK`.
    pub(crate) fn mlock_future_ok(&self, flags: VmFlags, bytes: u64) -> bool {
        let limit = self.layout.memlock_limit;
        limit == u64::MAX
            || !flags.contains(VmFlags::LOCKED)
            || within(self.locked_vm(), bytes, limit, self.page_size())
    }

    /// Linux's `may_expand_vm`: whether VMAs with `flags` may take `grow`
    /// more bytes, `replaced` of them over pages VMAs take already (a fixed
    /// mapping's target), within `RLIMIT_AS` and, for private writable
    /// memory, `RLIMIT_DATA`. Only a set limit costs a count.
    pub(crate) fn may_expand_vm(&self, flags: VmFlags, grow: u64, replaced: u64) -> bool {
        let l = &self.layout;
        if l.as_limit != u64::MAX && !within(self.total_vm(), grow - replaced, l.as_limit, l.page_size) {
            return false;
        }
        l.data_limit == u64::MAX
            || !is_data(flags)
            || within(self.data_vm(), grow - replaced, l.data_limit, l.page_size)
    }

    /// Bytes of `[start, end)` that VMAs take.
    pub(crate) fn mapped_in(&self, start: u64, end: u64) -> u64 {
        if start >= end {
            return 0;
        }
        self.tree.range(start..=end - 1).map(|(r, _)| (r.end() + 1).min(end) - (*r.start()).max(start)).sum()
    }

    /// The label `/proc/PID/maps` shows for `vma` when it has no file or
    /// name of its own: `[heap]` or `[stack]`.
    pub(crate) fn label(&self, vma: &Vma<'_>) -> Option<&'static str> {
        self.shown().label(vma)
    }

    /// What the maps file's labels depend on, as the space stands.
    pub(crate) fn shown(&self) -> Shown {
        Shown { brk: self.brk, start_stack: self.start_stack }
    }

    /// Checks the tree's invariants, that every VMA is page-aligned and
    /// below `task_size`, and that every guard page is a whole page inside
    /// a VMA. (Neighbours that could merge are not an error: Linux itself
    /// leaves some apart.)
    pub fn validate(&self) -> core::result::Result<(), String> {
        self.tree.check()?;
        // Whole pages, inside VMAs that all pass `fits`.
        let inside = |s: u64, e: u64, fits: &dyn Fn(&Vma<'_>) -> bool| {
            let mut pos = s;
            for v in self.range(s, e) {
                if v.start > pos || !fits(&v) {
                    break;
                }
                pos = v.end;
            }
            self.page_size().is_aligned(s) && self.page_size().is_aligned(e) && pos >= e
        };
        for (s, e) in self.guards.iter() {
            if !inside(s, e, &|_| true) {
                return Err(format!("guard pages {s:#x}-{e:#x} not whole pages inside VMAs"));
            }
        }
        for (s, e) in self.anon.iter() {
            if !inside(s, e, &|v| !v.flags().contains(VmFlags::SHARED)) {
                return Err(format!("anonymous pages {s:#x}-{e:#x} not whole pages inside private VMAs"));
            }
            if let Some(g) = self.guards.first_in(s, e) {
                return Err(format!("anonymous page {g:#x} is a guard page"));
            }
        }
        for (s, e) in self.lazy.iter() {
            if self.anon.runs(s, e) != [(s, e)] || !inside(s, e, &|v| v.data.is_anonymous()) {
                return Err(format!(
                    "lazily freeable pages {s:#x}-{e:#x} not anonymous pages of private anonymous VMAs"
                ));
            }
        }
        if let Some((s, e)) = self.reserved.iter().find(|&(s, e)| self.find_vma_intersection(s, e).is_some()) {
            return Err(format!("a VMA in the reserved range {s:#x}-{e:#x}"));
        }
        for v in self.iter() {
            if !self.page_size().is_aligned(v.start) || !self.page_size().is_aligned(v.end) {
                return Err(format!("unaligned VMA {:#x}-{:#x}", v.start, v.end));
            }
            if self.above_top(v.end, v.flags()) {
                return Err(format!("VMA {:#x}-{:#x} above the top of user space", v.start, v.end));
            }
        }
        Ok(())
    }

    /// True if a VMA ending at `end` with `flags` lies above the top of
    /// user space (the layout's `task_size`), where only special mappings
    /// (the vsyscall page) may.
    pub(crate) fn above_top(&self, end: u64, flags: VmFlags) -> bool {
        end > self.layout.task_size && !flags.contains(VmFlags::SPECIAL)
    }
}

/// Protection totals are indexed by `rwx` bits; this names an index.
pub fn prot_of_index(i: usize) -> Prot {
    Prot::from_bits_truncate(i as u32 & 7)
}

impl<T: VmaStore> AddressSpace<T> {
    /// The anonymous pages: the pages written in private mappings, which
    /// hold the process's own data (in memory, or in swap) rather than a
    /// file's or a shared object's — `/proc/PID/smaps`'s `Anonymous`, the
    /// pages a checkpoint must save. As runs of whole pages in address
    /// order, adjacent runs joined. The rules, measured on Linux 6.18 (the
    /// kernel oracle compares each VMA's count with smaps after every
    /// call):
    ///
    /// * a write makes one ([`touch`](Self::touch),
    ///   `MADV_POPULATE_WRITE`), and so does populating a private writable
    ///   mapping (`MAP_POPULATE`, `mlock` and `MAP_LOCKED`,
    ///   `mlockall(MCL_CURRENT)`, and what a locked mapping grows by, or is
    ///   made writable by `mprotect`), up to the first page it cannot
    ///   write; reads make none (an anonymous page read maps the shared
    ///   zero page), nor do writes to shared mappings;
    /// * unmapping, `MADV_DONTNEED` (`_LOCKED` too) and a guard install
    ///   throw them away; `MADV_FREE` makes them lazily freeable
    ///   ([`lazy_free_pages`](Self::lazy_free_pages)) and `MADV_PAGEOUT`
    ///   then throws those away (others stay: the model has no swap);
    /// * `mremap` moves them; `mprotect` keeps them;
    /// * a fork's child gets them in every VMA it inherits but
    ///   wipe-on-fork ones.
    ///
    /// A live process read with [`from_pid`](Self::from_pid) comes with its
    /// anonymous pages where pagemap shows page frames (to
    /// `CAP_SYS_ADMIN`); a space read from a maps file
    /// ([`from_maps`](Self::from_maps)) has none, as the file does not say
    /// which pages were written.
    ///
    /// ```
    /// use maple_mm::{AddressSpace, MapFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, 8 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    /// mm.touch(a + PAGE_SIZE, 2 * PAGE_SIZE).unwrap();
    /// assert_eq!(mm.anon_pages().collect::<Vec<_>>(), [a + PAGE_SIZE..a + 3 * PAGE_SIZE]);
    /// // MADV_DONTNEED (4) throws the second one away.
    /// mm.madvise(a + 2 * PAGE_SIZE, PAGE_SIZE, maple_mm::Advice::from_code(4).unwrap()).unwrap();
    /// assert_eq!(mm.anon_pages().collect::<Vec<_>>(), [a + PAGE_SIZE..a + 2 * PAGE_SIZE]);
    /// ```
    pub fn anon_pages(&self) -> impl Iterator<Item = core::ops::Range<u64>> + '_ {
        self.anon.iter().map(|(s, e)| s..e)
    }

    /// The anonymous pages `MADV_FREE` made lazily freeable and that were
    /// not written since (smaps's `LazyFree`, once Linux has moved them to
    /// its lazy-free list): the kernel may drop them at any time, after
    /// which they read as zero; `MADV_PAGEOUT` drops them at once. A subset
    /// of [`anon_pages`](Self::anon_pages).
    pub fn lazy_free_pages(&self) -> impl Iterator<Item = core::ops::Range<u64>> + '_ {
        self.lazy.iter().map(|(s, e)| s..e)
    }

    /// The number of anonymous pages in `[start, end)`.
    pub fn anon_page_count(&self, start: u64, end: u64) -> u64 {
        self.anon.runs(start, end).iter().map(|(s, e)| (e - s) / self.page_size().bytes()).sum()
    }
}

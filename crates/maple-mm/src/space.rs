//! The address space: VMAs in a gap-tracking maple tree, lookups, and the
//! machinery every call shares (saving a window for undo, merging around
//! what a call changed).

use core::fmt;

use maple_tree::{MapleTree, U63};

use crate::{
    change::{clip, diff_into, splice, Change, Changes, Events, Observer, Piece},
    error::{AllocFail, Errno, Result},
    flags::VmFlags,
    page::PageSize,
    pages::{PageSet, Runs},
    rbtree::RbTree,
    store::VmaStore,
    vma::{AnonVma, Vma, VmaData},
    vma_slab::VmaRef,
    Prot,
};

/// Where mappings go and the limits of an address space: the
/// architecture's page size and address layout (with address
/// randomisation off), and the process's resource limits.
///
/// [`Layout::x86_64`], [`Layout::x86_64_la57`] and [`Layout::arm64`] give
/// each kernel's layout; [`Default`] is the host's. Change the limits with
/// struct update syntax.
///
/// ```
/// use maple_mm::{AddressSpace, Layout, MapFlags, PageSize, Prot};
/// let mut mm = AddressSpace::with_layout(Layout::arm64(PageSize::K64));
/// let a = mm.mmap(0, 1, Prot::READ, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0).unwrap();
/// assert_eq!(mm.vma_at(a).unwrap().len(), 65536); // one 64 KiB page
/// assert_eq!(a + 65536, 0xffff_f800_0000); // below arm64's 48-bit stack top, less 128 MiB
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(deny_unknown_fields))]
pub struct Layout {
    /// Whose rules apply where the architectures differ (see [`Arch`]).
    pub arch: Arch,
    /// Bytes per page.
    pub page_size: PageSize,
    /// One past the highest user address (`TASK_SIZE`).
    pub task_size: u64,
    /// One past the highest address placement uses unless a hint lies
    /// above it (`DEFAULT_MAP_WINDOW`): the 47-bit (x86-64) or 48-bit
    /// (arm64) window of a kernel with larger addresses, so that programs
    /// that keep tags in the high bits keep working; `task_size` where the
    /// two are the same.
    pub map_window: u64,
    /// Mappings without an address are placed top-down below this.
    pub mmap_base: u64,
    /// Where bottom-up placement starts (`TASK_UNMAPPED_BASE`): the legacy
    /// layout's base, and where a failed top-down search looks next.
    pub legacy_base: u64,
    /// Lowest address a mapping may use (`vm.mmap_min_addr`).
    pub mmap_min_addr: u64,
    /// Place mappings bottom-up from `legacy_base` (the legacy layout)
    /// instead of top-down from `mmap_base`.
    pub bottom_up: bool,
    /// Gap kept free below a grows-down mapping (`stack_guard_gap`, 256
    /// pages).
    pub stack_guard_gap: u64,
    /// Largest size a stack may grow to (`RLIMIT_STACK`, 8 MiB;
    /// `u64::MAX` for no limit): see [`AddressSpace::fault`].
    pub stack_limit: u64,
    /// Most VMAs allowed (`vm.max_map_count`).
    pub max_map_count: usize,
    /// Most address space the VMAs may take, in bytes (`RLIMIT_AS`, as
    /// `ulimit -v` sets it; `u64::MAX` for no limit): `mmap`, `shmat`, a
    /// growing `brk` or `mremap` that would take more fail (`ENOMEM`; `brk`
    /// keeps its break). See [`AddressSpace::total_vm`].
    pub as_limit: u64,
    /// Most private writable memory the VMAs may take, in bytes
    /// (`RLIMIT_DATA`, as `ulimit -d` sets it; `u64::MAX` for no limit):
    /// `mmap`, `brk`, `mremap` and an `mprotect` that makes pages writable
    /// fail past it (`ENOMEM`; `brk` keeps its break). See
    /// [`AddressSpace::data_vm`]. (Linux reads a soft limit of 0 as the
    /// hard one, for Valgrind; the model takes it as given.)
    pub data_limit: u64,
    /// Bytes of the program's initialised data (`end_data - start_data` in
    /// `/proc/PID/stat`), which `brk` counts with the heap against
    /// `RLIMIT_DATA`.
    pub data_segment: u64,
    /// Most memory the VMAs may lock, in bytes (`RLIMIT_MEMLOCK`;
    /// `u64::MAX` for no limit, or a process with `CAP_IPC_LOCK`, which
    /// the limit does not bind: the default). Locks past it fail: `mlock`
    /// and `mlockall(MCL_CURRENT)` with `ENOMEM` (`EPERM` where the limit
    /// is 0), a locked `mmap` or `mremap` growth with `EAGAIN`, and a
    /// locked heap or stack does not grow. See [`AddressSpace::locked_vm`].
    pub memlock_limit: u64,
    /// The NUMA nodes with memory, bit `n` for node `n` (node 0 only by
    /// default), which memory policies may use (see
    /// [`AddressSpace::mbind`]).
    pub numa_nodes: u64,
    /// Place large anonymous (a multiple of the huge-page size,
    /// [`PageSize::pmd_size`]) and file (covering an aligned huge-page
    /// file range) mappings on huge-page boundaries when no address is
    /// given, as Linux does with transparent huge pages.
    pub thp_align: bool,
}

/// The architectures whose layouts are modelled. The VMA rules are the
/// same on both, and so is placement (x86-64's
/// `arch_get_unmapped_area(_topdown)` and the generic functions arm64 uses
/// agree on every input); they differ in how `execve` picks the layout
/// (see [`Layout::with_stack_limit`]). Another architecture is a
/// constructor giving its numbers, and a variant where its rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum Arch {
    /// x86-64 (`arch/x86/mm/mmap.c`, `arch/x86/kernel/sys_x86_64.c`).
    X86_64,
    /// arm64, through the generic layout code (`mm/util.c`, `mm/mmap.c`).
    Arm64,
}

/// Linux's `mmap_base` without randomisation: the stack's room below
/// `top` (its limit plus the guard gap, unless that overflows; at least
/// 128 MiB, at most five sixths of `top`), rounded up to a page.
fn mmap_base_below(top: u64, stack_limit: u64, guard_gap: u64, page: PageSize) -> u64 {
    let (min, max) = (128 << 20, top / 6 * 5);
    let mut gap = stack_limit.checked_add(guard_gap).unwrap_or(stack_limit);
    // (Linux's order: the minimum only where it is below the maximum.)
    if gap < min && min < max {
        gap = min;
    } else if gap > max {
        gap = max;
    }
    page.align_up(top.saturating_sub(gap)).unwrap_or(top)
}

impl Layout {
    /// Linux x86-64 with 4-level page tables: 47-bit user addresses
    /// (`TASK_SIZE` = 2^47 − one page), mappings top-down from 128 MiB
    /// below it, `vm.mmap_min_addr` 64 KiB, an 8 MiB stack limit.
    pub fn x86_64() -> Layout {
        let page = PageSize::K4;
        let task = (1 << 47) - page.bytes();
        Layout::common(Arch::X86_64, page, task, task, 0x1_0000, (task / 3).next_multiple_of(page.bytes()))
    }

    /// Linux x86-64 with 5-level page tables (`la57`): 56-bit user
    /// addresses, but placement stays in the 47-bit window unless a hint
    /// lies above it (`arch/x86/include/asm/page_64_types.h`,
    /// `DEFAULT_MAP_WINDOW`).
    ///
    /// ```
    /// use maple_mm::{AddressSpace, Layout, MapFlags, Prot};
    /// let mut mm = AddressSpace::with_layout(Layout::x86_64_la57());
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// assert!(mm.mmap(0, 4096, Prot::READ, anon, None, 0).unwrap() < 1 << 47);
    /// assert_eq!(mm.mmap(1 << 50, 4096, Prot::READ, anon, None, 0), Ok(1 << 50)); // a hint above the window
    /// ```
    pub fn x86_64_la57() -> Layout {
        let page = PageSize::K4;
        Layout { task_size: (1 << 56) - page.bytes(), ..Layout::x86_64() }
    }

    /// Linux arm64 with 48-bit user addresses (`VA_BITS_MIN`; a 52-bit
    /// kernel keeps the same window, `arch/arm64/include/asm/processor.h`)
    /// and the given page size: `TASK_SIZE` = 2^48, mappings top-down from
    /// 128 MiB below it, bottom-up from a quarter of it, `vm.mmap_min_addr`
    /// 32 KiB (the kernel's advice for arm, `mm/Kconfig`), a guard gap of
    /// 256 pages and huge pages of [`PageSize::pmd_size`].
    pub fn arm64(page: PageSize) -> Layout {
        let task = 1 << 48;
        Layout::common(Arch::Arm64, page, task, task, 0x8000, task / 4)
    }

    /// The running machine's layout: [`Layout::arm64`] with the host's
    /// page size on arm64, else [`Layout::x86_64`].
    pub fn host() -> Layout {
        if cfg!(target_arch = "aarch64") {
            Layout::arm64(PageSize::host().unwrap_or_default())
        } else {
            Layout::x86_64()
        }
    }

    fn common(
        arch: Arch,
        page: PageSize,
        task_size: u64,
        map_window: u64,
        mmap_min_addr: u64,
        legacy_base: u64,
    ) -> Layout {
        let stack_guard_gap = 256 * page.bytes();
        let stack_limit = 8 << 20;
        Layout {
            arch,
            page_size: page,
            task_size,
            map_window,
            mmap_base: mmap_base_below(map_window, stack_limit, stack_guard_gap, page),
            legacy_base,
            mmap_min_addr,
            bottom_up: false,
            stack_guard_gap,
            stack_limit,
            max_map_count: 65_530,
            as_limit: u64::MAX,
            data_limit: u64::MAX,
            data_segment: 0,
            memlock_limit: u64::MAX,
            numa_nodes: 1,
            thp_align: true,
        }
    }

    /// The layout `execve` sets up for a stack limit of `bytes`
    /// (`RLIMIT_STACK`; `u64::MAX` for none), as `ulimit -s` gives it:
    /// `mmap_base` leaves the stack its limit and the guard gap below the
    /// window's top (at least 128 MiB, at most five sixths of the window);
    /// on arm64 an unlimited stack picks the legacy bottom-up layout
    /// (`mmap_is_legacy` in `mm/util.c`), which x86-64 no longer does.
    ///
    /// ```
    /// use maple_mm::Layout;
    /// let big = Layout::x86_64().with_stack_limit(1 << 30);
    /// assert_eq!(big.mmap_base, 0x7fff_bfef_f000); // 1 GiB and the 1 MiB guard gap below the top
    /// let unlimited = Layout::x86_64().with_stack_limit(u64::MAX);
    /// assert_eq!((unlimited.mmap_base, unlimited.bottom_up), (0x1555_5555_6000, false));
    /// assert!(Layout::arm64(maple_mm::PageSize::K4).with_stack_limit(u64::MAX).bottom_up);
    /// ```
    pub fn with_stack_limit(self, bytes: u64) -> Layout {
        Layout {
            stack_limit: bytes,
            mmap_base: mmap_base_below(self.map_window, bytes, self.stack_guard_gap, self.page_size),
            bottom_up: self.bottom_up || (self.arch == Arch::Arm64 && bytes == u64::MAX),
            ..self
        }
    }

    /// The highest address (exclusive) placement may use for a hint of
    /// `hint` (`arch_get_mmap_end`).
    pub(crate) fn mmap_end(&self, hint: u64) -> u64 {
        if hint > self.map_window {
            self.task_size
        } else {
            self.map_window.min(self.task_size)
        }
    }
}

impl core::str::FromStr for Layout {
    type Err = String;

    /// A layout by name, as the command line takes it: `x86-64`,
    /// `x86-64-la57`, `arm64` (4 KiB pages), `arm64-16k`, `arm64-64k`.
    ///
    /// ```
    /// use maple_mm::{Layout, PageSize};
    /// assert_eq!("arm64-16k".parse::<Layout>(), Ok(Layout::arm64(PageSize::K16)));
    /// assert!("sparc".parse::<Layout>().unwrap_err().contains("x86-64-la57"));
    /// ```
    fn from_str(name: &str) -> core::result::Result<Layout, String> {
        Ok(match name {
            "x86-64" => Layout::x86_64(),
            "x86-64-la57" => Layout::x86_64_la57(),
            "arm64" | "arm64-4k" => Layout::arm64(PageSize::K4),
            "arm64-16k" => Layout::arm64(PageSize::K16),
            "arm64-64k" => Layout::arm64(PageSize::K64),
            _ => {
                return Err(format!(
                    "unknown layout {name:?}: one of x86-64, x86-64-la57, arm64 (4 KiB pages), arm64-16k, arm64-64k"
                ))
            }
        })
    }
}

impl Default for Layout {
    /// The host's ([`Layout::host`]).
    fn default() -> Layout {
        Layout::host()
    }
}

/// Linux's `is_data_mapping`: private writable memory that does not grow
/// down, which `RLIMIT_DATA` limits.
pub(crate) fn is_data(flags: VmFlags) -> bool {
    flags & (VmFlags::WRITE | VmFlags::SHARED | VmFlags::GROWSDOWN) == VmFlags::WRITE
}

/// Whether `used` bytes and `grow` more keep within a resource limit of
/// `limit` bytes (`u64::MAX` for none), counted in whole pages as Linux
/// counts (`used + grow > limit` refuses).
pub(crate) fn within(used: u64, grow: u64, limit: u64, page: PageSize) -> bool {
    limit == u64::MAX || page.pages(used).saturating_add(page.pages(grow)) <= page.pages(limit)
}

/// What Linux's counters count of `vmas`: bytes of address space
/// (`total_vm`: all but the vsyscall page, above `top`) and bytes locked
/// (`locked_vm`, without what it goes on counting after `MREMAP_DONTUNMAP`).
/// `locked` is counted only if asked.
pub(crate) fn vm_counts<'a>(vmas: impl Iterator<Item = Vma<'a>>, top: u64, locked: bool) -> (u64, u64) {
    vmas.filter(|v| v.end <= top).fold((0, 0), |(total, lck), v| {
        let is_locked = locked && v.flags().contains(VmFlags::LOCKED);
        (total + v.len(), lck + if is_locked { v.len() } else { 0 })
    })
}

/// The layout the unit tests run with for pages of `P` bytes (x86-64 for
/// 4 KiB, arm64 for 16 and 64 KiB), and [`each_page`] to run a test with
/// each.
#[cfg(test)]
pub(crate) fn test_layout<const P: u64>() -> Layout {
    match PageSize::try_from(P).expect("a page size the model knows") {
        PageSize::K4 => Layout::x86_64(),
        page => Layout::arm64(page),
    }
}

/// Runs a test written for pages of `P` bytes with each page size.
#[cfg(test)]
macro_rules! each_page {
    ($test:ident) => {{
        $test::<4096>();
        $test::<16384>();
        $test::<65536>();
    }};
}
#[cfg(test)]
pub(crate) use each_page;

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

/// The entries of a window before a call changed it, to put back if the
/// call fails on an allocation.
pub(crate) struct Undo {
    lo: u64,
    hi: u64,
    old: Saved,
    /// The guard, anonymous and lazily freeable runs of `[lo, hi)`.
    pages: [Runs; 3],
}

/// VMAs saved for an undo: a call's window and its neighbours are most
/// often a handful.
pub(crate) type Saved = smallvec::SmallVec<[(u64, u64, VmaRef); 4]>;

impl AddressSpace {
    /// The tree itself (for benchmarks that separate the tree's cost from
    /// the VMAs').
    #[doc(hidden)]
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

impl<T: VmaStore<GuardTree = MapleTree<U63>>> AddressSpace<T> {
    /// An empty space keeping its VMAs in `tree` (empty).
    fn empty(tree: T, layout: Layout) -> AddressSpace<T> {
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
    fn exec_as(&mut self, fresh: AddressSpace<T>) {
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

    // ---- shared write machinery ----

    /// Owned copies of the entries overlapping `[start, end)`.
    pub(crate) fn entries(&self, start: u64, end: u64) -> Saved {
        if start >= end {
            return Saved::new();
        }
        self.cloned(start..=end - 1)
    }

    /// Owned copies of the entries overlapping `range`, as `(start, end)`
    /// with `end` exclusive.
    pub(crate) fn cloned(&self, range: core::ops::RangeInclusive<u64>) -> Saved {
        let mut out = Saved::new();
        let mut it = self.tree.range_cloned(range);
        // In place: moving the iterator (as `collect` does) copies its path.
        for (r, d) in &mut it {
            out.push((*r.start(), r.end() + 1, d));
        }
        out
    }

    /// Saves every VMA touching `[start, end)` or adjacent to it (merge
    /// candidates), so that [`restore`](Self::restore) can undo a call.
    pub(crate) fn save(&self, start: u64, end: u64) -> Undo {
        // One walk over `[start - 1, end]` finds the window's VMAs and the
        // neighbours touching it: a VMA holding `start - 1` ends at or
        // after `start`, one holding `end` begins at or before it.
        let old = self.cloned(start.saturating_sub(1)..=end);
        let lo = old.first().map_or(start, |e| e.0.min(start));
        let hi = old.last().map_or(end, |e| e.1.max(end));
        let pages = [self.guards.runs(lo, hi), self.anon.runs(lo, hi), self.lazy.runs(lo, hi)];
        Undo { lo, hi, old, pages }
    }

    /// Puts a saved window back after a failed allocation. Each write is
    /// retried a few times; the allocation that failed is usually not the
    /// next one to be tried.
    pub(crate) fn restore(&mut self, undo: Undo) {
        let [guards, anon, lazy] = &undo.pages;
        self.guards.restore(undo.lo, undo.hi, guards);
        self.anon.restore(undo.lo, undo.hi, anon);
        self.lazy.restore(undo.lo, undo.hi, lazy);
        for _ in 0..8 {
            if self.tree.remove(undo.lo..undo.hi).is_ok() {
                self.wrote(undo.lo, undo.hi, None);
                break;
            }
        }
        for (s, e, d) in undo.old {
            let mut d = d;
            for _ in 0..8 {
                let told = self.events.is_some().then(|| d.clone());
                match self.tree.store(s..e, d) {
                    Ok(()) => {
                        if told.is_some() {
                            self.wrote(s, e, told);
                        }
                        break;
                    }
                    Err(err) => d = err.value,
                }
            }
        }
    }

    /// Runs `f`, undoing its tree writes over the windows if it fails on an
    /// allocation. `f` returns the call's result, which may be an error
    /// after a partial change that Linux keeps (not undone).
    pub(crate) fn transact<R>(
        &mut self,
        windows: &[(u64, u64)],
        f: impl FnOnce(&mut Self) -> core::result::Result<Result<R>, AllocFail>,
    ) -> Result<R> {
        let undo: smallvec::SmallVec<[Undo; 2]> = windows.iter().map(|&(s, e)| self.save(s, e)).collect();
        let (brk, stack, def_flags, lock_leak) = (self.brk, self.start_stack, self.def_flags, self.lock_leak);
        if let Some(ev) = &mut self.events {
            if ev.depth == 0 && !ev.writes.is_empty() {
                // (Writes made outside any call are not this call's.)
                ev.writes.clear();
            }
            ev.depth += 1;
        }
        let res = f(self);
        let report = self.events.as_mut().is_some_and(|ev| {
            ev.depth -= 1;
            ev.depth == 0
        });
        if report {
            if res.is_ok() {
                self.report(&undo);
            }
            if let Some(ev) = &mut self.events {
                ev.moves.clear();
                ev.writes.clear();
            }
        }
        match res {
            Ok(res) => res,
            Err(AllocFail) => {
                for u in undo.into_iter().rev() {
                    self.restore(u);
                }
                self.brk = brk;
                self.start_stack = stack;
                self.def_flags = def_flags;
                self.lock_leak = lock_leak;
                Err(Errno::ENOMEM)
            }
        }
    }

    /// Tells the observer what the call that saved `undo` changed.
    #[inline(never)]
    fn report(&mut self, undo: &[Undo]) {
        let Some(ev) = &self.events else { return };
        if let ([u], []) = (undo, &ev.moves[..]) {
            // One window and no move (most calls): told from the call's
            // writes, as they are found.
            #[cfg(debug_assertions)]
            let swept = self.swept(u, &ev.writes);
            let Some(ev) = &mut self.events else { return };
            let _told = ev.tell_writes(&u.old, u.lo, u.hi);
            #[cfg(debug_assertions)]
            assert_eq!(_told, swept, "changes told from the writes, and swept");
            return;
        }
        self.report_swept(undo);
    }

    /// Tells the observer what a call that moved pages or worked in more
    /// than one window changed, swept from its windows.
    #[inline(never)]
    fn report_swept(&mut self, undo: &[Undo]) {
        let changes = self.changes_since(undo);
        if let Some(ev) = &mut self.events {
            ev.tell(&changes);
        }
    }

    /// What the call that saved `undo` changed in its windows: the moves
    /// it recorded, then the difference between the windows' old entries,
    /// moved as the pages were, and what they hold now.
    fn changes_since(&self, undo: &[Undo]) -> Changes {
        let moves = self.events.as_ref().map_or(&[][..], |ev| &ev.moves[..]);
        let mut out = Changes::new();
        // The windows, joined where they overlap (a move's source and
        // target may share a neighbour).
        let mut windows: smallvec::SmallVec<[(u64, u64); 2]> = undo.iter().map(|u| (u.lo, u.hi)).collect();
        windows.sort_unstable();
        let mut joined: smallvec::SmallVec<[(u64, u64); 2]> = smallvec::SmallVec::new();
        for (lo, hi) in windows {
            match joined.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => joined.push((lo, hi)),
            }
        }
        let mut before = Saved::new();
        for &(lo, hi) in &joined {
            let mut old: Vec<Piece> = undo.iter().flat_map(|u| clip(&u.old, lo, hi)).collect();
            old.sort_unstable_by_key(|p| p.0);
            old.dedup_by_key(|p| p.0);
            before.extend(old);
        }
        for &(start, end, to) in moves {
            let target = to + (end - start);
            // The target is emptied first.
            diff_into(&clip(&before, to, target), &[], &mut out);
            let moved: Vec<Piece> = clip(&before, start, end)
                .into_iter()
                .map(|(s, e, d)| (s - start + to, e - start + to, VmaRef::new(d.relocated(s, s - start + to))))
                .collect();
            splice(&mut before, start, end, None);
            splice(&mut before, to, target, None);
            before.extend(moved);
            before.sort_unstable_by_key(|p| p.0);
            out.push(Change::Moved { from: start..end, to });
        }
        let mut after: Vec<Piece> = Vec::new();
        for &(lo, hi) in &joined {
            after.extend(clip(&self.entries(lo, hi), lo, hi));
        }
        diff_into(&before, &after, &mut out);
        out
    }

    /// The changes of a call's `writes` in one window, found the long way
    /// (to check [`Events::tell_writes`]): the writes applied to the
    /// window's old pieces give what the tree holds (no write went
    /// unnoted), and the difference between the two is the changes.
    #[cfg(debug_assertions)]
    fn swept(&self, u: &Undo, writes: &[crate::change::Write]) -> Vec<String> {
        let (after, swept) = crate::change::applied(&u.old, writes, u.lo, u.hi);
        let mut read = self.entries(u.lo, u.hi);
        if let Some(first) = read.first_mut() {
            first.0 = first.0.max(u.lo);
        }
        if let Some(last) = read.last_mut() {
            last.1 = last.1.min(u.hi);
        }
        let mut differ = Changes::new();
        diff_into(&after, &read, &mut differ);
        assert!(differ.is_empty(), "noted writes give {after:?}, the tree holds {read:?}");
        swept.iter().map(|c| format!("{c:?}")).collect()
    }

    /// Stores `data` over `[start, end)`, cutting whatever is there. A
    /// reserved range refuses it like a failed allocation: the call under
    /// way is undone and fails with `ENOMEM`.
    pub(crate) fn put(&mut self, start: u64, end: u64, data: VmaData) -> core::result::Result<(), AllocFail> {
        if self.reserved.first_in(start, end).is_some() {
            return Err(AllocFail);
        }
        let r = VmaRef::new(data);
        match &mut self.events {
            None => self.tree.store(start..end, r).map_err(|_| AllocFail),
            Some(_) => {
                self.tree.store(start..end, r.clone()).map_err(|_| AllocFail)?;
                self.wrote(start, end, Some(r));
                Ok(())
            }
        }
    }

    /// Notes a write for the observer (see [`Events::writes`]).
    #[inline]
    fn wrote(&mut self, start: u64, end: u64, v: Option<VmaRef>) {
        if let Some(ev) = &mut self.events {
            ev.writes.push((start, end, v));
        }
    }

    /// Unmaps `[start, end)` (neighbours are cut, keeping their
    /// attributes), with its guard pages.
    pub(crate) fn clear(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        if start >= end {
            return Ok(());
        }
        // The VMAs first: a lock-free reader never sees a page of theirs
        // mapped but no longer guarded.
        self.tree.remove(start..end).map_err(|_| AllocFail)?;
        self.wrote(start, end, None);
        self.guards.remove(start, end)?;
        self.zap(start, end)
    }

    /// Throws away the anonymous pages of `[start, end)` (`MADV_DONTNEED`,
    /// a guard install, an unmap).
    pub(crate) fn zap(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        self.anon.remove(start, end)?;
        self.lazy.remove(start, end)
    }

    /// Every page of `[start, end)` written (all mapped and writable, as
    /// the caller checked): the pages in private VMAs become anonymous
    /// pages of their own, and no longer lazily freeable.
    pub(crate) fn written(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        if start >= end {
            return Ok(());
        }
        // Most often one VMA holds it all: one walk.
        if let Some(v) = self.vma_at(start).filter(|v| v.end >= end) {
            if v.flags().contains(VmFlags::SHARED) {
                return Ok(());
            }
            self.anon.install(start, end)?;
            return self.lazy.remove(start, end);
        }
        let private: smallvec::SmallVec<[(u64, u64); 4]> = self
            .range(start, end)
            .filter(|v| !v.flags().contains(VmFlags::SHARED))
            .map(|v| (v.start.max(start), v.end.min(end)))
            .collect();
        for (s, e) in private {
            self.anon.install(s, e)?;
            self.lazy.remove(s, e)?;
        }
        Ok(())
    }

    /// A populate writing `[start, end)` of the private writable VMA
    /// holding `start`: the VMA gets its anon_vma (even if the first write
    /// fails, past the end of its file), and its pages up to the first
    /// that cannot be written (a guard page, or one past the object)
    /// become anonymous pages.
    pub(crate) fn populate_writes(&mut self, start: u64, end: u64) -> core::result::Result<(), AllocFail> {
        let Some(v) = self.vma_at(start) else { return Ok(()) };
        let end = end.min(v.end);
        let past = v.data.past_object(start, end, self.page_size()).unwrap_or(end);
        let stop = self.guards.first_in(start, past).unwrap_or(past);
        // (A write fault on a guard page fails before it makes an anon_vma.)
        if !self.is_guard_page(start) {
            self.fault_in_at(start)?;
        }
        self.written(start, stop)
    }

    /// Moves the pages' state (guard markers, anonymous pages) of
    /// `[start, end)` to start at `to`: an `mremap` moving page tables.
    pub(crate) fn move_pages(&mut self, start: u64, end: u64, to: u64) -> core::result::Result<(), AllocFail> {
        if let Some(ev) = &mut self.events {
            // The VMAs follow, written by the caller: an observer hears of
            // the pages as moved, not unmapped and mapped again.
            ev.moves.push((start, end, to));
        }
        self.guards.relocate(start, end, to)?;
        self.anon.relocate(start, end, to)?;
        self.lazy.relocate(start, end, to)
    }

    /// Merges compatible neighbours across every boundary of the changed
    /// ranges (sorted, `[start, end)`), as Linux's `vma_merge` does around
    /// the VMAs a call modified. Boundaries between two untouched VMAs are
    /// left alone.
    pub(crate) fn merge_around(&mut self, changed: &[(u64, u64)]) -> core::result::Result<(), AllocFail> {
        self.merge_around_keeping(changed, &[])
    }

    /// [`merge_around`](Self::merge_around), where Linux may not delete a
    /// VMA whose mapping has a `close` hook (a System V segment's pieces):
    /// `kept` are changed ranges that were whole such VMAs before the call,
    /// which no neighbour absorbs (one changed after them may still merge
    /// into them), and a changed range that merged with the VMA before it
    /// does not also absorb such a VMA after it.
    pub(crate) fn merge_around_keeping(
        &mut self,
        changed: &[(u64, u64)],
        kept: &[(u64, u64)],
    ) -> core::result::Result<(), AllocFail> {
        let mut bounds: smallvec::SmallVec<[u64; 8]> = changed.iter().flat_map(|&(s, e)| [s, e]).collect();
        bounds.sort_unstable();
        bounds.dedup();
        // (Both lists are in address order, as the calls make them.)
        let starts = |list: &[(u64, u64)], b: u64| list.binary_search_by_key(&b, |r| r.0).is_ok();
        let ends = |list: &[(u64, u64)], b: u64| list.binary_search_by_key(&b, |r| r.1).ok();
        let mut merged_left: smallvec::SmallVec<[u64; 8]> = smallvec::SmallVec::new();
        for b in bounds {
            // The VMA a merge at `b` would absorb: the changed range after
            // `b`, else the one before it (into an untouched VMA after).
            let starts_here = starts(changed, b);
            if starts(kept, b) || (!starts_here && ends(kept, b).is_some()) {
                continue;
            }
            let joined_left = ends(changed, b).is_some_and(|i| merged_left.binary_search(&changed[i].0).is_ok());
            if joined_left && self.vma_at(b).is_some_and(|v| v.data.closes()) {
                continue;
            }
            if self.merge_at(b)? && starts_here {
                merged_left.push(b);
            }
        }
        Ok(())
    }

    /// Merges the VMA ending at `b` with the one starting there, if they
    /// are compatible; true if they merged.
    pub(crate) fn merge_at(&mut self, b: u64) -> core::result::Result<bool, AllocFail> {
        let Some(lb) = b.checked_sub(1) else { return Ok(false) };
        let (Some(left), Some(right)) = (self.tree.get_range(lb), self.tree.get_range(b)) else {
            return Ok(false);
        };
        if *left.0.end() != lb || *right.0.start() != b || !left.1.merges_with(right.1) {
            return Ok(false);
        }
        let (start, end) = (*left.0.start(), right.0.end() + 1);
        let merged = left.1.merged(right.1);
        self.put(start, end, merged)?;
        Ok(true)
    }

    /// Checks that splitting the VMAs at `start` and `end` would not make
    /// more VMAs than `max_map_count` allows (Linux checks before each
    /// split).
    pub(crate) fn check_splits(&self, start: u64, end: u64) -> Result<()> {
        let mut extra = 0;
        for at in [start, end] {
            if let Some(v) = self.vma_at(at) {
                if v.start < at {
                    extra += 1;
                }
            }
        }
        if extra > 0 && self.vma_count() + extra > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        Ok(())
    }

    /// [`fault_in`](Self::fault_in) of the whole VMA holding `addr`, if any.
    pub(crate) fn fault_in_at(&mut self, addr: u64) -> core::result::Result<(), AllocFail> {
        match self.vma_at(addr).map(|v| (v.start, v.end)) {
            Some((s, e)) => self.fault_in(s, e),
            None => Ok(()),
        }
    }

    /// A first write to every page of `[start, end)` of the VMA `v`: a
    /// private mapping gets an anon_vma (reusing a compatible neighbour's,
    /// as Linux's `find_mergeable_anon_vma` does).
    pub(crate) fn fault_in(&mut self, v_start: u64, v_end: u64) -> core::result::Result<(), AllocFail> {
        let Some((r, d)) = self.tree.get_range(v_start) else { return Ok(()) };
        if d.anon.is_some() || d.flags.contains(VmFlags::SHARED) {
            return Ok(());
        }
        debug_assert_eq!((*r.start(), r.end() + 1), (v_start, v_end));
        let mut reuse = None;
        // Linux looks at the next VMA first, then the previous one. (An
        // entry holding `v_end` or `v_start - 1` is adjacent: this VMA
        // covers everything in between.)
        for n in [self.tree.get_range(v_end), v_start.checked_sub(1).and_then(|s| self.tree.get_range(s))]
            .into_iter()
            .flatten()
        {
            if let Some(a) = n.1.anon {
                if !a.is_forked() && d.anon_compatible(n.1) {
                    reuse = Some(a);
                    break;
                }
            }
        }
        let data = VmaData { anon: Some(reuse.unwrap_or_else(AnonVma::new)), ..d.clone() };
        self.put(v_start, v_end, data)
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

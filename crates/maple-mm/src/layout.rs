//! Where mappings go: the architecture's page size and address layout,
//! and the resource limits a space counts against.

use crate::{flags::VmFlags, page::PageSize, vma::Vma};

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
    /// `u64::MAX` for no limit): see [`AddressSpace::fault`](crate::AddressSpace::fault).
    pub stack_limit: u64,
    /// Most VMAs allowed (`vm.max_map_count`).
    pub max_map_count: usize,
    /// Most address space the VMAs may take, in bytes (`RLIMIT_AS`, as
    /// `ulimit -v` sets it; `u64::MAX` for no limit): `mmap`, `shmat`, a
    /// growing `brk` or `mremap` that would take more fail (`ENOMEM`; `brk`
    /// keeps its break). See [`AddressSpace::total_vm`](crate::AddressSpace::total_vm).
    pub as_limit: u64,
    /// Most private writable memory the VMAs may take, in bytes
    /// (`RLIMIT_DATA`, as `ulimit -d` sets it; `u64::MAX` for no limit):
    /// `mmap`, `brk`, `mremap` and an `mprotect` that makes pages writable
    /// fail past it (`ENOMEM`; `brk` keeps its break). See
    /// [`AddressSpace::data_vm`](crate::AddressSpace::data_vm). (Linux reads a soft limit of 0 as the
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
    /// locked heap or stack does not grow. See [`AddressSpace::locked_vm`](crate::AddressSpace::locked_vm).
    pub memlock_limit: u64,
    /// The NUMA nodes with memory, bit `n` for node `n` (node 0 only by
    /// default), which memory policies may use (see
    /// [`AddressSpace::mbind`](crate::AddressSpace::mbind)).
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

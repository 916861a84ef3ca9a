//! What a memory access does: [`AddressSpace::check_access`].
//!
//! An emulator, a sandbox or a debugger that runs another program's loads
//! and stores needs to know which of them fault, and with which signal:
//! that is decided by the VMAs, as Linux's page-fault handler decides it
//! before it looks at any page. The rules, measured on Linux 6.18 (x86-64
//! without memory protection keys; the kernel oracle test checks reads
//! and writes):
//!
//! * no mapping: `SIGSEGV` with `SEGV_MAPERR`;
//! * a mapping that does not allow the access: `SIGSEGV` with
//!   `SEGV_ACCERR` (a read needs any of read, write or execute permission,
//!   as x86 page tables give write and execute pages read access; a write
//!   needs write permission, an instruction fetch execute permission);
//! * a guard page (`MADV_GUARD_INSTALL`, see
//!   [`guard_pages`](AddressSpace::guard_pages)) the mapping allows the
//!   access to: `SIGSEGV` with `SEGV_MAPERR`, as if nothing were mapped
//!   there (the permission is checked first);
//! * a page wholly past the end of the file or shmem object the mapping
//!   maps, where its size is known ([`MappedFile::size`]): `SIGBUS` with
//!   `BUS_ADRERR`.
//!
//! An address in the hole below a grows-down mapping (a stack) is first
//! given to that mapping if it may grow down to it (see
//! [`fault`](AddressSpace::fault) and the growth rules there); the access
//! is then checked against the grown mapping.
//!
//! Not modelled: userfaultfd and protection keys.
//!
//! [`MappedFile::size`]: crate::MappedFile::size

use crate::{flags::VmFlags, page::PageSize, space::AddressSpace, store::VmaStore, vma::Vma};

/// A kind of memory access.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Exec,
}

/// Why an access faults; [`signal`](Fault::signal) and
/// [`code`](Fault::code) give what Linux delivers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// No mapping at the address (`SIGSEGV`, `SEGV_MAPERR`).
    Unmapped,
    /// The mapping does not allow the access (`SIGSEGV`, `SEGV_ACCERR`).
    Denied,
    /// The page lies wholly past the end of the file or shmem object the
    /// mapping maps (`SIGBUS`, `BUS_ADRERR`).
    PastObject,
    /// The page is a guard page (`SIGSEGV`, `SEGV_MAPERR`, as for
    /// [`Unmapped`](Fault::Unmapped)).
    Guard,
    /// [`AddressSpace::fault`] could not allocate what the fault records
    /// (a stack's growth, an anonymous page), and changed nothing. Linux
    /// would run the OOM killer; [`signal`](Fault::signal) says `SIGKILL`.
    OutOfMemory,
}

impl Fault {
    /// The signal number: `SIGSEGV` (11), `SIGBUS` (7), or `SIGKILL` (9)
    /// for [`OutOfMemory`](Fault::OutOfMemory).
    pub fn signal(self) -> i32 {
        match self {
            Fault::Unmapped | Fault::Denied | Fault::Guard => 11,
            Fault::PastObject => 7,
            Fault::OutOfMemory => 9,
        }
    }

    /// The signal's `si_code`: `SEGV_MAPERR` (1), `SEGV_ACCERR` (2) or
    /// `BUS_ADRERR` (2); 0 for [`OutOfMemory`](Fault::OutOfMemory).
    pub fn code(self) -> i32 {
        match self {
            Fault::Unmapped | Fault::Guard => 1,
            Fault::Denied | Fault::PastObject => 2,
            Fault::OutOfMemory => 0,
        }
    }
}

/// What an `access` at `addr` does, given the VMA holding it (if any) and
/// whether a page is a guard page: the rules of
/// [`AddressSpace::check_access`], for it and for the lock-free
/// [`SharedAddressSpace::check_access`](crate::SharedAddressSpace::check_access).
pub(crate) fn decide(
    v: Option<Vma<'_>>,
    addr: u64,
    access: Access,
    page_size: PageSize,
    guard: impl FnOnce(u64) -> bool,
) -> Result<(), Fault> {
    let Some(v) = v else { return Err(Fault::Unmapped) };
    let need = match access {
        Access::Read => VmFlags::ACCESS,
        Access::Write => VmFlags::WRITE,
        Access::Exec => VmFlags::EXEC,
    };
    if !v.flags().intersects(need) {
        return Err(Fault::Denied);
    }
    let page = page_size.align_down(addr);
    if guard(page) {
        return Err(Fault::Guard);
    }
    if v.data.past_object(page, page + page_size.bytes(), page_size).is_some() {
        return Err(Fault::PastObject);
    }
    Ok(())
}

impl<T: VmaStore> AddressSpace<T> {
    /// Whether an `access` at `addr` would succeed, and if not, why, as
    /// Linux 6.18's page-fault handler decides from the VMAs (measured on
    /// x86-64 without protection keys; the kernel oracle test checks reads
    /// and writes): no mapping is [`Fault::Unmapped`]; a mapping without
    /// the permission is [`Fault::Denied`] (a read needs any of read,
    /// write or execute permission, as x86 page tables give write and
    /// execute pages read access; a write needs write, an instruction
    /// fetch execute); then a guard page is [`Fault::Guard`]; a page
    /// wholly past the end of the file or shmem object mapped, where its
    /// size is known ([`MappedFile::size`](crate::MappedFile::size)), is
    /// [`Fault::PastObject`]. An address in the hole below a stack (a
    /// grows-down mapping) that may grow down to it is checked against the
    /// stack as it would grow (see [`fault`](Self::fault)). Userfaultfd
    /// and protection keys are not modelled.
    ///
    /// Changes nothing: a fault would also grow the stack, and a write
    /// give a private VMA its anon_vma and an anonymous page (use
    /// [`fault`](Self::fault) or [`touch`](Self::touch) to model that).
    ///
    /// ```
    /// use maple_mm::{Access, AddressSpace, Fault, MapFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let a = mm.mmap(0, PAGE_SIZE, Prot::READ, anon, None, 0).unwrap();
    /// assert_eq!(mm.check_access(a, Access::Read), Ok(()));
    /// assert_eq!(mm.check_access(a, Access::Write), Err(Fault::Denied));
    /// assert_eq!(mm.check_access(a + PAGE_SIZE, Access::Read).map_err(|f| f.signal()), Err(11));
    /// ```
    pub fn check_access(&self, addr: u64, access: Access) -> Result<(), Fault> {
        decide(self.faulting_vma(addr), addr, access, self.page_size(), |page| self.is_guard_page(page))
    }

    /// One access at `addr` as Linux's page-fault handler carries it out:
    /// [`check_access`](Self::check_access)'s verdict, after the same
    /// changes the kernel makes.
    ///
    /// * **A stack grows.** An address that no VMA holds, below a
    ///   grows-down mapping (`MAP_GROWSDOWN`; the main thread's
    ///   `[stack]`), extends that mapping down to its page, unless the
    ///   growth is refused: the page is below
    ///   [`mmap_min_addr`](crate::Layout::mmap_min_addr); the VMA below,
    ///   accessible and not growing down itself, ends less than
    ///   [`stack_guard_gap`](crate::Layout::stack_guard_gap) below it; the
    ///   stack would outgrow [`stack_limit`](crate::Layout::stack_limit)
    ///   (`RLIMIT_STACK`), or the VMAs [`as_limit`](crate::Layout::as_limit)
    ///   (`RLIMIT_AS`); or its page offset would fall below zero. A
    ///   refused growth is [`Fault::Unmapped`]. A grown
    ///   stack keeps its growth even if the access then faults (a write
    ///   to a read-only stack), as in Linux.
    /// * **A write** gives a private VMA its anon_vma (as the first write
    ///   fault does; also when the page lies past the end of its file) and
    ///   makes its page an anonymous page, as [`touch`](Self::touch) does.
    ///
    /// Reads and instruction fetches change nothing else (a private page
    /// read before it is written maps the shared zero page). The growth
    /// rules were measured on Linux 6.18: the kernel oracle test touches
    /// and probes the holes below grows-down mappings, the brk oracle
    /// under `RLIMIT_AS`. Not modelled: `RLIMIT_MEMLOCK` and the overcommit
    /// check, which may refuse a growth on a process short of them.
    ///
    /// If an allocation fails, nothing changes and the result is
    /// [`Fault::OutOfMemory`].
    ///
    /// ```
    /// use maple_mm::{Access, AddressSpace, Fault, MapFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let stack = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::GROWSDOWN;
    /// let top = mm.mmap(0, 4 * PAGE_SIZE, Prot::RW, stack, None, 0)?;
    /// // A push two pages below the stack grows it.
    /// assert_eq!(mm.fault(top - 2 * PAGE_SIZE + 8, Access::Write), Ok(()));
    /// assert_eq!(mm.vma_at(top).unwrap().start(), top - 2 * PAGE_SIZE);
    /// assert_eq!(mm.anon_page_count(0, u64::MAX), 1);
    /// // Not below the lowest address a mapping may use.
    /// let low = mm.mmap(0x20000, PAGE_SIZE, Prot::RW, stack | MapFlags::FIXED, None, 0)?;
    /// assert_eq!(mm.fault(low - 0x11000, Access::Read), Err(Fault::Unmapped));
    /// # Ok::<(), maple_mm::Errno>(())
    /// ```
    pub fn fault(&mut self, addr: u64, access: Access) -> Result<(), Fault> {
        let page = self.page_size().align_down(addr);
        // The VMA met gives the verdict and, where no VMA holds `addr`, the
        // growth (the stack's grown range); the growth is worked out once.
        let target = self.faulting_vma(addr);
        let growth = target.filter(|_| self.vma_at(addr).is_none()).map(|v| (v.start, v.end));
        let verdict = decide(target, addr, access, self.page_size(), |page| self.is_guard_page(page));
        // A write fault prepares the anon_vma before it finds the page
        // past the end of the file.
        let anon_vma = access == Access::Write && matches!(verdict, Ok(()) | Err(Fault::PastObject));
        if growth.is_none() && !anon_vma {
            return verdict;
        }
        let window = growth.unwrap_or((page, page + self.page_size().bytes()));
        self.transact(&[window], |mm| {
            if let Some((to, _)) = growth {
                mm.grow_stack(to)?;
            }
            if anon_vma {
                mm.fault_in_at(page)?;
            }
            if access == Access::Write && verdict.is_ok() {
                mm.written(page, page + mm.page_size().bytes())?;
            }
            Ok(Ok(()))
        })
        .map_err(|_| Fault::OutOfMemory)?;
        verdict
    }

    /// The guard pages (`MADV_GUARD_INSTALL`), as runs of whole pages in
    /// address order, adjacent runs joined. They are page-table entries,
    /// not VMAs: `/proc/PID/maps` does not list them, `/proc/PID/pagemap`
    /// flags them (bit 58). Any access to one faults ([`Fault::Guard`]);
    /// unmapping or `MADV_GUARD_REMOVE` removes them, `mremap` moves them
    /// with their pages, and a fork's child inherits them (but in
    /// wipe-on-fork VMAs).
    ///
    /// ```
    /// use maple_mm::{Access, AddressSpace, Advice, Fault, MapFlags, Prot, PAGE_SIZE};
    /// let mut mm = AddressSpace::new();
    /// let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
    /// let stack = mm.mmap(0, 16 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
    /// // The lowest page fences the stack off, without a VMA of its own.
    /// mm.madvise(stack, PAGE_SIZE, Advice::GuardInstall).unwrap();
    /// assert_eq!(mm.vma_count(), 1);
    /// assert_eq!(mm.guard_pages().collect::<Vec<_>>(), [stack..stack + PAGE_SIZE]);
    /// assert_eq!(mm.check_access(stack, Access::Write), Err(Fault::Guard));
    /// assert_eq!(mm.check_access(stack + PAGE_SIZE, Access::Write), Ok(()));
    /// ```
    pub fn guard_pages(&self) -> impl Iterator<Item = core::ops::Range<u64>> + '_ {
        self.guards.iter().map(|(s, e)| s..e)
    }

    /// True if the page holding `addr` is a guard page (see
    /// [`guard_pages`](Self::guard_pages)).
    pub fn is_guard_page(&self, addr: u64) -> bool {
        let page = self.page_size().align_down(addr);
        self.guards.first_in(page, page.saturating_add(self.page_size().bytes())).is_some()
    }
}

//! Typed flags: the arguments of the calls (`Prot`, `MapFlags`,
//! `MremapFlags`, `Advice`) with Linux's bit values, and the flags a VMA
//! keeps (`VmFlags`), which decide merging.

use bitflags::bitflags;

bitflags! {
    /// Memory protection (`PROT_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Prot: u32 {
        /// `PROT_READ`
        const READ = 0x1;
        /// `PROT_WRITE`
        const WRITE = 0x2;
        /// `PROT_EXEC`
        const EXEC = 0x4;
        /// `PROT_SEM` (accepted, no effect).
        const SEM = 0x8;
        /// `PROT_GROWSDOWN` (`mprotect` only): extend the range down to the
        /// start of a grows-down mapping.
        const GROWSDOWN = 0x0100_0000;
        /// `PROT_GROWSUP` (not on x86: `EINVAL`).
        const GROWSUP = 0x0200_0000;
    }
}

impl Prot {
    /// No access (`PROT_NONE`).
    pub const NONE: Prot = Prot::empty();
    /// Read and write.
    pub const RW: Prot = Prot::READ.union(Prot::WRITE);
}

bitflags! {
    /// `mmap` flags (`MAP_*`). Exactly one of `SHARED`, `PRIVATE` or
    /// `SHARED_VALIDATE` must be given.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MapFlags: u32 {
        /// `MAP_SHARED`
        const SHARED = 0x01;
        /// `MAP_PRIVATE`
        const PRIVATE = 0x02;
        /// `MAP_SHARED_VALIDATE`: shared, and unknown flags are an error.
        const SHARED_VALIDATE = 0x03;
        /// `MAP_DROPPABLE` (Linux 6.11+, anonymous only): private memory
        /// the kernel may drop under pressure; never locked, reserved,
        /// dumped or copied to a forked child.
        const DROPPABLE = 0x08;
        /// `MAP_FIXED`: exactly at the address, replacing what is there.
        const FIXED = 0x10;
        /// `MAP_ANONYMOUS`
        const ANONYMOUS = 0x20;
        /// `MAP_32BIT` (x86-64): placed in the second GiB of the address
        /// space, bottom-up, for code that needs 32-bit pointers.
        const BITS32 = 0x40;
        /// `MAP_GROWSDOWN`: a stack that grows down.
        const GROWSDOWN = 0x100;
        /// `MAP_DENYWRITE` (ignored, as by Linux).
        const DENYWRITE = 0x800;
        /// `MAP_EXECUTABLE` (ignored, as by Linux).
        const EXECUTABLE = 0x1000;
        /// `MAP_LOCKED`
        const LOCKED = 0x2000;
        /// `MAP_NORESERVE`: no commit accounting.
        const NORESERVE = 0x4000;
        /// `MAP_POPULATE`: prefault (a private writable mapping is written).
        const POPULATE = 0x8000;
        /// `MAP_NONBLOCK`
        const NONBLOCK = 0x10000;
        /// `MAP_STACK`: marks the mapping no-hugepage.
        const STACK = 0x20000;
        /// `MAP_HUGETLB`
        const HUGETLB = 0x40000;
        /// `MAP_SYNC`
        const SYNC = 0x80000;
        /// `MAP_FIXED_NOREPLACE`: at the address, `EEXIST` if anything is there.
        const FIXED_NOREPLACE = 0x10_0000;
        /// `MAP_UNINITIALIZED` (ignored).
        const UNINITIALIZED = 0x400_0000;
    }
}

bitflags! {
    /// `mremap` flags (`MREMAP_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MremapFlags: u32 {
        /// `MREMAP_MAYMOVE`
        const MAYMOVE = 1;
        /// `MREMAP_FIXED`: move to the given new address.
        const FIXED = 2;
        /// `MREMAP_DONTUNMAP`: move, leaving the old range mapped (empty).
        const DONTUNMAP = 4;
    }
}

bitflags! {
    /// `shmat` flags (`SHM_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct ShmFlags: u32 {
        /// `SHM_RDONLY`: attach read-only (the mapping can never be made
        /// writable).
        const RDONLY = 0o10000;
        /// `SHM_RND`: round an unaligned address down to a page.
        const RND = 0o20000;
        /// `SHM_REMAP`: replace whatever is mapped at the address.
        const REMAP = 0o40000;
        /// `SHM_EXEC`: attach executable too.
        const EXEC = 0o100000;
    }
}

/// `madvise` advice (`MADV_*`). Those that change a mapping's flags split
/// and merge VMAs like `mprotect`; the rest are accepted and change no VMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Advice {
    /// `MADV_NORMAL`
    Normal,
    /// `MADV_RANDOM`
    Random,
    /// `MADV_SEQUENTIAL`
    Sequential,
    /// `MADV_DONTFORK`: the child of a fork does not get this range.
    DontFork,
    /// `MADV_DOFORK`
    DoFork,
    /// `MADV_WIPEONFORK`: the child gets this range zeroed (private anonymous only).
    WipeOnFork,
    /// `MADV_KEEPONFORK`
    KeepOnFork,
    /// `MADV_DONTDUMP`
    DontDump,
    /// `MADV_DODUMP`
    DoDump,
    /// `MADV_HUGEPAGE`
    HugePage,
    /// `MADV_NOHUGEPAGE`
    NoHugePage,
    /// `MADV_POPULATE_WRITE`: prefault for writing (a write of every page).
    PopulateWrite,
    /// `MADV_MERGEABLE`: offer private memory to KSM (same-page merging).
    Mergeable,
    /// `MADV_UNMERGEABLE`
    Unmergeable,
    /// `MADV_GUARD_INSTALL` (Linux 6.13+): every page of the range becomes
    /// a guard page, which faults on any access (see
    /// [`AddressSpace::guard_pages`](crate::AddressSpace::guard_pages)).
    GuardInstall,
    /// `MADV_GUARD_REMOVE`: the range's guard pages are removed.
    GuardRemove,
    /// Any other valid advice (`MADV_DONTNEED`, `MADV_FREE`, `MADV_WILLNEED`,
    /// …), by number: no VMA flag changes (see
    /// [`AddressSpace::madvise`](crate::AddressSpace::madvise) for the
    /// checks Linux makes and the model follows).
    Other(i32),
}

impl Advice {
    /// The advice for a Linux `MADV_*` number; `None` for an invalid one.
    pub fn from_code(code: i32) -> Option<Advice> {
        Some(match code {
            0 => Advice::Normal,
            1 => Advice::Random,
            2 => Advice::Sequential,
            10 => Advice::DontFork,
            11 => Advice::DoFork,
            16 => Advice::DontDump,
            17 => Advice::DoDump,
            14 => Advice::HugePage,
            15 => Advice::NoHugePage,
            18 => Advice::WipeOnFork,
            19 => Advice::KeepOnFork,
            23 => Advice::PopulateWrite,
            12 => Advice::Mergeable,
            13 => Advice::Unmergeable,
            102 => Advice::GuardInstall,
            103 => Advice::GuardRemove,
            // WILLNEED, DONTNEED, FREE, REMOVE, COLD, PAGEOUT,
            // POPULATE_READ, DONTNEED_LOCKED, COLLAPSE, HWPOISON,
            // SOFT_OFFLINE.
            3 | 4 | 8 | 9 | 20 | 21 | 22 | 24 | 25 | 100 | 101 => Advice::Other(code),
            _ => return None,
        })
    }

    /// The Linux `MADV_*` number.
    pub fn code(self) -> i32 {
        match self {
            Advice::Normal => 0,
            Advice::Random => 1,
            Advice::Sequential => 2,
            Advice::DontFork => 10,
            Advice::DoFork => 11,
            Advice::DontDump => 16,
            Advice::DoDump => 17,
            Advice::HugePage => 14,
            Advice::NoHugePage => 15,
            Advice::WipeOnFork => 18,
            Advice::KeepOnFork => 19,
            Advice::PopulateWrite => 23,
            Advice::Mergeable => 12,
            Advice::Unmergeable => 13,
            Advice::GuardInstall => 102,
            Advice::GuardRemove => 103,
            Advice::Other(c) => c,
        }
    }
}

bitflags! {
    /// What Linux keeps in a VMA's `vm_flags` and we model. Two neighbours
    /// merge only if their flags are equal, so flags that
    /// `/proc/PID/maps` does not show (don't-fork, accounting, no-reserve,
    /// hugepage advice, …) still keep VMAs apart, as in Linux.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct VmFlags: u64 {
        /// Readable.
        const READ = 1 << 0;
        /// Writable.
        const WRITE = 1 << 1;
        /// Executable.
        const EXEC = 1 << 2;
        /// Shared (`MAP_SHARED`): writes reach the file or other mappers.
        const SHARED = 1 << 3;
        /// A stack that grows down (`MAP_GROWSDOWN`, `[stack]`).
        const GROWSDOWN = 1 << 8;
        /// Locked in memory (`MAP_LOCKED`, `mlock`).
        const LOCKED = 1 << 13;
        /// Locked as pages are faulted in, not all at once
        /// (`mlock2(MLOCK_ONFAULT)`, `mlockall(MCL_ONFAULT)`); always with
        /// `LOCKED`.
        const LOCKONFAULT = 1 << 19;
        /// `MADV_SEQUENTIAL`
        const SEQ_READ = 1 << 15;
        /// `MADV_RANDOM`
        const RAND_READ = 1 << 16;
        /// Not copied on fork (`MADV_DONTFORK`).
        const DONTCOPY = 1 << 17;
        /// Commit-charged (private writable mappings).
        const ACCOUNT = 1 << 20;
        /// Not charged (`MAP_NORESERVE`).
        const NORESERVE = 1 << 21;
        /// Zeroed in the child of a fork (`MADV_WIPEONFORK`).
        const WIPEONFORK = 1 << 25;
        /// Left out of core dumps (`MADV_DONTDUMP`).
        const DONTDUMP = 1 << 26;
        /// `MADV_HUGEPAGE`
        const HUGEPAGE = 1 << 29;
        /// `MADV_NOHUGEPAGE`, `MAP_STACK`
        const NOHUGEPAGE = 1 << 30;
        /// Offered to KSM (`MADV_MERGEABLE`).
        const MERGEABLE = 1 << 31;
        /// Guard markers may have been installed in it
        /// (`MADV_GUARD_INSTALL`; `smaps` shows `gu`): set on the whole
        /// VMA, never cleared, and sticky: merges ignore it and the merged
        /// VMA keeps it (Linux 6.18's `VM_MAYBE_GUARD`, measured).
        const MAYBE_GUARD = 1 << 41;
        /// Sealed (`mseal`; `smaps` shows `sl`): it cannot be unmapped,
        /// moved, resized or re-protected, nor its data discarded where
        /// it is read-only anonymous memory (`EPERM`).
        const SEALED = 1 << 42;
        /// Droppable (`MAP_DROPPABLE`; `smaps` shows `dp`): its pages may
        /// be dropped under pressure, so it is never locked, dumped, kept
        /// on fork or offered to KSM.
        const DROPPABLE = 1 << 43;
        /// Synchronous page faults (`MAP_SYNC`; `smaps` shows `sf`): kept
        /// by anonymous and shmem mappings, which do not look at it; a
        /// file on a disk file system refuses it but on DAX.
        const SYNC = 1 << 44;
        /// A special mapping the kernel installs (`[vdso]`, `[vvar]`,
        /// `[vsyscall]`, device memory): never merges, cannot be advised
        /// to fork differently.
        const SPECIAL = 1 << 40;
    }
}

impl VmFlags {
    /// Linux's `VM_STICKY`: flags that do not keep neighbours apart, and
    /// that a merged VMA keeps if either side had them.
    pub const STICKY: VmFlags = VmFlags::MAYBE_GUARD;

    /// Linux's `VM_LOCKED_MASK`: the lock bits.
    pub const LOCKED_MASK: VmFlags = VmFlags::LOCKED.union(VmFlags::LOCKONFAULT);

    /// The access bits.
    pub const ACCESS: VmFlags = VmFlags::READ.union(VmFlags::WRITE).union(VmFlags::EXEC);

    /// Private and writable: a populating fault writes such a mapping
    /// (breaking copy-on-write), which gives it an anon_vma; any other is
    /// only read.
    pub(crate) fn private_writable(self) -> bool {
        self & (VmFlags::WRITE | VmFlags::SHARED) == VmFlags::WRITE
    }

    /// Locked all at once (not on fault): Linux populates such a mapping
    /// when it is locked, grows or becomes writable.
    pub(crate) fn locked_now(self) -> bool {
        self & VmFlags::LOCKED_MASK == VmFlags::LOCKED
    }

    /// The access bits for a protection.
    pub fn from_prot(prot: Prot) -> VmFlags {
        let mut f = VmFlags::empty();
        f.set(VmFlags::READ, prot.contains(Prot::READ));
        f.set(VmFlags::WRITE, prot.contains(Prot::WRITE));
        f.set(VmFlags::EXEC, prot.contains(Prot::EXEC));
        f
    }

    /// The protection these flags grant.
    pub fn prot(self) -> Prot {
        let mut p = Prot::NONE;
        p.set(Prot::READ, self.contains(VmFlags::READ));
        p.set(Prot::WRITE, self.contains(VmFlags::WRITE));
        p.set(Prot::EXEC, self.contains(VmFlags::EXEC));
        p
    }
}

bitflags! {
    /// `mlock2` flags (`MLOCK_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MlockFlags: u32 {
        /// `MLOCK_ONFAULT`: lock pages as they are faulted in, populating
        /// nothing now.
        const ONFAULT = 1;
    }
}

bitflags! {
    /// `mlockall` flags (`MCL_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct MclFlags: u32 {
        /// `MCL_CURRENT`: lock every mapping there is.
        const CURRENT = 1;
        /// `MCL_FUTURE`: lock every mapping made from now on.
        const FUTURE = 2;
        /// `MCL_ONFAULT`: with either, lock pages as they are faulted in.
        const ONFAULT = 4;
    }
}

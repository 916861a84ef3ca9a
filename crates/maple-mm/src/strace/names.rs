//! Symbolic names strace prints for flags and constants (x86-64 values).

pub(crate) const PROT: &[(&str, u64)] = &[
    ("PROT_NONE", 0),
    ("PROT_READ", 0x1),
    ("PROT_WRITE", 0x2),
    ("PROT_EXEC", 0x4),
    ("PROT_SEM", 0x8),
    ("PROT_GROWSDOWN", 0x0100_0000),
    ("PROT_GROWSUP", 0x0200_0000),
];

pub(crate) const MAP: &[(&str, u64)] = &[
    ("MAP_SHARED", 0x01),
    ("MAP_PRIVATE", 0x02),
    ("MAP_SHARED_VALIDATE", 0x03),
    ("MAP_DROPPABLE", 0x08),
    ("MAP_FIXED", 0x10),
    ("MAP_ANONYMOUS", 0x20),
    ("MAP_ANON", 0x20),
    ("MAP_32BIT", 0x40),
    ("MAP_ABOVE4G", 0x80),
    ("MAP_GROWSDOWN", 0x100),
    ("MAP_DENYWRITE", 0x800),
    ("MAP_EXECUTABLE", 0x1000),
    ("MAP_LOCKED", 0x2000),
    ("MAP_NORESERVE", 0x4000),
    ("MAP_POPULATE", 0x8000),
    ("MAP_NONBLOCK", 0x10000),
    ("MAP_STACK", 0x20000),
    ("MAP_HUGETLB", 0x40000),
    ("MAP_SYNC", 0x80000),
    ("MAP_FIXED_NOREPLACE", 0x10_0000),
    ("MAP_UNINITIALIZED", 0x400_0000),
    ("MAP_FILE", 0),
    // A huge page size is printed `21<<MAP_HUGE_SHIFT`.
    ("MAP_HUGE_SHIFT", 26),
    ("MAP_HUGE_2MB", 21 << 26),
    ("MAP_HUGE_1GB", 30 << 26),
];

pub(crate) const MREMAP: &[(&str, u64)] = &[("MREMAP_MAYMOVE", 1), ("MREMAP_FIXED", 2), ("MREMAP_DONTUNMAP", 4)];

pub(crate) const MLOCK: &[(&str, u64)] = &[("MLOCK_ONFAULT", 1)];

pub(crate) const MPOL: &[(&str, u64)] = &[
    ("MPOL_DEFAULT", 0),
    ("MPOL_PREFERRED", 1),
    ("MPOL_BIND", 2),
    ("MPOL_INTERLEAVE", 3),
    ("MPOL_LOCAL", 4),
    ("MPOL_PREFERRED_MANY", 5),
    ("MPOL_WEIGHTED_INTERLEAVE", 6),
    ("MPOL_F_STATIC_NODES", 0x8000),
    ("MPOL_F_RELATIVE_NODES", 0x4000),
    ("MPOL_F_NUMA_BALANCING", 0x2000),
];

pub(crate) const MPOL_MF: &[(&str, u64)] = &[("MPOL_MF_STRICT", 1), ("MPOL_MF_MOVE", 2), ("MPOL_MF_MOVE_ALL", 4)];

pub(crate) const SHM: &[(&str, u64)] =
    &[("SHM_RDONLY", 0o10000), ("SHM_RND", 0o20000), ("SHM_REMAP", 0o40000), ("SHM_EXEC", 0o100000)];

/// `shmget` keys (and its flags, which the replay does not need).
pub(crate) const IPC: &[(&str, u64)] = &[("IPC_PRIVATE", 0)];

pub(crate) const MCL: &[(&str, u64)] = &[("MCL_CURRENT", 1), ("MCL_FUTURE", 2), ("MCL_ONFAULT", 4)];

pub(crate) const MADV: &[(&str, u64)] = &[
    ("MADV_NORMAL", 0),
    ("MADV_RANDOM", 1),
    ("MADV_SEQUENTIAL", 2),
    ("MADV_WILLNEED", 3),
    ("MADV_DONTNEED", 4),
    ("MADV_FREE", 8),
    ("MADV_REMOVE", 9),
    ("MADV_DONTFORK", 10),
    ("MADV_DOFORK", 11),
    ("MADV_MERGEABLE", 12),
    ("MADV_UNMERGEABLE", 13),
    ("MADV_HUGEPAGE", 14),
    ("MADV_NOHUGEPAGE", 15),
    ("MADV_DONTDUMP", 16),
    ("MADV_DODUMP", 17),
    ("MADV_WIPEONFORK", 18),
    ("MADV_KEEPONFORK", 19),
    ("MADV_COLD", 20),
    ("MADV_PAGEOUT", 21),
    ("MADV_POPULATE_READ", 22),
    ("MADV_POPULATE_WRITE", 23),
    ("MADV_DONTNEED_LOCKED", 24),
    ("MADV_COLLAPSE", 25),
    ("MADV_HWPOISON", 100),
    ("MADV_SOFT_OFFLINE", 101),
    ("MADV_GUARD_INSTALL", 102),
    ("MADV_GUARD_REMOVE", 103),
];

pub(crate) const CLONE_VM: u64 = 0x100;
pub(crate) const CLONE_FILES: u64 = 0x400;
pub(crate) const CLONE_VFORK: u64 = 0x4000;
pub(crate) const CLONE_THREAD: u64 = 0x10000;

pub(crate) const CLONE: &[(&str, u64)] = &[
    ("CSIGNAL", 0xff),
    ("CLONE_VM", CLONE_VM),
    ("CLONE_FS", 0x200),
    ("CLONE_FILES", CLONE_FILES),
    ("CLONE_SIGHAND", 0x800),
    ("CLONE_PIDFD", 0x1000),
    ("CLONE_PTRACE", 0x2000),
    ("CLONE_VFORK", CLONE_VFORK),
    ("CLONE_PARENT", 0x8000),
    ("CLONE_THREAD", CLONE_THREAD),
    ("CLONE_NEWNS", 0x20000),
    ("CLONE_SYSVSEM", 0x40000),
    ("CLONE_SETTLS", 0x80000),
    ("CLONE_PARENT_SETTID", 0x10_0000),
    ("CLONE_CHILD_CLEARTID", 0x20_0000),
    ("CLONE_DETACHED", 0x40_0000),
    ("CLONE_UNTRACED", 0x80_0000),
    ("CLONE_CHILD_SETTID", 0x100_0000),
    ("CLONE_NEWCGROUP", 0x200_0000),
    ("CLONE_NEWUTS", 0x400_0000),
    ("CLONE_NEWIPC", 0x800_0000),
    ("CLONE_NEWUSER", 0x1000_0000),
    ("CLONE_NEWPID", 0x2000_0000),
    ("CLONE_NEWNET", 0x4000_0000),
    ("CLONE_IO", 0x8000_0000),
    ("CLONE_CLEAR_SIGHAND", 0x1_0000_0000),
    ("CLONE_INTO_CGROUP", 0x2_0000_0000),
    // Exit signals strace prints inside the flags.
    ("SIGCHLD", 17),
];

pub(crate) const PR_SET_VMA: u64 = 0x53564d41;
pub(crate) const PRCTL: &[(&str, u64)] = &[("PR_SET_VMA", PR_SET_VMA), ("PR_SET_VMA_ANON_NAME", 0)];

//! Comparing maps files page by page (the replay tests), and the flags
//! smaps shows that maps lines do not (the kernel oracles).
#![allow(dead_code)] // each test uses part of it

pub mod calls;

use maple_mm::VmFlags;

/// Mappings the kernel makes without system calls: left out of every
/// comparison.
pub fn kernel_made(line: &str) -> bool {
    ["[stack]", "[vvar]", "[vvar_vclock]", "[vdso]", "[vsyscall]"].iter().any(|l| line.ends_with(l))
}

/// (start, end, "rwxp") of every compared VMA.
pub fn ranges(maps: &str) -> Vec<(u64, u64, String)> {
    maps.lines()
        .filter(|l| !kernel_made(l))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (s, e) = f[0].split_once('-').unwrap();
            (u64::from_str_radix(s, 16).unwrap(), u64::from_str_radix(e, 16).unwrap(), f[1].to_string())
        })
        .collect()
}

/// The address ranges whose pages differ (mapped or not, rwx,
/// private/shared).
pub fn page_diff(want: &str, got: &str) -> Vec<String> {
    let (a, b) = (ranges(want), ranges(got));
    let mut cuts: Vec<u64> = a.iter().chain(&b).flat_map(|r| [r.0, r.1]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let at = |v: &[(u64, u64, String)], x: u64| v.iter().find(|r| r.0 <= x && x < r.1).map(|r| r.2.clone());
    cuts.windows(2)
        .filter_map(|w| {
            let (pa, pb) = (at(&a, w[0]), at(&b, w[0]));
            (pa != pb).then(|| format!("{:x}-{:x}: want {pa:?}, got {pb:?}", w[0], w[1]))
        })
        .collect()
}

/// How many of `want`'s compared lines appear in `got` exactly, of how many.
pub fn matching_lines(want: &str, got: &str) -> (usize, usize) {
    let w: Vec<&str> = want.lines().filter(|l| !kernel_made(l)).collect();
    let g: Vec<&str> = got.lines().collect();
    (w.iter().filter(|l| g.contains(l)).count(), w.len())
}

/// The flags compared besides the maps lines, by the names `smaps` gives
/// them: every flag the model keeps that a maps line does not show.
pub const HIDDEN: [(&str, VmFlags); 17] = [
    ("gd", VmFlags::GROWSDOWN),
    ("lo", VmFlags::LOCKED),
    ("lf", VmFlags::LOCKONFAULT),
    ("sr", VmFlags::SEQ_READ),
    ("rr", VmFlags::RAND_READ),
    ("dc", VmFlags::DONTCOPY),
    ("ac", VmFlags::ACCOUNT),
    ("nr", VmFlags::NORESERVE),
    ("wf", VmFlags::WIPEONFORK),
    ("dd", VmFlags::DONTDUMP),
    ("hg", VmFlags::HUGEPAGE),
    ("nh", VmFlags::NOHUGEPAGE),
    ("mg", VmFlags::MERGEABLE),
    ("sl", VmFlags::SEALED),
    ("gu", VmFlags::MAYBE_GUARD),
    ("dp", VmFlags::DROPPABLE),
    ("sf", VmFlags::SYNC),
];

/// The hidden flags among an smaps `VmFlags:` value's names.
pub fn hidden_flags(shown: &str) -> VmFlags {
    let shown: Vec<&str> = shown.split_whitespace().collect();
    HIDDEN.iter().filter(|(n, _)| shown.contains(n)).fold(VmFlags::empty(), |a, (_, f)| a | *f)
}

/// The names of the hidden flags in `flags`, in one order for both sides.
pub fn hidden_names(flags: VmFlags) -> String {
    let names: Vec<&str> = HIDDEN.iter().filter(|(_, f)| flags.contains(*f)).map(|(n, _)| *n).collect();
    names.join(" ")
}

/// Normalises a maps line: the inode of shared anonymous memory differs.
pub fn normalise(line: &str) -> String {
    if line.ends_with("/dev/zero (deleted)") {
        let f: Vec<&str> = line.split_whitespace().collect();
        return format!("{} {} {} {} SHM /dev/zero (deleted)", f[0], f[1], f[2], f[3]);
    }
    // A System V segment's inode is its id (the kernel's to choose).
    if line.ends_with("/SYSV00000000 (deleted)") {
        let f: Vec<&str> = line.split_whitespace().collect();
        return format!("{} {} {} {} SHM /SYSV00000000 (deleted)", f[0], f[1], f[2], f[3]);
    }
    line.trim_end().to_string()
}

/// Whether `mlockall(MCL_CURRENT)` can lock the whole of a test process:
/// with `CAP_IPC_LOCK`, or without a locked-memory limit. Elsewhere Linux
/// says `ENOMEM` past the limit (8 MiB by default), which a model that
/// knows only part of the process cannot tell.
#[cfg(target_os = "linux")]
pub fn can_lock_all() -> bool {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: `getrlimit` writes the limit into the struct we pass, which
    // we own.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
    has_capability(CAP_IPC_LOCK) || read && lim.rlim_cur == libc::RLIM_INFINITY
}

/// `CAP_IPC_LOCK`: locks past `RLIMIT_MEMLOCK`.
pub const CAP_IPC_LOCK: u32 = 14;
/// `CAP_SYS_NICE`: `MPOL_MF_MOVE_ALL`.
pub const CAP_SYS_NICE: u32 = 23;

/// Whether this process holds the capability numbered `bit` (its
/// `CapEff` in `/proc/self/status`), which the model assumes of the
/// process it models.
pub fn has_capability(bit: u32) -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps =
        status.lines().find_map(|l| l.strip_prefix("CapEff:")).and_then(|c| u64::from_str_radix(c.trim(), 16).ok());
    caps.is_some_and(|c| c >> bit & 1 == 1)
}

/// The layout the page-size tests run with for pages of `P` bytes:
/// x86-64 for 4 KiB, arm64 for 16 and 64 KiB.
pub fn layout_for<const P: u64>() -> maple_mm::Layout {
    match maple_mm::PageSize::try_from(P).expect("a page size the model knows") {
        maple_mm::PageSize::K4 => maple_mm::Layout::x86_64(),
        page => maple_mm::Layout::arm64(page),
    }
}

/// An empty space of [`layout_for`]'s layout.
pub fn space<const P: u64>() -> maple_mm::AddressSpace {
    maple_mm::AddressSpace::with_layout(layout_for::<P>())
}

/// Every layout modelled: x86-64 with 4- and 5-level page tables, arm64
/// with each page size.
pub fn layouts() -> Vec<maple_mm::Layout> {
    use maple_mm::{Layout, PageSize};
    let mut all = vec![Layout::x86_64(), Layout::x86_64_la57()];
    all.extend(PageSize::ALL.map(Layout::arm64));
    all
}

/// Runs a test written for pages of `P` bytes with each page size.
#[macro_export]
macro_rules! each_page {
    ($test:ident) => {{
        $test::<4096>();
        $test::<16384>();
        $test::<65536>();
    }};
}

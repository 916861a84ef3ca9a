//! Linux is the oracle: random operation sequences run on this machine's
//! kernel and on an `AddressSpace` (twice: on the maple tree and on the
//! old design's red-black tree, list and cache), and the VMA lists inside
//! a reserved window must agree line for line after every operation, with
//! the same error numbers.
//!
//! This file has its own `main`. Run normally, it generates sequences and
//! starts itself again as a child process (`MAPLE_ORACLE_CHILD=1`) that
//! makes the real system calls inside a window at a fixed address, far from
//! anything else in the process, and reports `/proc/self/maps` (with the
//! hidden flags smaps shows and each VMA's count of anonymous pages), the
//! private anonymous VMAs' memory policies (`/proc/self/numa_maps`), the
//! guard pages and the anonymous pages (from `/proc/self/pagemap`: pages
//! in swap, or present and neither a file's page nor the zero page, which
//! takes page frame numbers, shown to `CAP_SYS_ADMIN` only; without them
//! only the counts are compared) after every operation. The child pins
//! itself to one CPU (see `run`). A divergence prints the
//! whole sequence, ready to paste into a unit test. A kernel without
//! guard regions in pagemap (before 6.15) skips the test, saying so.
//!
//! Where Linux and the model must differ, the test says so: shared
//! anonymous memory gets a fresh inode number in each (compared without
//! it); anonymous names are not tried (`CONFIG_ANON_VMA_NAME` is off on
//! these machines); `brk` is not in the window (`brk_oracle.rs` compares it
//! around the process's own heap), nor is the process's stack; the
//! machine is assumed to have memory to spare (under pressure Linux may
//! drop lazily freeable pages, or swap, between two calls).
//!
//! The child writes (`touch`) through `read(2)` from `/dev/zero`, so that a
//! write the model wrongly allows comes back as `EFAULT` rather than as a
//! signal that kills the child; the generator only makes writes the model
//! allows (a failed `touch` changes nothing in the model, while Linux
//! keeps the pages written before the fault), but the sequences in
//! `KNOWN` may hold others.
//!
//! `MAPLE_ORACLE_SEQS=N` changes the number of sequences (default 2000,
//! plus 3 fresh seeds, plus those in `KNOWN`); `MAPLE_ORACLE_SEED=S` runs
//! one seed, `MAPLE_ORACLE_OPS="op; op; ..."` one written-out sequence; with `MAPLE_ORACLE_TRACE=1` every operation's result and the
//! kernel's window lines after it are printed.

use std::{
    fmt,
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    sync::Arc,
};

use maple_mm::{
    rbtree::RbTree, Access, AddressSpace, Advice, Errno, Fault, Layout, MapFlags, MappedFile, MbindFlags, MclFlags,
    MemPolicy, MlockFlags, MremapFlags, Prot, ShmFlags, ShmSegment, VmFlags, VmaRef, VmaStore, PAGE_SIZE,
};
use rand::{rngs::SmallRng, Rng, SeedableRng};

mod common;

use common::{can_lock_all, has_capability, hidden_flags, hidden_names, normalise, CAP_SYS_NICE};

/// The window: far below where Linux places mappings and far above the
/// program, so nothing else ever lands next to it.
const BASE: u64 = 0x1000_0000_0000;
/// Window size in pages.
const W: u64 = 48;
/// Pages in the test file, the last one partly: mappings may reach past
/// its end (where a write raises `SIGBUS`).
const FILE_PAGES: u64 = 64;
/// The advice `madvise` is given: every valid code, some twice, and one
/// invalid; but the two that poison pages (`MADV_HWPOISON`,
/// `MADV_SOFT_OFFLINE`), and `MADV_COLLAPSE`, whose checks (a huge page
/// must fit in the VMA) the model does not make: in this window it is
/// always `EINVAL`.
const ADVICE: &[i32] = &[
    0, 1, 2, 3, 4, 4, 8, 9, 10, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 23, 24, 102, 102, 102, 103,
    103, 99,
];

/// The test file's size in bytes.
const FILE_BYTES: u64 = FILE_PAGES * PAGE_SIZE - 100;

/// Sequences that once diverged, run every time before the random ones
/// (ops as `Op`'s `Display` writes them).
const KNOWN: &[&str] = &[
    // MAP_HUGETLB: a regular file refuses it, a size the machine lacks is
    // invalid, a fixed address off a huge page too; with no huge page
    // reserved every other mapping fails, and a fixed one over a mapping
    // leaves a hole.
    "map 10 4 3 fixed 0 anon 0 0; map 10 4 3 fixed 0 file 0 262144; map 2 4 3 hint 0 anon 0 262144; \
     map 10 4 3 fixed 0 anon 0 1409548288; map 10 4 3 fixed 1 anon 0 2013528064; \
     map 10 4 3 fixed 0 anon 0 1476657152; map 10 4 3 fixed 0 filero 0 1409548288; map 0 4 3 fixed 0 anon 0 262144",
    // A zero old length duplicates a shared mapping from the offset of
    // the old address on, past the VMA's end if asked: not a
    // private one, not without MREMAP_MAYMOVE, not with DONTUNMAP, not a
    // sealed one; over the old mapping itself too.
    "map 10 4 3 fixed 1 anon 0 0; remap 12 0 6 3 30; touch 30 2; remap 10 0 2 0 30; remap 10 0 2 7 30; \
     remap 11 0 2 1 0",
    "map 10 4 3 fixed 0 anon 0 0; remap 10 0 2 3 30; map 20 4 3 fixed 1 anon 0 8192; remap 20 0 2 3 30; \
     remap 20 0 4 3 22; seal 20 1 0; remap 20 0 1 3 40",
    "map 10 4 1 fixed 1 filero 0 0; remap 11 0 2 3 30; protect 30 2 3; shmat 20 4 16384 0; remap 21 0 2 3 40; \
     shmdt 20; shmdt 39",
    // A duplicate onto the old address unmaps the target, the mapping to
    // duplicate with it, and fails (seed 8,038).
    "map 10 4 3 fixed 1 anon 0 0; remap 11 0 5 3 11; map 20 2 3 fixed 1 anon 0 0; seal 22 1 0; remap 20 0 4 3 20",
    // Memory policies: mbind cuts VMAs and a policy equal to
    // a neighbour's merges back; nodes without memory are dropped, but
    // the nodes as given still tell policies apart with static or
    // relative nodes and under NUMA balancing (seed 12,198); relative
    // nodes fold onto those with memory; holes fail it but for the
    // default policy, unless the range is wholly one.
    "map 10 4 3 fixed 0 anon 0 0; mbind 11 2 2 1 0; mbind 10 4 0 0 0; mbind 11 2 1 3 0; mbind 12 2 1 1 0; \
     mbind 10 1 4 0 0; mbind 9 1 4 0 0; touch 9 2",
    "mbind 9 10 8194 1 0; mbind 10 10 8194 3 2; mbind 20 4 2 1 0; mbind 21 4 2 3 0; mbind 30 2 32770 2 0; \
     mbind 31 2 16387 2 0; mbind 32 2 3 1 0; mbind 30 4 8195 1 0",
    "map 10 4 3 fixed 0 anon 0 0; unmap 12 1 0; mbind 10 4 2 1 0; mbind 10 4 0 0 0; unmap 20 4 0; \
     mbind 20 4 0 0 0; mbind 10 0 2 0 0; mbind 11 1 7 1 0; mbind 11 1 2 1 8",
    // System V segments. Their pieces merge only where no
    // whole piece is deleted: a lock's split stays split; an mprotect's
    // partial piece joins its neighbour; a piece moved back between two
    // others joins the one before it only.
    "shmat 10 4 16384 0; lock 11 2 0; lockall 1",
    "shmat 21 7 16384 0; protect 24 4 7; protect 17 10 5",
    "shmat 10 6 16384 0; remap 12 2 2 3 30; remap 30 2 2 3 12; protect 10 6 1; protect 10 6 3",
    // A move of several VMAs stops at a segment (what moved before stays
    // moved), before its seal is looked at.
    "map 10 2 3 fixed 0 anon 0 0; shmat 12 2 16384 0; remap 10 4 4 3 30",
    "shmat 12 2 16384 0; map 14 2 3 fixed 0 anon 0 0; seal 12 1 0; remap 12 4 4 3 30",
    // A detach finds the attach's pieces at their offsets; attaches check
    // their address (rounded with SHM_RND), and a read-only one never
    // becomes writable.
    "shmat 10 6 16384 0; protect 12 2 1; unmap 10 1 0; shmdt 10; shmdt 11",
    "shmat 10 4 16384 0; seal 11 1 0; shmdt 10; shmdt 11",
    "unmap 0 48 0; shmat 10 3 0 5; shmat 10 3 8192 5; shmat 20 2 4096 0; protect 20 2 3; shmdt 20; \
     shmat 30 2 32768 0; shmat 40 2 0 0; shmat 40 2 16384 0; remap 40 2 4 1 0; fork; shmdt 40",
    // Stacks grow: a write (`touch`), a read and a probe in
    // the hole below a grows-down mapping grow it down to the page; the
    // window's reservation below is inaccessible and fences nothing.
    "map 20 4 3 fixed 0 anon 0 256; unmap 10 10 0; touch 16 2; probe 13 1; fault 14 0; probe 11 0; fault 11 1",
    // A readable mapping within the guard gap refuses it, an inaccessible
    // one or a grows-down one does not; a don't-fork one is not in the
    // probe's fork.
    "map 20 4 3 fixed 0 anon 0 256; unmap 10 10 0; map 5 1 1 fixed 0 anon 0 0; probe 12 0; fault 12 1; \
     advise 5 1 10; probe 13 1; fault 13 0; protect 5 1 0; fault 12 1; map 3 2 3 fixed 0 anon 0 256; fault 9 1; \
     map 6 1 3 fixed 0 anon 0 0; fault 8 1",
    // A read-only stack grows for a write that then faults; a locked
    // stack grows by the faulting page alone; `PROT_GROWSDOWN` reaches the
    // grown start.
    "map 20 4 1 fixed 0 anon 0 256; unmap 12 8 0; fault 14 1; probe 13 1; probe 13 0; fault 12 1",
    "map 20 4 3 fixed 0 anon 0 8448; unmap 10 10 0; fault 15 1; fault 12 0; touch 11 2",
    "map 20 4 3 fixed 0 anon 0 256; unmap 10 10 0; fault 16 1; protect 18 1 16777217; fault 13 0",
    // Two stacks grown by one write across both holes (the lower one, a
    // stack, fences nothing); a stack cut by an unmap grows again.
    "map 30 2 3 fixed 0 anon 0 256; map 24 2 3 fixed 0 anon 0 256; unmap 14 10 0; unmap 26 4 0; touch 20 12; \
     unmap 20 2 0; fault 21 1; probe 20 0",
    // A read that grows a stack prepares its anon_vma: it keeps apart
    // from a separately written stack it grows against.
    "map 20 4 3 fixed 0 anon 0 256; unmap 10 10 0; fault 18 0; map 12 2 3 fixed 0 anon 0 256; touch 12 1; \
     fault 14 0; protect 12 8 1",
    // Populating and locking calls over the hole do not grow the stack.
    "map 20 4 3 fixed 0 anon 0 256; unmap 10 10 0; advise 15 6 23; advise 15 6 22; lock 15 6 0; lock 15 6 1; \
     fault 19 0; lock 18 6 0",
    // The anon_vma comes from the stack's neighbours before it grows, not
    // from the written stack it grows against.
    "map 20 4 3 fixed 0 anon 0 256; unmap 10 10 0; map 12 2 3 fixed 0 anon 0 256; touch 12 1; fault 14 0; \
     protect 12 8 1",
    // Anonymous pages, compared with smaps's `Anonymous`:
    // writes make them, `MADV_DONTNEED` throws them away, `MADV_FREE`
    // makes them lazily freeable until written again, `MADV_PAGEOUT` then
    // throws those away, a guard install too; a fork's child gets them.
    "map 10 8 3 fixed 0 anon 0 0; touch 10 5; advise 11 1 4; advise 12 2 8; touch 13 1; advise 10 8 21; \
     advise 10 1 102; fork; advise 14 1 8; advise 14 1 20; advise 14 1 21",
    // A written page of a private file mapping is anonymous (a copy), a
    // populating read makes none, a populating write one per page; writes
    // to shared memory make none.
    "map 20 6 3 fixed 0 file 0 0; touch 21 2; advise 20 6 22; advise 20 6 23; map 30 4 3 fixed 1 anon 0 0; \
     touch 30 2; map 36 4 3 fixed 1 file 0 0; touch 36 1",
    // Populating writes: `MAP_POPULATE`, `MAP_LOCKED` (but read-only:
    // reads), a locked mapping's growth, a locked mapping made writable.
    "map 10 4 3 fixed 0 anon 0 32768; map 20 4 1 fixed 0 anon 0 8192; map 30 4 3 fixed 0 anon 0 8192; \
     remap 30 4 6 0 0; protect 21 2 3; lock 10 2 0; map 40 2 3 fixed 0 file 63 8192",
    // `mremap` moves them (`MREMAP_DONTUNMAP` too); a fork's child gets
    // none in a wipe-on-fork VMA.
    "map 10 4 3 fixed 0 anon 0 0; touch 10 4; advise 12 2 18; fork; remap 10 2 2 3 30; remap 12 2 2 7 40; fork",
    // Guard pages, compared with pagemap: a load or store
    // there raises SIGSEGV; populating stops there with EFAULT, `mlock`
    // with ENOMEM (the lock kept); `MADV_GUARD_REMOVE` removes them.
    "map 10 6 3 fixed 0 anon 0 0; advise 12 2 102; probe 12 0; probe 13 1; probe 14 1; touch 14 2; \
     advise 10 6 23; lock 10 6 0; unlock 10 6; advise 12 1 103; probe 12 1; advise 10 6 22; lock 10 6 1",
    // They move with their pages (`MREMAP_DONTUNMAP` too), go with a
    // shrink's tail and with an unmap, and are installed on what is mapped
    // when the range has holes.
    "map 10 6 3 fixed 0 anon 0 0; advise 11 1 102; advise 15 1 102; remap 10 3 3 3 30; remap 13 3 2 0 0; \
     remap 30 3 3 7 40; unmap 41 1 0; map 12 4 3 fixed 0 anon 0 0; advise 10 2 102; advise 10 10 102",
    // Seed 359 of the first sweep (cut down): a fork's child gets no guard
    // pages in a wipe-on-fork VMA (its page tables are not copied), nor
    // in a don't-fork one; the model had kept them.
    "map 10 6 3 fixed 0 anon 0 0; advise 10 2 18; advise 14 2 10; advise 10 6 102; fork; advise 10 6 19; fork; \
     forkmap 11 1 3",
    // Sequence seed 62213 of a million: a shared anonymous mapping moved
    // and grown by `mremap` reaches past its shmem object, whose size is
    // that of the first `mmap`; the write to page 31 raised SIGBUS in the
    // child while the model let it through.
    "unmap 44 2 0; map 9 11 3 fixed 1 anon 0 0; protect 2 2 1; advise 12 9 99; touch 13 3; remap 11 5 3 3 11; \
     map 35 4 3 fixed 0 file 41 256; unmap 35 8 0; remap 16 4 11 3 27; advise 37 8 16; protect 47 1 3; \
     unmap 25 3 0; touch 29 8; advise 27 11 23; advise 27 4 23",
    // Found once the generator gave every advice and
    // `MAP_LOCKED` (each cut down by hand to what shows it):
    // `MADV_MERGEABLE` sets a flag (KSM is on), so it cuts and merges.
    "map 10 6 3 fixed 0 anon 0 0; advise 12 2 12; advise 10 6 13",
    // Locked memory refuses advice that drops or reclaims pages, and
    // guard markers.
    "map 10 4 3 fixed 0 anon 0 8192; advise 10 4 4; advise 10 4 24; advise 10 4 20; advise 10 4 21; \
     advise 10 4 8; advise 10 4 102; advise 10 4 103",
    // `MADV_FREE` takes private anonymous memory only; `MADV_REMOVE` a
    // file mapped shared and writable.
    "map 10 4 3 fixed 0 file 0 0; advise 10 4 8; advise 10 4 9; map 14 2 3 fixed 1 file 4 0; advise 14 2 9; \
     map 16 2 1 fixed 1 filero 6 0; advise 16 2 9; map 20 2 3 fixed 0 anon 0 0; advise 20 2 9; advise 20 2 8",
    // `MADV_POPULATE_READ` needs read permission.
    "protect 10 2 3; advise 9 3 22; advise 10 2 22",
    // `MADV_GUARD_INSTALL` gives the VMA an anon_vma: moved, it keeps its
    // page offset and does not merge with its new neighbour.
    "map 10 2 3 fixed 0 anon 0 0; advise 10 2 102; map 22 2 3 fixed 0 anon 0 0; remap 10 2 2 3 20",
    // Locks are not inherited: the child's new mapping merges with them.
    "map 10 4 0 fixed 0 anon 0 8192; forkmap 14 2 0",
    // An unwritten VMA moved with `MREMAP_DONTUNMAP` to just before
    // itself merges with its own copy and stays one VMA.
    "map 10 1 1 fixed 0 anon 0 0; remap 10 1 1 7 9",
    // A locked private mapping made writable is written at once, so it
    // keeps its charge when made read-only again.
    "map 5 10 1 fixed 0 anon 0 8192; protect 11 4 3; protect 7 8 1",
    // Sequence seed 23,786 of a million (cut down): Linux changes and
    // writes one VMA at a time, so a locked piece made writable gets its
    // own anon_vma before it could merge with a written neighbour.
    "map 40 6 1 fixed 0 anon 0 8192; protect 41 5 0; protect 42 1 3; protect 42 4 0; protect 37 7 3",
    // Sequence seed 89,373 of a million (cut down): guard markers give
    // an anon_vma to anonymous VMAs only; two file VMAs that got none
    // still merge.
    "map 7 4 1 fixed 0 file 29 0; map 11 5 3 fixed 0 file 33 0; advise 10 6 102; protect 3 11 3",
    // Sequence seed 1,643 (cut down): each VMA of a multi-VMA move is
    // merged at its target before the next moves, so an unwritten copy
    // merges with its own source, which DONTUNMAP then leaves whole.
    "map 38 9 0 fixed 0 anon 0 8192; remap 43 5 5 7 34",
    // The lock calls: a lock cuts, populates (a written VMA
    // keeps its page offset when moved, so it does not merge at its
    // target) and fails on what it cannot fault in, keeping the lock.
    "map 10 4 3 fixed 0 anon 0 0; lock 10 2 0; unlock 10 4; map 24 2 3 fixed 0 anon 0 0; remap 10 4 4 3 20; \
     lockall 3; map 30 2 3 fixed 0 anon 0 0; unlockall; map 32 2 3 fixed 0 anon 0 0; remap 30 4 4 3 40",
    "lock 10 2 0; map 20 4 3 fixed 0 anon 0 0; lock 21 2 0; unlock 20 4; lock 30 30 0",
    "map 10 4 3 fixed 0 anon 0 0; lock 10 4 1; protect 11 1 1; protect 11 1 3; map 14 2 3 fixed 0 anon 0 0; \
     lock 10 6 0",
    "lockall 2; map 10 2 3 fixed 0 anon 0 0; map 12 2 3 fixed 0 anon 0 0; forkmap 14 2 3; lockall 5; \
     map 20 2 3 fixed 0 anon 0 0; unlockall; map 22 2 3 fixed 0 anon 0 0",
    "map 10 4 3 fixed 0 anon 0 0; lockall 1; unmap 12 1 0; lockall 4; lockall 0; map 13 1 3 fixed 0 anon 0 0",
    // Guard markers mark the whole VMA (`gu` in smaps), a sticky flag that
    // neither keeps VMAs apart nor stops a fault reusing a neighbour's
    // anon_vma (measured: the two written pieces merge).
    "map 12 2 3 fixed 0 anon 0 16384; touch 12 1; map 10 2 1 fixed 0 anon 0 16384; advise 10 1 102; protect 10 2 3; \
     map 14 2 3 fixed 0 anon 0 16384",
    // Sequence seed 597,896 of a million (cut down): a write fault past
    // the end of a file prepares the anon_vma before it fails, so two
    // populated private mappings past the end keep apart.
    "map 12 2 3 fixed 0 file 72 32768; advise 12 2 1; map 10 2 3 fixed 0 file 70 32768; advise 12 2 0",
    // Seals: mseal's errors and cuts; munmap and mmap over a
    // seal fail, but the first VMA stays cut where the unmap began;
    // mprotect changes what comes before the seal.
    "map 10 8 3 fixed 0 anon 0 0; seal 12 2 0; seal 20 1 1; seal 13 1 0; unmap 10 8 0; unmap 11 3 0; \
     protect 10 8 1; protect 12 1 3; map 11 2 3 fixed 0 anon 0 0; map 11 2 3 noreplace 0 anon 0 0",
    // Discarding advice is refused on sealed read-only anonymous memory.
    "map 10 4 1 fixed 0 anon 0 0; seal 10 2 0; advise 10 1 4; advise 10 1 10; advise 10 1 18; advise 10 1 8; \
     advise 10 1 20; advise 10 1 11; advise 10 1 102; advise 8 4 4; protect 10 4 3; advise 10 1 4",
    // A sealed mapping is neither moved nor mapped over by mremap, nor
    // resized; a fork's child keeps the seal.
    "map 10 4 3 fixed 0 anon 0 0; seal 12 2 0; remap 12 2 2 3 30; remap 30 1 1 3 12; map 30 2 3 fixed 0 anon 0 0; \
     remap 30 2 2 3 11; remap 10 4 2 3 20; remap 10 4 2 1 10; fork; forkmap 13 2 3",
    // Seed 1,970 (cut down): a move of several VMAs stops at a sealed one,
    // what moved before staying moved.
    "map 20 3 3 fixed 0 anon 0 0; map 23 2 1 fixed 0 anon 0 0; seal 23 2 0; remap 20 5 5 3 6; unmap 6 3 0",
    // Sequence seed 350,502 of a million (cut down): what a locked
    // mapping grows by is populated, so the grown private VMA is written
    // and keeps its charge when made inaccessible.
    "protect 7 6 3; lock 3 9 0; remap 8 3 12 3 26; protect 18 10 0; protect 7 2 3; remap 7 1 3 0 0; protect 7 4 0",
    // Droppable memory: never locked (mlock and mlockall succeed but
    // leave it unlocked, and populate it), never kept on fork nor dumped
    // (advice to is refused), not offered to KSM; it merges only with
    // droppable memory. With a file, locked or growing it is refused.
    "map 10 4 3 fixed 0 anon 0 8; map 14 2 3 fixed 0 anon 0 8; map 16 2 3 fixed 0 anon 0 0; lock 11 2 0; \
     advise 10 1 19; advise 10 1 17; advise 10 1 12; advise 10 2 18; lockall 3; map 20 2 3 fixed 0 anon 0 8; \
     unlockall; fork; map 24 2 3 fixed 0 file 0 8; map 26 2 3 fixed 0 anon 0 8200; map 28 2 3 fixed 0 anon 0 264",
    // Validated shared mappings: the legacy flags and a huge page size
    // pass, MAP_FIXED_NOREPLACE, MAP_SYNC (off DAX) and unknown bits not.
    "map 10 2 3 hint 0 file 0 16387; map 12 2 3 hint 0 file 0 1073741827; map 14 2 3 fixed 0 file 0 1048579; \
     map 16 2 3 hint 0 file 0 524291; map 18 2 3 fixed 0 file 0 4194307; map 20 2 3 fixed 0 anon 0 3",
    // An unlock stops at a hole: the lock past it stays, and keeps a new
    // neighbour apart.
    "map 20 2 3 fixed 0 anon 0 0; unmap 22 2 0; map 24 2 3 fixed 0 anon 0 0; lock 20 6 1; lock 20 2 1; \
     lock 24 2 1; unlock 20 6; map 26 2 3 fixed 0 anon 0 0",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Src {
    Anon,
    File,
    FileRo,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Fixed,
    NoReplace,
    Hint,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Map {
        page: u64,
        pages: u64,
        prot: u32,
        place: Place,
        shared: bool,
        src: Src,
        off: u64,
        extra: u32,
    },
    Unmap {
        page: u64,
        pages: u64,
        skew: u64,
    },
    Protect {
        page: u64,
        pages: u64,
        prot: u32,
    },
    Advise {
        page: u64,
        pages: u64,
        advice: i32,
    },
    Touch {
        page: u64,
        pages: u64,
    },
    /// `shmat` of a fresh System V segment of `pages` pages less 100
    /// bytes (removed at once: it lives while attached) at the page, plus
    /// `skew` bytes.
    Shmat {
        page: u64,
        pages: u64,
        flags: u32,
        skew: u64,
    },
    /// `shmdt` at the page.
    Shmdt {
        page: u64,
    },
    /// `mbind` with a node mask of 64 nodes.
    Mbind {
        page: u64,
        pages: u64,
        mode: u32,
        nodes: u64,
        flags: u32,
    },
    /// One access at the page by the kernel for this process (a read into
    /// it from `/dev/zero`, or a write from it into a pipe): a fault that
    /// fails comes back as `EFAULT`, keeping what the fault changed (a
    /// stack's growth).
    Fault {
        page: u64,
        write: bool,
    },
    Remap {
        page: u64,
        old: u64,
        new: u64,
        flags: u32,
        to: u64,
    },
    /// `mlock`, or `mlock2(MLOCK_ONFAULT)`.
    Lock {
        page: u64,
        pages: u64,
        onfault: bool,
    },
    Unlock {
        page: u64,
        pages: u64,
    },
    /// `mlockall(flags)`.
    LockAll {
        flags: u32,
    },
    UnlockAll,
    /// A load (or with `write`, a store) of one byte, in a fork of the
    /// child: the signal it dies of, if any.
    Probe {
        page: u64,
        write: bool,
    },
    /// `mseal(flags)`.
    Seal {
        page: u64,
        pages: u64,
        flags: u64,
    },
    Fork,
    /// Fork, then map fresh anonymous memory in the child (next to
    /// inherited VMAs: Linux does not merge it with a written one).
    ForkMap {
        page: u64,
        pages: u64,
        prot: u32,
    },
    /// `remap_file_pages` of the range to the file's page `pgoff`.
    RemapPages {
        page: u64,
        pages: u64,
        pgoff: u64,
    },
    /// `process_madvise` on this process of the range, as two ranges
    /// (its first page, then the rest).
    ProcessAdvise {
        page: u64,
        pages: u64,
        advice: i32,
    },
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Map { page, pages, prot, place, shared, src, off, extra } => {
                let place = match place {
                    Place::Fixed => "fixed",
                    Place::NoReplace => "noreplace",
                    Place::Hint => "hint",
                };
                let src = match src {
                    Src::Anon => "anon",
                    Src::File => "file",
                    Src::FileRo => "filero",
                };
                write!(f, "map {page} {pages} {prot} {place} {} {src} {off} {extra}", u8::from(shared))
            }
            Op::Unmap { page, pages, skew } => write!(f, "unmap {page} {pages} {skew}"),
            Op::Protect { page, pages, prot } => write!(f, "protect {page} {pages} {prot}"),
            Op::Advise { page, pages, advice } => write!(f, "advise {page} {pages} {advice}"),
            Op::Touch { page, pages } => write!(f, "touch {page} {pages}"),
            Op::Remap { page, old, new, flags, to } => write!(f, "remap {page} {old} {new} {flags} {to}"),
            Op::Lock { page, pages, onfault } => write!(f, "lock {page} {pages} {}", u8::from(onfault)),
            Op::Unlock { page, pages } => write!(f, "unlock {page} {pages}"),
            Op::LockAll { flags } => write!(f, "lockall {flags}"),
            Op::UnlockAll => write!(f, "unlockall"),
            Op::Seal { page, pages, flags } => write!(f, "seal {page} {pages} {flags}"),
            Op::Probe { page, write } => write!(f, "probe {page} {}", u8::from(write)),
            Op::Fault { page, write } => write!(f, "fault {page} {}", u8::from(write)),
            Op::Shmat { page, pages, flags, skew } => write!(f, "shmat {page} {pages} {flags} {skew}"),
            Op::Shmdt { page } => write!(f, "shmdt {page}"),
            Op::Mbind { page, pages, mode, nodes, flags } => write!(f, "mbind {page} {pages} {mode} {nodes} {flags}"),
            Op::Fork => write!(f, "fork"),
            Op::ForkMap { page, pages, prot } => write!(f, "forkmap {page} {pages} {prot}"),
            Op::RemapPages { page, pages, pgoff } => write!(f, "rfp {page} {pages} {pgoff}"),
            Op::ProcessAdvise { page, pages, advice } => write!(f, "padvise {page} {pages} {advice}"),
        }
    }
}

fn parse_op(line: &str) -> Op {
    let w: Vec<&str> = line.split_whitespace().collect();
    let n = |i: usize| -> u64 { w[i].parse().expect("number") };
    match w[0] {
        "map" => Op::Map {
            page: n(1),
            pages: n(2),
            prot: n(3) as u32,
            place: match w[4] {
                "fixed" => Place::Fixed,
                "noreplace" => Place::NoReplace,
                _ => Place::Hint,
            },
            shared: w[5] == "1",
            src: match w[6] {
                "anon" => Src::Anon,
                "file" => Src::File,
                _ => Src::FileRo,
            },
            off: n(7),
            extra: n(8) as u32,
        },
        "unmap" => Op::Unmap { page: n(1), pages: n(2), skew: n(3) },
        "protect" => Op::Protect { page: n(1), pages: n(2), prot: n(3) as u32 },
        "advise" => Op::Advise { page: n(1), pages: n(2), advice: n(3) as i32 },
        "touch" => Op::Touch { page: n(1), pages: n(2) },
        "remap" => Op::Remap { page: n(1), old: n(2), new: n(3), flags: n(4) as u32, to: n(5) },
        "lock" => Op::Lock { page: n(1), pages: n(2), onfault: w[3] == "1" },
        "unlock" => Op::Unlock { page: n(1), pages: n(2) },
        "lockall" => Op::LockAll { flags: n(1) as u32 },
        "unlockall" => Op::UnlockAll,
        "seal" => Op::Seal { page: n(1), pages: n(2), flags: n(3) },
        "probe" => Op::Probe { page: n(1), write: w[2] == "1" },
        "fault" => Op::Fault { page: n(1), write: w[2] == "1" },
        "shmat" => Op::Shmat { page: n(1), pages: n(2), flags: n(3) as u32, skew: n(4) },
        "shmdt" => Op::Shmdt { page: n(1) },
        "mbind" => Op::Mbind { page: n(1), pages: n(2), mode: n(3) as u32, nodes: n(4), flags: n(5) as u32 },
        "fork" => Op::Fork,
        "forkmap" => Op::ForkMap { page: n(1), pages: n(2), prot: n(3) as u32 },
        "rfp" => Op::RemapPages { page: n(1), pages: n(2), pgoff: n(3) },
        "padvise" => Op::ProcessAdvise { page: n(1), pages: n(2), advice: n(3) as i32 },
        other => panic!("unknown op {other}"),
    }
}

/// The `mmap` flags of a `map` op. A map type among the extra flags
/// (`MAP_SHARED_VALIDATE`, `MAP_DROPPABLE`) takes the place of the one
/// `shared` gives.
fn map_flags(place: Place, shared: bool, src: Src, extra: u32) -> u32 {
    let kind = match extra & 0x0f {
        0 if shared => 0x01,
        0 => 0x02,
        k => k,
    };
    let mut f = kind | (extra & !0x0f);
    if src == Src::Anon {
        f |= 0x20;
    }
    match place {
        Place::Fixed => f | 0x10,
        Place::NoReplace => f | 0x10_0000,
        Place::Hint => f,
    }
}

/// A window line with the hidden flags and the VMA's anonymous pages
/// (smaps's `Anonymous`): `LINE | lo ac | anon 3`.
fn with_flags(line: &str, flags: VmFlags, anon: u64) -> String {
    format!("{} | {} | anon {anon}", normalise(line), hidden_names(flags))
}

/// The window's lines of an smaps file, each with its hidden flags and
/// anonymous pages.
fn smaps_window(smaps: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<&str> = None;
    let mut anon_kb = 0;
    for l in smaps.lines() {
        if let Some(kb) = l.strip_prefix("Anonymous:") {
            anon_kb = kb.trim().trim_end_matches("kB").trim().parse().expect("Anonymous: N kB");
        } else if let Some(flags) = l.strip_prefix("VmFlags:") {
            if let Some(line) = current.take() {
                out.push(with_flags(line, hidden_flags(flags), anon_kb * 1024 / PAGE_SIZE));
            }
        } else if !window_lines(l).is_empty() {
            current = Some(l);
        } else if l.split_once(' ').is_some_and(|(r, _)| r.contains('-')) {
            current = None;
        }
    }
    out
}

/// Maps lines that overlap the window.
fn window_lines(maps: &str) -> Vec<String> {
    maps.lines()
        .filter(|l| {
            let Some((r, _)) = l.split_once(' ') else { return false };
            let Some((s, e)) = r.split_once('-') else { return false };
            let (s, e) = (u64::from_str_radix(s, 16).unwrap_or(0), u64::from_str_radix(e, 16).unwrap_or(0));
            s < BASE + W * PAGE_SIZE && e > BASE
        })
        .map(normalise)
        .collect()
}

// ---------------------------------------------------------------- model --

/// A space's window lines with their hidden flags, as `smaps_window`
/// gives the kernel's.
fn space_lines<T: VmaStore>(mm: &AddressSpace<T>, per_page: bool) -> Vec<String> {
    let mut lines: Vec<String> = mm
        .range(BASE, BASE + W * PAGE_SIZE)
        .map(|v| with_flags(&mm.maps_line(&v), v.flags(), mm.anon_page_count(v.start(), v.end())))
        .collect();
    let guards = (0..W).filter(|p| mm.is_guard_page(BASE + p * PAGE_SIZE));
    lines.push(guard_line(guards));
    if per_page {
        let at = |p: u64| BASE + p * PAGE_SIZE;
        lines.push(anon_line((0..W).filter(|&p| mm.anon_page_count(at(p), at(p + 1)) == 1)));
    }
    if numa_nodes().is_some() {
        let policies = mm
            .range(BASE, BASE + W * PAGE_SIZE)
            .filter(|v| v.is_anonymous())
            .filter_map(|v| v.policy().map(|p| ((v.start() - BASE) / PAGE_SIZE, p.to_string())));
        lines.push(policies.fold("numa:".to_string(), |l, (page, p)| format!("{l} {page}={p}")));
    }
    lines
}

/// The memory policies of the window's private anonymous VMAs that have
/// one, as one line, from a `numa_maps` file (shared memory and files
/// show their object's policy there, which other mappings may have set).
///
/// Read with the library's parser and written back as it writes policies:
/// a policy it misreads (or cannot read, marked `?`) differs from the
/// model's.
fn numa_line(numa_maps: &str) -> String {
    let mut line = "numa:".to_string();
    for l in numa_maps.lines() {
        let Some((addr, rest)) = l.split_once(' ') else { continue };
        let Ok(addr) = u64::from_str_radix(addr, 16) else { continue };
        if !(BASE..BASE + W * PAGE_SIZE).contains(&addr) || rest.contains("file=") {
            continue;
        }
        let policy = match MemPolicy::from_numa_maps(rest) {
            Some(None) => continue,
            Some(Some(p)) => p.to_string(),
            None => format!("?{rest}"),
        };
        line = format!("{line} {}={policy}", (addr - BASE) / PAGE_SIZE);
    }
    line
}

/// The window's anonymous pages, by page number, as one line (the
/// model's [`AddressSpace::anon_pages`], the kernel's pagemap: present or
/// swapped, not a file's page, not the zero page).
fn anon_line(pages: impl Iterator<Item = u64>) -> String {
    pages.fold("anon:".to_string(), |l, p| format!("{l} {p}"))
}

/// The window's guard pages, by page number, as one line (the model's
/// [`AddressSpace::guard_pages`], the kernel's pagemap bit 58).
fn guard_line(pages: impl Iterator<Item = u64>) -> String {
    pages.fold("guards:".to_string(), |l, p| format!("{l} {p}"))
}

/// The model: the same calls on a maple-tree space and on an old-design
/// one (red-black tree, list and lookup cache), which must both match the
/// kernel.
struct Model {
    mm: AddressSpace,
    old: AddressSpace<RbTree<VmaRef>>,
    file: Arc<MappedFile>,
    file_ro: Arc<MappedFile>,
    /// Whether the anonymous pages are compared page by page.
    per_page: bool,
}

fn errno(e: Errno) -> String {
    format!("err {}", e.code())
}

fn result_of(r: Result<(), Errno>) -> String {
    match r {
        Ok(()) => "ok".into(),
        Err(e) => errno(e),
    }
}

impl Model {
    fn new(file: &MappedFile, per_page: bool) -> Model {
        let mut mm = AddressSpace::with_layout(Layout { numa_nodes: numa_nodes().unwrap_or(1), ..Layout::default() });
        mm.mmap(
            BASE,
            W * PAGE_SIZE,
            Prot::NONE,
            MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED_NOREPLACE,
            None,
            0,
        )
        .expect("window");
        let old = AddressSpace::old_design_from(&mm);
        Model { mm, old, file: Arc::new(file.clone()), file_ro: Arc::new(file.clone().read_only()), per_page }
    }

    /// Applies `op` to both spaces; returns the result line and, for
    /// `fork`, the child's window lines, of each (maple tree first).
    fn apply(&mut self, op: &Op) -> [(String, Option<Vec<String>>); 2] {
        let (file, file_ro, per_page) = (&self.file, &self.file_ro, self.per_page);
        [apply_on(&mut self.mm, file, file_ro, per_page, op), apply_on(&mut self.old, file, file_ro, per_page, op)]
    }

    fn lines(&self) -> [Vec<String>; 2] {
        [space_lines(&self.mm, self.per_page), space_lines(&self.old, self.per_page)]
    }
}

/// Applies `op` to `mm`; returns the result line and, for `fork`, the
/// child's window lines.
fn apply_on<T: VmaStore>(
    mm: &mut AddressSpace<T>,
    file: &Arc<MappedFile>,
    file_ro: &Arc<MappedFile>,
    per_page: bool,
    op: &Op,
) -> (String, Option<Vec<String>>) {
    let at = |p: u64| BASE + p * PAGE_SIZE;
    let res = match *op {
        Op::Map { page, pages, prot, place, shared, src, off, extra } => {
            let flags = MapFlags::from_bits_retain(map_flags(place, shared, src, extra));
            let file = match src {
                Src::Anon => None,
                Src::File => Some(Arc::clone(file)),
                Src::FileRo => Some(Arc::clone(file_ro)),
            };
            let prot = Prot::from_bits_retain(prot);
            match mm.mmap(at(page), pages * PAGE_SIZE, prot, flags, file, off * PAGE_SIZE) {
                Ok(a) if (BASE..BASE + W * PAGE_SIZE).contains(&a) => format!("ok {}", (a - BASE) / PAGE_SIZE),
                Ok(a) => {
                    mm.munmap(a, pages * PAGE_SIZE).expect("unmap outside");
                    "out".into()
                }
                Err(e) => errno(e),
            }
        }
        Op::Unmap { page, pages, skew } => match mm.munmap(at(page) + skew, pages * PAGE_SIZE) {
            Ok(()) => "ok".into(),
            Err(e) => errno(e),
        },
        Op::Protect { page, pages, prot } => {
            match mm.mprotect(at(page), pages * PAGE_SIZE, Prot::from_bits_retain(prot)) {
                Ok(()) => "ok".into(),
                Err(e) => errno(e),
            }
        }
        Op::Advise { page, pages, advice } => {
            let r = match Advice::from_code(advice) {
                Some(a) => mm.madvise(at(page), pages * PAGE_SIZE, a),
                None => Err(Errno::EINVAL),
            };
            match r {
                Ok(()) => "ok".into(),
                Err(e) => errno(e),
            }
        }
        Op::RemapPages { page, pages, pgoff } => {
            result_of(mm.remap_file_pages(at(page), pages * PAGE_SIZE, 0, pgoff, 0))
        }
        Op::ProcessAdvise { page, pages, advice } => {
            let ranges = [(at(page), PAGE_SIZE), (at(page + 1), (pages - 1) * PAGE_SIZE)];
            let r = match Advice::from_code(advice) {
                Some(a) => mm.process_madvise(&ranges, a, 0),
                None => Err(Errno::EINVAL),
            };
            match r {
                Ok(n) => format!("ok {n}"),
                Err(e) => errno(e),
            }
        }
        Op::Touch { page, pages } => match mm.touch(at(page), pages * PAGE_SIZE) {
            Ok(()) => "ok".into(),
            Err(e) => errno(e),
        },
        Op::Shmat { page, pages, flags, skew } => {
            let segment = ShmSegment { key: 0, id: 1, size: pages * PAGE_SIZE - 100 };
            match mm.shmat(&segment, at(page) + skew, ShmFlags::from_bits_retain(flags)) {
                Ok(a) => format!("ok {}", (a - BASE) / PAGE_SIZE),
                Err(e) => errno(e),
            }
        }
        Op::Shmdt { page } => result_of(mm.shmdt(at(page))),
        Op::Mbind { page, pages, mode, nodes, flags } => {
            result_of(mm.mbind(at(page), pages * PAGE_SIZE, mode, nodes, MbindFlags::from_bits_retain(flags)))
        }
        Op::Fault { page, write } => {
            let access = if write { Access::Write } else { Access::Read };
            match mm.fault(at(page), access) {
                Ok(()) => "ok".into(),
                Err(Fault::OutOfMemory) => panic!("out of memory"),
                Err(_) => errno(Errno::EFAULT),
            }
        }
        Op::Remap { page, old, new, flags, to } => {
            match mm.mremap(at(page), old * PAGE_SIZE, new * PAGE_SIZE, MremapFlags::from_bits_retain(flags), at(to)) {
                Ok(a) if (BASE..BASE + W * PAGE_SIZE).contains(&a) => format!("ok {}", (a - BASE) / PAGE_SIZE),
                Ok(a) => {
                    mm.munmap(a, new * PAGE_SIZE).expect("unmap outside");
                    "out".into()
                }
                Err(e) => errno(e),
            }
        }
        Op::Lock { page, pages, onfault } => {
            let flags = if onfault { MlockFlags::ONFAULT } else { MlockFlags::empty() };
            result_of(mm.mlock2(at(page), pages * PAGE_SIZE, flags))
        }
        Op::Unlock { page, pages } => result_of(mm.munlock(at(page), pages * PAGE_SIZE)),
        Op::LockAll { flags } => result_of(mm.mlockall(MclFlags::from_bits_retain(flags))),
        Op::UnlockAll => result_of(mm.munlockall()),
        Op::Seal { page, pages, flags } => result_of(mm.mseal(at(page), pages * PAGE_SIZE, flags)),
        Op::Probe { page, write } => {
            // In a fork, where the don't-fork mappings are not.
            let access = if write { Access::Write } else { Access::Read };
            match mm.fork().expect("fork").check_access(at(page), access) {
                Ok(()) => "ok".into(),
                Err(fault) => format!("sig {}", fault.signal()),
            }
        }
        Op::Fork => {
            let child = mm.fork().expect("fork");
            return ("ok".into(), Some(space_lines(&child, per_page)));
        }
        Op::ForkMap { page, pages, prot } => {
            let mut child = mm.fork().expect("fork");
            let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
            // (It may fail: over a sealed mapping the child inherited.)
            let _ = child.mmap(at(page), pages * PAGE_SIZE, Prot::from_bits_retain(prot), f, None, 0);
            return ("ok".into(), Some(space_lines(&child, per_page)));
        }
    };
    mm.validate().expect("model valid");
    (res, None)
}

/// A random sequence, generated against the model (touches only where the
/// model says every page is writable: a wrong guess would crash the child,
/// which then reports the divergence).
fn generate(seed: u64, file: &MappedFile, sysv: bool) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new(file, false);
    let len = rng.gen_range(4..28);
    let mut ops = Vec::new();
    while ops.len() < len {
        let page = rng.gen_range(0..W);
        let pages = rng.gen_range(1..=(W - page).min(12));
        let prot = *[0u32, 1, 3, 3, 5, 7, 1, 3].get(rng.gen_range(0..8)).unwrap();
        let op = match rng.gen_range(0..133) {
            0..=29 => {
                let src = [Src::Anon, Src::Anon, Src::File, Src::FileRo][rng.gen_range(0..4)];
                let place = [Place::Fixed, Place::Fixed, Place::NoReplace, Place::Hint][rng.gen_range(0..4)];
                // Now and then droppable memory (populated, locked, growing:
                // refused but populated), or shared with validated flags
                // (known, unknown, a huge page size's bits).
                let extra = [
                    0,
                    0,
                    0,
                    0x4000,
                    0x20000,
                    0x8000,
                    0x100,
                    0x2000,
                    0x18000,
                    0x08,
                    0x08 | 0x8000,
                    0x08 | [0x2000, 0x100, 0x4000][rng.gen_range(0..3)],
                    0x03 | [0, 0x4000, 0x10_0000, 0x80000, 0x4000_0000, 0x80, 0x40][rng.gen_range(0..7)],
                    0x80000,
                    0x40,
                ][rng.gen_range(0..15)];
                // Some file mappings reach past the file's end.
                let off = if src == Src::Anon { 0 } else { rng.gen_range(0..FILE_PAGES + 8 - pages) };
                Op::Map { page, pages, prot, place, shared: rng.gen_ratio(1, 4), src, off, extra }
            }
            30..=44 => Op::Unmap { page, pages, skew: u64::from(rng.gen_ratio(1, 30)) },
            // Now and then PROT_GROWSDOWN (which extends the change down
            // to the start of a grows-down mapping).
            45..=64 => Op::Protect { page, pages, prot: prot | if rng.gen_ratio(1, 15) { 0x0100_0000 } else { 0 } },
            65..=76 => {
                let advice = ADVICE[rng.gen_range(0..ADVICE.len())];
                Op::Advise { page, pages, advice }
            }
            77..=86 => Op::Touch { page, pages },
            87..=96 => {
                // Now and then a zero old length (a shared mapping
                // duplicated).
                let old = if rng.gen_ratio(1, 12) { 0 } else { pages };
                let new = rng.gen_range(1..=12);
                let flags = [0, 1, 1, 3, 3, 5, 7, 8][rng.gen_range(0..8)];
                let to = rng.gen_range(0..W - new.min(W - 1));
                // Keep moves that pick their own place (MAYMOVE without
                // FIXED) rare: they land outside the window.
                Op::Remap { page, old, new, flags, to }
            }
            97 => Op::Fork,
            98 => Op::ForkMap { page, pages, prot },
            99..=104 => Op::Lock { page, pages, onfault: rng.gen_ratio(1, 3) },
            105..=107 => Op::Unlock { page, pages },
            108 => Op::LockAll { flags: [1, 2, 3, 5, 6, 7, 4, 0][rng.gen_range(0..8)] },
            109 => Op::UnlockAll,
            110..=112 => Op::Seal { page, pages, flags: u64::from(rng.gen_ratio(1, 20)) },
            113..=115 => Op::Fault { page, write: rng.gen_bool(0.5) },
            116..=118 => {
                // SHM_RDONLY, SHM_RND, SHM_REMAP, SHM_EXEC, some together.
                let flags =
                    [0, 0, 0o10000, 0o20000, 0o40000, 0o40000, 0o100000, 0o150000, 0o60000][rng.gen_range(0..9)];
                Op::Shmat { page, pages, flags, skew: if rng.gen_ratio(1, 4) { 5 } else { 0 } }
            }
            119..=120 => Op::Shmdt { page },
            121..=126 => {
                // Every mode, with and without nodes (node 1 has no memory
                // here), some with flags, some invalid.
                let mode = [0, 1, 2, 2, 3, 4, 5, 6, 0x8002, 0x4003, 0x2002, 0x2003, 0xc002, 7][rng.gen_range(0..14)];
                let nodes = [0, 1, 1, 1, 2, 3][rng.gen_range(0..6)];
                let flags = [0, 0, 0, 2, 4, 8][rng.gen_range(0..6)];
                Op::Mbind { page, pages, mode, nodes, flags }
            }
            127..=129 => Op::RemapPages { page, pages, pgoff: rng.gen_range(0..FILE_PAGES + 4) },
            130..=132 => {
                let advice = ADVICE[rng.gen_range(0..ADVICE.len())];
                Op::ProcessAdvise { page, pages, advice }
            }
            _ => Op::Probe { page, write: rng.gen_bool(0.5) },
        };
        // Keep the window the window: mappings and growth stay inside it
        // (a stack grows only down to the page accessed, in the window).
        match &op {
            Op::Map { page, pages, .. } | Op::ForkMap { page, pages, .. } | Op::Shmat { page, pages, .. }
                if page + pages > W =>
            {
                continue
            }
            Op::Shmat { .. } | Op::Shmdt { .. } if !sysv => continue,
            Op::Mbind { .. } if numa_nodes().is_none() => continue,
            Op::Remap { page, new, to, flags, .. } if (flags & 2 != 0 && to + new > W) || page + new > W => continue,
            Op::Touch { .. } => {
                let mut probe = model.mm.clone();
                if let Op::Touch { page, pages } = op {
                    if probe.touch(BASE + page * PAGE_SIZE, pages * PAGE_SIZE).is_err() {
                        continue;
                    }
                }
            }
            _ => {}
        }
        model.apply(&op);
        ops.push(op);
    }
    ops
}

// --------------------------------------------------------------- parent --

/// Where a sequence comes from.
enum Source {
    /// Generated from this seed.
    Seed(u64),
    /// Written out (`KNOWN`, `MAPLE_ORACLE_OPS`): ops separated by `;`.
    Given(String),
}

/// The NUMA nodes with memory (bit `n` for node `n`, up to 64), from
/// sysfs; `None` on a kernel without NUMA (no `mbind`).
/// (Read once: the model and the child ask after every operation.)
fn numa_nodes() -> Option<u64> {
    static NODES: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *NODES.get_or_init(|| {
        let text = std::fs::read_to_string("/sys/devices/system/node/has_memory").ok()?;
        let mut mask = 0u64;
        for part in text.trim().split(',').filter(|p| !p.is_empty()) {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
            for n in a..=b.min(63) {
                mask |= 1 << n;
            }
        }
        Some(mask)
    })
}

/// Whether this machine lets a process make System V shared memory (a
/// container may not).
/// Whether the test file is on a file system that takes `MAP_SYNC` and
/// then refuses it off DAX (ext4, xfs), as the model takes every file but
/// shmem's.
fn sync_refused_by_files() -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(dir) = std::ffi::CString::new(std::env::temp_dir().as_os_str().as_bytes()) else { return false };
    // SAFETY: an all-zero statfs is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `dir` is a NUL-terminated path and `st` a statfs to fill,
    // both alive across the call.
    let ok = unsafe { libc::statfs(dir.as_ptr(), &mut st) } == 0;
    ok && matches!(st.f_type as u64, 0xEF53 | 0x5846_5342)
}

/// Whether this machine has huge pages reserved for `MAP_HUGETLB` (the
/// model has none: a default Linux).
fn huge_pages_reserved() -> bool {
    let Ok(dir) = std::fs::read_dir("/sys/kernel/mm/hugepages") else { return false };
    dir.flatten().any(|d| {
        let total = std::fs::read_to_string(d.path().join("nr_hugepages")).unwrap_or_default();
        total.trim().parse::<u64>().is_ok_and(|n| n > 0)
    })
}

fn sysv_available() -> bool {
    // SAFETY: makes a private segment and removes it again; no memory of
    // this process is touched.
    unsafe {
        let id = libc::shmget(libc::IPC_PRIVATE, 4096, libc::IPC_CREAT | 0o600);
        id >= 0 && libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) == 0
    }
}

fn run_parent() -> i32 {
    let n: u64 = std::env::var("MAPLE_ORACLE_SEQS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000);
    let mut seeds: Vec<Source> = (0..n).map(Source::Seed).collect();
    let fresh =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    seeds.extend((0..3).map(|i| Source::Seed(fresh.wrapping_mul(6364136223846793005).wrapping_add(i))));
    // The sequences in `KNOWN` first.
    let mut seeds: Vec<Source> = KNOWN.iter().map(|k| Source::Given(k.to_string())).chain(seeds).collect();
    if let Some(one) = std::env::var("MAPLE_ORACLE_SEED").ok().and_then(|s| s.parse().ok()) {
        seeds = vec![Source::Seed(one)];
    }
    if let Ok(ops) = std::env::var("MAPLE_ORACLE_OPS") {
        seeds = vec![Source::Given(ops)];
    }
    let exe = std::env::current_exe().expect("own path");
    let mut child = Command::new(exe)
        .env("MAPLE_ORACLE_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the child");
    let mut to_child = child.stdin.take().expect("stdin");
    let mut from_child = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    from_child.read_line(&mut line).expect("hello");
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.first() != Some(&"file") {
        println!("kernel oracle: the child could not set up ({}), skipped", line.trim());
        drop(to_child);
        let _ = child.wait();
        return 0;
    }
    let file = MappedFile::new(f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().unwrap(), f[6])
        .with_size(f[4].parse().unwrap());
    // Anonymous pages are compared page by page where the child can tell
    // them from the zero page (it sees page frame numbers), else by count.
    let per_page = f[5] != "none";
    if !per_page {
        println!("kernel oracle: page frames hidden (no CAP_SYS_ADMIN): anonymous pages compared by count only");
    }
    let sysv = sysv_available();
    if !sysv {
        println!("kernel oracle: no System V shared memory here: its calls left out of every sequence");
    }
    let lock_all = can_lock_all();
    if !lock_all {
        println!("kernel oracle: a locked-memory limit binds here: sequences with mlockall(MCL_CURRENT) left out");
    }
    let disk = sync_refused_by_files();
    if !disk {
        println!("kernel oracle: the test file is not on ext4 or xfs: sequences mapping it with MAP_SYNC left out");
    }
    let huge_pages_reserved = huge_pages_reserved();
    if huge_pages_reserved {
        println!("kernel oracle: huge pages are reserved here (vm.nr_hugepages): sequences with MAP_HUGETLB left out");
    }
    let nice = has_capability(CAP_SYS_NICE);
    if !nice {
        println!("kernel oracle: no CAP_SYS_NICE: sequences with mbind(MPOL_MF_MOVE_ALL) left out");
    }
    let (mut passed, mut failed) = (0u64, 0u64);
    let trace = std::env::var_os("MAPLE_ORACLE_TRACE").is_some();
    let mut ops_run = 0usize;
    for seed in &seeds {
        let ops: Vec<Op> = match seed {
            Source::Seed(seed) => generate(*seed, &file, sysv),
            Source::Given(ops) => ops.split(';').map(parse_op).collect(),
        };
        if !sysv && ops.iter().any(|op| matches!(op, Op::Shmat { .. } | Op::Shmdt { .. })) {
            continue;
        }
        if numa_nodes().is_none() && ops.iter().any(|op| matches!(op, Op::Mbind { .. })) {
            continue;
        }
        if !disk
            && ops
                .iter()
                .any(|op| matches!(op, Op::Map { src, extra, .. } if *src != Src::Anon && extra & 0x80000 != 0))
        {
            continue;
        }
        if !lock_all && ops.iter().any(|op| matches!(op, Op::LockAll { flags } if flags & 1 != 0)) {
            continue;
        }
        if huge_pages_reserved && ops.iter().any(|op| matches!(op, Op::Map { extra, .. } if extra & 0x40000 != 0)) {
            continue;
        }
        if !nice && ops.iter().any(|op| matches!(op, Op::Mbind { flags, .. } if flags & 4 != 0)) {
            continue;
        }
        let mut model = Model::new(&file, per_page);
        writeln!(to_child, "seq").unwrap();
        for op in &ops {
            writeln!(to_child, "{op}").unwrap();
        }
        writeln!(to_child, "end").unwrap();
        to_child.flush().unwrap();
        let mut diverged: Option<String> = None;
        for (i, op) in ops.iter().enumerate() {
            let wants = model.apply(op);
            let want_lines = model.lines();
            // The child's report: a result line, maybe a fork's lines, the maps lines.
            let mut got_res = String::new();
            if from_child.read_line(&mut got_res).unwrap_or(0) == 0 {
                diverged = Some(format!("the child died at op {} ({op})", i + 1));
                break;
            }
            let mut read_block = || {
                let mut v = Vec::new();
                loop {
                    let mut l = String::new();
                    if from_child.read_line(&mut l).unwrap_or(0) == 0 {
                        return None;
                    }
                    let l = l.trim_end().to_string();
                    if l == "." {
                        return Some(v);
                    }
                    v.push(l);
                }
            };
            let got_child = if matches!(op, Op::Fork | Op::ForkMap { .. }) { read_block() } else { Some(Vec::new()) };
            let got_lines = read_block();
            let (Some(got_child), Some(got_lines)) = (got_child, got_lines) else {
                diverged = Some(format!("the child died at op {} ({op})", i + 1));
                break;
            };
            let mut why = Vec::new();
            for (((want_res, want_child), want_lines), name) in
                wants.into_iter().zip(want_lines).zip(["model", "old design"])
            {
                if got_res.trim() != want_res {
                    why.push(format!("result: kernel {:?}, {name} {want_res:?}", got_res.trim()));
                }
                if got_lines != want_lines {
                    why.push(format!(
                        "maps:\n  kernel:\n    {}\n  {name}:\n    {}",
                        got_lines.join("\n    "),
                        want_lines.join("\n    ")
                    ));
                }
                if let Some(want_child) = want_child {
                    if got_child != want_child {
                        why.push(format!(
                            "forked child's maps:\n  kernel:\n    {}\n  {name}:\n    {}",
                            got_child.join("\n    "),
                            want_child.join("\n    ")
                        ));
                    }
                }
            }
            ops_run += 1;
            if trace {
                println!("{op} -> {}\n    {}", got_res.trim(), got_lines.join("\n    "));
            }
            if !why.is_empty() {
                diverged = Some(format!("after op {} ({op}): {}", i + 1, why.join("\n")));
                break;
            }
        }
        match diverged {
            None => passed += 1,
            Some(why) => {
                failed += 1;
                if failed <= 3 {
                    let which = match seed {
                        Source::Seed(seed) => format!("seed {seed}"),
                        Source::Given(_) => "a given sequence".to_string(),
                    };
                    println!("{which} diverged {why}\nsequence:");
                    for op in &ops {
                        println!("  {op}");
                    }
                }
                // The child is out of step now: stop here.
                let _ = child.kill();
                break;
            }
        }
    }
    drop(to_child);
    let _ = child.wait();
    println!("kernel oracle: {ops_run} operations in {} sequences", passed + failed);
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}

// ---------------------------------------------------------------- child --

#[cfg(target_os = "linux")]
mod child {
    use std::{
        ffi::CString,
        io::{BufRead, Write},
        os::unix::fs::MetadataExt,
    };

    use super::*;

    fn at(p: u64) -> u64 {
        BASE + p * PAGE_SIZE
    }

    /// The window's smaps lines, its guard pages and (where page frame
    /// numbers can be read) its anonymous pages.
    fn maps_window() -> Vec<String> {
        let mut lines = smaps_window(&std::fs::read_to_string("/proc/self/smaps").expect("smaps"));
        let words = pagemap(BASE, W);
        lines.push(guard_line((0..W).filter(|&p| words[p as usize] >> 58 & 1 == 1)));
        if let Some(zero) = ZERO_PFN.get().copied().flatten() {
            lines.push(anon_line((0..W).filter(|&p| is_anon(words[p as usize], zero))));
        }
        if numa_nodes().is_some() {
            lines.push(numa_line(&std::fs::read_to_string("/proc/self/numa_maps").unwrap_or_default()));
        }
        lines
    }

    /// `/proc/self/pagemap`'s words for `pages` pages from `start`: bit 63
    /// present, 62 swapped, 61 a file's page (or shared memory's), 58 a
    /// guard marker (Linux 6.15+), 0–54 the page frame number (shown to
    /// `CAP_SYS_ADMIN` only, else 0).
    fn pagemap(start: u64, pages: u64) -> Vec<u64> {
        use std::os::unix::fs::FileExt;
        let mut bytes = vec![0u8; (pages * 8) as usize];
        let f = std::fs::File::open("/proc/self/pagemap").expect("pagemap");
        f.read_exact_at(&mut bytes, start / PAGE_SIZE * 8).expect("pagemap words");
        bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
    }

    /// An anonymous page: in swap (a guard marker is a swap-type entry
    /// too, flagged apart), or present and neither a file's page nor the
    /// shared zero page (page frame `zero`), which a read maps.
    fn is_anon(word: u64, zero: u64) -> bool {
        let bit = |b: u32| word >> b & 1 == 1;
        let pfn = word & ((1 << 55) - 1);
        bit(62) && !bit(58) || bit(63) && !bit(61) && pfn != zero
    }

    /// The zero page's frame, found once: a fresh private page, read, maps
    /// it. `None` where frames are hidden (no `CAP_SYS_ADMIN`).
    static ZERO_PFN: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();

    fn find_zero_pfn() -> Option<u64> {
        // SAFETY: a fresh anonymous page, read and unmapped here; no Rust
        // object lives there.
        let word = unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                PAGE_SIZE as usize,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if p == libc::MAP_FAILED {
                return None;
            }
            std::ptr::read_volatile(p.cast::<u8>());
            let word = pagemap(p as u64, 1)[0];
            libc::munmap(p, PAGE_SIZE as usize);
            word
        };
        let pfn = word & ((1 << 55) - 1);
        (word >> 63 & 1 == 1 && pfn != 0).then_some(pfn)
    }

    fn result(ret: i64) -> String {
        if ret == -1 {
            format!("err {}", std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
        } else {
            "ok".into()
        }
    }

    fn placed(ret: *mut libc::c_void, pages: u64) -> String {
        if ret == libc::MAP_FAILED {
            return result(-1);
        }
        let a = ret as u64;
        if (BASE..BASE + W * PAGE_SIZE).contains(&a) {
            format!("ok {}", (a - BASE) / PAGE_SIZE)
        } else {
            // SAFETY: a mapping this process just made outside the window
            // and nothing uses.
            unsafe { libc::munmap(ret, (pages * PAGE_SIZE) as usize) };
            "out".into()
        }
    }

    /// The test file, opened for writing and read-only, and `/dev/zero`.
    #[derive(Clone, Copy)]
    struct Files {
        fd: i32,
        fd_ro: i32,
        zero: i32,
    }

    /// Reserves the window (inaccessible), where nothing is mapped;
    /// returns where the kernel put it (elsewhere: the window was taken).
    fn map_window() -> u64 {
        // SAFETY: a fresh mapping that replaces nothing
        // (`MAP_FIXED_NOREPLACE`), at an address no Rust object uses.
        let w = unsafe {
            libc::mmap(
                BASE as *mut _,
                (W * PAGE_SIZE) as usize,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        w as u64
    }

    /// Runs one sequence in a fresh window, reporting each operation's
    /// result and the window's lines after it.
    fn run_sequence(ops: &[Op], out: &mut impl Write, files: Files) {
        let Files { fd, fd_ro, zero } = files;
        assert_eq!(map_window(), BASE, "window");
        for &op in ops {
            let mut fork_lines: Option<Vec<String>> = None;
            // SAFETY: system calls on addresses inside the window, which
            // only this loop uses; no Rust object lives there. Writes
            // (`touch`) are `read(2)`s into the window, which fail with
            // EFAULT where a store would raise a signal. The forked
            // child only reads its maps, writes to a pipe and leaves
            // with `_exit`.
            let res = unsafe {
                match op {
                    Op::Map { page, pages, prot, place, shared, src, off, extra } => {
                        let fl = map_flags(place, shared, src, extra) as i32;
                        let f = match src {
                            Src::Anon => -1,
                            Src::File => fd,
                            Src::FileRo => fd_ro,
                        };
                        let r = libc::mmap(
                            at(page) as *mut _,
                            (pages * PAGE_SIZE) as usize,
                            prot as i32,
                            fl,
                            f,
                            (off * PAGE_SIZE) as i64,
                        );
                        placed(r, pages)
                    }
                    Op::Unmap { page, pages, skew } => {
                        result(libc::munmap((at(page) + skew) as *mut _, (pages * PAGE_SIZE) as usize) as i64)
                    }
                    Op::Protect { page, pages, prot } => {
                        result(libc::mprotect(at(page) as *mut _, (pages * PAGE_SIZE) as usize, prot as i32) as i64)
                    }
                    Op::Advise { page, pages, advice } => {
                        result(libc::madvise(at(page) as *mut _, (pages * PAGE_SIZE) as usize, advice) as i64)
                    }
                    Op::RemapPages { page, pages, pgoff } => result(libc::syscall(
                        libc::SYS_remap_file_pages,
                        at(page),
                        (pages * PAGE_SIZE) as usize,
                        0,
                        pgoff as usize,
                        0,
                    )),
                    Op::ProcessAdvise { page, pages, advice } => {
                        let iov = [
                            libc::iovec { iov_base: at(page) as *mut _, iov_len: PAGE_SIZE as usize },
                            libc::iovec {
                                iov_base: at(page + 1) as *mut _,
                                iov_len: ((pages - 1) * PAGE_SIZE) as usize,
                            },
                        ];
                        let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0);
                        let n = libc::syscall(libc::SYS_process_madvise, pidfd, iov.as_ptr(), 2usize, advice, 0);
                        let r = if n < 0 { result(n) } else { format!("ok {n}") };
                        libc::close(pidfd as i32);
                        r
                    }
                    Op::Touch { page, pages } => {
                        // A one-byte write into each page in turn, by the
                        // kernel: the same write fault as a store.
                        let failed = (page..page + pages).find(|&p| libc::read(zero, at(p) as *mut _, 1) != 1);
                        match failed {
                            None => "ok".into(),
                            Some(_) => result(-1),
                        }
                    }
                    Op::Shmat { page, pages, flags, skew } => {
                        let size = (pages * PAGE_SIZE - 100) as usize;
                        let id = libc::shmget(libc::IPC_PRIVATE, size, libc::IPC_CREAT | 0o700);
                        assert!(id >= 0, "shmget: {}", std::io::Error::last_os_error());
                        let r = libc::shmat(id, (at(page) + skew) as *const _, flags as i32);
                        let res = placed(r, pages);
                        libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut());
                        res
                    }
                    Op::Shmdt { page } => result(libc::shmdt(at(page) as *const _) as i64),
                    Op::Mbind { page, pages, mode, nodes, flags } => {
                        // A 64-node mask (`maxnode` counts one more).
                        let mask = nodes;
                        result(libc::syscall(
                            libc::SYS_mbind,
                            at(page),
                            (pages * PAGE_SIZE) as usize,
                            mode as usize,
                            &raw const mask,
                            65usize,
                            flags as usize,
                        ))
                    }
                    Op::Fault { page, write } => {
                        let ok = if write {
                            libc::read(zero, at(page) as *mut _, 1) == 1
                        } else {
                            // Into a pipe, and out of it again.
                            let mut p = [0i32; 2];
                            assert_eq!(libc::pipe(p.as_mut_ptr()), 0);
                            let ok = libc::write(p[1], at(page) as *const _, 1) == 1;
                            let mut byte = 0u8;
                            if ok {
                                libc::read(p[0], (&raw mut byte).cast(), 1);
                            }
                            libc::close(p[0]);
                            libc::close(p[1]);
                            ok
                        };
                        result(if ok { 0 } else { -1 })
                    }
                    Op::Remap { page, old, new, flags, to } => {
                        let r = libc::mremap(
                            at(page) as *mut _,
                            (old * PAGE_SIZE) as usize,
                            (new * PAGE_SIZE) as usize,
                            flags as i32,
                            at(to) as *mut libc::c_void,
                        );
                        placed(r, new)
                    }
                    Op::Lock { page, pages, onfault } => {
                        let flags = if onfault { libc::MLOCK_ONFAULT } else { 0 };
                        result(libc::mlock2(at(page) as *const _, (pages * PAGE_SIZE) as usize, flags) as i64)
                    }
                    Op::Unlock { page, pages } => {
                        result(libc::munlock(at(page) as *const _, (pages * PAGE_SIZE) as usize) as i64)
                    }
                    Op::LockAll { flags } => result(libc::mlockall(flags as i32) as i64),
                    Op::UnlockAll => result(libc::munlockall() as i64),
                    Op::Probe { page, write } => {
                        // A fork makes the access (changing nothing here);
                        // its end tells what it got.
                        let pid = libc::fork();
                        if pid == 0 {
                            let p = at(page) as *mut u8;
                            if write {
                                std::ptr::write_volatile(p, 1);
                            } else {
                                std::ptr::read_volatile(p);
                            }
                            libc::_exit(0);
                        }
                        let mut status = 0;
                        libc::waitpid(pid, &mut status, 0);
                        if libc::WIFSIGNALED(status) {
                            format!("sig {}", libc::WTERMSIG(status))
                        } else {
                            "ok".into()
                        }
                    }
                    // `mseal` is system call 462 on every 64-bit Linux.
                    Op::Seal { page, pages, flags } => {
                        result(libc::syscall(462, at(page), (pages * PAGE_SIZE) as usize, flags))
                    }
                    Op::Fork | Op::ForkMap { .. } => {
                        let mut p = [0i32; 2];
                        assert_eq!(libc::pipe(p.as_mut_ptr()), 0);
                        let pid = libc::fork();
                        if pid == 0 {
                            // The forked child: maybe map, report its window
                            // and leave without running any destructor.
                            if let Op::ForkMap { page, pages, prot } = op {
                                libc::mmap(
                                    at(page) as *mut _,
                                    (pages * PAGE_SIZE) as usize,
                                    prot as i32,
                                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                                    -1,
                                    0,
                                );
                            }
                            let text = maps_window().join("\n") + "\n";
                            libc::write(p[1], text.as_ptr().cast(), text.len());
                            libc::_exit(0);
                        }
                        libc::close(p[1]);
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 4096];
                        loop {
                            let n = libc::read(p[0], chunk.as_mut_ptr().cast(), chunk.len());
                            if n <= 0 {
                                break;
                            }
                            buf.extend_from_slice(&chunk[..n as usize]);
                        }
                        libc::close(p[0]);
                        let mut status = 0;
                        libc::waitpid(pid, &mut status, 0);
                        let text = String::from_utf8_lossy(&buf).to_string();
                        fork_lines = Some(text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect());
                        "ok".into()
                    }
                }
            };
            writeln!(out, "{res}").unwrap();
            if let Some(fl) = fork_lines {
                for l in fl {
                    writeln!(out, "{l}").unwrap();
                }
                writeln!(out, ".").unwrap();
            }
            for l in maps_window() {
                writeln!(out, "{l}").unwrap();
            }
            writeln!(out, ".").unwrap();
            out.flush().unwrap();
        }
    }

    pub fn run() {
        // If the parent stops reading (it found a divergence), end quietly
        // rather than panic on a broken pipe.
        // SAFETY: restores the default action of one signal, before any
        // thread or child exists.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
        // One CPU for the whole run: `MADV_FREE` parks the pages it frees
        // in a per-CPU batch until that CPU's batches drain (as
        // `MADV_PAGEOUT` drains them, on its own CPU), so whether a page
        // out finds them lazily freeable must not depend on a migration.
        // SAFETY: a `cpu_set_t` is plain data, zeroed and filled by the
        // libc macros; the calls only read or set this process's mask.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                if let Some(cpu) = (0..libc::CPU_SETSIZE as usize).find(|&c| libc::CPU_ISSET(c, &set)) {
                    let mut one: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut one);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one);
                }
            }
        }
        let path = std::env::temp_dir().join(format!("maple-oracle-{}.bin", std::process::id()));
        let data = vec![7u8; FILE_BYTES as usize];
        std::fs::write(&path, &data).expect("test file");
        let cpath = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: plain open(2) calls on a path we own.
        let (fd, fd_ro, zero) = unsafe {
            (
                libc::open(cpath.as_ptr(), libc::O_RDWR),
                libc::open(cpath.as_ptr(), libc::O_RDONLY),
                libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY),
            )
        };
        let meta = std::fs::metadata(&path).unwrap();
        let dev = meta.dev();
        let (maj, min) = (libc::major(dev), libc::minor(dev));
        let out = std::io::stdout();
        let mut out = out.lock();
        if fd < 0 || fd_ro < 0 || zero < 0 {
            writeln!(out, "nofile").unwrap();
            return;
        }
        // The window must be free in this process (it is, unless the
        // machine's layout is very unusual: then say so and skip).
        let probe = map_window();
        if probe != BASE {
            writeln!(out, "nowindow").unwrap();
            return;
        }
        // The model's guard pages are compared with pagemap's: the kernel
        // must have both (guard regions from 6.13, their pagemap bit from
        // 6.15). Tried on the window's first page, in the probe mapping.
        // SAFETY: advice on the probe mapping made just above, which no
        // Rust object uses.
        let installed = unsafe { libc::madvise(probe as *mut _, PAGE_SIZE as usize, 102) } == 0;
        let shown = installed && pagemap(BASE, 1)[0] >> 58 & 1 == 1;
        // SAFETY: the probe mapping made just above.
        unsafe { libc::munmap(probe as *mut _, (W * PAGE_SIZE) as usize) };
        if !shown {
            writeln!(out, "noguardregions").unwrap();
            return;
        }
        let zero_pfn = ZERO_PFN.get_or_init(find_zero_pfn).map_or("none".to_string(), |z| z.to_string());
        writeln!(out, "file {maj} {min} {} {FILE_BYTES} {zero_pfn} {}", meta.ino(), path.display()).unwrap();
        out.flush().unwrap();
        let stdin = std::io::stdin();
        let mut lines = stdin.lock().lines();
        while let Some(Ok(l)) = lines.next() {
            if l != "seq" {
                continue;
            }
            let mut ops = Vec::new();
            while let Some(Ok(l)) = lines.next() {
                if l == "end" {
                    break;
                }
                ops.push(parse_op(&l));
            }
            // Each sequence runs in a fresh fork of this process, which
            // maps the window and leaves with it: a sequence may seal
            // memory (which can never be unmapped again) or lock all of it.
            out.flush().unwrap();
            // SAFETY: this process has one thread; the fork only runs the
            // sequence (system calls and writes to the inherited standard
            // output, flushed) and leaves with `_exit`.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                run_sequence(&ops, &mut out, Files { fd, fd_ro, zero });
                out.flush().unwrap();
                // SAFETY: leaves the forked process without running
                // anything of the parent's.
                unsafe { libc::_exit(0) };
            }
            let mut status = 0;
            // SAFETY: waits for the fork made just above.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                // The sequence died (a write the model allowed, say): end
                // here, so that the parent sees the output stop.
                std::process::exit(1);
            }
        }
        let _ = std::fs::remove_file(&path);
    }
}

fn main() {
    if std::env::var_os("MAPLE_ORACLE_CHILD").is_some() {
        #[cfg(target_os = "linux")]
        child::run();
        return;
    }
    if !cfg!(target_os = "linux") {
        println!("kernel oracle: not Linux, skipped");
        return;
    }
    std::process::exit(run_parent());
}

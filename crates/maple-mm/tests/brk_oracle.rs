//! Linux is the oracle for the program break: random sequences of `brk`
//! calls, mixed with `mmap`, `munmap`, `mprotect`, `mseal` and `mlockall`
//! around the heap, run on this machine's kernel and on an
//! `AddressSpace`, which must agree on every call's result and, after
//! every call, on the VMAs around the heap (maps lines with the flags
//! smaps adds).
//!
//! The heap cannot be put in a window of our choosing as the main
//! oracle's mappings are (`kernel_oracle.rs`): it is the process's own, at
//! `mm->start_brk`, and the process's allocator lives in it. So each
//! sequence runs in a fresh child process (this file's own `main`,
//! started again with `MAPLE_BRK_CHILD=1`) that reads its sequence and
//! then stops using the allocator: the operations and the report live in
//! memory it maps itself, its calls are raw system calls (the allocator
//! caches the break, which the sequence makes stale, and may have its
//! data in pages the sequence unmaps), and it writes its report and exits
//! without returning to it. The model starts from the child's smaps (the
//! whole process, so that it knows what lies above the heap),
//! `mm->start_brk` from `/proc/self/stat` and the break that `brk(0)`
//! gives.
//!
//! The sequences also set resource limits (`RLIMIT_AS`, `RLIMIT_DATA`
//! relative to `VmSize` and `VmData`, `RLIMIT_MEMLOCK` relative to `VmLck`
//! or absolute, `RLIMIT_STACK`; the model's `total_vm`, `data_vm` and `locked_vm` must
//! equal them), remap, lock, and fault below grows-down mappings. A child
//! whose sequence sets `RLIMIT_MEMLOCK` gives up `CAP_IPC_LOCK`, which the
//! limit does not bind; a child without it (given up, or a user who is not
//! root) tells the model its limit. Limits are cut to the hard ones, which
//! the child reports (raising them takes `CAP_SYS_RESOURCE`).
//!
//! Addresses are written in pages from `start_brk` (so a sequence means
//! the same in every child, whatever the address randomization), break
//! values in bytes from it. Anonymous page counts are not compared: the
//! model does not know which of the allocator's heap pages are written.
//!
//! `MAPLE_BRK_SEQS=N` changes the number of sequences (default 300, plus
//! 2 fresh seeds, plus those in `KNOWN`); `MAPLE_BRK_SEED=S` runs one
//! seed, `MAPLE_BRK_OPS="op; op; ..."` one written-out sequence;
//! `MAPLE_BRK_TRACE=1` prints every operation's result and lines.

use std::{
    fmt,
    io::{Read, Write},
    process::{Command, Stdio},
};

use maple_mm::{
    Access, AddressSpace, Brk, Errno, Layout, MapFlags, MclFlags, MlockFlags, MremapFlags, Prot, PAGE_SIZE,
};
use rand::{rngs::SmallRng, Rng, SeedableRng};

mod common;

use common::{hidden_flags, hidden_names, normalise};

/// Pages compared below `start_brk`.
const BELOW: i64 = 64;
/// Pages compared from `start_brk` up: past the last page an operation
/// touches (`PAGES`) by more than a stack guard gap.
const ABOVE: i64 = 1600;
/// Operations place mappings and breaks in the first `PAGES` pages from
/// `start_brk`.
const PAGES: i64 = 1200;

/// Sequences that once found a difference (or pin a rule), run first.
const KNOWN: &[&str] = &[
    // Seed 170: a shrink with nothing mapped between the two breaks (the
    // heap's top unmapped) leaves the break where it was.
    "brk +262144; unmap 37 55; brk +253952",
    // Any mapping between the breaks lets the shrink go, and goes with it.
    "brk +262144; unmap 37 55; map 63 1 r-- p; brk +253952",
    // Seed 2198: a mapping that starts at the break is not the heap.
    "brk +565248; map 138 29 rwx p noreplace",
    // RLIMIT_AS: a mapping that does not fit fails with the VMAs it would
    // replace cut at its start (seed 12 of the first run) or at its end.
    "brk +262144; aslimit +10; map 50 30 r-- p",
    "brk +262144; unmap 10 10; aslimit +4; map 15 10 r-- p",
    // What it replaces counts as freed.
    "brk +262144; aslimit +16; map 50 30 r-- p",
    // A stack grows only within it (seed 506 with the check left out).
    "map 562 10 rw- p noreplace gd; aslimit +5; fault 556",
    "map 562 10 rw- p noreplace gd; aslimit +6; fault 556",
    // brk and mremap grow only within it; DONTUNMAP's copy counts.
    "brk +262144; aslimit +3; brk +278528; brk +270336",
    "brk +262144; aslimit +3; remap 60 4 8; remap 60 4 7",
    "brk +262144; aslimit +3; remap 60 4 4 maymove to 300 dontunmap; remap 60 3 3 maymove to 300 dontunmap",
    // A DONTUNMAP move of several VMAs checks each piece's copy as it
    // goes: the first (10 pages) moves, the second fails (seed 16,381 of
    // the first 20,000); with room for 9, nothing moves.
    "brk +262144; unmap 20 4; aslimit +10; remap 10 20 20 maymove to 300 fixed dontunmap",
    "brk +262144; unmap 20 4; aslimit +9; remap 10 20 20 maymove to 300 fixed dontunmap",
    // RLIMIT_DATA counts private writable memory only (not read-only,
    // shared or grows-down mappings), an mprotect that makes it so too,
    // and a brk counts the heap with the program's data, shrinks too.
    "datalimit +10; map 300 20 rw- p; map 300 20 r-- p; map 340 20 rw- s; map 380 20 rw- p gd",
    "datalimit +10; map 300 20 r-- p; protect 300 20 rw-; protect 300 8 rw-",
    "brk +262144; datalimit =8; brk +131072; brk +270336; datalimit =400; brk +131072",
    // RLIMIT_MEMLOCK (the child gives up CAP_IPC_LOCK): mlock counts the
    // range's pages not locked yet; a limit of 0 refuses every lock; a
    // locked mapping or growth fails with EAGAIN, a locked stack does not
    // grow; mlockall(MCL_CURRENT) counts everything mapped.
    "map 300 20 rw- p; memlock +10; lock 300 20; lock 300 10; lock 300 12; lock 305 10 onfault",
    "map 300 20 rw- p; lock 300 10; memlock +5; lock 300 12; lock 300 16",
    "memlock =0; lock 300 1; map 300 4 rw- p locked; lockall 2; unlockall",
    "memlock +4; map 300 8 rw- p locked; map 300 4 rw- p locked",
    "memlock +100; lockall 1",
    "map 562 10 rw- p noreplace gd locked; memlock +5; fault 556; memlock +6; fault 556",
    "map 300 4 rw- p locked; memlock +3; remap 300 4 8; remap 300 4 7",
    // RLIMIT_STACK: a stack grows to it, not past it (16 pages here).
    "map 562 10 rw- p noreplace gd; stacklimit =15; fault 556; stacklimit =16; fault 556",
    // MREMAP_DONTUNMAP unlocks the old VMA (all of it) but Linux goes on
    // counting its pages as locked, even once it is unmapped (VmLck 92 KiB
    // with 12 locked).
    "map 300 20 rw- p locked; remap 303 3 3 maymove to 500 fixed dontunmap; memlock +0; unmap 300 20; memlock +0",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// `brk(start_brk + to)`, or `brk(0)` for `None`.
    Brk {
        to: Option<i64>,
    },
    /// `brk(addr)`, wherever the heap is: the top of user space and past it.
    BrkAt {
        addr: u64,
    },
    /// A fixed mapping (`MAP_FIXED`, or `MAP_FIXED_NOREPLACE`).
    Map {
        page: i64,
        pages: i64,
        prot: u8,
        shared: bool,
        growsdown: bool,
        noreplace: bool,
        locked: bool,
    },
    Unmap {
        page: i64,
        pages: i64,
    },
    Protect {
        page: i64,
        pages: i64,
        prot: u8,
    },
    Seal {
        page: i64,
        pages: i64,
    },
    LockAll {
        flags: i32,
    },
    UnlockAll,
    /// A write to the page by the kernel for the process (`read(2)` from
    /// `/dev/zero` into it): `EFAULT` where the page fault fails, a stack
    /// growing down to it where one may.
    Fault {
        page: i64,
    },
    /// `setrlimit(RLIMIT_AS)` to what the process takes now (`VmSize`)
    /// and `pages` more (or fewer).
    AsLimit {
        pages: i64,
    },
    /// `setrlimit(RLIMIT_DATA)` to the private writable memory the process
    /// takes now (`VmData`) and `pages` more (or fewer).
    DataLimit {
        pages: i64,
    },
    /// `mlock` (or `mlock2(MLOCK_ONFAULT)`) of pages from `page`.
    Lock {
        page: i64,
        pages: i64,
        onfault: bool,
    },
    Unlock {
        page: i64,
        pages: i64,
    },
    /// `setrlimit(RLIMIT_MEMLOCK)` to the memory the process has locked
    /// (`VmLck`) and `pages` more (or fewer), the child having given up
    /// `CAP_IPC_LOCK` (which the limit does not bind).
    MemLock {
        pages: i64,
    },
    /// `setrlimit(RLIMIT_MEMLOCK)` to `pages` (0 refuses every lock).
    MemLockAt {
        pages: i64,
    },
    /// `setrlimit(RLIMIT_STACK)` to `pages`: how far a stack may grow.
    StackLimitAt {
        pages: i64,
    },
    /// `setrlimit(RLIMIT_DATA)` to `pages` (less than a process takes:
    /// every growth fails, and a `brk` whose heap and data would not fit,
    /// shrinks too).
    DataLimitAt {
        pages: i64,
    },
    /// `mremap` of pages from `page`: in place, free to move (`maymove`),
    /// or to page `to`, fixed (`MREMAP_FIXED`) or as a hint, leaving the
    /// old pages mapped (`MREMAP_DONTUNMAP`) or not.
    Remap {
        page: i64,
        pages: i64,
        new_pages: i64,
        maymove: bool,
        to: Option<i64>,
        fixed: bool,
        dontunmap: bool,
    },
}

fn prot_str(p: u8) -> String {
    let c = |bit: u8, ch: char| if p & bit != 0 { ch } else { '-' };
    format!("{}{}{}", c(1, 'r'), c(2, 'w'), c(4, 'x'))
}

fn parse_prot(s: &str) -> u8 {
    s.bytes().zip([1u8, 2, 4]).filter(|(b, _)| *b != b'-').map(|(_, bit)| bit).sum()
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Op::Brk { to: None } => write!(f, "brk 0"),
            Op::Brk { to: Some(to) } => write!(f, "brk {to:+}"),
            Op::BrkAt { addr } => write!(f, "brk ={addr:#x}"),
            Op::Map { page, pages, prot, shared, growsdown, noreplace, locked } => write!(
                f,
                "map {page} {pages} {} {}{}{}{}",
                prot_str(prot),
                if shared { 's' } else { 'p' },
                if noreplace { " noreplace" } else { "" },
                if growsdown { " gd" } else { "" },
                if locked { " locked" } else { "" }
            ),
            Op::Lock { page, pages, onfault } => {
                write!(f, "lock {page} {pages}{}", if onfault { " onfault" } else { "" })
            }
            Op::Unlock { page, pages } => write!(f, "unlock {page} {pages}"),
            Op::MemLock { pages } => write!(f, "memlock {pages:+}"),
            Op::MemLockAt { pages } => write!(f, "memlock ={pages}"),
            Op::Unmap { page, pages } => write!(f, "unmap {page} {pages}"),
            Op::Protect { page, pages, prot } => write!(f, "protect {page} {pages} {}", prot_str(prot)),
            Op::Seal { page, pages } => write!(f, "seal {page} {pages}"),
            Op::LockAll { flags } => write!(f, "lockall {flags}"),
            Op::UnlockAll => write!(f, "unlockall"),
            Op::AsLimit { pages } => write!(f, "aslimit {pages:+}"),
            Op::DataLimit { pages } => write!(f, "datalimit {pages:+}"),
            Op::DataLimitAt { pages } => write!(f, "datalimit ={pages}"),
            Op::StackLimitAt { pages } => write!(f, "stacklimit ={pages}"),
            Op::Fault { page } => write!(f, "fault {page}"),
            Op::Remap { page, pages, new_pages, maymove, to, fixed, dontunmap } => {
                write!(f, "remap {page} {pages} {new_pages}")?;
                if maymove {
                    write!(f, " maymove")?;
                }
                if let Some(to) = to {
                    write!(f, " to {to}")?;
                }
                if fixed {
                    write!(f, " fixed")?;
                }
                if dontunmap {
                    write!(f, " dontunmap")?;
                }
                Ok(())
            }
        }
    }
}

fn parse_op(line: &str) -> Op {
    let w: Vec<&str> = line.split_whitespace().collect();
    let n = |i: usize| -> i64 { w[i].parse().unwrap_or_else(|_| panic!("a number in {line:?}")) };
    match w[0] {
        "brk" if w[1] == "0" => Op::Brk { to: None },
        "brk" if w[1].starts_with('=') => {
            Op::BrkAt { addr: u64::from_str_radix(w[1].trim_start_matches("=0x"), 16).expect("brk =0xADDR") }
        }
        "brk" => Op::Brk { to: Some(n(1)) },
        "map" => Op::Map {
            page: n(1),
            pages: n(2),
            prot: parse_prot(w[3]),
            shared: w[4] == "s",
            noreplace: w.contains(&"noreplace"),
            locked: w.contains(&"locked"),
            growsdown: w.contains(&"gd"),
        },
        "unmap" => Op::Unmap { page: n(1), pages: n(2) },
        "protect" => Op::Protect { page: n(1), pages: n(2), prot: parse_prot(w[3]) },
        "seal" => Op::Seal { page: n(1), pages: n(2) },
        "lockall" => Op::LockAll { flags: n(1) as i32 },
        "unlockall" => Op::UnlockAll,
        "aslimit" => Op::AsLimit { pages: n(1) },
        "datalimit" if w[1].starts_with('=') => {
            Op::DataLimitAt { pages: w[1][1..].parse().unwrap_or_else(|_| panic!("datalimit =PAGES in {line:?}")) }
        }
        "datalimit" => Op::DataLimit { pages: n(1) },
        "lock" => Op::Lock { page: n(1), pages: n(2), onfault: w.contains(&"onfault") },
        "unlock" => Op::Unlock { page: n(1), pages: n(2) },
        "memlock" if w[1].starts_with('=') => {
            Op::MemLockAt { pages: w[1][1..].parse().unwrap_or_else(|_| panic!("memlock =PAGES in {line:?}")) }
        }
        "memlock" => Op::MemLock { pages: n(1) },
        "stacklimit" => Op::StackLimitAt {
            pages: w[1].trim_start_matches('=').parse().unwrap_or_else(|_| panic!("stacklimit =PAGES in {line:?}")),
        },
        "fault" => Op::Fault { page: n(1) },
        "remap" => Op::Remap {
            page: n(1),
            pages: n(2),
            new_pages: n(3),
            maymove: w.contains(&"maymove"),
            to: w.iter().position(|&x| x == "to").map(|i| n(i + 1)),
            fixed: w.contains(&"fixed"),
            dontunmap: w.contains(&"dontunmap"),
        },
        other => panic!("unknown operation {other:?} in {line:?}"),
    }
}

/// A sequence of 24 operations, from a seed.
fn generate(seed: u64) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let page = |rng: &mut SmallRng| rng.gen_range(0..PAGES - 64);
    let prots = [0u8, 1, 3, 3, 3, 5, 7];
    // Where grows-down mappings were asked for: faults go below them.
    let mut stacks: Vec<i64> = Vec::new();
    (0..24)
        .map(|_| match rng.gen_range(0..132) {
            0..=44 => {
                let to = match rng.gen_range(0..12) {
                    0 => None,
                    // Past the top of user space, at it, or where the
                    // page rounding overflows: always refused.
                    10 => {
                        let top = [0x7fff_ffff_f000u64, 1 << 47, (1 << 47) + 1, u64::MAX - 100, u64::MAX];
                        return Op::BrkAt { addr: top[rng.gen_range(0..top.len())] };
                    }
                    // Below the heap's start: always refused.
                    1 => Some(-rng.gen_range(1..4 * PAGE_SIZE as i64)),
                    // Somewhere up to 700 pages, on a page or not.
                    _ => {
                        let p = rng.gen_range(0..700i64) * PAGE_SIZE as i64;
                        Some(if rng.gen_bool(0.5) { p } else { p + rng.gen_range(1..PAGE_SIZE as i64) })
                    }
                };
                Op::Brk { to }
            }
            45..=62 => {
                let growsdown = rng.gen_range(0..5) == 0;
                let at = page(&mut rng);
                if growsdown {
                    stacks.push(at);
                }
                Op::Map {
                    page: at,
                    pages: rng.gen_range(1..40),
                    prot: prots[rng.gen_range(0..prots.len())],
                    shared: !growsdown && rng.gen_range(0..5) == 0,
                    growsdown,
                    noreplace: rng.gen_range(0..4) == 0,
                    locked: rng.gen_range(0..8) == 0,
                }
            }
            63..=76 => Op::Unmap { page: page(&mut rng), pages: rng.gen_range(1..60) },
            77..=88 => {
                Op::Protect { page: page(&mut rng), pages: rng.gen_range(1..60), prot: prots[rng.gen_range(0..7)] }
            }
            89..=91 => Op::Seal { page: page(&mut rng), pages: rng.gen_range(1..20) },
            92..=95 => Op::LockAll { flags: [2, 6, 3, 1, 0][rng.gen_range(0..5)] },
            96 => Op::UnlockAll,
            97..=98 => Op::AsLimit { pages: rng.gen_range(-20..400) },
            118..=120 => Op::DataLimit { pages: rng.gen_range(-20..400) },
            121 => Op::DataLimitAt { pages: rng.gen_range(1..400) },
            122..=125 => Op::Lock { page: page(&mut rng), pages: rng.gen_range(1..60), onfault: rng.gen_bool(0.3) },
            126 => Op::Unlock { page: page(&mut rng), pages: rng.gen_range(1..60) },
            127..=128 => Op::MemLock { pages: rng.gen_range(-20..200) },
            129 => Op::MemLockAt { pages: rng.gen_range(0..40) },
            130..=131 => Op::StackLimitAt { pages: rng.gen_range(1..60) },
            99..=106 => {
                let below = stacks.get(rng.gen_range(0..stacks.len().max(1))).map(|s| s - rng.gen_range(1..12));
                Op::Fault { page: below.unwrap_or_else(|| page(&mut rng)) }
            }
            _ => {
                let pages = rng.gen_range(1..30);
                let (maymove, to, fixed, dontunmap, new_pages) = match rng.gen_range(0..10) {
                    0..=3 => (false, None, false, false, rng.gen_range(1..60)),
                    4..=6 => (true, None, false, false, rng.gen_range(1..60)),
                    7..=8 => (true, Some(page(&mut rng)), true, false, rng.gen_range(1..60)),
                    _ => (true, Some(page(&mut rng)), rng.gen_bool(0.5), true, pages),
                };
                // Half from the heap's first pages, mapped more often than not.
                let from = if rng.gen_bool(0.5) { rng.gen_range(0..100) } else { page(&mut rng) };
                Op::Remap { page: from, pages, new_pages, maymove, to, fixed, dontunmap }
            }
        })
        .collect()
}

/// The flags of a `map` operation (the model's are Linux's numbers, which
/// the child passes on).
fn map_flags(op: &Op) -> MapFlags {
    let Op::Map { shared, growsdown, noreplace, locked, .. } = *op else { unreachable!("not a map") };
    let mut flags = MapFlags::ANONYMOUS | if shared { MapFlags::SHARED } else { MapFlags::PRIVATE };
    flags |= if noreplace { MapFlags::FIXED_NOREPLACE } else { MapFlags::FIXED };
    flags.set(MapFlags::LOCKED, locked);
    flags.set(MapFlags::GROWSDOWN, growsdown);
    flags
}

/// The flags of a `remap` operation.
fn remap_flags(op: &Op) -> MremapFlags {
    let Op::Remap { maymove, fixed, dontunmap, .. } = *op else { unreachable!("not a remap") };
    let mut flags = MremapFlags::empty();
    flags.set(MremapFlags::MAYMOVE, maymove);
    flags.set(MremapFlags::FIXED, fixed);
    flags.set(MremapFlags::DONTUNMAP, dontunmap);
    flags
}

/// The address a `brk` operation asks for, with the heap at `start`.
fn brk_target(op: &Op, start: u64) -> u64 {
    match *op {
        Op::Brk { to } => to.map_or(0, |to| start.wrapping_add_signed(to)),
        Op::BrkAt { addr } => addr,
        _ => unreachable!("not a brk"),
    }
}

/// One compared line: the maps line and the hidden flags.
fn line(maps: &str, flags: maple_mm::VmFlags) -> String {
    format!("{} | {}", normalise(maps), hidden_names(flags))
}

// ---------------------------------------------------------------- model --

struct Model {
    mm: AddressSpace,
    start: u64,
    /// The child's hard limits: `RLIMIT_AS`, `_DATA`, `_MEMLOCK`, `_STACK`.
    hard: [u64; 4],
}

impl Model {
    /// The model of the child's first report: `start_brk`, the break and
    /// the smaps lines around the heap (each `HEADER | VmFlags`).
    fn new(start: u64, brk: u64, lines: &[String]) -> Model {
        let smaps: String = lines
            .iter()
            .map(|l| {
                let (header, flags) = l.split_once(" | ").expect("HEADER | FLAGS");
                format!("{header}\nVmFlags: {flags}\n")
            })
            .collect();
        let mut mm = AddressSpace::from_maps_with(&smaps, "the child's smaps", Layout::default())
            .unwrap_or_else(|e| panic!("the child's lines parse: {e}"));
        mm.set_brk(Brk { start, current: brk }).expect("the child's break");
        Model { mm, start, hard: [u64::MAX; 4] }
    }

    fn at(&self, page: i64) -> u64 {
        self.start.wrapping_add_signed(page * PAGE_SIZE as i64)
    }

    fn apply(&mut self, op: &Op) -> String {
        let len = |pages: i64| pages as u64 * PAGE_SIZE;
        let done = |r: Result<(), Errno>| match r {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("err {}", e.code()),
        };
        match *op {
            Op::Brk { .. } | Op::BrkAt { .. } => {
                let to = brk_target(op, self.start);
                format!("brk {:+}", self.mm.brk(to) as i64 - self.start as i64)
            }
            Op::Map { page, pages, prot, .. } => {
                let flags = map_flags(op);
                let prot = Prot::from_bits_truncate(u32::from(prot));
                done(self.mm.mmap(self.at(page), len(pages), prot, flags, None, 0).map(|_| ()))
            }
            Op::Unmap { page, pages } => done(self.mm.munmap(self.at(page), len(pages))),
            Op::Protect { page, pages, prot } => {
                done(self.mm.mprotect(self.at(page), len(pages), Prot::from_bits_truncate(u32::from(prot))))
            }
            Op::Seal { page, pages } => done(self.mm.mseal(self.at(page), len(pages), 0)),
            Op::LockAll { flags } => done(self.mm.mlockall(MclFlags::from_bits_retain(flags as u32))),
            Op::UnlockAll => done(self.mm.munlockall()),
            Op::Fault { page } => match self.mm.fault(self.at(page), Access::Write) {
                Ok(()) => "ok".into(),
                Err(_) => format!("err {}", Errno::EFAULT.code()),
            },
            Op::DataLimitAt { pages } => {
                self.mm.set_data_limit((pages as u64 * PAGE_SIZE).min(self.hard[1]));
                "ok".into()
            }
            Op::StackLimitAt { pages } => {
                self.mm.set_stack_limit((pages as u64 * PAGE_SIZE).min(self.hard[3]));
                "ok".into()
            }
            Op::Lock { page, pages, onfault } => {
                let flags = if onfault { MlockFlags::ONFAULT } else { MlockFlags::empty() };
                done(self.mm.mlock2(self.at(page), len(pages), flags))
            }
            Op::Unlock { page, pages } => done(self.mm.munlock(self.at(page), len(pages))),
            Op::MemLock { pages } => {
                let locked = self.mm.locked_vm();
                self.mm.set_memlock_limit(locked.saturating_add_signed(pages * PAGE_SIZE as i64).min(self.hard[2]));
                format!("vm {}", locked / 1024)
            }
            Op::MemLockAt { pages } => {
                self.mm.set_memlock_limit((pages as u64 * PAGE_SIZE).min(self.hard[2]));
                "ok".into()
            }
            Op::DataLimit { pages } => {
                let data = self.mm.data_vm();
                self.mm.set_data_limit(data.saturating_add_signed(pages * PAGE_SIZE as i64).min(self.hard[1]));
                format!("vm {}", data / 1024)
            }
            Op::AsLimit { pages } => {
                let total = self.mm.total_vm();
                self.mm.set_as_limit(total.saturating_add_signed(pages * PAGE_SIZE as i64).min(self.hard[0]));
                format!("vm {}", total / 1024)
            }
            Op::Remap { page, pages, new_pages, to, .. } => {
                let flags = remap_flags(op);
                let to = to.map_or(0, |p| self.at(p));
                done(self.mm.mremap(self.at(page), len(pages), len(new_pages), flags, to).map(|_| ()))
            }
        }
    }

    fn lines(&self) -> Vec<String> {
        self.mm.range(self.at(-BELOW), self.at(ABOVE)).map(|v| line(&self.mm.maps_line(&v), v.flags())).collect()
    }
}

// --------------------------------------------------------------- parent --

/// Runs one sequence in a fresh child: `Ok(operations)` or the
/// divergence, described.
fn run_one(exe: &std::path::Path, ops: &[Op], trace: bool) -> Result<usize, String> {
    let mut child = Command::new(exe)
        .env("MAPLE_BRK_CHILD", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the child");
    let text: String = ops.iter().map(|op| format!("{op}\n")).collect();
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("the sequence");
    let mut out = String::new();
    child.stdout.take().expect("stdout").read_to_string(&mut out).expect("the report");
    let status = child.wait().expect("the child's end");
    let mut report = out.lines();
    let head = report.next().unwrap_or_default();
    if head.starts_with("skip") {
        return Err(head.to_string());
    }
    let f: Vec<&str> = head.split_whitespace().collect();
    let field = |i: usize| f.get(i).and_then(|s| s.parse().ok());
    let (Some(start), Some(brk), Some(data), Some(memlock)) = (field(1), field(3), field(5), field(7)) else {
        return Err(format!("the child reported {head:?} ({status})"));
    };
    // The hard limits (`RLIMIT_AS`, `_DATA`, `_MEMLOCK`, `_STACK`), which the child
    // cannot raise (it may lack CAP_SYS_RESOURCE): the limits it sets are
    // cut to them.
    let hard: Vec<u64> =
        report.next().unwrap_or_default().split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let [as_max, data_max, memlock_max, stack_max] = hard[..] else {
        return Err(format!("the child reported no hard limits ({status})"));
    };
    // The lines up to the next `.`.
    let block = |report: &mut std::str::Lines<'_>| -> Option<Vec<String>> {
        let mut v = Vec::new();
        loop {
            let l = report.next()?;
            if l == "." {
                return Some(v);
            }
            v.push(l.to_string());
        }
    };
    let kernel_lines = |b: Vec<String>| -> Vec<String> {
        b.iter()
            .map(|l| {
                let (header, flags) = l.split_once(" | ").expect("HEADER | FLAGS");
                line(header, hidden_flags(flags))
            })
            .collect()
    };
    // The whole process first (the model knows what lies above the heap,
    // as the kernel's checks do), then the lines around the heap.
    let first = block(&mut report).ok_or("no first report")?;
    let mut model = Model::new(start, brk, &first);
    model.hard = [as_max, data_max, memlock_max, stack_max];
    model.mm.set_data_segment(data);
    model.mm.set_memlock_limit(memlock);
    let (lo, hi) = (model.at(-BELOW), model.at(ABOVE));
    let around: Vec<String> = first
        .into_iter()
        .filter(|l| {
            let range = l.split_once(' ').and_then(|(r, _)| r.split_once('-'));
            let hex = |s: &str| u64::from_str_radix(s, 16).ok();
            range.and_then(|(s, e)| Some((hex(s)?, hex(e)?))).is_some_and(|(s, e)| s < hi && e > lo)
        })
        .collect();
    let (want, got) = (model.lines(), kernel_lines(around));
    if want != got {
        return Err(format!("the model does not start as the child: {want:#?} against {got:#?}"));
    }
    for (i, op) in ops.iter().enumerate() {
        let want_res = model.apply(op);
        let (Some(got_res), Some(got)) = (report.next(), block(&mut report)) else {
            return Err(format!("the child stopped at op {} ({op}), {status}", i + 1));
        };
        let (want, got) = (model.lines(), kernel_lines(got));
        if trace {
            println!("{op}: {got_res}");
            for l in &got {
                println!("    {l}");
            }
        }
        if want_res != got_res || want != got {
            let mut msg = format!("op {} ({op}): model {want_res}, kernel {got_res}\n", i + 1);
            for l in &want {
                if !got.contains(l) {
                    msg += &format!("  model only:  {l}\n");
                }
            }
            for l in &got {
                if !want.contains(l) {
                    msg += &format!("  kernel only: {l}\n");
                }
            }
            return Err(msg);
        }
    }
    Ok(ops.len())
}

fn run_parent() -> i32 {
    let n: u64 = std::env::var("MAPLE_BRK_SEQS").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let fresh =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    let mut seqs: Vec<(String, Vec<Op>)> =
        KNOWN.iter().map(|k| (format!("known {k:?}"), k.split(';').map(parse_op).collect())).collect();
    let seeds = (0..n).chain((0..2).map(|i| fresh.wrapping_mul(6364136223846793005).wrapping_add(i)));
    seqs.extend(seeds.map(|s| (format!("seed {s}"), generate(s))));
    if let Some(one) = std::env::var("MAPLE_BRK_SEED").ok().and_then(|s| s.parse().ok()) {
        seqs = vec![(format!("seed {one}"), generate(one))];
    }
    if let Ok(ops) = std::env::var("MAPLE_BRK_OPS") {
        seqs = vec![("given".into(), ops.split(';').map(parse_op).collect())];
    }
    let exe = std::env::current_exe().expect("own path");
    let trace = std::env::var_os("MAPLE_BRK_TRACE").is_some();
    let (mut passed, mut failed, mut ops_run) = (0, 0, 0);
    for (name, ops) in &seqs {
        match run_one(&exe, ops, trace) {
            Ok(n) => {
                passed += 1;
                ops_run += n;
            }
            Err(e) if e.starts_with("skip") => {
                println!("brk oracle: {e}");
                return 0;
            }
            Err(e) => {
                failed += 1;
                let text: Vec<String> = ops.iter().map(Op::to_string).collect();
                println!("brk oracle: {name} differs at {e}  sequence: MAPLE_BRK_OPS=\"{}\"", text.join("; "));
                if failed >= 5 {
                    break;
                }
            }
        }
    }
    println!("brk oracle: {ops_run} operations in {passed} sequences");
    println!("{passed} passed, {failed} failed");
    i32::from(failed > 0)
}

// ---------------------------------------------------------------- child --

#[cfg(target_os = "linux")]
mod child {
    use std::io::{BufRead, Write};

    use super::*;

    /// Memory of our own, away from the heap (the kernel places it near
    /// the top of the address space), that the allocator knows nothing of.
    fn own_buffer(len: usize) -> &'static mut [u8] {
        // SAFETY: a fresh private anonymous mapping, never unmapped, that
        // nothing else refers to: the slice is its only user.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED, "a buffer of our own");
            std::slice::from_raw_parts_mut(p.cast::<u8>(), len)
        }
    }

    /// Fields 45 to 47 of `/proc/self/stat`: `mm->start_data`,
    /// `end_data` and `start_brk`.
    fn data_and_brk() -> Option<[u64; 3]> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let after_comm = &stat[stat.rfind(')')? + 1..];
        let mut f = after_comm.split_whitespace().skip(42).map(|x| x.parse().ok());
        Some([f.next()??, f.next()??, f.next()??])
    }

    /// Whether this process holds `CAP_IPC_LOCK`, after giving it up
    /// (effective and permitted) if `drop`, so that `RLIMIT_MEMLOCK` binds
    /// it as it binds an unprivileged process.
    fn ipc_lock(drop: bool) -> bool {
        /// `struct __user_cap_header_struct`.
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        /// `struct __user_cap_data_struct`.
        #[repr(C)]
        #[derive(Clone, Copy)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const CAP_IPC_LOCK: u32 = 14;
        let mut header = Header { version: 0x2008_0522, pid: 0 };
        let mut data = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
        // SAFETY: capget and capset read and write the structs we pass,
        // laid out as the kernel's (version 3: two data structs).
        unsafe {
            assert_eq!(libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()), 0, "capget");
            if drop {
                data[0].effective &= !(1 << CAP_IPC_LOCK);
                data[0].permitted &= !(1 << CAP_IPC_LOCK);
                assert_eq!(libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()), 0, "capset");
            }
        }
        data[0].effective >> CAP_IPC_LOCK & 1 == 1
    }

    /// The last call's error number.
    fn errno() -> i32 {
        // SAFETY: libc's thread-local error number, read on this thread.
        unsafe { *libc::__errno_location() }
    }

    /// Reads `/proc/self/smaps` into `buf` with raw calls (no allocation);
    /// the length read.
    fn read_smaps(buf: &mut [u8]) -> usize {
        read_file(c"/proc/self/smaps", buf)
    }

    /// A `/proc/self/status` field (`VmSize:`, `VmData:`), in KiB.
    fn status_kb(status: &[u8], field: &[u8]) -> u64 {
        let line = status.split(|&b| b == b'\n').find_map(|l| l.strip_prefix(field)).expect("a status field");
        line.iter().filter(|b| b.is_ascii_digit()).fold(0, |a, &b| a * 10 + u64::from(b - b'0'))
    }

    /// Reads the file at `path` into `buf` with raw calls (no
    /// allocation); the length read.
    fn read_file(path: &std::ffi::CStr, buf: &mut [u8]) -> usize {
        // SAFETY: a NUL-terminated path; reads into `buf`, ours, within
        // its length; the descriptor is closed here.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
            assert!(fd >= 0, "open {path:?}");
            let mut len = 0;
            loop {
                let n = libc::read(fd, buf[len..].as_mut_ptr().cast(), buf.len() - len);
                assert!(n >= 0, "read {path:?}");
                if n == 0 {
                    break;
                }
                len += n as usize;
                assert!(len < buf.len(), "{path:?} fits the buffer");
            }
            libc::close(fd);
            len
        }
    }

    /// Writes the smaps entries that overlap `lo..hi` as `HEADER |
    /// VMFLAGS` lines, then `.`.
    fn report_window(smaps: &[u8], lo: u64, hi: u64, out: &mut &mut [u8]) {
        let mut inside = None;
        for l in smaps.split(|&b| b == b'\n') {
            if let Some(flags) = l.strip_prefix(b"VmFlags:") {
                if let Some(header) = inside.take() {
                    out.write_all(header).unwrap();
                    out.write_all(b" | ").unwrap();
                    out.write_all(flags.trim_ascii()).unwrap();
                    out.write_all(b"\n").unwrap();
                }
                continue;
            }
            let Some(dash) = l.iter().position(|&b| b == b'-') else { continue };
            let Some(space) = l.iter().position(|&b| b == b' ') else { continue };
            if dash > space {
                continue;
            }
            let hex = |s: &[u8]| s.iter().try_fold(0u64, |a, &b| Some(a << 4 | (b as char).to_digit(16)? as u64));
            if let (Some(s), Some(e)) = (hex(&l[..dash]), hex(&l[dash + 1..space])) {
                inside = (s < hi && e > lo).then_some(l);
            }
        }
        out.write_all(b".\n").unwrap();
    }

    pub fn run() {
        let Some([start_data, end_data, start]) = data_and_brk() else {
            println!("skip: no start_brk in /proc/self/stat");
            return;
        };
        // The sequence, read with the allocator's help, then copied to
        // memory of our own.
        let ops_heap: Vec<Op> = std::io::stdin().lock().lines().map(|l| parse_op(&l.expect("a line"))).collect();
        let ops_mem = own_buffer(ops_heap.len().max(1) * std::mem::size_of::<Op>());
        // SAFETY: the buffer is fresh, page-aligned (so aligned for `Op`)
        // and holds `ops_heap.len()` of them; `Op` is `Copy`.
        let ops: &mut [Op] = unsafe {
            let p = ops_mem.as_mut_ptr().cast::<Op>();
            std::ptr::copy_nonoverlapping(ops_heap.as_ptr(), p, ops_heap.len());
            std::slice::from_raw_parts_mut(p, ops_heap.len())
        };
        std::mem::forget(ops_heap);
        let smaps = own_buffer(1 << 20);
        let report = own_buffer(1 << 20);
        let total = report.len();
        let mut out: &mut [u8] = &mut report[..];
        let at = |page: i64| start.wrapping_add_signed(page * PAGE_SIZE as i64);
        let (lo, hi) = (at(-BELOW), at(ABOVE));
        // Without CAP_IPC_LOCK (given up for the sequences that set the
        // limit, or never held, as by a user who is not root) the
        // process's RLIMIT_MEMLOCK binds from the start: the model is told.
        let drop = ops.iter().any(|op| matches!(op, Op::MemLock { .. } | Op::MemLockAt { .. }));
        let mut memlock = u64::MAX;
        if !ipc_lock(drop) {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: getrlimit writes into the struct we own.
            unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
            memlock = lim.rlim_cur;
        }
        // SAFETY: a NUL-terminated path.
        let zero = unsafe { libc::open(c"/dev/zero".as_ptr(), libc::O_RDONLY) };
        assert!(zero >= 0, "/dev/zero");
        // From here on, nothing allocates.
        // SAFETY: `brk(0)` changes nothing.
        let brk = unsafe { libc::syscall(libc::SYS_brk, 0usize) } as u64;
        let hard = |resource| {
            let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: getrlimit writes into the struct we own.
            unsafe { libc::getrlimit(resource, &mut lim) };
            lim.rlim_max
        };
        let hard =
            [hard(libc::RLIMIT_AS), hard(libc::RLIMIT_DATA), hard(libc::RLIMIT_MEMLOCK), hard(libc::RLIMIT_STACK)];
        writeln!(out, "start {start} brk {brk} data {} memlock {memlock}", end_data - start_data).unwrap();
        writeln!(out, "hard {} {} {} {}", hard[0], hard[1], hard[2], hard[3]).unwrap();
        let n = read_smaps(smaps);
        report_window(&smaps[..n], 0, u64::MAX, &mut out);
        for op in ops.iter() {
            let len = |pages: i64| (pages as u64 * PAGE_SIZE) as usize;
            let done = |ret: i64| if ret == -1 { (false, errno()) } else { (true, 0) };
            // SAFETY: every call is on pages from `start_brk` up, where
            // only the allocator's heap and this loop's mappings lie: the
            // allocator is not used again in this process, and no Rust
            // object of ours lives there (ours are in `own_buffer`s and on
            // the stack).
            let (ok, err) = unsafe {
                match *op {
                    Op::Brk { .. } | Op::BrkAt { .. } => {
                        let to = brk_target(op, start);
                        let ret = libc::syscall(libc::SYS_brk, to as usize) as u64;
                        writeln!(out, "brk {:+}", ret as i64 - start as i64).unwrap();
                        let n = read_smaps(smaps);
                        report_window(&smaps[..n], lo, hi, &mut out);
                        continue;
                    }
                    Op::Map { page, pages, prot, .. } => {
                        // The model's flags are Linux's numbers.
                        let flags = map_flags(op).bits() as i32;
                        let p = libc::mmap(at(page) as *mut _, len(pages), i32::from(prot), flags, -1, 0);
                        done(if p == libc::MAP_FAILED { -1 } else { 0 })
                    }
                    Op::Unmap { page, pages } => done(i64::from(libc::munmap(at(page) as *mut _, len(pages)))),
                    Op::Protect { page, pages, prot } => {
                        done(i64::from(libc::mprotect(at(page) as *mut _, len(pages), i32::from(prot))))
                    }
                    Op::Seal { page, pages } => done(libc::syscall(462, at(page) as usize, len(pages), 0usize)),
                    Op::LockAll { flags } => done(i64::from(libc::mlockall(flags))),
                    Op::UnlockAll => done(i64::from(libc::munlockall())),
                    Op::Fault { page } => done(libc::read(zero, at(page) as *mut _, 1) as i64),
                    Op::Lock { page, pages, onfault } => {
                        let flags = if onfault { libc::MLOCK_ONFAULT } else { 0 };
                        done(libc::syscall(libc::SYS_mlock2, at(page) as usize, len(pages), flags as usize))
                    }
                    Op::Unlock { page, pages } => done(i64::from(libc::munlock(at(page) as *const _, len(pages)))),
                    Op::MemLockAt { pages } => {
                        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                        libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim);
                        lim.rlim_cur = (pages as u64 * PAGE_SIZE).min(lim.rlim_max);
                        done(i64::from(libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim)))
                    }
                    Op::StackLimitAt { pages } => {
                        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                        libc::getrlimit(libc::RLIMIT_STACK, &mut lim);
                        lim.rlim_cur = (pages as u64 * PAGE_SIZE).min(lim.rlim_max);
                        done(i64::from(libc::setrlimit(libc::RLIMIT_STACK, &lim)))
                    }
                    Op::DataLimitAt { pages } => {
                        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                        libc::getrlimit(libc::RLIMIT_DATA, &mut lim);
                        lim.rlim_cur = (pages as u64 * PAGE_SIZE).min(lim.rlim_max);
                        done(i64::from(libc::setrlimit(libc::RLIMIT_DATA, &lim)))
                    }
                    Op::AsLimit { pages } | Op::DataLimit { pages } | Op::MemLock { pages } => {
                        let (field, resource) = match *op {
                            Op::AsLimit { .. } => (&b"VmSize:"[..], libc::RLIMIT_AS),
                            Op::DataLimit { .. } => (&b"VmData:"[..], libc::RLIMIT_DATA),
                            _ => (&b"VmLck:"[..], libc::RLIMIT_MEMLOCK),
                        };
                        let n = read_file(c"/proc/self/status", smaps);
                        let kb = status_kb(&smaps[..n], field);
                        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
                        libc::getrlimit(resource, &mut lim);
                        let want = (kb * 1024).saturating_add_signed(pages * PAGE_SIZE as i64);
                        // Clamped to the hard limit (which the parent knows).
                        lim.rlim_cur = want.min(lim.rlim_max);
                        if libc::setrlimit(resource, &lim) == 0 {
                            writeln!(out, "vm {kb}").unwrap();
                        } else {
                            writeln!(out, "vm {kb}, setrlimit err {}", errno()).unwrap();
                        }
                        let n = read_smaps(smaps);
                        report_window(&smaps[..n], lo, hi, &mut out);
                        continue;
                    }
                    Op::Remap { page, pages, new_pages, to, .. } => {
                        let flags = remap_flags(op).bits() as i32;
                        let to = to.map_or(0, at) as *mut libc::c_void;
                        let p = libc::mremap(at(page) as *mut _, len(pages), len(new_pages), flags, to);
                        done(if p == libc::MAP_FAILED { -1 } else { 0 })
                    }
                }
            };
            if ok {
                writeln!(out, "ok").unwrap();
            } else {
                writeln!(out, "err {err}").unwrap();
            }
            let n = read_smaps(smaps);
            report_window(&smaps[..n], lo, hi, &mut out);
        }
        let used = total - out.len();
        let mut left = &report[..used];
        while !left.is_empty() {
            // SAFETY: writes from our own buffer, within its length.
            let n = unsafe { libc::write(1, left.as_ptr().cast(), left.len()) };
            if n <= 0 {
                break;
            }
            left = &left[n as usize..];
        }
        // SAFETY: leaves at once, running nothing that might use the
        // allocator (whose heap the sequence has changed under it).
        unsafe { libc::_exit(0) }
    }
}

fn main() {
    if std::env::var_os("MAPLE_BRK_CHILD").is_some() {
        #[cfg(target_os = "linux")]
        child::run();
        return;
    }
    if !cfg!(target_os = "linux") {
        println!("brk oracle: not Linux, skipped");
        return;
    }
    std::process::exit(run_parent());
}

//! The observer's changes, checked against a page-granular model that
//! knows nothing but the changes: random sequences of every call kind
//! (failures and failed allocations included) run on an address space
//! with an observer; after every call the changes it heard, applied to the
//! model, must give the space's pages and attributes exactly, and must be
//! what `diff` finds between the space before and after (for a call that
//! moved nothing; a diff sees a move as an unmap and a map).

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use maple_mm::{
    Access, AddressSpace, Advice, AnonVma, Change, MapFlags, MappedFile, MbindFlags, MclFlags, MemPolicy, MlockFlags,
    MremapFlags, Prot, ShmFlags, ShmSegment, VmFlags, Vma, PAGE_SIZE,
};
use proptest::prelude::*;

const BASE: u64 = 0x4000_0000;
const PAGES: u64 = 48;

/// One page's attributes, as the public API shows them.
#[derive(Clone, Debug, PartialEq)]
struct Page {
    flags: VmFlags,
    file: Option<(u64, bool)>,
    pgoff: u64,
    name: Option<String>,
    anon: Option<AnonVma>,
    label: Option<String>,
    policy: Option<MemPolicy>,
}

fn page_of(v: &Vma<'_>, addr: u64) -> Page {
    Page {
        flags: v.flags(),
        file: v.file().map(|f| (f.inode, f.anon_shmem)),
        pgoff: v.pgoff().wrapping_add((addr - v.start()) / PAGE_SIZE),
        name: v.name().map(|n| n.to_string()),
        anon: v.anon_vma(),
        label: v.label().map(str::to_owned),
        policy: v.policy().cloned(),
    }
}

/// Every page of the space.
fn pages(mm: &AddressSpace) -> BTreeMap<u64, Page> {
    let mut out = BTreeMap::new();
    for v in mm.iter() {
        for a in (v.start()..v.end()).step_by(PAGE_SIZE as usize) {
            out.insert(a, page_of(&v, a));
        }
    }
    out
}

/// The model: pages and their attributes, changed only by what the
/// observer heard.
fn apply(model: &mut BTreeMap<u64, Page>, c: &Change) {
    match c {
        Change::Mapped { range, .. } | Change::Changed { range, .. } => {
            let v = c.vma().expect("a mapped change has attributes");
            for a in range.clone().step_by(PAGE_SIZE as usize) {
                model.insert(a, page_of(&v, a));
            }
        }
        Change::Unmapped { range, .. } => {
            for a in range.clone().step_by(PAGE_SIZE as usize) {
                assert!(model.remove(&a).is_some(), "{c}: page {a:#x} was not mapped");
            }
        }
        Change::Moved { from, to } => {
            let mut moved = Vec::new();
            for a in from.clone().step_by(PAGE_SIZE as usize) {
                let mut p = model.remove(&a).unwrap_or_else(|| panic!("{c}: page {a:#x} was not mapped"));
                let at = a - from.start + to;
                // Anonymous memory never written takes the offset of its
                // new place (see `Change::Moved`).
                if p.file.is_none() && p.anon.is_none() {
                    p.pgoff = at / PAGE_SIZE;
                }
                moved.push((at, p));
            }
            for (at, p) in moved {
                assert!(model.insert(at, p).is_none(), "{c}: target {at:#x} not unmapped first");
            }
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Map { page: u64, pages: u64, prot: u32, kind: u8, off: u64, fixed: bool },
    Unmap { page: u64, pages: u64 },
    Protect { page: u64, pages: u64, prot: u32 },
    Remap { page: u64, pages: u64, new_pages: u64, to: u64, how: u8 },
    Brk { pages: u64 },
    Advise { page: u64, pages: u64, advice: u8 },
    Lock { page: u64, pages: u64, how: u8 },
    LockAll { how: u8 },
    Seal { page: u64, pages: u64 },
    Bind { page: u64, pages: u64, mode: u32 },
    Name { page: u64, pages: u64, name: u8 },
    Touch { page: u64, pages: u64 },
    Fault { page: u64, write: bool },
    ShmAt { page: u64, seg: u8 },
    ShmDt { page: u64 },
    Exec,
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..PAGES).prop_flat_map(|p| (Just(p), 1..=(PAGES - p).min(12)));
    let page = 0..PAGES;
    prop_oneof![
        4 => (range.clone(), 0..8u32, 0..5u8, 0..8u64, any::<bool>())
            .prop_map(|((page, pages), prot, kind, off, fixed)| Op::Map { page, pages, prot, kind, off, fixed: fixed || kind == 4 }),
        2 => range.clone().prop_map(|(page, pages)| Op::Unmap { page, pages }),
        3 => (range.clone(), 0..8u32).prop_map(|((page, pages), prot)| Op::Protect { page, pages, prot }),
        3 => (range.clone(), 1..12u64, page.clone(), 0..4u8)
            .prop_map(|((page, pages), new_pages, to, how)| Op::Remap { page, pages, new_pages, to, how }),
        1 => (0..6u64).prop_map(|pages| Op::Brk { pages }),
        3 => (range.clone(), 0..12u8).prop_map(|((page, pages), advice)| Op::Advise { page, pages, advice }),
        2 => (range.clone(), 0..3u8).prop_map(|((page, pages), how)| Op::Lock { page, pages, how }),
        1 => (0..3u8).prop_map(|how| Op::LockAll { how }),
        1 => range.clone().prop_map(|(page, pages)| Op::Seal { page, pages }),
        1 => (range.clone(), 0..4u32).prop_map(|((page, pages), mode)| Op::Bind { page, pages, mode }),
        2 => (range.clone(), 0..3u8).prop_map(|((page, pages), name)| Op::Name { page, pages, name }),
        2 => range.clone().prop_map(|(page, pages)| Op::Touch { page, pages }),
        1 => (page.clone(), any::<bool>()).prop_map(|(page, write)| Op::Fault { page, write }),
        1 => (page.clone(), 0..2u8).prop_map(|(page, seg)| Op::ShmAt { page, seg }),
        1 => page.prop_map(|page| Op::ShmDt { page }),
        1 => Just(Op::Exec),
    ]
}

fn at(p: u64) -> u64 {
    BASE + p * PAGE_SIZE
}

/// Runs `op` (its result does not matter here: a failure must be told as
/// what it changed, usually nothing).
fn call(mm: &mut AddressSpace, op: &Op, files: &[Arc<MappedFile>]) {
    let len = |n: u64| n * PAGE_SIZE;
    let _ = match *op {
        Op::Map { page, pages, prot, kind, off, fixed } => {
            let mut f = if kind == 2 { MapFlags::SHARED } else { MapFlags::PRIVATE };
            if fixed {
                f |= MapFlags::FIXED;
            }
            let file = match kind {
                0 | 2 => {
                    f |= MapFlags::ANONYMOUS;
                    None
                }
                4 => {
                    f |= MapFlags::ANONYMOUS | MapFlags::GROWSDOWN;
                    None
                }
                _ => Some(Arc::clone(&files[usize::from(kind) % files.len()])),
            };
            mm.mmap(at(page), len(pages), Prot::from_bits_retain(prot), f, file, len(off)).map(drop)
        }
        Op::Unmap { page, pages } => mm.munmap(at(page), len(pages)),
        Op::Protect { page, pages, prot } => mm.mprotect(at(page), len(pages), Prot::from_bits_retain(prot)),
        Op::Remap { page, pages, new_pages, to, how } => {
            let flags = match how {
                0 => MremapFlags::empty(),
                1 => MremapFlags::MAYMOVE,
                2 => MremapFlags::MAYMOVE | MremapFlags::FIXED,
                _ => MremapFlags::MAYMOVE | MremapFlags::DONTUNMAP,
            };
            let new = if how == 3 { pages } else { new_pages };
            mm.mremap(at(page), len(pages), len(new), flags, at(to)).map(drop)
        }
        Op::Brk { pages } => {
            let base = mm.brk_state().map_or(0, |b| b.start);
            mm.brk(base + len(pages));
            Ok(())
        }
        Op::Advise { page, pages, advice } => {
            let a = [
                Advice::Normal,
                Advice::Random,
                Advice::Sequential,
                Advice::DontFork,
                Advice::DoFork,
                Advice::WipeOnFork,
                Advice::DontDump,
                Advice::HugePage,
                Advice::NoHugePage,
                Advice::PopulateWrite,
                Advice::GuardInstall,
                Advice::GuardRemove,
            ][usize::from(advice)];
            mm.madvise(at(page), len(pages), a)
        }
        Op::Lock { page, pages, how } => match how {
            0 => mm.mlock(at(page), len(pages)),
            1 => mm.mlock2(at(page), len(pages), MlockFlags::ONFAULT),
            _ => mm.munlock(at(page), len(pages)),
        },
        Op::LockAll { how } => match how {
            0 => mm.mlockall(MclFlags::CURRENT),
            1 => mm.mlockall(MclFlags::CURRENT | MclFlags::FUTURE),
            _ => mm.munlockall(),
        },
        Op::Seal { page, pages } => mm.mseal(at(page), len(pages), 0),
        Op::Bind { page, pages, mode } => mm.mbind(at(page), len(pages), mode, 0b1, MbindFlags::empty()),
        Op::Name { page, pages, name } => {
            mm.set_anon_name(at(page), len(pages), [None, Some("a"), Some("b")][usize::from(name)])
        }
        Op::Touch { page, pages } => mm.touch(at(page), len(pages)),
        Op::Fault { page, write } => mm
            .fault(at(page), if write { Access::Write } else { Access::Read })
            .map(drop)
            .map_err(|_| maple_mm::Errno::EFAULT),
        Op::ShmAt { page, seg } => {
            let s = ShmSegment { key: 0, id: 7 + i32::from(seg), size: 3 * PAGE_SIZE };
            mm.shmat(&s, at(page), ShmFlags::empty()).map(drop)
        }
        Op::ShmDt { page } => mm.shmdt(at(page)),
        Op::Exec => {
            mm.exec();
            Ok(())
        }
    };
}

fn run(ops: &[(Op, u8)]) -> Result<(), TestCaseError> {
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * PAGE_SIZE))).collect();
    let mut mm = AddressSpace::new();
    mm.set_brk_base(at(PAGES + 64)).expect("a heap above the window");
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.clone()));
    let mut model = BTreeMap::new();
    for (step, (op, fail)) in ops.iter().enumerate() {
        let before = mm.clone();
        // Every few calls, one of the tree's next allocations fails.
        maple_tree::fault::fail_nth_alloc(if *fail < 8 { u64::from(*fail) + 1 } else { 0 });
        call(&mut mm, op, &files);
        maple_tree::fault::fail_nth_alloc(0);
        mm.validate().map_err(|e| TestCaseError::fail(format!("step {step} {op:?}: {e}")))?;
        let changes = std::mem::take(&mut *heard.lock().unwrap());
        for c in &changes {
            apply(&mut model, c);
        }
        prop_assert!(model == pages(&mm), "step {} {:?}: the changes {:?} do not give the space", step, op, changes);
        if !changes.iter().any(|c| matches!(c, Change::Moved { .. })) {
            let diff: Vec<Change> = before.diff(&mm).collect();
            prop_assert_eq!(format!("{diff:?}"), format!("{changes:?}"), "step {} {:?}", step, op);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn changes_rebuild_the_space(ops in prop::collection::vec((op(), 0..32u8), 1..60)) {
        run(&ops)?;
    }
}

/// A move is told as a move, after the target's unmap, with the tail it
/// grew and nothing else.
#[test]
fn a_move_is_told_as_a_move() {
    let mut mm = AddressSpace::new();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.to_string()));
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap(0x10000, 2 * PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    mm.mmap(0x20000, PAGE_SIZE, Prot::READ, f, None, 0).unwrap();
    heard.lock().unwrap().clear();
    mm.mremap(0x10000, 2 * PAGE_SIZE, 3 * PAGE_SIZE, MremapFlags::MAYMOVE | MremapFlags::FIXED, 0x20000).unwrap();
    assert_eq!(
        *heard.lock().unwrap(),
        ["unmapped 20000-21000 r--p", "moved 10000-12000 to 20000", "mapped 22000-23000 rw-p"]
    );
}

/// An exec is every page unmapped; a call failing before any change and
/// a fork tell nothing.
#[test]
fn exec_fork_and_failures() {
    let mut mm = AddressSpace::new();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.to_string()));
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap(0x10000, PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    mm.mmap(0x30000, PAGE_SIZE, Prot::READ, f, None, 0).unwrap();
    heard.lock().unwrap().clear();
    assert!(mm.munmap(0x10001, PAGE_SIZE).is_err());
    assert!(mm.mprotect(0x50000, PAGE_SIZE, Prot::READ).is_err());
    let _child = mm.fork().unwrap();
    assert!(heard.lock().unwrap().is_empty());
    mm.exec();
    assert_eq!(*heard.lock().unwrap(), ["unmapped 10000-11000 rw-p", "unmapped 30000-31000 r--p"]);
}

/// A shared space keeps the observer for its writers, and gives it back.
#[test]
fn a_shared_space_tells_its_writers_changes() {
    let mut mm = AddressSpace::new();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.to_string()));
    let shared = maple_mm::SharedAddressSpace::from(mm);
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    shared.write().mmap(0x10000, 2 * PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    shared.write().mprotect(0x11000, PAGE_SIZE, Prot::NONE).unwrap();
    let mut mm = shared.into_inner();
    mm.munmap(0x10000, PAGE_SIZE).unwrap();
    assert_eq!(
        *heard.lock().unwrap(),
        ["mapped 10000-12000 rw-p", "changed 11000-12000 rw-p -> ---p", "unmapped 10000-11000 rw-p"]
    );
}

/// A range model of one process: start → (end, attributes at start).
type Ranges = BTreeMap<u64, (u64, Page)>;

/// `page` as it would be `by` bytes further on.
fn advanced(page: &Page, by: u64) -> Page {
    Page { pgoff: page.pgoff.wrapping_add(by / PAGE_SIZE), ..page.clone() }
}

/// Empties `[lo, hi)` of `m`, keeping what lies outside it.
fn cut(m: &mut Ranges, lo: u64, hi: u64) {
    let hit: Vec<u64> = m.range(..hi).filter(|(_, (e, _))| *e > lo).map(|(s, _)| *s).collect();
    for s in hit {
        let (e, p) = m.remove(&s).expect("listed");
        if s < lo {
            m.insert(s, (lo, p.clone()));
        }
        if e > hi {
            m.insert(hi, (e, advanced(&p, hi - s)));
        }
    }
}

fn apply_ranges(m: &mut Ranges, c: &Change) {
    match c {
        Change::Mapped { range, .. } | Change::Changed { range, .. } => {
            let v = c.vma().expect("mapped");
            cut(m, range.start, range.end);
            m.insert(range.start, (range.end, page_of(&v, range.start)));
        }
        Change::Unmapped { range, .. } => cut(m, range.start, range.end),
        Change::Moved { from, to } => {
            let pieces: Vec<(u64, u64, Page)> = m
                .range(..from.end)
                .filter(|(_, (e, _))| *e > from.start)
                .map(|(s, (e, p))| {
                    let (ps, pe) = ((*s).max(from.start), (*e).min(from.end));
                    (ps, pe, advanced(p, ps - s))
                })
                .collect();
            cut(m, from.start, from.end);
            for (s, e, mut p) in pieces {
                let at = s - from.start + to;
                if p.file.is_none() && p.anon.is_none() {
                    p.pgoff = at / PAGE_SIZE;
                }
                m.insert(at, (e - from.start + to, p));
            }
        }
    }
}

/// `m` with touching ranges whose attributes continue joined: the pages
/// and attributes alone, whatever the cuts.
fn joined(m: &Ranges) -> Vec<(u64, u64, Page)> {
    let mut out: Vec<(u64, u64, Page)> = Vec::new();
    for (s, (e, p)) in m {
        if let Some(last) = out.last_mut() {
            if last.1 == *s && advanced(&last.2, s - last.0) == *p {
                last.1 = *e;
                continue;
            }
        }
        out.push((*s, *e, p.clone()));
    }
    out
}

/// Real programs' logs (`tests/data/recorded`) replayed with their changes
/// recorded: each process's changes, applied in order to a range model
/// that starts empty, give its final address space.
#[test]
fn recorded_logs_changes_rebuild_every_process() {
    use maple_mm::strace::{ReplayOptions, Replayer};
    const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/recorded");
    for sample in ["churn", "python", "gcc", "sqlite", "node", "java", "locks", "seal"] {
        let bytes = std::fs::read(format!("{DIR}/{sample}.strace.xz")).unwrap();
        let mut text = Vec::new();
        lzma_rs::xz_decompress(&mut &bytes[..], &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        let mut r = Replayer::new(ReplayOptions { lenient: true, log_only: true, ..Default::default() }, None);
        r.record_changes();
        let mut models: BTreeMap<u32, Ranges> = BTreeMap::new();
        let mut told = 0;
        for (i, line) in text.lines().enumerate() {
            r.feed(i + 1, line).unwrap();
            for c in r.take_changes() {
                // (A child's lines held back until its clone returns are
                // applied then, with their own numbers.)
                assert!(c.line <= i + 1, "{sample}: a change told for line {} at line {}", c.line, i + 1);
                apply_ranges(models.entry(c.pid).or_default(), &c.change);
                told += 1;
            }
        }
        let done = r.finish().unwrap();
        assert!(told >= 10, "{sample}: only {told} changes");
        let mut checked = 0;
        for (pid, space) in &done.processes {
            // Threads share the space told under their group's first pid.
            let Some(m) = models.get(pid) else { continue };
            let mut want = Ranges::new();
            for v in space.iter() {
                want.insert(v.start(), (v.end(), page_of(&v, v.start())));
            }
            assert!(joined(m) == joined(&want), "{sample}: process {pid}'s changes do not give its space");
            checked += 1;
        }
        assert!(checked > 0, "{sample}: no process checked");
    }
}

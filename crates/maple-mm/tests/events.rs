//! The observer's changes, checked against a model of page ranges that
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
    AddressSpace, AnonVma, Change, Layout, MapFlags, MappedFile, MemPolicy, MremapFlags, Prot, VmFlags, Vma, PAGE_SIZE,
};
use proptest::prelude::*;

mod common;

use common::calls::{at_in, call, layout, op, Op, PAGES};

/// One page's attributes, as the public API shows them.
#[derive(Clone, Debug, PartialEq)]
struct Page {
    flags: VmFlags,
    file: Option<(u64, bool)>,
    offset: u64,
    name: Option<String>,
    anon: Option<AnonVma>,
    label: Option<String>,
    policy: Option<MemPolicy>,
    value: Option<u8>,
}

fn page_of(v: &Vma<'_>, addr: u64) -> Page {
    Page {
        flags: v.flags(),
        file: v.file().map(|f| (f.inode, f.anon_shmem)),
        offset: v.offset().wrapping_add(addr - v.start()),
        name: v.name().map(|n| n.to_string()),
        anon: v.anon_vma(),
        label: v.label().map(str::to_owned),
        policy: v.policy().cloned(),
        value: v.value::<u8>().copied(),
    }
}

/// The model: ranges of pages with their attributes (start → end and
/// the attributes at the start), changed only by what an observer heard.
type Ranges = BTreeMap<u64, (u64, Page)>;

/// The space as the model holds it.
fn ranges_of(mm: &AddressSpace) -> Ranges {
    mm.iter().map(|v| (v.start(), (v.end(), page_of(&v, v.start())))).collect()
}

/// Bytes of `[lo, hi)` the model holds mapped.
fn mapped(m: &Ranges, lo: u64, hi: u64) -> u64 {
    m.range(..hi).filter(|(_, (e, _))| *e > lo).map(|(s, (e, _))| (*e).min(hi) - (*s).max(lo)).sum()
}

/// `page` as it would be `by` bytes further on.
fn advanced(page: &Page, by: u64) -> Page {
    Page { offset: page.offset.wrapping_add(by), ..page.clone() }
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

/// Applies one change to the model.
fn apply(m: &mut Ranges, c: &Change) {
    match c {
        Change::Mapped { range, .. } | Change::Changed { range, .. } => {
            let v = c.vma().expect("mapped");
            cut(m, range.start, range.end);
            m.insert(range.start, (range.end, page_of(&v, range.start)));
        }
        Change::Unmapped { range, .. } => {
            assert_eq!(mapped(m, range.start, range.end), range.end - range.start, "{c}: not all of it was mapped");
            cut(m, range.start, range.end);
        }
        Change::Moved { from, to } => {
            assert_eq!(mapped(m, from.start, from.end), from.end - from.start, "{c}: not all of it was mapped");
            let pieces: Vec<(u64, u64, Page)> = m
                .range(..from.end)
                .filter(|(_, (e, _))| *e > from.start)
                .map(|(s, (e, p))| {
                    let (ps, pe) = ((*s).max(from.start), (*e).min(from.end));
                    (ps, pe, advanced(p, ps - s))
                })
                .collect();
            cut(m, from.start, from.end);
            let target = to + (from.end - from.start);
            assert_eq!(mapped(m, *to, target), 0, "{c}: target not unmapped first");
            for (s, e, mut p) in pieces {
                let at = s - from.start + to;
                // Anonymous memory never written takes the offset of its
                // new place (see `Change::Moved`).
                if p.file.is_none() && p.anon.is_none() {
                    p.offset = at;
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

fn run(layout: Layout, ops: &[(Op, u8)]) -> Result<(), TestCaseError> {
    let pg = layout.page_size.bytes();
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * pg))).collect();
    let mut mm = AddressSpace::with_layout(layout);
    mm.set_brk_base(at_in(pg, PAGES + 64)).expect("a heap above the window");
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.clone()));
    let mut model = Ranges::new();
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
        prop_assert!(
            joined(&model) == joined(&ranges_of(&mm)),
            "step {} {:?}: the changes {:?} do not give the space",
            step,
            op,
            changes
        );
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
    fn changes_rebuild_the_space(layout in layout(), ops in prop::collection::vec((op(), 0..32u8), 1..60)) {
        run(layout, &ops)?;
    }
}

/// A space whose observer writes each change as a line into the list.
fn observed() -> (AddressSpace, Arc<Mutex<Vec<String>>>) {
    let mut mm = AddressSpace::new();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&heard);
    mm.set_observer(move |c: &Change| log.lock().unwrap().push(c.to_string()));
    (mm, heard)
}

/// A move is told as a move, after the target's unmap, with the tail it
/// grew and nothing else.
#[test]
fn a_move_is_told_as_a_move() {
    let (mut mm, heard) = observed();
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
    let (mut mm, heard) = observed();
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
    let (mm, heard) = observed();
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
                apply(models.entry(c.pid).or_default(), &c.change);
                told += 1;
            }
        }
        let done = r.finish().unwrap();
        assert!(told >= 10, "{sample}: only {told} changes");
        let mut checked = 0;
        for (pid, space) in &done.processes {
            // Threads share the space told under their group's first pid.
            let Some(m) = models.get(pid) else { continue };
            assert!(joined(m) == joined(&ranges_of(space)), "{sample}: process {pid}'s changes do not give its space");
            checked += 1;
        }
        assert!(checked > 0, "{sample}: no process checked");
    }
}

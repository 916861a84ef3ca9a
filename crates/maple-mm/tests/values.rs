//! The embedder's values on VMAs: a host-memory base (guest page `g` lives
//! at host address `g + delta`) carried through random sequences of every
//! call kind, with `mmap_with`, `set_value` and forks among them. After
//! every call each mapped page's host address must be what a model of
//! pages says: unchanged by every call that does not map, unmap or move
//! the page; following the page through `mremap`; new where `mmap_with`
//! or `set_value` put one. A merge of two VMAs whose host memory is not
//! contiguous would change the upper one's host addresses; a split that
//! lost a value would drop them.

use std::{collections::BTreeMap, sync::Arc};

use maple_mm::{
    snapshot::WithValues, AddressSpace, Advice, MapFlags, MappedFile, MremapFlags, Prot, VmaValue, PAGE_SIZE,
};
use proptest::prelude::*;

mod common;

use common::calls::{at, at_in, call, layout, op_without_values, Op, PAGES};

/// Where a guest page's memory is on the host: `g + delta`.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
struct Host {
    delta: u64,
}

impl VmaValue for Host {
    fn moved(&self, from: u64, to: u64) -> Host {
        Host { delta: self.delta.wrapping_add(from).wrapping_sub(to) }
    }
}

/// Host memory for the window, page for page; other deltas are elsewhere.
const HOST: u64 = 0x7f00_0000_0000;

fn delta(choice: u8) -> u64 {
    (HOST + u64::from(choice) * 0x1000_0000).wrapping_sub(at(0))
}

#[derive(Clone, Debug)]
enum Step {
    /// Any call but the embedders' values.
    Call(Op),
    /// A fixed private anonymous `mmap_with`.
    MapHost { page: u64, pages: u64, prot: u32, choice: u8 },
    /// `set_value`, a host (choices 0–2) or none (3).
    SetHost { page: u64, pages: u64, choice: u8 },
    /// A fork, going on with the child or the parent.
    Fork { child: bool },
}

fn step() -> impl Strategy<Value = Step> {
    let range = (0..PAGES).prop_flat_map(|p| (Just(p), 1..=(PAGES - p).min(12)));
    prop_oneof![
        8 => op_without_values().prop_map(Step::Call),
        3 => (range.clone(), 0..8u32, 0..3u8)
            .prop_map(|((page, pages), prot, choice)| Step::MapHost { page, pages, prot, choice }),
        2 => (range, 0..4u8).prop_map(|((page, pages), choice)| Step::SetHost { page, pages, choice }),
        1 => any::<bool>().prop_map(|child| Step::Fork { child }),
    ]
}

/// Mapped pages (below the heap) and their host addresses, if they carry one.
type Pages = BTreeMap<u64, Option<u64>>;

/// The pages watched end below the heap (placed mappings land far above).
const fn top(pg: u64) -> u64 {
    at_in(pg, PAGES + 64)
}

fn pages(mm: &AddressSpace) -> Pages {
    let pg = mm.page_size().bytes();
    let mut out = Pages::new();
    for v in mm.iter().filter(|v| v.start() < top(pg)) {
        let host = v.value::<Host>().copied();
        for g in (v.start()..v.end()).step_by(pg as usize) {
            out.insert(g, host.map(|h| g.wrapping_add(h.delta)));
        }
    }
    out
}

fn range(pg: u64, page: u64, pages: u64) -> core::ops::Range<u64> {
    at_in(pg, page)..at_in(pg, page + pages)
}

/// What the pages must be after `step` that returned `ret` (the address
/// it mapped at, or `None` for a failure), from what they were.
fn expected(pg: u64, before: &Pages, step: &Step, ret: Option<u64>) -> Pages {
    let mut want = before.clone();
    let Some(r) = ret else { return want };
    let len = |n: u64| n * pg;
    match step {
        Step::MapHost { page, pages, choice, .. } => {
            for g in range(pg, *page, *pages).step_by(pg as usize) {
                want.insert(g, Some(g.wrapping_add(delta(*choice))));
            }
        }
        Step::SetHost { page, pages, choice } => {
            for g in range(pg, *page, *pages).step_by(pg as usize) {
                want.insert(g, (*choice < 3).then(|| g.wrapping_add(delta(*choice))));
            }
        }
        Step::Call(Op::Unmap { page, pages }) => {
            want.retain(|g, _| !range(pg, *page, *pages).contains(g));
        }
        Step::Call(Op::Map { pages, .. }) => {
            for g in (r..r + len(*pages)).step_by(pg as usize) {
                want.insert(g, None);
            }
        }
        Step::Call(Op::Remap { page, pages, new_pages, how, .. }) => {
            let (old, old_len) = (at_in(pg, *page), len(*pages));
            let new_len = if *how == 3 { old_len } else { len(*new_pages) };
            let kept = old_len.min(new_len);
            // (A pure move may take several VMAs and the holes between;
            // the holes' targets are left alone.)
            let moved: Vec<(u64, Option<u64>)> =
                before.range(old..old + kept).map(|(g, h)| (g - old + r, *h)).collect();
            if *how != 3 {
                want.retain(|g, _| !(old..old + old_len).contains(g));
            }
            for (g, host) in &moved {
                want.insert(*g, *host);
            }
            // Grown: the moved VMA's host memory, continued.
            let last = moved.last().and_then(|m| m.1);
            for g in (r + old_len..r + new_len).step_by(pg as usize) {
                want.insert(g, last.map(|h| h + (g - (r + old_len - pg))));
            }
        }
        Step::Call(Op::Exec) => want.clear(),
        _ => {}
    }
    want.retain(|g, _| *g < top(pg));
    want
}

fn check(pg: u64, before: &Pages, step: &Step, ret: Option<u64>, after: &Pages) -> Result<(), String> {
    let want = expected(pg, before, step, ret);
    // A fixed remap that failed may have unmapped its target and moved
    // some of its VMAs first, as Linux does (moving VMAs one by one): each
    // page is then as before or as after a whole move.
    let partial = match step {
        Step::Call(Op::Remap { to, how: 2, .. }) if ret.is_none() => expected(pg, before, step, Some(at_in(pg, *to))),
        _ => want.clone(),
    };
    for (g, host) in after {
        match want.get(g) {
            Some(w) if w == host => {}
            _ if partial.get(g) == Some(host) => {}
            Some(w) => return Err(format!("page {g:#x}: host {host:x?}, want {w:x?}")),
            // Mapped by the call itself: a stack that grew carries the
            // stack's host memory on, a shared segment attached carries none.
            None => {
                let grown = matches!(step, Step::Call(Op::Touch { .. } | Op::Fault { .. }));
                let above = before.range(g + pg..).next().map(|(p, h)| (*p, *h));
                let ok = match (host, above) {
                    (None, _) => true,
                    (Some(h), Some((p, Some(hp)))) => grown && *h == hp - (p - g),
                    _ => false,
                };
                if !ok {
                    return Err(format!("page {g:#x} newly mapped with host {host:x?}"));
                }
            }
        }
    }
    // A detach unmaps pages of its own choosing; a fixed remap unmaps its
    // target before it may fail (a sealed source).
    let may_go = |g: u64| match step {
        Step::Call(Op::ShmDt { .. }) => true,
        Step::Call(Op::Remap { to, new_pages, how: 2, .. }) => ret.is_none() && range(pg, *to, *new_pages).contains(&g),
        _ => false,
    };
    for g in want.keys() {
        if !after.contains_key(g) && !may_go(*g) && partial.contains_key(g) {
            return Err(format!("page {g:#x} gone"));
        }
    }
    Ok(())
}

fn run(layout: maple_mm::Layout, steps: &[Step]) -> Result<(), TestCaseError> {
    let pg = layout.page_size.bytes();
    let files: Vec<Arc<MappedFile>> =
        (0..3).map(|i| Arc::new(MappedFile::new(8, 1, 100 + i, format!("/f{i}")).with_size(64 * pg))).collect();
    let mut mm = AddressSpace::with_layout(layout);
    mm.set_brk_base(top(pg)).unwrap();
    for (i, step) in steps.iter().enumerate() {
        let mut before = pages(&mm);
        let ret = match step {
            Step::Call(op) => call(&mut mm, op, &files),
            Step::MapHost { page, pages, prot, choice } => {
                let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
                let host = Host { delta: delta(*choice) };
                mm.mmap_with(at_in(pg, *page), pages * pg, Prot::from_bits_retain(*prot), f, None, 0, host).ok()
            }
            Step::SetHost { page, pages, choice } => {
                let host = (*choice < 3).then(|| Host { delta: delta(*choice) });
                mm.set_value(at_in(pg, *page), pages * pg, host).ok().map(|()| 0)
            }
            Step::Fork { child } => {
                let kid = mm.fork().unwrap();
                kid.validate().map_err(TestCaseError::fail)?;
                // The child has every page the parent has, host and all,
                // but those of don't-fork ranges.
                let dont: Vec<core::ops::Range<u64>> =
                    mm.iter().filter(|v| v.flags().contains(maple_mm::VmFlags::DONTCOPY)).map(|v| v.range()).collect();
                let mut want = before.clone();
                want.retain(|g, _| !dont.iter().any(|d| d.contains(g)));
                prop_assert_eq!(&pages(&kid), &want, "step {}: the child's pages", i);
                if *child {
                    mm = kid;
                    before = want;
                }
                Some(0)
            }
        };
        mm.validate().map_err(|e| TestCaseError::fail(format!("step {i} {step:?}: {e}")))?;
        let after = pages(&mm);
        check(pg, &before, step, ret, &after).map_err(|e| TestCaseError::fail(format!("step {i} {step:?}: {e}")))?;
    }
    // A snapshot with the values gives the same pages, host memory and
    // all, and the same VMAs.
    let json = serde_json::to_string(&mm.with_values::<Host>()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let WithValues(copy, _) =
        serde_json::from_str::<WithValues<Host>>(&json).map_err(|e| TestCaseError::fail(format!("{e}\n{json}")))?;
    prop_assert_eq!(pages(&copy), pages(&mm));
    prop_assert_eq!(copy.maps(), mm.maps());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn host_memory_follows_every_page(layout in layout(), steps in prop::collection::vec(step(), 1..60)) {
        run(layout, &steps)?;
    }
}

/// Neighbours whose host memory continues merge; others stay apart, and
/// a moved range takes its host memory along.
#[test]
fn contiguous_host_memory_merges_and_moves_along() {
    let mut mm = AddressSpace::new();
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    let host = |d: u8| Host { delta: delta(d) };
    mm.mmap_with(at(0), 2 * PAGE_SIZE, Prot::RW, f, None, 0, host(0)).unwrap();
    mm.mmap_with(at(2), 2 * PAGE_SIZE, Prot::RW, f, None, 0, host(0)).unwrap();
    assert_eq!(mm.vma_count(), 1);
    mm.mmap_with(at(4), PAGE_SIZE, Prot::RW, f, None, 0, host(1)).unwrap();
    mm.mmap(at(5), PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    assert_eq!(mm.vma_count(), 3);
    let new =
        mm.mremap(at(0), 4 * PAGE_SIZE, 4 * PAGE_SIZE, MremapFlags::MAYMOVE | MremapFlags::FIXED, at(20)).unwrap();
    let v = mm.find_vma(new + PAGE_SIZE).unwrap();
    assert_eq!(new + PAGE_SIZE + v.value::<Host>().unwrap().delta, HOST + PAGE_SIZE);
    // A fork shares the values; don't-fork ranges stay behind.
    mm.madvise(at(4), PAGE_SIZE, Advice::DontFork).unwrap();
    let child = mm.fork().unwrap();
    assert_eq!(child.find_vma(new).unwrap().value::<Host>(), Some(&host(0).moved(at(0), new)));
    assert!(child.find_vma(at(4)).is_none_or(|v| v.start() != at(4)));
    // Values of another type are not this type's, and do not join.
    mm.mmap_with(at(30), PAGE_SIZE, Prot::RW, f, None, 0, 1u64).unwrap();
    mm.mmap_with(at(31), PAGE_SIZE, Prot::RW, f, None, 0, 1u32).unwrap();
    assert_eq!(mm.find_vma(at(30)).unwrap().value::<Host>(), None);
    assert_eq!(mm.find_vma(at(31)).unwrap().value::<u32>(), Some(&1));
    assert_ne!(mm.find_vma(at(30)).unwrap().end(), at(32));
}

/// A failed `set_value` changes nothing, and names the fault.
#[test]
fn set_value_refuses_holes_and_bad_ranges() {
    let mut mm = AddressSpace::new();
    let f = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
    mm.mmap(at(0), 2 * PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    mm.mmap(at(3), PAGE_SIZE, Prot::RW, f, None, 0).unwrap();
    let maps = mm.maps();
    assert_eq!(mm.set_value(at(0), 4 * PAGE_SIZE, Some(1u8)), Err(maple_mm::Errno::ENOMEM));
    assert_eq!(mm.set_value(at(0) + 1, PAGE_SIZE, Some(1u8)), Err(maple_mm::Errno::EINVAL));
    assert_eq!(mm.set_value(u64::MAX - PAGE_SIZE + 1, 2 * PAGE_SIZE, Some(1u8)), Err(maple_mm::Errno::EINVAL));
    assert_eq!(mm.maps(), maps);
    assert!(mm.iter().all(|v| !v.has_value()));
}

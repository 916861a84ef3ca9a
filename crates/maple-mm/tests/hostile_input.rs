//! Input from files is hostile until parsed: the strace parser, the
//! replayer and the maps parser get arbitrary text and real lines damaged
//! at random (characters changed, cut or doubled, numbers swapped for
//! extreme ones), and the swap-extent builder arbitrary extent lists (as a
//! recorded FIEMAP listing could hold). None may panic; whatever they
//! accept must leave address spaces that pass `validate`, a maps file they
//! accept must render back to text that parses to the same address space,
//! and an extent map must cover its pages in order.

use std::sync::Arc;

use maple_mm::{
    strace::{parse::parse_line, ReplayOptions, Replayer},
    swap::{swap_extents_from, FileExtent},
    Access, AddressSpace, Advice, Errno, Layout, MapFlags, MappedFile, MbindFlags, MremapFlags, PageSize, Prot,
};
use proptest::prelude::*;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/strace-sample");

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{DIR}/{name}")).unwrap()
}

/// Numbers that break careless arithmetic.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "0x0",
    "0xffffffffffffffff",
    "0xfffffffffffff000",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "0x7ffffffff000",
    "4096",
    "",
];

/// One edit of `line`, chosen by `pick` (a few random numbers).
fn damage(line: &str, pick: &[usize]) -> String {
    let chars: Vec<char> = line.chars().collect();
    if chars.is_empty() {
        return EXTREMES[pick[0] % EXTREMES.len()].to_string();
    }
    let at = pick[0] % chars.len();
    let len = 1 + pick[1] % 12;
    let end = (at + len).min(chars.len());
    let cut = |a: usize, b: usize| chars[a..b].iter().collect::<String>();
    match pick[2] % 5 {
        // A run of characters replaced by an extreme number.
        0 => format!("{}{}{}", cut(0, at), EXTREMES[pick[3] % EXTREMES.len()], cut(end, chars.len())),
        // A run cut out.
        1 => format!("{}{}", cut(0, at), cut(end, chars.len())),
        // A run doubled.
        2 => format!("{}{}{}", cut(0, end), cut(at, end), cut(end, chars.len())),
        // One character replaced by a delimiter.
        3 => {
            let d = ['(', ')', ',', '=', '"', '<', '>', '|', ' ', '{', '}', '[', ']', '-', '\t'][pick[3] % 15];
            format!("{}{d}{}", cut(0, at), cut(at + 1, chars.len()))
        }
        // The line cut short.
        _ => cut(0, at),
    }
}

/// Replays `lines` (numbered from 1) and checks what it accepted.
fn replay_checked(lines: &[String], initial: Option<AddressSpace>) {
    let opts = ReplayOptions::default();
    let mut r = Replayer::new(opts, initial);
    for (i, l) in lines.iter().enumerate() {
        // An error stops a strict replay, as it stops `maple replay`.
        if r.feed(i + 1, l).is_err() {
            break;
        }
        for (pid, space) in r.processes() {
            if let Err(e) = space.validate() {
                panic!("pid {pid} invalid after line {} {l:?}: {e}", i + 1);
            }
        }
    }
    // (Its result may be an error too: a clone never answered.)
    let _ = r.finish();
}

/// Parses `text` as a maps file; if it is accepted, the space must be
/// valid and its rendering must parse back to the same rendering.
fn maps_checked(text: &str) {
    let Ok(space) = AddressSpace::from_maps(text, "hostile.maps") else {
        return;
    };
    space.validate().unwrap();
    let out = space.maps();
    let again = AddressSpace::from_maps(&out, "rendered.maps").unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(again.maps(), out);
}

/// A well-formed memory call with arguments drawn from the extremes, a
/// few page-ish numbers and the flag names strace prints, and a result
/// that claims success, fails, or returns an address.
fn call_line() -> impl Strategy<Value = String> {
    // (Numbers only: a value past 64 bits is a parse error, which stops
    // the replay at once; the damaged lines above try those.)
    let fits = EXTREMES.iter().filter(|e| !e.is_empty() && **e != "18446744073709551616");
    let value = prop_oneof![
        prop::sample::select(fits.map(|e| e.to_string()).collect::<Vec<_>>()),
        (0u64..64).prop_map(|p| format!("{:#x}", 0x7f00_0000_0000u64 + p * 4096)),
        (0u64..64).prop_map(|p| (p * 4096).to_string()),
    ];
    let num = prop_oneof![value.clone(), Just("NULL".to_string())];
    let prot =
        prop::sample::select(vec!["PROT_NONE", "PROT_READ", "PROT_READ|PROT_WRITE", "PROT_READ|PROT_EXEC", "0x7"]);
    let flags = prop::sample::select(vec![
        "MAP_PRIVATE|MAP_ANONYMOUS",
        "MAP_PRIVATE|MAP_FIXED|MAP_ANONYMOUS",
        "MAP_SHARED|MAP_ANONYMOUS",
        "MAP_PRIVATE|MAP_FIXED_NOREPLACE|MAP_ANONYMOUS",
        "MAP_PRIVATE|MAP_ANONYMOUS|MAP_GROWSDOWN",
        "MAP_PRIVATE|MAP_ANONYMOUS|MAP_STACK|MAP_NORESERVE",
        "0xffffffff",
    ]);
    let mflags = prop::sample::select(vec![
        "0",
        "MREMAP_MAYMOVE",
        "MREMAP_MAYMOVE|MREMAP_FIXED",
        "MREMAP_DONTUNMAP|MREMAP_MAYMOVE",
        "7",
    ]);
    let advice = prop::sample::select(vec![
        "MADV_DONTNEED",
        "MADV_FREE",
        "MADV_DONTFORK",
        "MADV_DOFORK",
        "MADV_HUGEPAGE",
        "MADV_WIPEONFORK",
        "99",
    ]);
    let ret = prop_oneof![
        value,
        Just("-1 ENOMEM (Cannot allocate memory)".to_string()),
        Just("-1 EINVAL (Invalid argument)".to_string()),
        Just("0".to_string()),
    ];
    let pid = prop::sample::select(vec![100u32, 101]);
    let args = (num.clone(), num.clone(), num.clone(), num);
    (pid, 0..7u8, args, prot, flags, mflags, advice, ret).prop_map(
        |(pid, call, (a, b, c, d), prot, flags, mflags, advice, ret)| {
            let body = match call {
                0 => format!("mmap({a}, {b}, {prot}, {flags}, -1, 0)"),
                1 => format!("munmap({a}, {b})"),
                2 => format!("mprotect({a}, {b}, {prot})"),
                3 => format!("mremap({a}, {b}, {c}, {mflags}, {d})"),
                4 => format!("madvise({a}, {b}, {advice})"),
                5 => format!("brk({a})"),
                _ => "clone(child_stack=NULL, flags=CLONE_CHILD_CLEARTID|CLONE_CHILD_SETTID|SIGCHLD) = 101".to_string(),
            };
            if call == 6 {
                format!("{pid} {body}")
            } else {
                format!("{pid} {body} = {ret}")
            }
        },
    )
}

/// A number that is often an edge: 0, a page boundary, or near `u64::MAX`.
fn edgy() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        (0u64..64).prop_map(|p| p * 4096),
        (0u64..4096).prop_map(|b| b * 512),
        (0u64..8192).prop_map(|d| u64::MAX - d),
        any::<u64>(),
    ]
}

/// A modelled layout, or one with an edge value in every field.
fn layout() -> impl Strategy<Value = Layout> {
    let modelled = prop::sample::select(vec![
        Layout::x86_64(),
        Layout::x86_64_la57(),
        Layout::arm64(PageSize::K4),
        Layout::arm64(PageSize::K16),
        Layout::arm64(PageSize::K64),
    ]);
    let page = prop::sample::select(PageSize::ALL.to_vec());
    let hostile = (page, [edgy(), edgy(), edgy(), edgy(), edgy(), edgy()], any::<bool>(), any::<bool>()).prop_map(
        |(page, [task, window, base, legacy, min, gap], bottom_up, unlimited)| {
            let l = Layout {
                page_size: page,
                task_size: task,
                map_window: window,
                mmap_base: base,
                legacy_base: legacy,
                mmap_min_addr: min,
                stack_guard_gap: gap,
                bottom_up,
                ..Layout::arm64(page)
            };
            if unlimited {
                l.with_stack_limit(u64::MAX)
            } else {
                l.with_stack_limit(gap)
            }
        },
    );
    prop_oneof![modelled, hostile]
}

/// The mapped pages as runs of one protection, whatever the VMA cuts.
fn runs(mm: &AddressSpace) -> Vec<(u64, u64, maple_mm::Prot)> {
    let mut out: Vec<(u64, u64, maple_mm::Prot)> = Vec::new();
    for v in mm.iter() {
        match out.last_mut() {
            Some(last) if last.1 == v.start() && last.2 == v.prot() => last.1 = v.end(),
            _ => out.push((v.start(), v.end(), v.prot())),
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: if cfg!(miri) { 4 } else { 256 },
        ..ProptestConfig::default()
    })]

    /// Arbitrary text: the parser and the replayer answer, never panic.
    #[test]
    fn arbitrary_strace_lines(lines in prop::collection::vec("\\PC{0,120}", 1..20)) {
        for l in &lines {
            let _ = parse_line(l);
        }
        replay_checked(&lines, None);
    }

    /// The real sample with a few lines damaged, replayed from the maps
    /// snapshot it starts from.
    #[test]
    fn damaged_strace_sample(edits in prop::collection::vec((any::<usize>(), prop::array::uniform4(any::<usize>())), 1..6)) {
        let log = read("sample.strace");
        let mut lines: Vec<String> = log.lines().map(str::to_string).collect();
        for (which, pick) in &edits {
            let k = which % lines.len();
            lines[k] = damage(&lines[k], pick);
            let _ = parse_line(&lines[k]);
        }
        let start = AddressSpace::from_maps(&read("sample.start.maps"), "sample.start.maps").unwrap();
        replay_checked(&lines, Some(start));
        replay_checked(&lines, None);
    }

    /// Well-formed memory calls with extreme arguments, from an empty
    /// space and from the sample's snapshot: every space the replayer
    /// accepts them into stays valid.
    #[test]
    fn extreme_memory_calls(lines in prop::collection::vec(call_line(), 1..40), snapshot: bool) {
        let start = snapshot
            .then(|| AddressSpace::from_maps(&read("sample.start.maps"), "sample.start.maps").unwrap());
        replay_checked(&lines, start);
    }

    /// Arbitrary extent lists, and contiguous ones with edge values: the
    /// builder refuses or maps whole pages in order, never panics.
    #[test]
    fn arbitrary_extent_lists(
        raw in prop::collection::vec((edgy(), edgy(), edgy(), any::<u32>()), 0..12),
        contiguous: bool,
    ) {
        let mut logical = 0u64;
        let extents: Vec<FileExtent> = raw
            .iter()
            .map(|&(l, physical, length, flags)| {
                // Contiguous lists get past the hole check to the arithmetic.
                let e = FileExtent { logical: if contiguous { logical } else { l }, physical, length, flags: if contiguous { flags & 0x1 } else { flags } };
                logical = logical.saturating_add(length);
                e
            })
            .collect();
        if let Ok(map) = swap_extents_from(&extents, None) {
            let mut next = 0u64;
            let mut pages = 0u64;
            for (start, n, _block) in map.iter() {
                prop_assert!(start >= next && n > 0, "extent at {start} ({n} pages) after {next}");
                next = start + n;
                pages += n;
            }
            prop_assert_eq!(pages, map.pages());
        }
    }

    /// The address space's own calls with edge arguments (lengths and
    /// addresses near 0, page boundaries and `u64::MAX`, any flag bits),
    /// in a modelled layout or one with edge values in every field (any
    /// page size, a top, window and bases anywhere): each answers, the
    /// space stays valid, and a failed call changes nothing.
    #[test]
    fn calls_with_edge_arguments(
        calls in prop::collection::vec((0..12u8, edgy(), edgy(), edgy(), any::<u32>(), any::<u32>()), 1..30),
        layout in layout(),
    ) {
        let mut mm = AddressSpace::with_layout(layout);
        let file = Arc::new(MappedFile::new(8, 1, 42, "/tmp/f"));
        // Something to work on near the top and in the middle (where the
        // layout lets it be).
        let _ = mm.mmap(0, 64 << 12, Prot::READ | Prot::WRITE, MapFlags::PRIVATE | MapFlags::ANONYMOUS, None, 0);
        let _ = mm.mmap(0x1000_0000, 16 << 12, Prot::READ, MapFlags::PRIVATE | MapFlags::FIXED, Some(file.clone()), 0);
        mm.validate().map_err(TestCaseError::fail)?;
        for (i, &(call, a, b, c, f, g)) in calls.iter().enumerate() {
            let state = |mm: &AddressSpace| {
                (mm.maps(), mm.guard_pages().collect::<Vec<_>>(), mm.anon_pages().collect::<Vec<_>>())
            };
            let before = state(&mm);
            let copy = mm.clone();
            let prot = Prot::from_bits_retain(f);
            let res = match call {
                0 => mm.mmap(a, b, prot, MapFlags::from_bits_retain(g), None, c).map(|_| ()),
                1 => mm.mmap(a, b, prot, MapFlags::from_bits_retain(g), Some(file.clone()), c).map(|_| ()),
                2 => mm.munmap(a, b),
                3 => mm.mprotect(a, b, prot),
                4 => mm.mremap(a, b, c, MremapFlags::from_bits_retain(g), f as u64 * 4096).map(|_| ()),
                5 => match Advice::from_code(g as i32 % 128) {
                    Some(adv) => mm.madvise(a, b, adv),
                    None => Ok(()),
                },
                6 => mm.touch(a, b),
                7 => mm.set_anon_name(a, b, Some("x")),
                8 => {
                    let access = [Access::Read, Access::Write, Access::Exec][f as usize % 3];
                    mm.fault(a, access).map_err(|_| Errno::EFAULT)
                }
                9 => mm.mbind(a, b, f, c, MbindFlags::from_bits_retain(g)),
                // A resource limit, any value.
                10 => {
                    match f % 4 {
                        0 => mm.set_as_limit(a),
                        1 => mm.set_data_limit(a),
                        2 => mm.set_memlock_limit(a),
                        _ => mm.set_stack_limit(a),
                    }
                    Ok(())
                }
                _ => {
                    let _ = mm.brk(a);
                    Ok(())
                }
            };
            if let Err(e) = mm.validate() {
                panic!("call {i} ({call}, {a:#x}, {b:#x}, {c:#x}, {f:#x}, {g:#x}) left the space invalid: {e}");
            }
            // (mprotect, madvise and naming report ENOMEM for a hole after
            // applying themselves to what is mapped before it, as Linux
            // does, and a fault keeps a stack's growth when the access then
            // faults; every other failure changes nothing.)
            // (A fixed mmap refused by an address-space or data limit
            // leaves the VMAs it would replace cut where it starts and
            // ends, as Linux does: the same pages, cut.)
            let limited = mm.layout().as_limit != u64::MAX || mm.layout().data_limit != u64::MAX;
            if res == Err(Errno::ENOMEM) && matches!(call, 0 | 1) && limited {
                prop_assert_eq!(runs(&mm), runs(&copy), "call {} ({}) failed and changed pages", i, call);
                prop_assert_eq!((&state(&mm).1, &state(&mm).2), (&before.1, &before.2));
            } else if res.is_err() && !matches!(call, 3 | 5 | 7 | 8) {
                prop_assert_eq!(state(&mm), before, "call {} ({}) failed but changed the space", i, call);
            }
        }
        let child = mm.fork().unwrap();
        child.validate().unwrap();
    }

    /// Arbitrary text as a maps file.
    #[test]
    fn arbitrary_maps(text in "\\PC{0,300}") {
        maps_checked(&text);
    }

    /// Real maps snapshots with a few lines damaged.
    #[test]
    fn damaged_maps(file in 0..3usize, edits in prop::collection::vec((any::<usize>(), prop::array::uniform4(any::<usize>())), 1..4)) {
        let text = read(["sample.start.maps", "sample.child.maps", "sample.end.maps"][file]);
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        for (which, pick) in &edits {
            let k = which % lines.len();
            lines[k] = damage(&lines[k], pick);
        }
        maps_checked(&(lines.join("\n") + "\n"));
    }
}

//! `maple maps`: summarise an address space, find an address, or diff two
//! snapshots.

use std::{collections::BTreeMap, fmt::Write as _};

use maple_mm::{Access, AddressSpace, Fault, VmFlags};

fn mib(b: u64) -> String {
    let units = [("TiB", 40), ("GiB", 30), ("MiB", 20)];
    for (name, shift) in units {
        if b >= 1 << shift {
            return format!("{:.1} {name}", b as f64 / (1u64 << shift) as f64);
        }
    }
    format!("{} KiB", b / 1024)
}

/// The page holding `addr`.
fn page_of(mm: &AddressSpace, addr: u64) -> u64 {
    addr & !(mm.page_size().bytes() - 1)
}

/// The summary: VMA count, bytes by kind, the largest gaps.
pub fn summary(mm: &AddressSpace) -> String {
    let mut out = String::new();
    let s = mm.stats();
    let (mut heap, mut stack) = (0, 0);
    for v in mm.iter() {
        let line = mm.maps_line(&v);
        if line.ends_with("[heap]") {
            heap += v.len();
        } else if line.ends_with("[stack]") {
            stack += v.len();
        }
    }
    let _ = writeln!(out, "{} VMAs, {} mapped", s.vmas, mib(s.mapped));
    let _ = writeln!(out, "  file-backed   {}", mib(s.file));
    let _ = writeln!(out, "  anonymous     {}", mib(s.anon));
    let _ = writeln!(out, "  shared        {}", mib(s.shared));
    let _ = writeln!(out, "  heap          {}", mib(heap));
    let _ = writeln!(out, "  stack         {}", mib(stack));
    let runs: Vec<_> = mm.guard_pages().collect();
    if !runs.is_empty() {
        let pages: u64 = runs.iter().map(|r| (r.end - r.start) / mm.page_size().bytes()).sum();
        let _ = writeln!(out, "  guard pages   {pages} in {} runs (MADV_GUARD_INSTALL)", runs.len());
    }
    let written: u64 = mm.anon_pages().map(|r| r.end - r.start).sum();
    if written > 0 {
        let _ = writeln!(out, "  written       {} (anonymous pages: in private mappings)", mib(written));
    }
    // What Linux counts against the process's limits.
    let l = mm.layout();
    let limit = |b: u64| if b == u64::MAX { "unlimited".to_string() } else { mib(b) };
    let _ = writeln!(out, "limits:");
    let _ = writeln!(out, "  address space {} of {} (RLIMIT_AS)", mib(mm.total_vm()), limit(l.as_limit));
    let _ = writeln!(out, "  data          {} of {} (RLIMIT_DATA)", mib(mm.data_vm()), limit(l.data_limit));
    let _ = writeln!(out, "  locked        {} of {} (RLIMIT_MEMLOCK)", mib(mm.locked_vm()), limit(l.memlock_limit));
    let _ = writeln!(out, "  stack         {} at most (RLIMIT_STACK)", limit(l.stack_limit));
    let _ = writeln!(out, "by protection:");
    for (i, b) in s.by_prot.iter().enumerate() {
        if *b > 0 {
            let p = maple_mm::prot_of_index(i);
            let perms = format!(
                "{}{}{}",
                if p.contains(maple_mm::Prot::READ) { 'r' } else { '-' },
                if p.contains(maple_mm::Prot::WRITE) { 'w' } else { '-' },
                if p.contains(maple_mm::Prot::EXEC) { 'x' } else { '-' }
            );
            let _ = writeln!(out, "  {perms}           {}", mib(*b));
        }
    }
    let mut gaps: Vec<(u64, u64)> = Vec::new();
    let mut prev_end: Option<u64> = None;
    // Gaps inside the user address space ([vsyscall] sits far above it).
    for v in mm.iter().filter(|v| v.end() <= mm.layout().task_size) {
        if let Some(p) = prev_end {
            if v.start() > p {
                gaps.push((p, v.start()));
            }
        }
        prev_end = Some(v.end());
    }
    gaps.sort_by_key(|g| std::cmp::Reverse(g.1 - g.0));
    let _ = writeln!(out, "largest gaps between mappings:");
    for (a, b) in gaps.iter().take(5) {
        let _ = writeln!(out, "  {a:x}-{b:x}  {}", mib(b - a));
    }
    out
}

/// The VMA containing `addr` or the next one above it.
pub fn find(mm: &AddressSpace, addr: u64) -> String {
    match mm.find_vma(addr) {
        Some(v) if v.contains(addr) && mm.is_guard_page(addr) => {
            format!("{addr:#x} is a guard page (any access faults) in\n{}\n", mm.maps_line(&v))
        }
        Some(v)
            if v.contains(addr)
                && mm.anon_page_count(page_of(mm, addr), page_of(mm, addr) + mm.page_size().bytes()) == 1 =>
        {
            format!("{addr:#x} is in a written page (an anonymous page) of\n{}\n", mm.maps_line(&v))
        }
        Some(v) if v.contains(addr) => format!("{addr:#x} is in\n{}\n", mm.maps_line(&v)),
        Some(v) => {
            let stack = if !v.flags().contains(VmFlags::GROWSDOWN) {
                ""
            } else if mm.check_access(addr, Access::Read) == Err(Fault::Unmapped) {
                ", a stack that may not grow down to it (a mapping too close below, or the stack limit)"
            } else {
                ", a stack: an access here grows it down to this page"
            };
            format!(
                "{addr:#x} is not mapped; the next mapping is {:#x} bytes above{stack}:\n{}\n",
                v.start() - addr,
                mm.maps_line(&v)
            )
        }
        None => format!("{addr:#x} is not mapped, and nothing is mapped above it\n"),
    }
}

/// What changed from `a` to `b`: VMAs removed, added and changed (same
/// start, different line), and the pages that changed mapping.
pub fn diff(a: &AddressSpace, b: &AddressSpace) -> String {
    let lines =
        |mm: &AddressSpace| -> BTreeMap<u64, String> { mm.iter().map(|v| (v.start(), mm.maps_line(&v))).collect() };
    let (la, lb) = (lines(a), lines(b));
    let mut out = String::new();
    let (mut removed, mut added, mut changed) = (0, 0, 0);
    let starts: std::collections::BTreeSet<u64> = la.keys().chain(lb.keys()).copied().collect();
    for s in starts {
        match (la.get(&s), lb.get(&s)) {
            (Some(x), None) => {
                removed += 1;
                let _ = writeln!(out, "- {x}");
            }
            (None, Some(y)) => {
                added += 1;
                let _ = writeln!(out, "+ {y}");
            }
            (Some(x), Some(y)) if x != y => {
                changed += 1;
                let _ = writeln!(out, "- {x}\n+ {y}");
            }
            _ => {}
        }
    }
    let mapped = |mm: &AddressSpace| mm.stats().mapped / mm.page_size().bytes();
    let _ = writeln!(
        out,
        "{removed} removed, {added} added, {changed} changed; {} pages mapped before, {} after",
        mapped(a),
        mapped(b)
    );
    out
}

/// One VMA as JSON: its bounds, the maps line's fields, and the line.
pub fn vma_json(mm: &AddressSpace, v: &maple_mm::Vma<'_>) -> serde_json::Value {
    let mut j = line_json(v, mm.maps_line(v));
    j["start"] = v.start().into();
    j["end"] = v.end().into();
    j
}

/// The columns of `line`, the maps line of `v`: {"perms", "offset",
/// "dev", "inode", "name", "line"}.
pub fn line_json(v: &maple_mm::Vma<'_>, line: String) -> serde_json::Value {
    // start-end perms offset dev inode [name]: the name may hold spaces.
    let fields: Vec<&str> = line.splitn(6, ' ').collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or("");
    let name = field(5).trim_start();
    serde_json::json!({
        "perms": field(1),
        "offset": v.file_offset(),
        "dev": field(3),
        "inode": field(4).parse::<u64>().unwrap_or(0),
        "name": if name.is_empty() { serde_json::Value::Null } else { name.into() },
        "line": line,
    })
}

/// [`summary`] as JSON: the totals and every VMA.
pub fn summary_json(mm: &AddressSpace) -> serde_json::Value {
    let s = mm.stats();
    serde_json::json!({
        "vmas": mm.iter().map(|v| vma_json(mm, &v)).collect::<Vec<_>>(),
        "mapped": s.mapped,
        "file": s.file,
        "anonymous": s.anon,
        "shared": s.shared,
        "written": mm.anon_pages().map(|r| r.end - r.start).sum::<u64>(),
    })
}

/// [`find`] as JSON: the VMA containing `addr` (`"in"`) or the next one
/// above it (`"next"`), or neither.
pub fn find_json(mm: &AddressSpace, addr: u64) -> serde_json::Value {
    let v = mm.find_vma(addr);
    let inside = v.as_ref().is_some_and(|v| v.contains(addr));
    serde_json::json!({
        "address": addr,
        "mapped": inside,
        "guard_page": inside && mm.is_guard_page(addr),
        "in": v.as_ref().filter(|_| inside).map(|v| vma_json(mm, v)),
        "next": v.as_ref().filter(|_| !inside).map(|v| vma_json(mm, v)),
    })
}

/// [`diff`] as JSON: the maps lines removed, added and changed (same
/// start), and the pages mapped before and after.
pub fn diff_json(a: &AddressSpace, b: &AddressSpace) -> serde_json::Value {
    let lines =
        |mm: &AddressSpace| -> BTreeMap<u64, String> { mm.iter().map(|v| (v.start(), mm.maps_line(&v))).collect() };
    let (la, lb) = (lines(a), lines(b));
    let (mut removed, mut added, mut changed) = (Vec::new(), Vec::new(), Vec::new());
    let starts: std::collections::BTreeSet<u64> = la.keys().chain(lb.keys()).copied().collect();
    for s in starts {
        match (la.get(&s), lb.get(&s)) {
            (Some(x), None) => removed.push(x.clone()),
            (None, Some(y)) => added.push(y.clone()),
            (Some(x), Some(y)) if x != y => changed.push(serde_json::json!({ "before": x, "after": y })),
            _ => {}
        }
    }
    serde_json::json!({
        "removed": removed,
        "added": added,
        "changed": changed,
        "pages_before": a.stats().mapped / a.page_size().bytes(),
        "pages_after": b.stats().mapped / b.page_size().bytes(),
    })
}

#[cfg(test)]
mod tests {
    use maple_mm::{Advice, MapFlags, Prot, PAGE_SIZE};

    use super::*;

    /// A space with one private anonymous mapping of eight pages, and its
    /// start.
    fn eight_pages() -> (AddressSpace, u64) {
        let mut mm = AddressSpace::new();
        let anon = MapFlags::PRIVATE | MapFlags::ANONYMOUS;
        let at = mm.mmap(0, 8 * PAGE_SIZE, Prot::RW, anon, None, 0).unwrap();
        (mm, at)
    }

    #[test]
    fn guard_pages_are_counted_and_found() {
        let (mut mm, at) = eight_pages();
        assert!(!summary(&mm).contains("guard pages"));
        mm.madvise(at, 2 * PAGE_SIZE, Advice::GuardInstall).unwrap();
        mm.madvise(at + 4 * PAGE_SIZE, PAGE_SIZE, Advice::GuardInstall).unwrap();
        assert!(summary(&mm).contains("guard pages   3 in 2 runs"), "{}", summary(&mm));
        assert!(find(&mm, at + PAGE_SIZE + 8).contains("is a guard page"));
        assert!(find(&mm, at + 2 * PAGE_SIZE).starts_with(&format!("{:#x} is in\n", at + 2 * PAGE_SIZE)));
    }

    #[test]
    fn the_limits_are_shown_with_what_counts_against_them() {
        let (mut mm, at) = eight_pages();
        let text = summary(&mm);
        assert!(text.contains("address space 32 KiB of unlimited (RLIMIT_AS)"), "{text}");
        mm.set_as_limit(1 << 30);
        mm.set_data_limit(4 * PAGE_SIZE);
        let text = summary(&mm);
        assert!(text.contains("address space 32 KiB of 1.0 GiB (RLIMIT_AS)"), "{text}");
        assert!(text.contains("data          32 KiB of 16 KiB (RLIMIT_DATA)"), "{text}");
        assert!(text.contains("stack         8.0 MiB at most (RLIMIT_STACK)"), "{text}");
        mm.set_memlock_limit(1 << 20);
        mm.mlock(at, PAGE_SIZE).unwrap();
        assert!(summary(&mm).contains("locked        4 KiB of 1.0 MiB (RLIMIT_MEMLOCK)"), "{}", summary(&mm));
    }

    #[test]
    fn written_pages_are_counted_and_found() {
        let (mut mm, at) = eight_pages();
        assert!(!summary(&mm).contains("written"));
        mm.touch(at + PAGE_SIZE, 3 * PAGE_SIZE).unwrap();
        assert!(summary(&mm).contains("written       12 KiB"), "{}", summary(&mm));
        assert!(find(&mm, at + 2 * PAGE_SIZE + 8).contains("is in a written page"));
        assert!(find(&mm, at).starts_with(&format!("{at:#x} is in\n")));
    }

    #[test]
    fn the_hole_below_a_stack_says_whether_it_grows() {
        let (mut mm, at) = eight_pages();
        let fixed = MapFlags::PRIVATE | MapFlags::ANONYMOUS | MapFlags::FIXED;
        let stack = fixed | MapFlags::GROWSDOWN;
        let (far, near) = (at - (1 << 30), at - 64 * PAGE_SIZE);
        mm.mmap(far, PAGE_SIZE, Prot::RW, stack, None, 0).unwrap();
        mm.mmap(near, PAGE_SIZE, Prot::RW, stack, None, 0).unwrap();
        mm.mmap(near - 32 * PAGE_SIZE, PAGE_SIZE, Prot::RW, fixed, None, 0).unwrap();
        assert!(find(&mm, far - 3 * PAGE_SIZE).contains("an access here grows it down"), "{}", find(&mm, far - 8));
        // Within the guard gap above an accessible mapping: refused.
        assert!(find(&mm, near - 3 * PAGE_SIZE).contains("may not grow down"));
        assert!(!find(&mm, near - 40 * PAGE_SIZE).contains("stack"));
    }
}

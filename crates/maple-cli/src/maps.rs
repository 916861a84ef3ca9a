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

/// What `maple maps` says of a space: the totals by kind, the pages
/// written and guarded, what counts against each limit, the bytes by
/// protection and the largest gaps. Rendered as text ([`summary`]) and as
/// JSON ([`summary_json`]) from the same figures.
#[derive(Debug)]
pub struct Summary {
    /// VMAs.
    pub vmas: u64,
    /// Bytes mapped, in all; file-backed; anonymous; shared.
    pub mapped: u64,
    /// See [`mapped`](Self::mapped).
    pub file: u64,
    /// See [`mapped`](Self::mapped).
    pub anon: u64,
    /// See [`mapped`](Self::mapped).
    pub shared: u64,
    /// Bytes of the `[heap]` and `[stack]` lines.
    pub heap: u64,
    /// See [`heap`](Self::heap).
    pub stack: u64,
    /// Guard pages (`MADV_GUARD_INSTALL`), and the runs they make.
    pub guard_pages: u64,
    /// See [`guard_pages`](Self::guard_pages).
    pub guard_runs: u64,
    /// Bytes of anonymous pages written in private mappings.
    pub written: u64,
    /// What counts against each limit: (name, resource, bytes used,
    /// limit; `None` for the stack, whose use the limit caps as it grows).
    pub limits: Vec<Limit>,
    /// Bytes by protection (`r-x`), the protections mapped only.
    pub by_protection: Vec<(String, u64)>,
    /// The five largest gaps between mappings of the user address space:
    /// (start, end).
    pub gaps: Vec<(u64, u64)>,
}

/// One resource limit and what counts against it.
#[derive(Debug)]
pub struct Limit {
    /// "address space", "data", "locked", "stack".
    pub name: &'static str,
    /// `RLIMIT_AS`, …
    pub resource: &'static str,
    /// Bytes counted against it (`None`: not counted, the stack's).
    pub used: Option<u64>,
    /// The limit in bytes (`u64::MAX`: unlimited).
    pub limit: u64,
}

impl Summary {
    /// The figures of `mm`.
    pub fn of(mm: &AddressSpace) -> Summary {
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
        let runs: Vec<_> = mm.guard_pages().collect();
        let l = mm.layout();
        let limits = vec![
            Limit { name: "address space", resource: "RLIMIT_AS", used: Some(mm.total_vm()), limit: l.as_limit },
            Limit { name: "data", resource: "RLIMIT_DATA", used: Some(mm.data_vm()), limit: l.data_limit },
            Limit { name: "locked", resource: "RLIMIT_MEMLOCK", used: Some(mm.locked_vm()), limit: l.memlock_limit },
            Limit { name: "stack", resource: "RLIMIT_STACK", used: None, limit: l.stack_limit },
        ];
        let by_protection = s
            .by_prot
            .iter()
            .enumerate()
            .filter(|(_, b)| **b > 0)
            .map(|(i, b)| (perms(maple_mm::prot_of_index(i)), *b))
            .collect();
        let mut gaps: Vec<(u64, u64)> = Vec::new();
        let mut prev_end: Option<u64> = None;
        // Gaps inside the user address space ([vsyscall] sits far above it).
        for v in mm.iter().filter(|v| v.end() <= mm.layout().task_size) {
            if let Some(p) = prev_end.filter(|&p| v.start() > p) {
                gaps.push((p, v.start()));
            }
            prev_end = Some(v.end());
        }
        gaps.sort_by_key(|g| (std::cmp::Reverse(g.1 - g.0), g.0));
        gaps.truncate(5);
        Summary {
            vmas: s.vmas as u64,
            mapped: s.mapped,
            file: s.file,
            anon: s.anon,
            shared: s.shared,
            heap,
            stack,
            guard_pages: runs.iter().map(|r| (r.end - r.start) / mm.page_size().bytes()).sum(),
            guard_runs: runs.len() as u64,
            written: mm.anon_pages().map(|r| r.end - r.start).sum(),
            limits,
            by_protection,
            gaps,
        }
    }
}

/// `rwx` with dashes, as maps shows a protection.
fn perms(p: maple_mm::Prot) -> String {
    use maple_mm::Prot;
    [(Prot::READ, 'r'), (Prot::WRITE, 'w'), (Prot::EXEC, 'x')]
        .iter()
        .map(|&(bit, c)| if p.contains(bit) { c } else { '-' })
        .collect()
}

/// The summary: VMA count, bytes by kind, the limits, the largest gaps.
pub fn summary(mm: &AddressSpace) -> String {
    let s = Summary::of(mm);
    let mut out = String::new();
    let _ = writeln!(out, "{} VMAs, {} mapped", s.vmas, mib(s.mapped));
    let _ = writeln!(out, "  file-backed   {}", mib(s.file));
    let _ = writeln!(out, "  anonymous     {}", mib(s.anon));
    let _ = writeln!(out, "  shared        {}", mib(s.shared));
    let _ = writeln!(out, "  heap          {}", mib(s.heap));
    let _ = writeln!(out, "  stack         {}", mib(s.stack));
    if s.guard_pages > 0 {
        let _ = writeln!(out, "  guard pages   {} in {} runs (MADV_GUARD_INSTALL)", s.guard_pages, s.guard_runs);
    }
    if s.written > 0 {
        let _ = writeln!(out, "  written       {} (anonymous pages: in private mappings)", mib(s.written));
    }
    // What Linux counts against the process's limits.
    let limit = |b: u64| if b == u64::MAX { "unlimited".to_string() } else { mib(b) };
    let _ = writeln!(out, "limits:");
    for l in &s.limits {
        let what = match l.used {
            Some(used) => format!("{} of {}", mib(used), limit(l.limit)),
            None => format!("{} at most", limit(l.limit)),
        };
        let _ = writeln!(out, "  {:<13} {what} ({})", l.name, l.resource);
    }
    let _ = writeln!(out, "by protection:");
    for (p, b) in &s.by_protection {
        let _ = writeln!(out, "  {p}           {}", mib(*b));
    }
    let _ = writeln!(out, "largest gaps between mappings:");
    for (a, b) in &s.gaps {
        let _ = writeln!(out, "  {a:x}-{b:x}  {}", mib(b - a));
    }
    out
}

/// The resident size of each VMA of live process `pid` (by its start),
/// from `/proc/PID/smaps` (`Rss`); empty where it cannot be read.
pub fn resident(pid: u32) -> BTreeMap<u64, u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut out = BTreeMap::new();
    let mut start = None;
    for l in text.lines() {
        if let Some(kb) = l.strip_prefix("Rss:") {
            let kb = kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok();
            if let (Some(s), Some(kb)) = (start, kb) {
                out.insert(s, kb * 1024);
            }
        } else if let Some((range, _)) = l.split_once(' ').filter(|(r, _)| r.contains('-')) {
            start = range.split_once('-').and_then(|(s, _)| u64::from_str_radix(s, 16).ok());
        }
    }
    out
}

/// Every mapping on a line, as `pmap -x` lists them: address, size in
/// KiB, resident KiB (from `rss`, a live process's: `-` where unknown),
/// permissions, offset, device, inode and name; then the totals.
pub fn listing(mm: &AddressSpace, rss: &BTreeMap<u64, u64>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:>10} {:>10} {:<4} {:>8} {:<6} {:>10}  Mapping",
        "Address", "Kbytes", "RSS", "Mode", "Offset", "Device", "Inode"
    );
    let (mut size, mut res) = (0, 0);
    for v in mm.iter() {
        let j = vma_json(mm, &v);
        let r = rss.get(&v.start()).copied();
        size += v.len();
        res += r.unwrap_or(0);
        let _ = writeln!(
            out,
            "{:016x} {:>10} {:>10} {:<4} {:08x} {:<6} {:>10}  {}",
            v.start(),
            v.len() / 1024,
            r.map_or("-".to_string(), |r| (r / 1024).to_string()),
            j["perms"].as_str().unwrap_or(""),
            v.file_offset(),
            j["dev"].as_str().unwrap_or(""),
            j["inode"].as_u64().unwrap_or(0),
            j["name"].as_str().unwrap_or("[ anon ]"),
        );
    }
    let res = if rss.is_empty() { "-".to_string() } else { (res / 1024).to_string() };
    let _ = writeln!(out, "{:<16} {:>10} {:>10}", "total kB", size / 1024, res);
    out
}

/// [`listing`] as JSON: every VMA ([`vma_json`]) with its size and, where
/// known, its resident bytes.
pub fn listing_json(mm: &AddressSpace, rss: &BTreeMap<u64, u64>) -> serde_json::Value {
    let vmas: Vec<serde_json::Value> = mm
        .iter()
        .map(|v| {
            let mut j = vma_json(mm, &v);
            j["size"] = v.len().into();
            j["rss"] = rss.get(&v.start()).copied().into();
            j
        })
        .collect();
    serde_json::json!({ "vmas": vmas })
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

/// A maps line without what no memory call shows, so that a model's line
/// and the kernel's compare equal: whether a mapped file was unlinked
/// since (" (deleted)"; an unlink is no memory call), and the inode
/// number the kernel gives shared anonymous memory (`/dev/zero`), which a
/// model numbers itself.
pub fn unseen_removed(line: &str) -> String {
    let l = line.strip_suffix(" (deleted)").unwrap_or(line);
    let f: Vec<&str> = l.splitn(6, ' ').collect();
    let path = f.get(5).map_or("", |p| p.trim_start());
    if path == "/dev/zero" && f.len() == 6 {
        format!("{} {} {} - - {path}", f[0], f[1], f[2])
    } else {
        format!("{} {path}", f[..f.len().min(5)].join(" "))
    }
}

/// How two snapshots differ, VMA by VMA (by start address).
struct Diff {
    removed: Vec<String>,
    added: Vec<String>,
    /// Same start, a different line: (before, after, the fields that
    /// differ).
    changed: Vec<(String, String, Vec<&'static str>)>,
    /// Same start, lines equal but for what no call shows
    /// ([`unseen_removed`]).
    unseen: u64,
    pages_before: u64,
    pages_after: u64,
}

impl Diff {
    fn of(a: &AddressSpace, b: &AddressSpace) -> Diff {
        let lines =
            |mm: &AddressSpace| -> BTreeMap<u64, String> { mm.iter().map(|v| (v.start(), mm.maps_line(&v))).collect() };
        let (la, lb) = (lines(a), lines(b));
        let mut d = Diff {
            removed: Vec::new(),
            added: Vec::new(),
            changed: Vec::new(),
            unseen: 0,
            pages_before: a.stats().mapped / a.page_size().bytes(),
            pages_after: b.stats().mapped / b.page_size().bytes(),
        };
        let starts: std::collections::BTreeSet<u64> = la.keys().chain(lb.keys()).copied().collect();
        for s in starts {
            match (la.get(&s), lb.get(&s)) {
                (Some(x), None) => d.removed.push(x.clone()),
                (None, Some(y)) => d.added.push(y.clone()),
                (Some(x), Some(y)) if x != y && unseen_removed(x) == unseen_removed(y) => d.unseen += 1,
                (Some(x), Some(y)) if x != y => d.changed.push((x.clone(), y.clone(), fields_differing(x, y))),
                _ => {}
            }
        }
        d
    }
}

/// The maps-line fields in which `x` and `y` (lines of VMAs with the same
/// start) differ.
fn fields_differing(x: &str, y: &str) -> Vec<&'static str> {
    const NAMES: [&str; 6] = ["end", "perms", "offset", "device", "inode", "name"];
    let (fx, fy): (Vec<&str>, Vec<&str>) = (x.splitn(6, ' ').collect(), y.splitn(6, ' ').collect());
    let field = |f: &[&str], i: usize| -> String {
        let v = f.get(i).map_or("", |v| v.trim_start());
        if i == 0 {
            v.split_once('-').map_or(v, |r| r.1).to_string()
        } else {
            v.to_string()
        }
    };
    (0..6).filter(|&i| field(&fx, i) != field(&fy, i)).map(|i| NAMES[i]).collect()
}

/// What changed from `a` to `b`: VMAs removed (`-`), added (`+`) and
/// changed (`~`: same start, the line before and after it, with the
/// fields that differ), and the pages mapped before and after. Lines
/// equal but for what no memory call shows ([`unseen_removed`]) are
/// counted apart, as `maple trace --verify` counts them.
pub fn diff(a: &AddressSpace, b: &AddressSpace) -> String {
    let d = Diff::of(a, b);
    let mut out = String::new();
    for x in &d.removed {
        let _ = writeln!(out, "- {x}");
    }
    for y in &d.added {
        let _ = writeln!(out, "+ {y}");
    }
    for (x, y, what) in &d.changed {
        let _ = writeln!(out, "~ {x}\n  {y}\n    ({} changed)", what.join(", "));
    }
    let unseen = if d.unseen > 0 {
        format!(", {} equal but for an unlinked file or a shared-memory inode", d.unseen)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{} removed, {} added, {} changed{unseen}; {} pages mapped before, {} after",
        d.removed.len(),
        d.added.len(),
        d.changed.len(),
        d.pages_before,
        d.pages_after
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

/// [`summary`] as JSON: every figure the text shows, and every VMA.
pub fn summary_json(mm: &AddressSpace) -> serde_json::Value {
    let s = Summary::of(mm);
    let limit = |b: u64| if b == u64::MAX { serde_json::Value::Null } else { b.into() };
    serde_json::json!({
        "vmas": mm.iter().map(|v| vma_json(mm, &v)).collect::<Vec<_>>(),
        "mapped": s.mapped,
        "file": s.file,
        "anonymous": s.anon,
        "shared": s.shared,
        "heap": s.heap,
        "stack": s.stack,
        "guard_pages": { "pages": s.guard_pages, "runs": s.guard_runs },
        "written": s.written,
        "limits": s.limits.iter().map(|l| serde_json::json!({
            "name": l.name,
            "resource": l.resource,
            "used": l.used,
            "limit": limit(l.limit),
        })).collect::<Vec<_>>(),
        "by_protection": s.by_protection.iter().map(|(p, b)| (p.clone(), serde_json::Value::from(*b))).collect::<serde_json::Map<_, _>>(),
        "largest_gaps": s.gaps.iter().map(|&(a, b)| serde_json::json!({ "start": a, "end": b, "bytes": b - a })).collect::<Vec<_>>(),
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

/// [`diff`] as JSON: the VMAs removed and added and, for those changed,
/// each before and after with the fields that differ (each VMA as its
/// maps line's fields: [`line_fields_json`]), the count equal but for
/// what no call shows, and the pages mapped before and after.
pub fn diff_json(a: &AddressSpace, b: &AddressSpace) -> serde_json::Value {
    let d = Diff::of(a, b);
    let changed: Vec<serde_json::Value> = d
        .changed
        .iter()
        .map(|(x, y, what)| {
            serde_json::json!({ "before": line_fields_json(x), "after": line_fields_json(y), "fields": what })
        })
        .collect();
    serde_json::json!({
        "removed": d.removed.iter().map(|l| line_fields_json(l)).collect::<Vec<_>>(),
        "added": d.added.iter().map(|l| line_fields_json(l)).collect::<Vec<_>>(),
        "changed": changed,
        "equal_but_unseen": d.unseen,
        "pages_before": d.pages_before,
        "pages_after": d.pages_after,
    })
}

/// A maps line's fields: {"start", "end", "perms", "offset", "dev",
/// "inode", "name", "line"}.
pub fn line_fields_json(line: &str) -> serde_json::Value {
    let f: Vec<&str> = line.splitn(6, ' ').collect();
    let field = |i: usize| f.get(i).copied().unwrap_or("");
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    let (start, end) = field(0).split_once('-').unwrap_or(("", ""));
    let name = field(5).trim_start();
    serde_json::json!({
        "start": hex(start),
        "end": hex(end),
        "perms": field(1),
        "offset": hex(field(2)),
        "dev": field(3),
        "inode": field(4).parse::<u64>().ok(),
        "name": if name.is_empty() { serde_json::Value::Null } else { name.into() },
        "line": line,
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

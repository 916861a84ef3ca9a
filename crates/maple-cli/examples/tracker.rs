//! A tracker: run a child under `maple trace`, keep the changes it is
//! told (every page range mapped, unmapped, changed or moved, from the
//! child's exec image on), and check them against the child's own
//! `/proc/self/maps`.
//!
//! The child (this program again, with `--child FILE`) maps, protects,
//! writes, moves and unmaps memory, maps a file, then maps a marker page,
//! copies its maps file into FILE without any memory call, and unmaps the
//! marker. The tracker applies the changes up to the marker's unmapping to
//! a plain map of page ranges (it knows nothing of VMAs) and compares that
//! map with FILE page by page: permissions, offset, device, inode, name.
//! The stack, which grows by faults rather than calls, is left out.
//!
//! `cargo run -p maple-cli --example tracker` (Linux x86-64; needs ptrace).

use std::collections::BTreeMap;

/// What the maps file shows of a page range, with the offset of its first
/// page.
#[derive(Clone, Debug, PartialEq)]
struct Attrs {
    perms: String,
    offset: u64,
    dev: String,
    inode: u64,
    name: Option<String>,
}

impl Attrs {
    /// These attributes `by` bytes further into the range (a file's offset
    /// advances; anonymous memory shows 0).
    fn advanced(&self, by: u64) -> Attrs {
        let offset = if self.inode == 0 { 0 } else { self.offset + by };
        Attrs { offset, ..self.clone() }
    }
}

/// Page ranges: start → (end, attributes at start).
type Ranges = BTreeMap<u64, (u64, Attrs)>;

/// Empties `[lo, hi)`, keeping what lies outside it.
fn cut(m: &mut Ranges, lo: u64, hi: u64) {
    let hit: Vec<u64> = m.range(..hi).filter(|(_, (e, _))| *e > lo).map(|(s, _)| *s).collect();
    for s in hit {
        let (e, a) = m.remove(&s).expect("listed");
        if s < lo {
            m.insert(s, (lo, a.clone()));
        }
        if e > hi {
            m.insert(hi, (e, a.advanced(hi - s)));
        }
    }
}

/// The pieces of `[lo, hi)`, each with its attributes.
fn pieces(m: &Ranges, lo: u64, hi: u64) -> Vec<(u64, u64, Attrs)> {
    m.range(..hi)
        .filter(|(_, (e, _))| *e > lo)
        .map(|(s, (e, a))| ((*s).max(lo), (*e).min(hi), a.advanced(lo.saturating_sub(*s))))
        .collect()
}

fn attrs(j: &serde_json::Value) -> Attrs {
    Attrs {
        perms: j["perms"].as_str().unwrap_or_default().to_string(),
        offset: j["offset"].as_u64().unwrap_or(0),
        dev: j["dev"].as_str().unwrap_or_default().to_string(),
        inode: j["inode"].as_u64().unwrap_or(0),
        name: j["name"].as_str().map(str::to_string),
    }
}

/// Applies one change, as `maple trace --json` tells it.
fn apply(m: &mut Ranges, c: &serde_json::Value) {
    let (start, end) = (c["start"].as_u64().expect("start"), c["end"].as_u64().expect("end"));
    match c["change"].as_str() {
        Some("mapped" | "changed") => {
            cut(m, start, end);
            m.insert(start, (end, attrs(&c["new"])));
        }
        Some("unmapped") => cut(m, start, end),
        Some("moved") => {
            let (from, to) = (c["from"]["start"].as_u64().expect("from"), start);
            let len = c["from"]["end"].as_u64().expect("from") - from;
            let moving = pieces(m, from, from + len);
            cut(m, from, from + len);
            cut(m, to, to + len);
            for (s, e, a) in moving {
                m.insert(s - from + to, (e - from + to, a));
            }
        }
        other => panic!("unknown change {other:?}"),
    }
}

/// A maps file as page ranges.
fn parse_maps(text: &str) -> Ranges {
    let mut m = Ranges::new();
    for line in text.lines() {
        let f: Vec<&str> = line.splitn(6, ' ').collect();
        let (s, e) = f[0].split_once('-').expect("a range");
        let name = f.get(5).map(|n| n.trim_start()).filter(|n| !n.is_empty()).map(str::to_string);
        let a = Attrs {
            perms: f[1].to_string(),
            offset: u64::from_str_radix(f[2], 16).expect("offset"),
            dev: f[3].to_string(),
            inode: f[4].parse().expect("inode"),
            name,
        };
        m.insert(u64::from_str_radix(s, 16).expect("start"), (u64::from_str_radix(e, 16).expect("end"), a));
    }
    m
}

/// The page ranges where the two maps differ (the stack left out).
fn differences(model: &Ranges, real: &Ranges) -> Vec<String> {
    let stack = |m: &Ranges| {
        m.iter()
            .filter(|(_, (_, a))| a.name.as_deref() == Some("[stack]"))
            .map(|(s, (e, _))| (*s, *e))
            .collect::<Vec<_>>()
    };
    let skip: Vec<(u64, u64)> = stack(model).into_iter().chain(stack(real)).collect();
    let mut cuts: Vec<u64> = model.iter().chain(real.iter()).flat_map(|(s, (e, _))| [*s, *e]).collect();
    cuts.sort_unstable();
    cuts.dedup();
    let at = |m: &Ranges, x: u64| {
        m.range(..=x).next_back().filter(|(_, (e, _))| *e > x).map(|(s, (_, a))| a.advanced(x - s))
    };
    cuts.windows(2)
        .filter(|w| !skip.iter().any(|&(s, e)| s < w[1] && w[0] < e))
        .filter_map(|w| {
            let (a, b) = (at(model, w[0]), at(real, w[0]));
            (a != b).then(|| format!("{:x}-{:x}: told {a:?}, /proc says {b:?}", w[0], w[1]))
        })
        .collect()
}

/// Where the marker page goes: far from anything a loader places.
const MARKER: u64 = 0x5ca1_ab1e_0000;

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
mod child {
    use std::ffi::CString;

    use super::MARKER;

    /// The child's work, then its maps copied into `out`; ends the process.
    pub fn run(out: &str) -> ! {
        let out = CString::new(out).expect("a path");
        let maps = CString::new("/proc/self/maps").expect("a path");
        let file = CString::new("/proc/self/exe").expect("a path");
        // Allocated before the snapshot, so that taking it makes no call.
        let mut buf = vec![0u8; 1 << 20];
        let page = 4096usize;
        let (rw, anon) = (libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS);
        // SAFETY: every call below maps memory of its own (placed by the
        // kernel or at the marker's address, which nothing uses), changes
        // only that memory, and writes only inside its own mapping; no
        // Rust object lives in any of it. `buf`, `out` and `maps` outlive
        // the calls that read or write them.
        unsafe {
            let a = libc::mmap(core::ptr::null_mut(), 16 * page, rw, anon, -1, 0).cast::<u8>();
            assert_ne!(a.cast(), libc::MAP_FAILED);
            libc::mprotect(a.add(4 * page).cast(), 2 * page, libc::PROT_READ);
            a.write(1);
            libc::madvise(a.add(8 * page).cast(), page, libc::MADV_DONTFORK);
            let moved = libc::mremap(a.add(12 * page).cast(), 4 * page, 8 * page, libc::MREMAP_MAYMOVE);
            assert_ne!(moved, libc::MAP_FAILED);
            libc::munmap(a.add(10 * page).cast(), page);
            let fd = libc::open(file.as_ptr(), libc::O_RDONLY);
            let f = libc::mmap(core::ptr::null_mut(), 3 * page, libc::PROT_READ, libc::MAP_PRIVATE, fd, page as i64);
            assert_ne!(f, libc::MAP_FAILED);
            libc::close(fd);
            libc::mprotect(f.cast::<u8>().add(page).cast(), page, libc::PROT_NONE);
            // The snapshot, between the marker's mapping and unmapping.
            let marker = libc::mmap(MARKER as *mut _, page, libc::PROT_READ, anon | libc::MAP_FIXED_NOREPLACE, -1, 0);
            assert_eq!(marker as u64, MARKER);
            let src = libc::open(maps.as_ptr(), libc::O_RDONLY);
            let mut len = 0;
            loop {
                let n = libc::read(src, buf.as_mut_ptr().add(len).cast(), buf.len() - len);
                if n <= 0 {
                    break;
                }
                len += n as usize;
            }
            let dst = libc::open(out.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC, 0o600);
            libc::write(dst, buf.as_ptr().cast(), len);
            libc::close(dst);
            libc::close(src);
            libc::munmap(marker, page);
            libc::_exit(0)
        }
    }
}

#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, out] = &args[..] {
        if flag == "--child" {
            child::run(out);
        }
    }
    let dir = std::env::temp_dir().join(format!("maple-tracker-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let snapshot = dir.join("maps");
    let me = std::env::current_exe().expect("this program");
    let trace = maple_cli::trace::Args {
        cmd: vec![me.display().to_string(), "--child".into(), snapshot.display().to_string()],
        json: true,
        ..Default::default()
    };
    let mut out = Vec::new();
    match maple_cli::trace::run(&trace, &mut out) {
        Ok(0) => {}
        Ok(code) => panic!("the child exited with {code}"),
        Err(e) => panic!("maple trace: {}", e.msg),
    }
    let changes: Vec<serde_json::Value> =
        String::from_utf8(out).expect("UTF-8").lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    // The changes up to the marker's unmapping: the space the snapshot saw.
    let mut model = Ranges::new();
    let mut told = 0;
    for c in &changes {
        if c["change"] == "unmapped" && c["start"] == MARKER {
            break;
        }
        apply(&mut model, c);
        told += 1;
    }
    let real = parse_maps(&std::fs::read_to_string(&snapshot).expect("the child's snapshot"));
    let _ = std::fs::remove_dir_all(&dir);
    let diff = differences(&model, &real);
    let pages: u64 = real.iter().map(|(s, (e, _))| (e - s) / 4096).sum();
    println!("{told} changes told; {} ranges in /proc/PID/maps, {pages} pages", real.len());
    assert!(real.contains_key(&MARKER), "the snapshot holds the marker");
    assert!(diff.is_empty(), "the changes do not give the child's maps:\n{}", diff.join("\n"));
    println!("every page agrees (permissions, offset, device, inode, name)");
}

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
fn main() {
    println!("maple trace runs on Linux x86-64 only");
}

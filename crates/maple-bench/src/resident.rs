//! Resident memory of a tree, measured rather than computed: a tree is
//! built in a fresh process (this program run again, told what to build
//! through [`PROBE_ENV`]), and the growth of its resident set (`VmRSS` in
//! `/proc/self/status`) is divided by the number of ranges; the share of
//! that growth mapped with huge pages (`AnonHugePages` in
//! `/proc/self/smaps_rollup`) is reported beside it.
//!
//! A fresh process matters: in a long-running one the thread's pool of
//! empty chunks (and the global allocator, for other memory) hands back
//! memory earlier experiments made resident, and the growth would read
//! low. The figure includes everything the tree costs the process: node
//! chunks with their free cells, the block header chunks, the global
//! allocator's own pages where node blocks come from it (not on Linux),
//! and the empty chunks the thread's pool keeps after splits.
//!
//! A program that wants the measurement calls [`serve_probe`] first thing
//! in `main` (the `maple` binary does), so that [`measure`] can run it
//! again as the probe.

use std::{
    process::Command,
    sync::atomic::{AtomicBool, Ordering},
};

use maple_tree::{MapleTree, U63};

use crate::workloads::{boxed_strings, maple, order, range, slab_strings, u};

/// The environment variable that turns a run of the program into a probe:
/// `KIND:N`, KIND one of [`Build`]'s names.
pub const PROBE_ENV: &str = "MAPLE_RESIDENT_PROBE";

/// Set by [`serve_probe`]: this program answers probes, so [`measure`] may
/// run it again as one. (Any other program, a test binary for one, would
/// just run itself again, which may measure again, and so on.)
static SERVES_PROBES: AtomicBool = AtomicBool::new(false);

/// How the measured tree is built (the memory table's rows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Build {
    /// Bulk-built from sorted ranges, without gap tracking.
    Bulk,
    /// Bulk-built, with gap tracking.
    BulkGaps,
    /// Inserted one by one in ascending order (gap tracking).
    Ascending,
    /// Inserted one by one in a random order (gap tracking).
    Random,
    /// `String` values (`"range {i}"`) inserted in a random order into a
    /// plain tree, which boxes each.
    StringsBoxed,
    /// The same in a per-map slab ([`SlabValues`](crate::baselines::SlabValues)).
    StringsSlab,
}

impl Build {
    fn name(self) -> &'static str {
        match self {
            Build::Bulk => "bulk",
            Build::BulkGaps => "bulk-gaps",
            Build::Ascending => "ascending",
            Build::Random => "random",
            Build::StringsBoxed => "strings-boxed",
            Build::StringsSlab => "strings-slab",
        }
    }

    fn parse(s: &str) -> Option<Build> {
        Build::ALL.into_iter().find(|b| b.name() == s)
    }

    const ALL: [Build; 6] =
        [Build::Bulk, Build::BulkGaps, Build::Ascending, Build::Random, Build::StringsBoxed, Build::StringsSlab];

    /// The numbers of `n` ranges in the order this build takes them.
    pub fn order(self, n: u64) -> Vec<u64> {
        order(n, matches!(self, Build::Random | Build::StringsBoxed | Build::StringsSlab))
    }

    /// The tree over the ranges numbered `keys` ([`range`]), built this
    /// way (bulk builds take the keys as `0..keys.len()`); `None` if memory
    /// ran out, or for the builds of `String` maps (which the probe holds
    /// as they are).
    pub fn tree(self, keys: &[u64]) -> Option<MapleTree<U63>> {
        let n = keys.len() as u64;
        Some(match self {
            Build::Bulk => maple(n, false),
            Build::BulkGaps => maple(n, true),
            Build::StringsBoxed | Build::StringsSlab => return None,
            Build::Ascending | Build::Random => {
                let mut t = MapleTree::with_gaps();
                for &i in keys {
                    let (f, l) = range(i);
                    t.insert_range(f..=l, u(i)).ok()?;
                }
                t
            }
        })
    }

    /// What this build makes, to hold while measuring: the tree, or the
    /// map of `String` values.
    fn hold(self, keys: &[u64]) -> Option<Box<dyn std::any::Any>> {
        Some(match self {
            Build::StringsBoxed => Box::new(boxed_strings(keys)),
            Build::StringsSlab => Box::new(slab_strings(keys)),
            _ => Box::new(self.tree(keys)?),
        })
    }
}

/// What a probe measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Resident {
    /// Growth of the resident set per range, in bytes.
    pub per_range: f64,
    /// The part of that growth mapped with huge pages, 0 to 1 (0 where the
    /// system does not say).
    pub huge_share: f64,
}

/// The value of the `field` line (in kB) of a `/proc` file, in bytes.
fn proc_kib(file: &str, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.split(':').next() == Some(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The resident set of this process, in bytes (Linux only).
fn resident_bytes() -> Option<u64> {
    proc_kib("/proc/self/status", "VmRSS")
}

/// The part of the resident set mapped with transparent huge pages, in
/// bytes (0 where the system does not say).
fn huge_bytes() -> u64 {
    proc_kib("/proc/self/smaps_rollup", "AnonHugePages").unwrap_or(0)
}

/// Builds the tree `build` with `n` ranges and measures the growth of the
/// resident set (the key order is made before measuring).
fn probe(build: Build, n: u64) -> Option<Resident> {
    let keys = build.order(n);
    // A small tree of the same kind first, kept alive until the end, so
    // that the program's code on this path is resident before measuring
    // (and its chunks are not reused by the measured tree).
    let warm = build.hold(&build.order(1000))?;
    let (before, huge_before) = (resident_bytes()?, huge_bytes());
    let tree = build.hold(&keys)?;
    let (after, huge_after) = (resident_bytes()?, huge_bytes());
    let grew = after.saturating_sub(before);
    let per_range = grew as f64 / n.max(1) as f64;
    let huge_share =
        if grew == 0 { 0.0 } else { (huge_after.saturating_sub(huge_before) as f64 / grew as f64).min(1.0) };
    drop((tree, warm));
    Some(Resident { per_range, huge_share })
}

/// If this run is a probe ([`PROBE_ENV`] set), measures, prints the
/// figure and returns true: the caller should exit. Returns false for a
/// normal run.
pub fn serve_probe() -> bool {
    SERVES_PROBES.store(true, Ordering::Relaxed);
    let Ok(spec) = std::env::var(PROBE_ENV) else {
        return false;
    };
    let figure = spec
        .split_once(':')
        .and_then(|(kind, n)| Some((Build::parse(kind)?, n.parse::<u64>().ok()?)))
        .and_then(|(build, n)| probe(build, n));
    match figure {
        Some(r) => println!("{} {}", r.per_range, r.huge_share),
        None => println!("unmeasured"),
    }
    true
}

/// Resident memory of the tree `build` with `n` ranges, measured
/// in a fresh run of this program; `None` if that is not possible here:
/// no `/proc`, or a program that has not called [`serve_probe`] (never
/// run again, so a probe cannot start probes), or a run that is a probe.
pub fn measure(build: Build, n: u64) -> Option<Resident> {
    if !SERVES_PROBES.load(Ordering::Relaxed) || std::env::var_os(PROBE_ENV).is_some() {
        return None;
    }
    let exe = std::env::current_exe().ok()?;
    let out = Command::new(exe).env(PROBE_ENV, format!("{}:{n}", build.name())).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut figures = text.split_whitespace().map(str::parse::<f64>);
    Some(Resident { per_range: figures.next()?.ok()?, huge_share: figures.next()?.ok()? })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that does not serve probes (this test binary) is never
    /// run again: it would run its own tests instead.
    #[test]
    fn no_probe_from_a_program_that_does_not_serve_them() {
        assert_eq!(measure(Build::Random, 1000), None);
    }

    #[test]
    fn builds_parse_back_from_their_names() {
        for b in Build::ALL {
            assert_eq!(Build::parse(b.name()), Some(b));
        }
        assert_eq!(Build::parse("sideways"), None);
    }
}

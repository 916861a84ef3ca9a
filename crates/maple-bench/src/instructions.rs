//! Instructions per address-space call, counted rather than timed: this
//! program is run again under callgrind (`valgrind --tool=callgrind`),
//! told through [`PROBE_ENV`] which loop to run, and the instruction
//! count it reports is read back.
//!
//! On a shared machine the wall clock of the same loop moves by tens of
//! per cent from run to run; the instruction count repeats to within a
//! few instructions, so it can decide a ratio of a few per cent (an
//! observer's cost). Two runs, of [`PAIRS`] and twice as many call pairs,
//! are subtracted, which leaves out starting the program and building the
//! space.
//!
//! A program that wants the count calls [`serve_probe`] first thing in
//! `main` (`maple-report` does), so that [`per_pair`] can run it again.

use std::{
    process::Command,
    sync::atomic::{AtomicBool, Ordering},
};

use crate::workloads::{counting_observer, holey_space, map_pairs, middle, protect_pairs};

/// The environment variable that turns a run of the program into a probe:
/// `LOOP:plain|observed:VMAS:PAIRS`.
pub const PROBE_ENV: &str = "MAPLE_CALLS_PROBE";

/// Call pairs in the shorter of the two counted runs.
pub const PAIRS: u64 = 2_000;

/// Set by [`serve_probe`]: this program answers probes (see
/// [`crate::resident`] for why a program that does not must not be run
/// again).
static SERVES_PROBES: AtomicBool = AtomicBool::new(false);

/// Which loop of the mm-calls section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loop {
    /// A page mapped in a hole and unmapped ([`map_pairs`]).
    Map,
    /// A page protected inside a VMA and restored ([`protect_pairs`]).
    Protect,
}

impl Loop {
    fn name(self) -> &'static str {
        match self {
            Loop::Map => "map",
            Loop::Protect => "protect",
        }
    }

    fn parse(s: &str) -> Option<Loop> {
        [Loop::Map, Loop::Protect].into_iter().find(|l| l.name() == s)
    }
}

/// The probe's request: which loop, observed or not, on how many VMAs,
/// how many pairs.
fn parse_spec(spec: &str) -> Option<(Loop, bool, u64, u64)> {
    let mut parts = spec.split(':');
    let lp = Loop::parse(parts.next()?)?;
    let observed = match parts.next()? {
        "plain" => false,
        "observed" => true,
        _ => return None,
    };
    let n = parts.next()?.parse().ok()?;
    let pairs = parts.next()?.parse().ok()?;
    parts.next().is_none().then_some((lp, observed, n, pairs))
}

/// If this run is a probe ([`PROBE_ENV`] set), runs the loop asked for and
/// returns true: the caller should exit. Returns false for a normal run.
pub fn serve_probe() -> bool {
    SERVES_PROBES.store(true, Ordering::Relaxed);
    let Ok(spec) = std::env::var(PROBE_ENV) else {
        return false;
    };
    match parse_spec(&spec) {
        Some((lp, observed, n, pairs)) => {
            let mut mm = holey_space(n);
            let (observer, told) = counting_observer();
            if observed {
                mm.set_observer(observer);
            }
            let (hole, page) = middle(n);
            match lp {
                Loop::Map => map_pairs(&mut mm, pairs, hole),
                Loop::Protect => protect_pairs(&mut mm, pairs, page),
            }
            println!("{} changes told", told.load(Ordering::Relaxed));
        }
        None => println!("unmeasured: bad {PROBE_ENV} {spec:?}"),
    }
    true
}

/// The instructions callgrind counted in a probe run of `spec`.
fn count(spec: &str) -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let out = Command::new("valgrind")
        .args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
        .arg(exe)
        .env(PROBE_ENV, spec)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    collected(&String::from_utf8_lossy(&out.stderr))
}

/// The count in callgrind's closing lines (`==PID== Collected : N`).
fn collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse().ok()))
}

/// Instructions per call pair of `lp` on a space of `n` VMAs, observed by
/// a counting observer or not; `None` where valgrind cannot run, or in a
/// program that does not serve probes (or is one).
pub fn per_pair(lp: Loop, observed: bool, n: u64) -> Option<f64> {
    if !SERVES_PROBES.load(Ordering::Relaxed) || std::env::var_os(PROBE_ENV).is_some() {
        return None;
    }
    let spec = |pairs: u64| format!("{}:{}:{n}:{pairs}", lp.name(), if observed { "observed" } else { "plain" });
    let (short, long) = (count(&spec(PAIRS))?, count(&spec(2 * PAIRS))?);
    Some(long.checked_sub(short)? as f64 / PAIRS as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_spec("map:plain:100:2000"), Some((Loop::Map, false, 100, 2000)));
        assert_eq!(parse_spec("protect:observed:10000:4000"), Some((Loop::Protect, true, 10_000, 4000)));
        for bad in ["", "map", "map:seen:1:1", "fold:plain:1:1", "map:plain:x:1", "map:plain:1:1:1"] {
            assert_eq!(parse_spec(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_count_is_read_from_callgrinds_closing_lines() {
        let stderr = "==7== Events    : Ir\n==7== Collected : 216511757\n==7==\n==7== I   refs:      216,511,757\n";
        assert_eq!(collected(stderr), Some(216_511_757));
        assert_eq!(collected("==7== error\n"), None);
    }

    /// A program that does not serve probes (this test binary) is never
    /// run again.
    #[test]
    fn no_count_from_a_program_that_does_not_serve_probes() {
        assert_eq!(per_pair(Loop::Map, false, 100), None);
    }
}

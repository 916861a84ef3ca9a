//! The measuring loop: candidates run in alternating rounds after a
//! warm-up, medians and spread; CPU pinning; reader/writer throughput.
//!
//! Alternating matters on a shared machine: if the machine slows down for
//! a few seconds, every candidate of the round pays, and the ratios keep
//! their meaning although the absolute times do not.

use std::{
    hint::black_box,
    sync::atomic::{AtomicBool, Ordering},
    time::{Duration, Instant},
};

use rand::{rngs::SmallRng, Rng, SeedableRng};

/// Time per operation over several rounds, in seconds (as `f64`: a
/// `Duration` per operation would round every figure to whole nanoseconds,
/// which for loops of a few nanoseconds per step is an error of up to
/// half the figure).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Timing {
    /// Median seconds per operation.
    pub median: f64,
    /// Fastest round.
    pub min: f64,
    /// Slowest round.
    pub max: f64,
}

impl Timing {
    /// Median nanoseconds per operation.
    pub fn ns(&self) -> f64 {
        self.median * 1e9
    }

    /// (slowest − fastest) / median, in per cent.
    pub fn spread(&self) -> f64 {
        if self.median <= 0.0 {
            return 0.0;
        }
        (self.max - self.min) / self.median * 100.0
    }

    /// Operations per second at the median.
    pub fn per_sec(&self) -> f64 {
        1.0 / self.median.max(1e-15)
    }
}

/// One thing to time: `ops` operations per run; `run` does one run and
/// returns the time of its measured part.
pub struct Candidate<'a> {
    ops: u64,
    run: Box<dyn FnMut() -> Duration + 'a>,
}

impl std::fmt::Debug for Candidate<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Candidate").field("ops", &self.ops).finish_non_exhaustive()
    }
}

/// A candidate: `setup` makes a fresh input (not timed), `f` consumes it
/// (timed); whatever `f` returns is dropped after the clock stops.
pub fn case<'a, S: 'a, T: 'a>(
    ops: u64,
    mut setup: impl FnMut() -> S + 'a,
    mut f: impl FnMut(S) -> T + 'a,
) -> Candidate<'a> {
    Candidate {
        ops: ops.max(1),
        run: Box::new(move || {
            let input = setup();
            let start = Instant::now();
            let out = f(input);
            let d = start.elapsed();
            drop(black_box(out));
            d
        }),
    }
}

/// A candidate that times itself: `run` does one run of `ops` operations
/// and returns the time of its measured part (another process's own clock,
/// say, which leaves that process's start-up out).
pub fn timed<'a>(ops: u64, run: impl FnMut() -> Duration + 'a) -> Candidate<'a> {
    Candidate { ops: ops.max(1), run: Box::new(run) }
}

/// Runs the candidates in `reps` alternating rounds (one untimed warm-up
/// round first when `reps > 1`) and returns each one's timing per
/// operation, in order.
pub fn alternate(reps: usize, mut cands: Vec<Candidate<'_>>) -> Vec<Timing> {
    let reps = reps.max(1);
    if reps > 1 {
        for c in &mut cands {
            (c.run)();
        }
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(reps); cands.len()];
    for _ in 0..reps {
        for (c, t) in cands.iter_mut().zip(&mut times) {
            t.push((c.run)().as_secs_f64() / c.ops as f64);
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_by(f64::total_cmp);
            Timing { median: t[t.len() / 2], min: t[0], max: t[t.len() - 1] }
        })
        .collect()
}

/// One candidate alone (see [`alternate`]).
pub fn per_op<S, T>(reps: usize, ops: u64, setup: impl FnMut() -> S, f: impl FnMut(S) -> T) -> Timing {
    alternate(reps, vec![case(ops, setup, f)])[0]
}

/// Keeps the calling thread on one CPU while alive (threads it spawns
/// inherit that), and restores the old affinity on drop. Single-threaded
/// measurements pin; concurrent ones must not.
#[derive(Debug)]
pub struct Pinned {
    #[cfg(target_os = "linux")]
    old: libc::cpu_set_t,
}

/// Pins the calling thread to the CPU it is running on; `None` where the
/// platform cannot.
pub fn pin_to_current_cpu() -> Option<Pinned> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `cpu_set_t` is plain data; all-zero is the empty set.
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::cpu_set_t>();
        // SAFETY: `old` is a writable cpu_set_t of `size` bytes; pid 0 is
        // the calling thread.
        if unsafe { libc::sched_getaffinity(0, size, &mut old) } != 0 {
            return None;
        }
        // SAFETY: no arguments; returns -1 on failure, checked below.
        let cpu = unsafe { libc::sched_getcpu() };
        if cpu < 0 {
            return None;
        }
        // SAFETY: as above.
        let mut one: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `cpu` is a valid CPU number (just returned by the
        // kernel) below CPU_SETSIZE, and `one` is a valid set.
        unsafe { libc::CPU_SET(cpu as usize, &mut one) };
        // SAFETY: `one` is a valid set of `size` bytes.
        if unsafe { libc::sched_setaffinity(0, size, &one) } != 0 {
            return None;
        }
        Some(Pinned { old })
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        // SAFETY: `old` is the set read from the kernel when pinning.
        unsafe {
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.old);
        }
    }
}

/// CPU time used so far by the calling thread.
pub fn thread_cpu_time() -> Option<Duration> {
    #[cfg(unix)]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        if rc == 0 {
            return Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
        }
    }
    None
}

/// Tells a benchmark writer when to stop and, if paced, when each write
/// is due.
#[derive(Debug)]
pub struct Pace {
    stop: AtomicBool,
    start: Instant,
    /// Time between writes; `None` writes as fast as possible.
    period: Option<Duration>,
    /// Number of writes after which to stop anyway.
    limit: u64,
}

impl Pace {
    /// A pace that stops after `limit` writes (flat out).
    pub fn limited(limit: u64) -> Pace {
        Pace { stop: AtomicBool::new(false), start: Instant::now(), period: None, limit }
    }

    /// Waits (spinning, so the writer keeps its core) until write `i` is
    /// due; false once the readers have finished.
    pub fn next(&self, i: u64) -> bool {
        if i >= self.limit {
            return false;
        }
        if let Some(p) = self.period {
            let due = self.start + p * i as u32;
            while Instant::now() < due {
                if self.stop.load(Ordering::Relaxed) {
                    return false;
                }
                std::hint::spin_loop();
            }
        }
        !self.stop.load(Ordering::Relaxed)
    }
}

/// A benchmark reader: one lookup, returning something to sum.
pub type Read<'a> = &'a (dyn Fn(u64) -> u64 + Sync);
/// A benchmark writer: writes until its [`Pace`] says stop; returns the
/// number of writes.
pub type Write<'a> = &'a (dyn Fn(&Pace) -> u64 + Sync);

/// What one [`read_throughput`] run measured.
#[derive(Clone, Copy, Debug)]
pub struct Throughput {
    /// Lookups per second of wall time, mean over readers.
    pub wall: f64,
    /// Lookups per second of the readers' own CPU time.
    pub cpu: f64,
    /// Writes per second, if a writer ran.
    pub writes: f64,
}

/// `readers` threads each do `per_reader` random lookups of keys below
/// `keys` with `lookup`, while `writer` (if any, with its pacing period)
/// runs in another thread until they finish.
pub fn read_throughput(
    readers: usize,
    per_reader: u64,
    keys: u64,
    lookup: Read<'_>,
    writer: Option<(Write<'_>, Option<Duration>)>,
) -> Throughput {
    let start = Instant::now();
    let pace = Pace { stop: AtomicBool::new(false), start, period: writer.and_then(|w| w.1), limit: u64::MAX };
    let (times, writes) = std::thread::scope(|s| {
        let w = writer.map(|(w, _)| s.spawn(|| w(&pace)));
        let hs: Vec<_> = (0..readers)
            .map(|r| {
                s.spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(r as u64 + 1);
                    let cpu0 = thread_cpu_time();
                    let start = Instant::now();
                    let mut sum = 0u64;
                    for _ in 0..per_reader {
                        sum = sum.wrapping_add(lookup(rng.gen_range(0..keys)));
                    }
                    black_box(sum);
                    let wall = start.elapsed().as_secs_f64();
                    let cpu = match (cpu0, thread_cpu_time()) {
                        (Some(a), Some(b)) => (b - a).as_secs_f64(),
                        _ => wall,
                    };
                    (wall, cpu)
                })
            })
            .collect();
        let times: Vec<(f64, f64)> = hs.into_iter().map(|h| h.join().expect("reader")).collect();
        pace.stop.store(true, Ordering::Relaxed);
        let writes = w.map_or(0, |w| w.join().expect("writer"));
        (times, writes)
    });
    let elapsed = start.elapsed().as_secs_f64();
    let mean = |f: fn(&(f64, f64)) -> f64| times.iter().map(f).sum::<f64>() / times.len().max(1) as f64;
    Throughput {
        wall: per_reader as f64 / mean(|t| t.0).max(1e-9),
        cpu: per_reader as f64 / mean(|t| t.1).max(1e-9),
        writes: writes as f64 / elapsed,
    }
}

/// Readers alone and readers with `writer`, `reps` times each,
/// alternating; for each, the run with the median wall rate.
pub fn alone_and_busy(
    reps: usize,
    readers: usize,
    per_reader: u64,
    keys: u64,
    lookup: Read<'_>,
    writer: (Write<'_>, Option<Duration>),
) -> (Throughput, Throughput) {
    let (mut alone, mut busy) = (Vec::new(), Vec::new());
    for _ in 0..reps.max(1) {
        alone.push(read_throughput(readers, per_reader, keys, lookup, None));
        busy.push(read_throughput(readers, per_reader, keys, lookup, Some(writer)));
    }
    let median = |mut runs: Vec<Throughput>| {
        runs.sort_by(|a, b| a.wall.total_cmp(&b.wall));
        runs.swap_remove(runs.len() / 2)
    };
    (median(alone), median(busy))
}

/// A reader/writer case measured by [`alone_and_busy`]: its rates and
/// how much of its rate it kept with the writer, in per cent.
#[derive(Clone, Copy, Debug)]
pub struct Kept {
    /// Readers alone.
    pub alone: Throughput,
    /// Readers with the writer.
    pub busy: Throughput,
}

impl Kept {
    /// [`alone_and_busy`] with a writer running flat out.
    pub fn measure(reps: usize, readers: usize, per_reader: u64, keys: u64, read: Read<'_>, write: Write<'_>) -> Kept {
        let (alone, busy) = alone_and_busy(reps, readers, per_reader, keys, read, (write, None));
        Kept { alone, busy }
    }

    /// Wall-time rate with the writer over the rate alone, in per cent.
    pub fn wall(&self) -> f64 {
        self.busy.wall / self.alone.wall.max(1e-9) * 100.0
    }

    /// The same by the readers' own CPU time.
    pub fn cpu(&self) -> f64 {
        self.busy.cpu / self.alone.cpu.max(1e-9) * 100.0
    }
}

/// Lookups per second with `threads` threads, each doing `per_thread`
/// random lookups below `keys` with `f`.
pub fn rate(threads: usize, per_thread: u64, keys: u64, f: &(dyn Fn(u64) -> u64 + Sync)) -> f64 {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(t as u64 + 7);
                let mut sum = 0u64;
                for _ in 0..per_thread {
                    sum = sum.wrapping_add(f(rng.gen_range(0..keys.max(1))));
                }
                black_box(sum);
            });
        }
    });
    (threads as u64 * per_thread) as f64 / start.elapsed().as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternate_reports_per_operation_medians() {
        let t = alternate(
            3,
            vec![
                case(10, || (), |()| std::thread::sleep(Duration::from_millis(2))),
                case(1, || (), |()| std::thread::sleep(Duration::from_millis(2))),
            ],
        );
        // Ten operations share one sleep; one operation has it alone.
        assert!(t[0].median < t[1].median, "{t:?}");
        assert!(t[0].min <= t[0].median && t[0].median <= t[0].max);
    }

    #[test]
    fn pinning_restores_the_old_affinity() {
        let before = std::thread::available_parallelism().map_or(1, |n| n.get());
        if let Some(p) = pin_to_current_cpu() {
            assert_eq!(std::thread::available_parallelism().map_or(1, |n| n.get()), 1);
            drop(p);
        }
        assert_eq!(std::thread::available_parallelism().map_or(1, |n| n.get()), before);
    }
}

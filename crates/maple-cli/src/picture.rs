//! `maple replay --svg`: the address spaces over the course of a log.
//!
//! Measuring (sampling the replayer every so many lines) is separate from
//! drawing ([`draw`]), which takes only the samples.

use std::collections::BTreeMap;

use maple_mm::{strace::Replayer, AddressSpace};
use plotters::prelude::*;

/// Address-space regions are this big (4 GiB): the program and its heap,
/// the mmap area and the stack land in different ones.
const REGION_SHIFT: u32 = 32;

/// One sampling point.
#[derive(Clone, Debug, Default)]
pub struct Sample {
    /// Log line.
    pub line: usize,
    /// (pid, VMAs, mapped bytes) of every process with its own space.
    pub procs: Vec<(u32, usize, u64)>,
    /// Mapped bytes per region of the followed process.
    pub regions: BTreeMap<u64, u64>,
}

/// Samples of a replay.
#[derive(Debug, Default)]
pub struct Timeline {
    /// In line order.
    pub samples: Vec<Sample>,
}

impl Timeline {
    /// Records the replayer's state at `line`; `follow` is the process
    /// whose regions are drawn (default: the first).
    pub fn sample(&mut self, line: usize, r: &Replayer, follow: Option<u32>) {
        let procs = r.processes();
        let mut seen: Vec<*const AddressSpace> = Vec::new();
        let mut s = Sample { line, ..Sample::default() };
        let follow = follow.or(r.root());
        for (pid, space) in &procs {
            let ptr: *const AddressSpace = &**space;
            if Some(*pid) == follow {
                for v in space.iter() {
                    *s.regions.entry(v.start() >> REGION_SHIFT).or_default() += v.len();
                }
            }
            if seen.contains(&ptr) {
                continue; // a thread: its process is counted already
            }
            seen.push(ptr);
            let st = space.stats();
            s.procs.push((*pid, st.vmas, st.mapped));
        }
        self.samples.push(s);
    }
}

/// Draws the timeline as an SVG file: VMA count and mapped MiB per
/// process, and where in the address space the followed process's memory
/// lives (a band per 4 GiB region, darker for more mapped memory).
pub fn draw(t: &Timeline, path: &str, title: &str) -> Result<(), String> {
    let root = SVGBackend::new(path, (1100, 900)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {path}: {e}");
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (top, rest) = root.split_vertically(300);
    let (mid, bottom) = rest.split_vertically(300);
    let last_line = t.samples.last().map_or(1, |s| s.line.max(1));
    // The processes with the most VMAs at any point, at most eight.
    let mut peak: BTreeMap<u32, usize> = BTreeMap::new();
    for s in &t.samples {
        for &(pid, n, _) in &s.procs {
            let e = peak.entry(pid).or_default();
            *e = (*e).max(n);
        }
    }
    let mut shown: Vec<(u32, usize)> = peak.into_iter().collect();
    shown.sort_by_key(|&(p, n)| (std::cmp::Reverse(n), p));
    shown.truncate(8);
    let series = |pid: u32, f: &dyn Fn(usize, u64) -> f64| -> Vec<(usize, f64)> {
        t.samples
            .iter()
            .filter_map(|s| s.procs.iter().find(|p| p.0 == pid).map(|&(_, n, b)| (s.line, f(n, b))))
            .collect()
    };
    let max_vmas = shown.first().map_or(1, |s| s.1).max(1) as f64;
    let max_mib = t.samples.iter().flat_map(|s| s.procs.iter().map(|p| p.2)).max().unwrap_or(1) as f64 / 1048576.0;
    for (area, caption, ymax, f) in [
        (
            &top,
            format!("{title}: VMAs per process"),
            max_vmas * 1.05,
            &(|n: usize, _b: u64| n as f64) as &dyn Fn(usize, u64) -> f64,
        ),
        (&mid, "mapped MiB per process".to_string(), max_mib * 1.05 + 0.1, &(|_n: usize, b: u64| b as f64 / 1048576.0)),
    ] {
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0..last_line, 0f64..ymax)
            .map_err(|e| err(&e))?;
        chart.configure_mesh().x_desc("log line").draw().map_err(|e| err(&e))?;
        for (i, &(pid, _)) in shown.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(LineSeries::new(series(pid, f), color.stroke_width(2)))
                .map_err(|e| err(&e))?
                .label(format!("pid {pid}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], color));
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(&e))?;
    }
    // Bands: one row per region, one column per sample.
    let regions: Vec<u64> = {
        let mut r: Vec<u64> = t.samples.iter().flat_map(|s| s.regions.keys().copied()).collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let rows = regions.len().max(1);
    let mut chart = ChartBuilder::on(&bottom)
        .caption("where the first process's memory lives (4 GiB regions; darker = more mapped)", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(140)
        .build_cartesian_2d(0..last_line, 0..rows)
        .map_err(|e| err(&e))?;
    let labels = regions.clone();
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc("log line")
        .y_labels(rows.min(20))
        .y_label_formatter(&|i: &usize| labels.get(*i).map_or(String::new(), |r| format!("{:#x}", r << REGION_SHIFT)))
        .draw()
        .map_err(|e| err(&e))?;
    let max_region = t.samples.iter().flat_map(|s| s.regions.values().copied()).max().unwrap_or(1).max(1) as f64;
    let mut prev = 0usize;
    for s in &t.samples {
        for (row, reg) in regions.iter().enumerate() {
            let bytes = s.regions.get(reg).copied().unwrap_or(0);
            if bytes == 0 {
                continue;
            }
            // Log scale: a page and a gigabyte both show.
            let shade = ((bytes as f64).ln() / max_region.ln().max(1.0)).clamp(0.1, 1.0);
            let color = RGBColor(30, 80, 200).mix(shade);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(prev, row), (s.line.max(prev + 1), row + 1)],
                    color.filled(),
                )))
                .map_err(|e| err(&e))?;
        }
        prev = s.line;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

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
    /// (pid, VMAs, mapped bytes) of every live process with its own space.
    pub procs: Vec<(u32, usize, u64)>,
    /// Mapped bytes per region of the followed process.
    pub regions: BTreeMap<u64, u64>,
}

/// A process's last state: at its exit, or at the end of the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Final {
    /// The line it was seen at (its exit's, or the last).
    pub line: usize,
    /// Its VMAs.
    pub vmas: usize,
    /// Its mapped bytes.
    pub mapped: u64,
    /// Whether it had exited.
    pub exited: bool,
}

/// Samples of a replay.
#[derive(Debug, Default)]
pub struct Timeline {
    /// In line order.
    pub samples: Vec<Sample>,
    /// Every process's last state, by pid (threads counted in their
    /// process).
    pub finals: BTreeMap<u32, Final>,
    /// The replayer's [`Replayer::process_events`] at the last sample.
    events: usize,
}

impl Timeline {
    /// Records the replayer's state at `line`; `follow` is the process
    /// whose regions are drawn (default: the first).
    pub fn sample(&mut self, line: usize, r: &Replayer, follow: Option<u32>) {
        self.events = r.process_events();
        let mut seen: Vec<*const AddressSpace> = Vec::new();
        let mut s = Sample { line, ..Sample::default() };
        let follow = follow.or(r.root());
        for (pid, space, exited) in &r.every_process() {
            let ptr: *const AddressSpace = &**space;
            if Some(*pid) == follow && !exited {
                for v in space.iter() {
                    *s.regions.entry(v.start() >> REGION_SHIFT).or_default() += v.len();
                }
            }
            if seen.contains(&ptr) {
                continue; // a thread: its process is counted already
            }
            seen.push(ptr);
            let st = space.stats();
            if !exited {
                s.procs.push((*pid, st.vmas, st.mapped));
            }
            // An exited process's state stays as it was at its exit.
            if !self.finals.get(pid).is_some_and(|f| f.exited && *exited) {
                self.finals.insert(*pid, Final { line, vmas: st.vmas, mapped: st.mapped, exited: *exited });
            }
        }
        self.samples.push(s);
    }

    /// Samples at `line` if a process appeared or exited since the last
    /// sample, or if `due` (the caller's regular interval): so every
    /// process, however short-lived, is drawn, and its last state.
    pub fn sample_if(&mut self, due: bool, line: usize, r: &Replayer, follow: Option<u32>) {
        if due || r.process_events() != self.events {
            self.sample(line, r, follow);
        }
    }
}

/// Processes listed in a legend before "… and N more".
const LEGEND_ROWS: usize = 24;

/// Draws the timeline as an SVG file: VMA count and mapped MiB of every
/// process (each line ending at its last state, marked: a filled dot for
/// a process that exited, a ring for one alive at the end), the legend
/// beside the charts, and where in the address space the followed
/// process's memory lives (a band per 4 GiB region, darker for more
/// mapped memory).
pub fn draw(t: &Timeline, path: &str, title: &str) -> Result<(), String> {
    let root = SVGBackend::new(path, (1300, 900)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| format!("cannot draw {path}: {e}");
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (charts, legend) = root.split_horizontally(1040);
    let (top, rest) = charts.split_vertically(300);
    let (mid, bottom) = rest.split_vertically(300);
    let last_line = t.samples.last().map_or(1, |s| s.line.max(1));
    // Every process, the ones with the most VMAs first (their colours
    // stay apart).
    let mut shown: Vec<(u32, usize)> = t.finals.keys().map(|&pid| (pid, 0)).collect();
    for (pid, peak) in &mut shown {
        *peak = t.samples.iter().flat_map(|s| s.procs.iter()).filter(|p| p.0 == *pid).map(|p| p.1).max().unwrap_or(0);
        *peak = (*peak).max(t.finals[pid].vmas);
    }
    shown.sort_by_key(|&(p, n)| (std::cmp::Reverse(n), p));
    let color = |i: usize| Palette99::pick(i).to_rgba();
    // A process's points: its samples, then its last state.
    let series = |pid: u32, f: &dyn Fn(usize, u64) -> f64| -> Vec<(usize, f64)> {
        let mut v: Vec<(usize, f64)> = t
            .samples
            .iter()
            .filter_map(|s| s.procs.iter().find(|p| p.0 == pid).map(|&(_, n, b)| (s.line, f(n, b))))
            .collect();
        if let Some(fin) = t.finals.get(&pid) {
            if v.last().is_none_or(|l| l.0 < fin.line) {
                v.push((fin.line, f(fin.vmas, fin.mapped)));
            }
        }
        v
    };
    let max_vmas = shown.first().map_or(1, |s| s.1).max(1) as f64;
    let max_bytes =
        t.samples.iter().flat_map(|s| s.procs.iter().map(|p| p.2)).chain(t.finals.values().map(|f| f.mapped));
    let max_mib = max_bytes.max().unwrap_or(1) as f64 / 1048576.0;
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
            let points = series(pid, f);
            chart.draw_series(LineSeries::new(points.clone(), color(i).stroke_width(2))).map_err(|e| err(&e))?;
            let (Some(&end), Some(fin)) = (points.last(), t.finals.get(&pid)) else { continue };
            let style = if fin.exited { color(i).filled() } else { color(i).stroke_width(2) };
            chart.draw_series(std::iter::once(Circle::new(end, 4, style))).map_err(|e| err(&e))?;
        }
    }
    // The legend, beside the charts: each process and its last state.
    let text = |s: &str, y: i32, size: i32| Text::new(s.to_string(), (10, y), ("sans-serif", size).into_font());
    legend.draw(&text("processes (last state)", 20, 16)).map_err(|e| err(&e))?;
    legend.draw(&text("● exited   ○ alive at the end", 42, 13)).map_err(|e| err(&e))?;
    for (i, &(pid, _)) in shown.iter().take(LEGEND_ROWS).enumerate() {
        let y = 70 + 22 * i as i32;
        let fin = t.finals[&pid];
        legend
            .draw(&PathElement::new(vec![(10, y + 7), (30, y + 7)], color(i).stroke_width(3)))
            .map_err(|e| err(&e))?;
        let mark = if fin.exited { "●" } else { "○" };
        let label = format!("{mark} {pid}: {} VMAs, {:.1} MiB", fin.vmas, fin.mapped as f64 / 1048576.0);
        legend.draw(&Text::new(label, (36, y), ("sans-serif", 13).into_font())).map_err(|e| err(&e))?;
    }
    if shown.len() > LEGEND_ROWS {
        let y = 70 + 22 * LEGEND_ROWS as i32;
        legend.draw(&text(&format!("… and {} more", shown.len() - LEGEND_ROWS), y, 13)).map_err(|e| err(&e))?;
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

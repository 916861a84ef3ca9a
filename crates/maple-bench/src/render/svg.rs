//! SVG line plots, drawn with `plotters`.

use plotters::{coord::ranged1d::ValueFormatter, prelude::*};

use crate::model::Plot;

const SIZE: (u32, u32) = (760, 420);

/// Distinct colours that read on white (no yellow).
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
    RGBColor(23, 190, 207),
];

/// Where the legend hides the least: curves that fall from left to right
/// leave the upper right empty, rising ones the upper left.
fn legend_position(pts: &[Vec<(f64, f64)>], log_y: bool) -> SeriesLabelPosition {
    let y = |v: f64| if log_y { v.max(f64::MIN_POSITIVE).ln() } else { v };
    let (mut first, mut last) = (0.0, 0.0);
    for s in pts {
        if let (Some(a), Some(b)) = (s.first(), s.last()) {
            first += y(a.1);
            last += y(b.1);
        }
    }
    if first > last {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    }
}

/// Draws `p` as a standalone SVG document.
pub fn svg(p: &Plot) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, SIZE).into_drawing_area();
        draw(&root, p).map_err(|e| format!("plot {}: {e}", p.id))?;
        root.present().map_err(|e| format!("plot {}: {e}", p.id))?;
    }
    Ok(buf)
}

/// The largest magnitude drawn: an axis padded around figures near the
/// largest `f64` overflows to infinity (or spans more than `f64` holds),
/// and plotters then never finishes its ticks.
const DRAWABLE: f64 = 1e300;

/// The points that can be drawn: finite and within [`DRAWABLE`], and
/// positive on a log axis.
fn usable(p: &Plot) -> Vec<Vec<(f64, f64)>> {
    let fits = |v: f64, log: bool| v.abs() <= DRAWABLE && (!log || v > 0.0);
    p.series
        .iter()
        .map(|s| s.points.iter().copied().filter(|&(x, y)| fits(x, p.log_x) && fits(y, p.log_y)).collect())
        .collect()
}

/// The axis range covering `vals`, padded; on a log axis, whole factors.
fn bounds(vals: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() || !hi.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        lo /= 1.5;
        hi *= 1.5;
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        lo = if lo >= 0.0 { 0.0 } else { lo - pad };
        hi += pad;
    }
    (lo, hi)
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, plotters::coord::Shift>, p: &Plot) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let pts = usable(p);
    let xs = bounds(pts.iter().flatten().map(|q| q.0), p.log_x);
    let ys = bounds(pts.iter().flatten().map(|q| q.1), p.log_y);
    // Four coordinate types (linear or log on each axis) share one body.
    match (p.log_x, p.log_y) {
        (false, false) => body(root, p, &pts, xs.0..xs.1, ys.0..ys.1),
        (true, false) => body(root, p, &pts, (xs.0..xs.1).log_scale(), ys.0..ys.1),
        (false, true) => body(root, p, &pts, xs.0..xs.1, (ys.0..ys.1).log_scale()),
        (true, true) => body(root, p, &pts, (xs.0..xs.1).log_scale(), (ys.0..ys.1).log_scale()),
    }
}

fn body<DB: DrawingBackend, X, Y>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    p: &Plot,
    pts: &[Vec<(f64, f64)>],
    x: X,
    y: Y,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(&p.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc(p.x_label.as_str())
        .y_desc(p.y_label.as_str())
        .x_label_formatter(&|v| short(*v))
        .y_label_formatter(&|v| short(*v))
        .draw()
        .map_err(|e| e.to_string())?;
    for (i, (s, points)) in p.series.iter().zip(pts).enumerate() {
        let color = PALETTE[i % PALETTE.len()].to_rgba();
        let style = if s.reference { color.stroke_width(1) } else { color.stroke_width(2) };
        let name = if s.reference { format!("{} (reference)", s.name) } else { s.name.clone() };
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map_err(|e| e.to_string())?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], style));
        let marker = move |c: (f64, f64)| -> DynElement<'static, DB, (f64, f64)> {
            if s.reference {
                Cross::new(c, 4, color.stroke_width(1)).into_dyn()
            } else {
                Circle::new(c, 3, color.filled()).into_dyn()
            }
        };
        chart.draw_series(points.iter().map(|&c| marker(c))).map_err(|e| e.to_string())?;
    }
    chart
        .configure_series_labels()
        .position(legend_position(pts, p.log_y))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// A short axis label: 1.5K, 20M, 0.25.
fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        trim(format!("{:.2}", v / 1e9)) + "G"
    } else if a >= 1e6 {
        trim(format!("{:.2}", v / 1e6)) + "M"
    } else if a >= 1e3 {
        trim(format!("{:.2}", v / 1e3)) + "K"
    } else if a >= 1.0 || a == 0.0 {
        trim(format!("{v:.2}"))
    } else {
        format!("{v:.2e}")
    }
}

fn trim(s: String) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_axis_kind_draws() {
        for (lx, ly) in [(false, false), (true, false), (false, true), (true, true)] {
            let mut p = Plot::new("t", "title", "x", "y").log(lx, ly);
            p.series("a", vec![(1.0, 2.0), (10.0, 20.0), (100.0, 5.0)]);
            p.reference("b", vec![(1.0, 3.0), (100.0, 30.0)]);
            // Points a log axis cannot show are left out, not an error.
            p.series("c", vec![(0.0, 0.0), (-1.0, f64::NAN)]);
            let svg = svg(&p).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("title") && svg.contains("</svg>"), "{lx} {ly}");
        }
        assert_eq!(short(1500.0), "1.5K");
        assert_eq!(short(2_000_000.0), "2M");
    }

    /// Figures near the ends of `f64` are left out: an axis padded around
    /// them overflowed, and plotters never finished its ticks (found by
    /// feeding damaged report files to the renderers).
    #[test]
    fn extreme_figures_do_not_hang_the_axes() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for (lx, ly) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut p = Plot::new("t", "title", "x", "y").log(lx, ly);
                p.series("a", vec![(1.0, 2.0), (10.0, 20.0)]);
                p.series("huge", vec![(-f64::MAX, 1.0), (f64::MAX, 1e308), (1e308, -f64::MAX)]);
                tx.send(svg(&p).map(|s| s.contains("</svg>"))).unwrap();
            }
        });
        for _ in 0..4 {
            let drawn = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("a plot never finished");
            assert_eq!(drawn, Ok(true));
        }
    }
}

//! What a run produces: typed tables, data series and goals, never
//! formatted text (the renderers in [`crate::render`] do the formatting).
//!
//! Everything here is `serde`-serialisable: `report.json` is this model,
//! and `--compare` reads an earlier run's back.

use serde::{Deserialize, Serialize};

/// A whole run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Report {
    /// Where and how it ran.
    pub meta: Meta,
    /// The sections, in running order.
    pub sections: Vec<Section>,
}

impl Report {
    /// Every goal of every section, in order.
    pub fn goals(&self) -> impl Iterator<Item = (&Section, &Goal)> {
        self.sections.iter().flat_map(|s| s.goals.iter().map(move |g| (s, g)))
    }

    /// Every table of every section.
    pub fn tables(&self) -> impl Iterator<Item = (&Section, &Table)> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(move |b| match b {
                Block::Table(t) => Some((s, t)),
                _ => None,
            })
        })
    }

    /// Every plot of every section.
    pub fn plots(&self) -> impl Iterator<Item = (&Section, &Plot)> {
        self.sections.iter().flat_map(|s| {
            s.blocks.iter().filter_map(move |b| match b {
                Block::Plot(p) => Some((s, p)),
                _ => None,
            })
        })
    }
}

/// The machine and the build, recorded at the top of every report.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    /// The command line that produced the report.
    pub command: String,
    /// `quick`, `full` or `tiny`.
    pub mode: String,
    /// CPU model name.
    pub cpu: String,
    /// Logical CPUs.
    pub cores: usize,
    /// Physical memory in GiB.
    pub memory_gib: f64,
    /// Operating system and kernel release.
    pub os: String,
    /// `rustc --version` of the compiler that built this binary, if known.
    pub rustc: String,
    /// Git commit of the source tree, if known.
    pub commit: String,
    /// Start of the run (UTC, ISO 8601).
    pub date: String,
    /// Load average (1, 5, 15 minutes) before the run.
    pub load_before: [f64; 3],
    /// Load average after the run.
    pub load_after: [f64; 3],
    /// Wall time of the whole run, in seconds.
    pub seconds: f64,
}

impl Meta {
    /// The header as (label, text) rows, as every renderer shows it.
    pub fn rows(&self) -> Vec<(&'static str, String)> {
        let load = |l: [f64; 3]| format!("{:.2} {:.2} {:.2}", l[0], l[1], l[2]);
        vec![
            ("command", self.command.clone()),
            ("mode", self.mode.clone()),
            ("machine", format!("{}, {} logical CPUs, {:.1} GiB", self.cpu, self.cores, self.memory_gib)),
            ("OS", self.os.clone()),
            ("compiler", self.rustc.clone()),
            ("commit", self.commit.clone()),
            ("date", self.date.clone()),
            ("load average before / after", format!("{} / {}", load(self.load_before), load(self.load_after))),
            ("run time", format!("{:.0} s", self.seconds)),
        ]
    }
}

/// What every report says under its header.
pub const NOISE_NOTE: &str = "Absolute times are noise on a shared machine (±30 %); every table runs its candidates side by side in one process, in alternating rounds, so compare the ratios.";

/// One experiment's results.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Section {
    /// Short stable name (`compare`, `fork`, …): JSON key and `--only`.
    pub id: String,
    /// Heading.
    pub title: String,
    /// The command that regenerates this section alone.
    pub command: String,
    /// Tables, plots and notes, in reading order.
    pub blocks: Vec<Block>,
    /// What this section's figures say about the project's goals.
    pub goals: Vec<Goal>,
}

impl Section {
    /// An empty section.
    pub fn new(id: &str, title: &str) -> Section {
        Section {
            id: id.to_string(),
            title: title.to_string(),
            command: format!("cargo run --release -p maple-bench -- --only {id}"),
            ..Section::default()
        }
    }

    /// Adds a paragraph of explanation.
    pub fn text(&mut self, s: impl Into<String>) {
        self.blocks.push(Block::Text(s.into()));
    }

    /// Adds a table.
    pub fn table(&mut self, t: Table) {
        self.blocks.push(Block::Table(t));
    }

    /// Adds a plot.
    pub fn plot(&mut self, p: Plot) {
        self.blocks.push(Block::Plot(p));
    }

    /// Adds a goal.
    pub fn goal(&mut self, g: Goal) {
        self.goals.push(g);
    }
}

/// A piece of a section.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", content = "data", rename_all = "lowercase")]
pub enum Block {
    /// A paragraph (Markdown inline syntax: backticks, emphasis).
    Text(String),
    /// A table.
    Table(Table),
    /// A plot.
    Plot(Plot),
}

/// A table: named columns, rows of typed cells. The first `key` columns
/// name a row (they are how `--compare` matches rows of two runs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Table {
    /// Stable name within the report.
    pub id: String,
    /// A line above the table, if any.
    pub caption: Option<String>,
    /// Column headings.
    pub columns: Vec<String>,
    /// How many leading columns identify a row.
    pub key: usize,
    /// The rows; each has one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these columns, whose first `key` columns name a row.
    pub fn new(id: &str, key: usize, columns: &[&str]) -> Table {
        Table {
            id: id.to_string(),
            caption: None,
            columns: columns.iter().map(|c| c.to_string()).collect(),
            key,
            rows: Vec::new(),
        }
    }

    /// With a caption.
    pub fn caption(mut self, c: impl Into<String>) -> Table {
        self.caption = Some(c.into());
        self
    }

    /// Adds a row (one cell per column; missing cells are empty).
    pub fn row(&mut self, cells: Vec<Cell>) {
        let mut cells = cells;
        cells.resize(self.columns.len(), Cell::Empty);
        self.rows.push(cells);
    }

    /// The label of row `i`: its key cells joined.
    pub fn row_label(&self, i: usize) -> String {
        self.rows[i].iter().take(self.key.max(1)).map(Cell::plain).collect::<Vec<_>>().join(" / ")
    }

    /// The cell in the row labelled `label`, column `column`.
    pub fn get(&self, label: &str, column: &str) -> Option<&Cell> {
        let c = self.columns.iter().position(|x| x == column)?;
        let r = (0..self.rows.len()).find(|&i| self.row_label(i) == label)?;
        self.rows[r].get(c)
    }
}

/// How a number is shown. The value itself is always kept exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    /// Nanoseconds (1 decimal below 100, none above).
    Ns,
    /// Milliseconds, 2 decimals.
    Ms,
    /// A count (no decimals, thousands as they come).
    Count,
    /// A rate per second, with K/M suffixes.
    Rate,
    /// A ratio, shown as `1.23×`.
    Times,
    /// A percentage (the value is in per cent).
    Percent,
    /// A signed percentage change (`+12%`).
    Change,
    /// Bytes, 1 decimal.
    Bytes,
    /// Millions, 2 decimals (`M lines/s`).
    Millions,
    /// Plain number with 2 decimals.
    Plain,
}

/// One table cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Cell {
    /// A measured or derived number.
    Num {
        /// The value.
        v: f64,
        /// How to show it.
        unit: Unit,
    },
    /// Text (a name, a description, a figure quoted from a kernel commit or mail).
    Text(String),
    /// Nothing (not applicable).
    Empty,
}

impl Cell {
    /// A number.
    pub fn num(v: f64, unit: Unit) -> Cell {
        Cell::Num { v, unit }
    }

    /// Text.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }

    /// The value, if a number.
    pub fn value(&self) -> Option<f64> {
        match self {
            Cell::Num { v, .. } => Some(*v),
            _ => None,
        }
    }

    /// The cell as plain text (numbers formatted by their unit).
    pub fn plain(&self) -> String {
        match self {
            Cell::Num { v, unit } => format_num(*v, *unit),
            Cell::Text(s) => s.clone(),
            Cell::Empty => "–".to_string(),
        }
    }
}

/// Formats `v` as `unit` says.
pub fn format_num(v: f64, unit: Unit) -> String {
    if !v.is_finite() {
        return "–".to_string();
    }
    match unit {
        Unit::Ns => {
            if v.abs() >= 100.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        }
        Unit::Ms | Unit::Plain | Unit::Millions => format!("{v:.2}"),
        Unit::Count => format!("{v:.0}"),
        Unit::Rate => {
            if v.abs() >= 1e6 {
                format!("{:.2} M", v / 1e6)
            } else if v.abs() >= 1e3 {
                format!("{:.1} K", v / 1e3)
            } else {
                format!("{v:.0}")
            }
        }
        Unit::Times => format!("{v:.2}×"),
        Unit::Percent => format!("{v:.0} %"),
        Unit::Change => format!("{v:+.0}%"),
        Unit::Bytes => format!("{v:.1}"),
    }
}

/// A line plot: named series of (x, y) points.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Plot {
    /// Stable name within the report (also the SVG file's name).
    pub id: String,
    /// Title above the plot.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis.
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// One line of a plot.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points, in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed-looking (thin, with markers only): a reference figure
    /// (a kernel commit's or mail's, the kernel's), not one measured here.
    pub reference: bool,
}

impl Plot {
    /// An empty plot.
    pub fn new(id: &str, title: &str, x_label: &str, y_label: &str) -> Plot {
        Plot {
            id: id.to_string(),
            title: title.to_string(),
            x_label: x_label.to_string(),
            y_label: y_label.to_string(),
            ..Plot::default()
        }
    }

    /// With logarithmic axes.
    pub fn log(mut self, x: bool, y: bool) -> Plot {
        self.log_x = x;
        self.log_y = y;
        self
    }

    /// Adds a measured series.
    pub fn series(&mut self, name: &str, points: Vec<(f64, f64)>) {
        self.series.push(Series { name: name.to_string(), points, reference: false });
    }

    /// Adds a reference series (figures quoted, not measured here).
    pub fn reference(&mut self, name: &str, points: Vec<(f64, f64)>) {
        self.series.push(Series { name: name.to_string(), points, reference: true });
    }
}

/// A goal of the project and where this run stands on it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Goal {
    /// The goal, stated.
    pub what: String,
    /// This run's figure(s), stated.
    pub figure: String,
    /// Met in this run (`None`: not measured at this size).
    pub met: Option<bool>,
}

impl Goal {
    /// A goal with its figure and verdict.
    pub fn new(what: impl Into<String>, figure: impl Into<String>, met: Option<bool>) -> Goal {
        Goal { what: what.into(), figure: figure.into(), met }
    }
}

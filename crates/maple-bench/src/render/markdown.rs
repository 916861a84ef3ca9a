//! `report.md`: the summary, then every section's notes and tables, with
//! the command that regenerates each and links to the SVG plots.

use std::fmt::Write as _;

use crate::model::{Block, Goal, Meta, Report, Section, Table, NOISE_NOTE};

/// The whole report as Markdown; plots are linked as `plots/ID.svg`.
pub fn markdown(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# maple benchmark report\n");
    out.push_str(&meta_table(&r.meta));
    out.push('\n');
    let _ = writeln!(out, "## Summary: the goals in this run\n");
    out.push_str(&goals_table(r));
    for s in &r.sections {
        out.push('\n');
        out.push_str(&section(s, true));
    }
    out
}

/// The machine table at the top of a report.
pub fn meta_table(m: &Meta) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| | |\n| --- | --- |");
    for (k, v) in m.rows() {
        let v = if k == "command" { format!("`{v}`") } else { v };
        let _ = writeln!(out, "| {k} | {} |", cell_text(&v));
    }
    let _ = writeln!(out, "\n{NOISE_NOTE}");
    out
}

/// Whether a goal was met, as a word.
pub fn verdict(g: &Goal) -> &'static str {
    match g.met {
        Some(true) => "met",
        Some(false) => "**not met**",
        None => "not judged",
    }
}

/// The goals with this run's verdicts, as a Markdown table.
pub fn goals_table(r: &Report) -> String {
    let mut out = String::from("| goal | this run | verdict | section |\n| --- | --- | --- | --- |\n");
    for (s, g) in r.goals() {
        let _ = writeln!(out, "| {} | {} | {} | {} |", cell_text(&g.what), cell_text(&g.figure), verdict(g), s.id);
    }
    out
}

/// One section: heading, regenerating command, blocks. With `links`,
/// plots are linked as `plots/ID.svg`; without, they are left out.
pub fn section(s: &Section, links: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## {}\n", s.title);
    let _ = writeln!(out, "Regenerate: `{}`\n", s.command);
    for b in &s.blocks {
        match b {
            Block::Text(t) => {
                let _ = writeln!(out, "{t}\n");
            }
            Block::Table(t) => {
                out.push_str(&table(t));
                out.push('\n');
            }
            Block::Plot(p) if links => {
                let _ = writeln!(out, "![{}](plots/{}.svg)\n", p.title, p.id);
            }
            Block::Plot(_) => {}
        }
    }
    out
}

/// A table in Markdown; numbers right-aligned.
pub fn table(t: &Table) -> String {
    let mut out = String::new();
    if let Some(c) = &t.caption {
        let _ = writeln!(out, "{c}\n");
    }
    let numeric: Vec<bool> = (0..t.columns.len()).map(|c| t.rows.iter().any(|r| r[c].value().is_some())).collect();
    let _ = writeln!(out, "| {} |", t.columns.iter().map(|c| cell_text(c)).collect::<Vec<_>>().join(" | "));
    let _ = writeln!(out, "|{}", numeric.iter().map(|&n| if n { " ---: |" } else { " --- |" }).collect::<String>());
    for r in &t.rows {
        let _ = writeln!(out, "| {} |", r.iter().map(|c| cell_text(&c.plain())).collect::<Vec<_>>().join(" | "));
    }
    out
}

/// Text made safe for a table cell.
fn cell_text(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

//! Renderers: Markdown, a self-contained HTML page, SVG plots and JSON;
//! the comparison of two runs; and the refresh of `docs/BENCHMARKS.md`.

mod html;
mod markdown;
mod svg;

use std::{
    fmt::Write as _,
    path::{Path, PathBuf},
};

pub use html::html;
pub use markdown::{markdown, section as markdown_section, table as markdown_table};
pub use svg::svg;

use crate::{
    model::{format_num, Cell, Report, Unit},
    SectionId,
};

/// The report as pretty-printed JSON (every raw figure, with its unit).
pub fn json(r: &Report) -> String {
    serde_json::to_string_pretty(r).expect("a report always serialises")
}

/// Reads a report written by [`json`]; `name` names the source in errors.
pub fn from_json(name: &str, text: &str) -> Result<Report, String> {
    serde_json::from_str(text).map_err(|e| format!("{name}: not a maple report (line {}: {e})", e.line()))
}

/// Every plot as (id, SVG document).
pub fn plots(r: &Report) -> Result<Vec<(String, String)>, String> {
    r.plots().map(|(_, p)| svg(p).map(|s| (p.id.clone(), s))).collect()
}

/// Writes `report.md`, `report.html`, `report.json` and `plots/ID.svg`
/// into `dir` (created if missing); returns the files written.
pub fn write_all(r: &Report, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let plots = plots(r)?;
    let plot_dir = dir.join("plots");
    std::fs::create_dir_all(&plot_dir).map_err(|e| format!("cannot create {}: {e}", plot_dir.display()))?;
    let mut written = Vec::new();
    let mut put = |path: PathBuf, text: &str| -> Result<(), String> {
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
        Ok(())
    };
    put(dir.join("report.md"), &markdown(r))?;
    put(dir.join("report.html"), &html(r, &plots))?;
    put(dir.join("report.json"), &json(r))?;
    for (id, s) in &plots {
        put(plot_dir.join(format!("{id}.svg")), s)?;
    }
    Ok(written)
}

/// Whether a bigger value of `unit` is better (rates, speed-ups, kept
/// shares) or worse (times, bytes); `None` for counts and text.
fn higher_is_better(unit: Unit) -> Option<bool> {
    match unit {
        Unit::Rate | Unit::Times | Unit::Percent | Unit::Millions => Some(true),
        Unit::Ns | Unit::Ms | Unit::Bytes | Unit::Change => Some(false),
        Unit::Count | Unit::Plain => None,
    }
}

/// Markdown comparing every figure of `new` to the same figure of `old`
/// (matched by section, table, row label and column): old, new, new/old,
/// and whether that is better or worse. Figures in only one run are
/// counted, not listed.
pub fn compare(old: &Report, new: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# maple-report: this run against {} ({})\n", old.meta.commit, old.meta.date);
    let _ = writeln!(
        out,
        "Ratios are new / old for every figure found in both runs. \"better\" and \"worse\" go by the unit (a time lower, a rate higher); counts are listed without a verdict. Machine noise is ±30 %, so read 0.75–1.3 as unchanged.\n"
    );
    let (mut matched, mut unmatched) = (0usize, 0usize);
    for (s, t) in new.tables() {
        let Some((_, ot)) = old.tables().find(|(os, ot)| os.id == s.id && ot.id == t.id) else {
            unmatched += t.rows.len();
            continue;
        };
        let mut rows = String::new();
        for i in 0..t.rows.len() {
            let label = t.row_label(i);
            for (c, col) in t.columns.iter().enumerate().skip(t.key) {
                let Cell::Num { v: nv, unit } = t.rows[i][c] else { continue };
                match ot.get(&label, col).and_then(Cell::value) {
                    Some(ov) => {
                        matched += 1;
                        let ratio = nv / ov;
                        let verdict = match higher_is_better(unit) {
                            _ if !ratio.is_finite() => "",
                            Some(hib) if (ratio > 1.3 && hib) || (ratio < 0.77 && !hib) => "better",
                            Some(hib) if (ratio < 0.77 && hib) || (ratio > 1.3 && !hib) => "**worse**",
                            Some(_) => "same",
                            None => "",
                        };
                        let _ = writeln!(
                            rows,
                            "| {label} | {col} | {} | {} | {ratio:.2} | {verdict} |",
                            format_num(ov, unit),
                            format_num(nv, unit)
                        );
                    }
                    None => unmatched += 1,
                }
            }
        }
        if !rows.is_empty() {
            let _ = writeln!(out, "## {} / {}\n", s.id, t.id);
            let _ = writeln!(out, "| row | column | old | new | new/old | |\n| --- | --- | ---: | ---: | ---: | --- |");
            out.push_str(&rows);
            out.push('\n');
        }
    }
    let _ = writeln!(out, "{matched} figures compared; {unmatched} in this run had no counterpart in the old one.");
    out
}

/// Rewrites the generated parts of a document: every block between
/// `<!-- maple-report:begin ID -->` and `<!-- maple-report:end ID -->`
/// becomes section ID of `r` (notes and tables). Sections not in `r` are
/// left as they are. Returns the new text and the ids replaced.
pub fn update_docs(doc: &str, r: &Report) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(doc.len());
    let mut done = Vec::new();
    let mut rest = doc;
    const BEGIN: &str = "<!-- maple-report:begin ";
    while let Some(b) = rest.find(BEGIN) {
        let after = &rest[b + BEGIN.len()..];
        let close = after.find("-->").ok_or("an unterminated maple-report:begin marker")?;
        let id = after[..close].trim().to_string();
        let end_marker = format!("<!-- maple-report:end {id} -->");
        let body_start = b + BEGIN.len() + close + 3;
        let end =
            rest[body_start..].find(&end_marker).ok_or_else(|| format!("no {end_marker} after its begin marker"))?;
        out.push_str(&rest[..body_start]);
        if id == "goals" && r.sections.len() == SectionId::ALL.len() {
            // The goals of a run of every section (a partial run would
            // leave some out).
            out.push('\n');
            let _ = writeln!(
                out,
                "_Generated by `maple-report --update-docs` on {} ({}, {})._\n",
                r.meta.date, r.meta.mode, r.meta.commit
            );
            out.push_str(&markdown::goals_table(r));
            out.push('\n');
            done.push(id);
            out.push_str(&end_marker);
            rest = &rest[body_start + end + end_marker.len()..];
            continue;
        }
        match r.sections.iter().find(|s| s.id == id) {
            Some(s) => {
                out.push('\n');
                let _ = writeln!(
                    out,
                    "_Generated by `maple-report --update-docs` on {} ({}, {})._\n",
                    r.meta.date, r.meta.mode, r.meta.commit
                );
                out.push_str(&markdown_section(s, false).replacen("## ", "### ", 1));
                done.push(id);
            }
            None => out.push_str(&rest[body_start..body_start + end]),
        }
        out.push_str(&end_marker);
        rest = &rest[body_start + end + end_marker.len()..];
    }
    out.push_str(rest);
    Ok((out, done))
}

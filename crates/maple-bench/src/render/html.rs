//! `report.html`: one self-contained page (styles and SVG plots inline),
//! readable in a browser without a server. The markup is well-formed XML
//! (XHTML syntax), which the report test checks by parsing it.

use std::fmt::Write as _;

use super::markdown::verdict;
use crate::model::{Block, Cell, Meta, Report, Table, NOISE_NOTE};

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}\
table{border-collapse:collapse;margin:1em 0;font-size:14px}\
th,td{border:1px solid #ccc;padding:3px 8px}th{background:#f3f3f3}\
td.n{text-align:right;font-variant-numeric:tabular-nums}\
tr.met td.v{color:#176b2c}tr.miss td.v{color:#a11;font-weight:bold}\
code{background:#f4f4f4;padding:0 3px}figure{margin:1em 0}\
p.cmd{color:#555;font-size:13px}";

/// The report as one HTML page.
pub fn html(r: &Report, plots: &[(String, String)]) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>maple benchmark report</title><style>{STYLE}</style></head><body>\n<h1>maple benchmark report</h1>\n"
    );
    out.push_str(&meta(&r.meta));
    out.push_str("<h2 id=\"summary\">Summary: the goals in this run</h2>\n<table><tr><th>goal</th><th>this run</th><th>verdict</th><th>section</th></tr>\n");
    for (s, g) in r.goals() {
        let class = match g.met {
            Some(true) => "met",
            Some(false) => "miss",
            None => "none",
        };
        let _ = writeln!(
            out,
            "<tr class=\"{class}\"><td>{}</td><td>{}</td><td class=\"v\">{}</td><td><a href=\"#{}\">{}</a></td></tr>",
            inline(&g.what),
            inline(&g.figure),
            esc(verdict(g).trim_matches('*')),
            esc(&s.id),
            esc(&s.id)
        );
    }
    out.push_str("</table>\n");
    for s in &r.sections {
        let _ = writeln!(out, "<h2 id=\"{}\">{}</h2>", esc(&s.id), inline(&s.title));
        let _ = writeln!(out, "<p class=\"cmd\">Regenerate: <code>{}</code></p>", esc(&s.command));
        for b in &s.blocks {
            match b {
                Block::Text(t) => {
                    let _ = writeln!(out, "<p>{}</p>", inline(t));
                }
                Block::Table(t) => out.push_str(&table(t)),
                Block::Plot(p) => {
                    if let Some((_, svg)) = plots.iter().find(|(id, _)| *id == p.id) {
                        let _ = writeln!(out, "<figure>{}</figure>", strip_prolog(svg));
                    }
                }
            }
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn meta(m: &Meta) -> String {
    let mut out = String::from("<table>\n");
    for (k, v) in m.rows() {
        let _ = writeln!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(&v));
    }
    let _ = writeln!(out, "</table>\n<p>{}</p>", esc(NOISE_NOTE));
    out
}

fn table(t: &Table) -> String {
    let mut out = String::new();
    if let Some(c) = &t.caption {
        let _ = writeln!(out, "<p>{}</p>", inline(c));
    }
    out.push_str("<table><tr>");
    for c in &t.columns {
        let _ = write!(out, "<th>{}</th>", inline(c));
    }
    out.push_str("</tr>\n");
    for r in &t.rows {
        out.push_str("<tr>");
        for c in r {
            let class = if matches!(c, Cell::Num { .. }) { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", inline(&c.plain()));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</table>\n");
    out
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// Escapes text and turns Markdown's `code` and **strong** into markup.
fn inline(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in s.split('`').enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
        } else {
            for (j, p) in part.split("**").enumerate() {
                if j % 2 == 1 {
                    let _ = write!(out, "<strong>{}</strong>", esc(p));
                } else {
                    out.push_str(&esc(p));
                }
            }
        }
    }
    out
}

/// An SVG document without an XML declaration, for inlining.
fn strip_prolog(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_markup() {
        assert_eq!(inline("a `x<y` **b** & c"), "a <code>x&lt;y</code> <strong>b</strong> &amp; c");
    }
}

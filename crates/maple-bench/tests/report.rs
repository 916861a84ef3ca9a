//! The whole report at tiny sizes: every section, table, plot and JSON
//! field is produced and non-empty, the HTML is well-formed, a run
//! compared with itself is unchanged, and `--update-docs` replaces exactly
//! the marked blocks. No timing is asserted.

use maple_bench::{
    model::{Block, Cell},
    render, run, Options, SectionId,
};

#[test]
fn a_tiny_report_has_everything() {
    let mut steps = Vec::new();
    let report = run(&Options::tiny(), &mut |s| steps.push(s.to_string()));
    assert!(!steps.is_empty(), "progress was reported");

    // Every section, in order, each with a table and a goal or a note.
    let ids: Vec<&str> = report.sections.iter().map(|s| s.id.as_str()).collect();
    let want: Vec<&str> = SectionId::ALL.iter().map(|s| s.name()).collect();
    assert_eq!(ids, want);
    for s in &report.sections {
        assert!(!s.title.is_empty() && s.command.contains(&s.id), "{}", s.id);
        assert!(s.blocks.iter().any(|b| matches!(b, Block::Table(_))), "{} has a table", s.id);
        assert!(s.blocks.iter().any(|b| matches!(b, Block::Text(t) if !t.is_empty())), "{} explains itself", s.id);
    }
    for (s, t) in report.tables() {
        assert!(!t.rows.is_empty(), "{}/{} has rows", s.id, t.id);
        for row in &t.rows {
            assert_eq!(row.len(), t.columns.len(), "{}/{}", s.id, t.id);
            assert!(row.iter().any(|c| matches!(c, Cell::Num { .. })), "{}/{} row has a figure", s.id, t.id);
            for c in row {
                if let Some(v) = c.value() {
                    assert!(v.is_finite(), "{}/{}: {row:?}", s.id, t.id);
                }
            }
        }
    }
    // Plots: the published figures where there are some, ours everywhere.
    let plot_ids: Vec<&str> = report.plots().map(|(_, p)| p.id.as_str()).collect();
    for id in ["fork-scaling", "swap-2000", "mm-calls", "old-design", "compare-load", "concurrent-paced", "dup-scaling"]
    {
        assert!(plot_ids.contains(&id), "plot {id} in {plot_ids:?}");
    }
    for (_, p) in report.plots() {
        assert!(p.series.iter().any(|s| !s.reference && !s.points.is_empty()), "plot {} has data", p.id);
    }
    assert!(report.plots().any(|(_, p)| p.series.iter().any(|s| s.reference)), "published figures are plotted");
    // Goals from every section that sets one.
    let with_goals: std::collections::BTreeSet<&str> = report.goals().map(|(s, _)| s.id.as_str()).collect();
    for id in ["forking", "fork-scaling", "names", "swap", "compare", "kernel", "concurrent", "replay"] {
        assert!(with_goals.contains(id), "a goal of section {id}: {with_goals:?}");
    }
    assert!(report.meta.cores > 0 && !report.meta.date.is_empty() && report.meta.seconds > 0.0);

    // Files.
    let dir = std::env::temp_dir().join(format!("maple-report-test-{}", std::process::id()));
    let written = render::write_all(&report, &dir).unwrap();
    assert!(written.len() >= 3 + plot_ids.len());
    for f in &written {
        assert!(std::fs::metadata(f).unwrap().len() > 0, "{} is empty", f.display());
    }
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    for s in &report.sections {
        assert!(md.contains(&format!("## {}", s.title)), "{} in report.md", s.id);
    }
    assert!(md.contains("Summary") && md.contains("plots/fork-scaling.svg"));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..roxmltree::ParsingOptions::default() };
    let doc = roxmltree::Document::parse_with_options(&html, opts).expect("report.html is well-formed");
    let count = |tag: &str| doc.descendants().filter(|n| n.tag_name().name() == tag).count();
    assert_eq!(count("svg"), plot_ids.len(), "every plot inline");
    assert!(count("table") >= report.tables().count(), "every table in the page");
    for (_, p) in report.plots() {
        let svg = std::fs::read_to_string(dir.join(format!("plots/{}.svg", p.id))).unwrap();
        roxmltree::Document::parse(&svg).expect("SVG is well-formed");
    }

    // JSON round trip, and a run compared with itself.
    let json = std::fs::read_to_string(dir.join("report.json")).unwrap();
    let back = render::from_json("report.json", &json).unwrap();
    assert!(render::json(&back) == json, "report.json does not read back as the same report");
    let cmp = render::compare(&back, &report);
    assert!(cmp.contains("| 1.00 |") && !cmp.contains("| **worse** |") && !cmp.contains("| better |"), "{cmp}");
    assert!(!cmp.contains(" 0 figures compared"));
    assert!(render::from_json("x.json", "{not json").unwrap_err().contains("x.json"));
    std::fs::remove_dir_all(&dir).unwrap();

    // Only the marked blocks of a document are replaced.
    let doc = "intro\n<!-- maple-report:begin kernel -->\nold\n<!-- maple-report:end kernel -->\nmiddle\n\
               <!-- maple-report:begin nosuch -->\nkept\n<!-- maple-report:end nosuch -->\nend\n";
    let (new, done) = render::update_docs(doc, &report).unwrap();
    assert_eq!(done, ["kernel"]);
    assert!(
        new.starts_with("intro\n")
            && new
                .ends_with("middle\n<!-- maple-report:begin nosuch -->\nkept\n<!-- maple-report:end nosuch -->\nend\n")
    );
    assert!(!new.contains("\nold\n") && new.contains("| slot store |"));
    assert!(render::update_docs("<!-- maple-report:begin x -->", &report).is_err());
}

#[test]
fn section_lists_parse_with_clear_errors() {
    assert_eq!(SectionId::parse_list("swap,kernel").unwrap(), [SectionId::Swap, SectionId::Kernel]);
    assert_eq!(SectionId::parse_list("mm").unwrap().len(), 5);
    let e = SectionId::parse_list("swap,bogus").unwrap_err();
    assert!(e.contains("bogus") && e.contains("fork-scaling"), "{e}");
}

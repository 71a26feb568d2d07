//! The pictures of docs/performance.md, drawn from the CSVs the benchmarks write (`FERRY_BENCH_CSV`): SVG line
//! charts with plotters, no font files or bitmaps. `e2e/bench-all` runs the benchmarks into one folder and then
//! this (`cargo bench --bench plot`, reading `FERRY_BENCH_OUT`, writing `FERRY_PLOT_DIR`, default docs/img).
//! Under `cargo test --all-targets` it draws from a small made-up CSV into a temporary folder and checks the
//! result, so a broken chart fails the tests.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use plotters::prelude::*;

/// One line: a name and its (x, y) points, x ascending.
type Series = (String, Vec<(f64, f64)>);

fn main() -> anyhow::Result<()> {
    let smoke = !std::env::args().any(|a| a == "--bench");
    if smoke {
        return smoke_test();
    }
    let input = PathBuf::from(std::env::var("FERRY_BENCH_OUT").unwrap_or_else(|_| "target/bench-out".into()));
    let output = PathBuf::from(std::env::var("FERRY_PLOT_DIR").unwrap_or_else(|_| "docs/img".into()));
    std::fs::create_dir_all(&output)?;
    for written in draw_all(&input, &output)? {
        println!("wrote {}", written.display());
    }
    Ok(())
}

/// Every chart whose CSV is in `input`; returns the files written.
fn draw_all(input: &Path, output: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    let federation = input.join("federation.csv");
    if federation.exists() {
        let rows = read_csv(&federation)?;
        let mut by_variant: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for row in &rows {
            let p99 = number(row, "p99_ms")? / 1000.0;
            by_variant.entry(format!("{} (p99)", row["variant"])).or_default().push((number(row, "agents")?, p99));
        }
        let path = output.join("federation-delivery.svg");
        line_chart(&path, "Delivery after a catalog change, by agent count", "agents", "delivery p99 (s)", by_variant)?;
        written.push(path);
    }
    let visible = input.join("time_to_visible.csv");
    if visible.exists() {
        let rows = read_csv(&visible)?;
        let mut by_system: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        // The repair rows measure something else (PVBs deleted under existing Backups): a table, not this chart.
        for row in rows.iter().filter(|r| !r["system"].contains("repair")) {
            by_system
                .entry(row["system"].clone())
                .or_default()
                .push((number(row, "backups")?, number(row, "seconds")?));
        }
        let path = output.join("time-to-visible.svg");
        line_chart(
            &path,
            "Time until every Backup and PVB is listable",
            "backups in the bucket",
            "seconds",
            by_system,
        )?;
        written.push(path);
    }
    Ok(written)
}

/// A CSV with a header line, as the benchmarks write it (a field with a comma is in double quotes).
fn read_csv(path: &Path) -> anyhow::Result<Vec<BTreeMap<String, String>>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = fields(lines.next().context("empty CSV")?);
    Ok(lines.map(|line| header.iter().cloned().zip(fields(line)).collect()).collect())
}

/// One CSV line's fields (quotes removed; no escaped quotes inside, which the benchmarks never write).
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().into_iter().for_each(|f| f.push(c)),
        }
    }
    out
}

fn number(row: &BTreeMap<String, String>, column: &str) -> anyhow::Result<f64> {
    let value = row.get(column).with_context(|| format!("no column {column}"))?;
    value.trim().parse().with_context(|| format!("column {column}: {value:?} is not a number"))
}

fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: BTreeMap<String, Vec<(f64, f64)>>,
) -> anyhow::Result<()> {
    let mut series: Vec<Series> = series.into_iter().collect();
    for (_, points) in &mut series {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let points = || series.iter().flat_map(|(_, p)| p.iter());
    let x_max = points().map(|p| p.0).fold(0.0, f64::max).max(1.0) * 1.05;
    let y_max = points().map(|p| p.1).fold(0.0, f64::max).max(0.001) * 1.1;
    let root = SVGBackend::new(path, (760, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)?;
    chart.configure_mesh().x_desc(x_label).y_desc(y_label).draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, color.filled())))?;
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(())
}

fn smoke_test() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::write(
        dir.path().join("federation.csv"),
        "variant,agents,p50_ms,p99_ms,cpu_per_change_s,rss_settled_mb\n\
         \"once per pass, deltas\",250,300,500,0.1,100\n\"once per pass, deltas\",1000,600,1200,0.4,400\n\
         \"per cluster, whole sets\",1000,6000,10000,12,2400\n",
    )?;
    std::fs::write(
        dir.path().join("time_to_visible.csv"),
        "system,backups,objects,seconds,objects_per_s,cpu_s,peak_rss_mb\n\
         ferry,2000,6000,8,750,3,60\nferry,10000,30000,40,750,15,200\nvelero,2000,6000,96,62,20,150\n\
         \"velero, repair\",2000,0,75,0,,\n",
    )?;
    let written = draw_all(dir.path(), dir.path())?;
    anyhow::ensure!(written.len() == 2, "both charts drawn: {written:?}");
    for path in written {
        let svg = std::fs::read_to_string(&path)?;
        anyhow::ensure!(svg.starts_with("<svg") && svg.contains("<polyline"), "{} is not a line chart", path.display());
        anyhow::ensure!(svg.contains("deltas (p99)") || svg.contains("velero"), "{}: no legend", path.display());
        anyhow::ensure!(!svg.contains("repair"), "{}: the repair row is not a line", path.display());
    }
    println!("plot smoke: both charts drawn");
    Ok(())
}

//! The figures of Ando & Aida (Figs. 7-12): success rate and average cost vs offered load, one
//! line per algorithm, drawn with plotters as SVG and PNG.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use coreserve::model::{ReservationMethod, SelectionPolicy};

use super::{topology_kinds, SummaryRow};
use crate::algorithm::Algorithm;

/// Image size in pixels (SVG user units), legend panel included.
const WIDTH: u32 = 1100;
const HEIGHT: u32 = 700;
/// Width of the legend panel on the right.
const LEGEND_W: u32 = 250;
/// Marker "radius" in pixels.
const MARKER_R: i32 = 6;
const FONT: &str = "sans-serif";
/// The ring around a drifting point.
const DRIFT: RGBColor = RGBColor(220, 0, 0);

/// Which of the two figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    Success,
    Cost,
}

impl Metric {
    fn file_prefix(self) -> &'static str {
        match self {
            Metric::Success => "success",
            Metric::Cost => "cost",
        }
    }
    fn title(self) -> &'static str {
        match self {
            Metric::Success => "success rate",
            Metric::Cost => "average cost",
        }
    }
    fn y_desc(self) -> &'static str {
        match self {
            Metric::Success => "success rate",
            Metric::Cost => "average cost (per CPU-hour)",
        }
    }
}

/// Marker shape, chosen by the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Circle,
    Square,
    Triangle,
    Diamond,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    Solid,
    /// Dash length and gap, pixels.
    Dashed(u32, u32),
}

/// How one algorithm is drawn, in the chart and in the legend.
#[derive(Debug, Clone, Copy)]
struct Style {
    color: RGBColor,
    line: Line,
    width: u32,
    shape: Shape,
    filled: bool,
}

/// Method rank in the legend: BBR, BIR, overlay.
fn method_rank(method: ReservationMethod) -> u8 {
    match method {
        ReservationMethod::Bbr => 0,
        ReservationMethod::Bir => 1,
        ReservationMethod::BbrOverlay => 2,
    }
}

/// Policy rank (legend order) and base colour (Okabe-Ito-like, colour-blind friendly) and shape.
fn policy_look(policy: SelectionPolicy) -> (u8, RGBColor, Shape) {
    match policy {
        SelectionPolicy::Time => (0, RGBColor(0, 114, 178), Shape::Circle),
        SelectionPolicy::Cost => (1, RGBColor(213, 94, 0), Shape::Square),
        SelectionPolicy::Load => (2, RGBColor(0, 150, 110), Shape::Triangle),
        SelectionPolicy::Random => (3, RGBColor(170, 60, 150), Shape::Diamond),
    }
}

fn blend(c: RGBColor, toward: RGBColor, t: f64) -> RGBColor {
    let m = |a: u8, b: u8| (a as f64 + (b as f64 - a as f64) * t).round() as u8;
    RGBColor(m(c.0, toward.0), m(c.1, toward.1), m(c.2, toward.2))
}

/// Legend order: BBR, BIR, overlay; within each, time, cost, load, random.
fn legend_order(a: &Algorithm, b: &Algorithm) -> std::cmp::Ordering {
    let rank = |a: &Algorithm| (method_rank(a.method), policy_look(a.policy).0);
    rank(a).cmp(&rank(b)).then_with(|| a.cmp(b))
}

/// Styles of all algorithms of the summary, so an algorithm looks the same in every figure.
///
/// The policy sets the hue and the marker shape (time: blue circle, cost: vermillion square,
/// load: green triangle, random: purple diamond); the method sets the rest: BIR solid, thick,
/// full colour, filled markers; BBR dashed, a lighter shade, hollow markers; `bbr-overlay-*`
/// short dashes, a darker shade, filled markers.
fn style(algorithm: &Algorithm) -> Style {
    let (_, c, shape) = policy_look(algorithm.policy);
    match algorithm.method {
        ReservationMethod::Bir => Style { color: c, line: Line::Solid, width: 3, shape, filled: true },
        ReservationMethod::Bbr => {
            Style { color: blend(c, WHITE, 0.35), line: Line::Dashed(10, 6), width: 2, shape, filled: false }
        }
        ReservationMethod::BbrOverlay => {
            Style { color: blend(c, BLACK, 0.4), line: Line::Dashed(3, 4), width: 3, shape, filled: true }
        }
    }
}

/// Which offered load the figures' x axis shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum XAxis {
    /// The CPUs' (the scenario's `loads`, the workload generator's definition).
    #[default]
    Cpu,
    /// The network's ([`super::network_load`], mean over the point's runs).
    Network,
}

impl XAxis {
    /// The axis title: what offered load means (docs/simulator.md).
    fn desc(self) -> &'static str {
        match self {
            XAxis::Cpu => "offered load (requested CPU-seconds per second ÷ the grid's CPUs)",
            XAxis::Network => "network offered load (requested Mbit/s x 2 ends ÷ the sites' link capacity)",
        }
    }

    fn of(self, r: &SummaryRow) -> f64 {
        match self {
            XAxis::Cpu => r.load,
            XAxis::Network => r.network_load_mean,
        }
    }
}

/// An algorithm's name in the legend: ours (not in Ando & Aida) marked with `*`.
fn legend_name(algorithm: &Algorithm) -> String {
    match algorithm.method {
        ReservationMethod::BbrOverlay => format!("{algorithm}*"),
        ReservationMethod::Bbr | ReservationMethod::Bir => algorithm.to_string(),
    }
}

/// One point: x, mean, CI half-width, its offered load (the scenario's) and whether it drifts
/// (steady-state.md: its success rate, last quarter against first, moves beyond the tolerance)
/// or is undecided (too few seeds to tell).
#[derive(Debug, Clone, Copy)]
struct Point {
    x: f64,
    mean: f64,
    ci: f64,
    load: f64,
    drifts: bool,
    undecided: bool,
}

/// Each point's steady-state verdict (`steady::Verdict`), by `steady::Point` key: the figures
/// ring the drifting ones and their captions count the undecided ones. A point not in it has
/// no verdict (a folder without runs.csv).
pub type Drifting = BTreeMap<crate::steady::Point, crate::steady::Verdict>;

/// Two lines closer than this share of the y axis at every load are drawn over one another
/// (1.5 % of 600 pixels: 9 pixels, about a marker).
const COINCIDE_SHARE: f64 = 0.015;

struct Series {
    name: String,
    style: Style,
    points: Vec<Point>,
}

struct Figure {
    title: String,
    metric: Metric,
    x_axis: XAxis,
    x_range: (f64, f64),
    y_range: (f64, f64),
    series: Vec<Series>,
    note: String,
    /// Groups of series (indices into `series`, two or more) whose lines coincide: within
    /// [`COINCIDE_SHARE`] of the y axis of a member of the group at every load.
    coinciding: Vec<Vec<usize>>,
}

impl Figure {
    /// The largest distance at which two lines count as coinciding, in the metric's unit.
    fn coincide_within(&self) -> f64 {
        COINCIDE_SHARE * (self.y_range.1 - self.y_range.0)
    }

    /// Every series with points lies in one coinciding group: the figure would show one line.
    fn shows_nothing(&self) -> bool {
        let drawn = self.series.iter().filter(|s| !s.points.is_empty()).count();
        drawn >= 2 && self.coinciding.iter().any(|g| g.len() == drawn)
    }

    /// The group letter of series `i` (`A`, `B`, ...), if it coincides with others.
    fn group_of(&self, i: usize) -> Option<char> {
        self.coinciding.iter().position(|g| g.contains(&i)).map(|n| (b'A' + (n % 26) as u8) as char)
    }
}

/// The groups of series whose lines coincide (see [`Figure::coinciding`]): two series are
/// linked when they have points at the same loads and their means differ by at most `within`
/// at each; groups are the linked components with two or more members.
fn coinciding(series: &[Series], within: f64) -> Vec<Vec<usize>> {
    let n = series.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], i: usize) -> usize {
        let mut r = i;
        while parent[r] != r {
            r = parent[r];
        }
        parent[i] = r;
        r
    }
    for (i, si) in series.iter().enumerate() {
        for (j, sj) in series.iter().enumerate().skip(i + 1) {
            let (a, b) = (&si.points, &sj.points);
            let close = !a.is_empty()
                && a.len() == b.len()
                && a.iter().zip(b).all(|(p, q)| p.x == q.x && (p.mean - q.mean).abs() <= within);
            if close {
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                parent[rj] = ri;
            }
        }
    }
    let mut groups: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        groups.entry(r).or_default().push(i);
    }
    groups.into_values().filter(|g| g.len() >= 2).collect()
}

/// `lo..hi` padded by `frac` of its span on both sides (a degenerate range gets a span of its own).
fn pad(lo: f64, hi: f64, frac: f64) -> (f64, f64) {
    if !(lo.is_finite() && hi.is_finite()) || lo > hi {
        return (0.0, 1.0);
    }
    let span = hi - lo;
    if span <= f64::EPSILON * hi.abs().max(1.0) {
        let d = if hi.abs() > 0.0 { hi.abs() * 0.1 } else { 0.5 };
        return (lo - d, hi + d);
    }
    (lo - span * frac, hi + span * frac)
}

/// The figure of one metric for the rows of one (topology, kind).
///
/// Points whose mean is not finite are left out; a non-finite CI counts as 0. For the cost
/// figure, points where no run committed anything (`success_rate_mean == 0`) are left out: they
/// have no average cost.
fn build_figure(
    topology: &str,
    kind: &str,
    rows: &[&SummaryRow],
    metric: Metric,
    x_axis: XAxis,
    drifting: &Drifting,
) -> Figure {
    let mut by_alg: BTreeMap<Algorithm, Vec<Point>> = BTreeMap::new();
    for r in rows {
        let (mean, ci) = match metric {
            Metric::Success => (r.success_rate_mean, r.success_rate_ci95),
            Metric::Cost => {
                if r.success_rate_mean == 0.0 {
                    continue;
                }
                (r.mean_cost_mean, r.mean_cost_ci95)
            }
        };
        let x = x_axis.of(r);
        if !mean.is_finite() || !x.is_finite() {
            continue;
        }
        let ci = if ci.is_finite() { ci.abs() } else { 0.0 };
        let key = (r.topology.clone(), r.kind.clone(), r.algorithm.to_string(), (r.load * 1000.0).round() as i64);
        let verdict = drifting.get(&key).copied();
        let (drifts, undecided) =
            (verdict == Some(crate::steady::Verdict::Drifts), verdict == Some(crate::steady::Verdict::Undecided));
        by_alg.entry(r.algorithm).or_default().push(Point { x, mean, ci, load: r.load, drifts, undecided });
    }
    let mut algorithms: Vec<Algorithm> = rows.iter().map(|r| r.algorithm).collect();
    algorithms.sort_by(legend_order);
    algorithms.dedup();
    let series: Vec<Series> = algorithms
        .into_iter()
        .map(|algorithm| {
            let mut points = by_alg.remove(&algorithm).unwrap_or_default();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            Series { name: legend_name(&algorithm), style: style(&algorithm), points }
        })
        .collect();

    let loads = rows.iter().map(|r| x_axis.of(r)).filter(|x| x.is_finite());
    let (xmin, xmax) = loads.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let x_range = pad(xmin, xmax, 0.04);
    let y_range = match metric {
        Metric::Success => (0.0, 1.0),
        Metric::Cost => {
            let pts = series.iter().flat_map(|s| s.points.iter());
            let (lo, hi) =
                pts.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.mean - p.ci), b.max(p.mean + p.ci)));
            // From 0, so that the ratio of two algorithms' costs reads off the figure.
            if lo > hi {
                (0.0, 1.0)
            } else {
                let (plo, phi) = pad(lo, hi, 0.08);
                (if lo >= 0.0 { 0.0 } else { plo }, phi)
            }
        }
    };
    let mut runs: Vec<u64> = rows.iter().map(|r| r.runs).collect();
    runs.sort_unstable();
    let note = match (runs.first(), runs.last()) {
        (Some(a), Some(b)) if a == b => format!("runs per point: {a}"),
        (Some(a), Some(b)) => format!("runs per point: {a}-{b}"),
        _ => String::new(),
    };
    let mut fig = Figure {
        title: format!("{topology}, {kind}: {}", metric.title()),
        metric,
        x_axis,
        x_range,
        y_range,
        series,
        note,
        coinciding: Vec::new(),
    };
    fig.coinciding = coinciding(&fig.series, fig.coincide_within());
    fig
}

fn drawing_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing failed: {e}")
}

/// Draws a marker centred on `at` (in `area`'s coordinates), `MARKER_R` pixels in size.
fn draw_marker<DB, CT>(area: &DrawingArea<DB, CT>, at: CT::From, style: &Style) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    CT: plotters::coord::CoordTranslate,
    CT::From: Clone,
{
    let r = MARKER_R;
    let fill = if style.filled { style.color.filled() } else { WHITE.filled() };
    let stroke = style.color.stroke_width(2);
    let poly: Vec<(i32, i32)> = match style.shape {
        Shape::Circle => {
            area.draw(&(EmptyElement::at(at.clone()) + Circle::new((0, 0), r, fill))).map_err(drawing_err)?;
            area.draw(&(EmptyElement::at(at) + Circle::new((0, 0), r, stroke))).map_err(drawing_err)?;
            return Ok(());
        }
        Shape::Square => {
            let s = r - 1;
            vec![(-s, -s), (s, -s), (s, s), (-s, s)]
        }
        Shape::Triangle => {
            let h = r + 1;
            vec![(0, -h), (h, h * 3 / 4), (-h, h * 3 / 4)]
        }
        Shape::Diamond => {
            let h = r + 1;
            vec![(0, -h), (h, 0), (0, h), (-h, 0)]
        }
    };
    area.draw(&(EmptyElement::at(at.clone()) + Polygon::new(poly.clone(), fill))).map_err(drawing_err)?;
    let mut outline = poly.clone();
    outline.push(poly[0]);
    area.draw(&(EmptyElement::at(at) + PathElement::new(outline, stroke))).map_err(drawing_err)?;
    Ok(())
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

fn draw_line<DB: DrawingBackend>(chart: &mut Chart<'_, DB>, pts: Vec<(f64, f64)>, style: &Style) -> anyhow::Result<()> {
    let shape = style.color.stroke_width(style.width);
    match style.line {
        Line::Solid => chart.draw_series(LineSeries::new(pts, shape)).map(|_| ()),
        Line::Dashed(d, g) => chart.draw_series(DashedLineSeries::new(pts, d, g, shape)).map(|_| ()),
    }
    .map_err(drawing_err)
}

/// Draws `fig` onto `root` (which must be `WIDTH` x `HEIGHT`).
fn render<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, fig: &Figure) -> anyhow::Result<()> {
    root.fill(&WHITE).map_err(drawing_err)?;
    let body = root.titled(&fig.title, (FONT, 28).into_font().color(&BLACK)).map_err(drawing_err)?;
    let (plot_area, legend_area) = body.split_horizontally(WIDTH - LEGEND_W);

    let (x0, x1) = fig.x_range;
    let (y0, y1) = fig.y_range;
    let mut chart = ChartBuilder::on(&plot_area)
        .margin(15)
        .margin_right(25)
        .x_label_area_size(60)
        .y_label_area_size(85)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(drawing_err)?;
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(fig.x_axis.desc())
        .y_desc(fig.metric.y_desc())
        .axis_desc_style((FONT, 22))
        .label_style((FONT, 17))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(240, 240, 240))
        .max_light_lines(1);
    if fig.metric == Metric::Success {
        mesh.y_labels(11).y_label_formatter(&|y| format!("{y:.1}"));
    }
    mesh.draw().map_err(drawing_err)?;

    // Bands first, then lines, then markers, so no band covers a line.
    for s in &fig.series {
        if s.points.len() < 2 || s.points.iter().all(|p| p.ci == 0.0) {
            continue;
        }
        let clamp = |y: f64| y.clamp(y0, y1);
        let mut poly: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, clamp(p.mean + p.ci))).collect();
        poly.extend(s.points.iter().rev().map(|p| (p.x, clamp(p.mean - p.ci))));
        chart
            .draw_series(std::iter::once(Polygon::new(poly, s.style.color.mix(0.13).filled())))
            .map_err(drawing_err)?;
    }
    for s in &fig.series {
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.mean)).collect();
        if pts.len() >= 2 {
            draw_line(&mut chart, pts, &s.style)?;
        }
    }
    for s in &fig.series {
        for p in &s.points {
            draw_marker(chart.plotting_area(), (p.x, p.mean.clamp(y0, y1)), &s.style)?;
        }
    }
    // Drifting points: a red ring around the marker.
    for s in &fig.series {
        for p in s.points.iter().filter(|p| p.drifts) {
            let at = (p.x, p.mean.clamp(y0, y1));
            chart
                .plotting_area()
                .draw(&(EmptyElement::at(at) + Circle::new((0, 0), MARKER_R + 5, DRIFT.stroke_width(2))))
                .map_err(drawing_err)?;
        }
    }

    // Legend panel: sample line + marker + name per algorithm, then what the band means.
    let text = (FONT, 18).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let row_h = 30;
    let mut y = 40;
    legend_area
        .draw_text(
            "algorithm",
            &(FONT, 19).into_font().style(FontStyle::Bold).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
            (10, y),
        )
        .map_err(drawing_err)?;
    y += row_h;
    for (i, s) in fig.series.iter().enumerate() {
        let shape = s.style.color.stroke_width(s.style.width);
        let seg = vec![(10, y), (66, y)];
        match s.style.line {
            Line::Solid => legend_area.draw(&PathElement::new(seg, shape)),
            Line::Dashed(d, g) => legend_area.draw(&DashedPathElement::new(seg, d, g, shape)),
        }
        .map_err(drawing_err)?;
        draw_marker(&legend_area, (38, y), &s.style)?;
        let name = match fig.group_of(i) {
            Some(g) => format!("{} ≈{g}", s.name),
            None => s.name.clone(),
        };
        legend_area.draw_text(&name, &text, (78, y)).map_err(drawing_err)?;
        y += row_h;
    }
    let small = (FONT, 16).into_font().color(&RGBColor(80, 80, 80)).pos(Pos::new(HPos::Left, VPos::Center));
    if !fig.coinciding.is_empty() {
        legend_area
            .draw_text(&format!("≈X: lines within {:.3}", fig.coincide_within()), &small, (10, y))
            .map_err(drawing_err)?;
        y += row_h * 2 / 3;
        legend_area.draw_text("at every load (they overlap)", &small, (10, y)).map_err(drawing_err)?;
        y += row_h;
    }
    if fig.series.iter().any(|s| s.points.iter().any(|p| p.drifts)) {
        legend_area
            .draw(&(EmptyElement::at((38, y)) + Circle::new((0, 0), MARKER_R + 5, DRIFT.stroke_width(2))))
            .map_err(drawing_err)?;
        legend_area.draw_text("drifts (steady-state.md)", &text, (78, y)).map_err(drawing_err)?;
        y += row_h;
    }
    y += row_h / 2;
    legend_area.draw(&Rectangle::new([(10, y - 9), (66, y + 9)], BLACK.mix(0.13).filled())).map_err(drawing_err)?;
    legend_area.draw_text("mean ± 95% CI", &text, (78, y)).map_err(drawing_err)?;
    y += row_h;
    legend_area.draw_text(&fig.note, &small, (10, y)).map_err(drawing_err)?;
    if fig.series.iter().any(|s| s.name.ends_with('*')) {
        y += row_h;
        legend_area.draw_text("* ours, not in the paper", &small, (10, y)).map_err(drawing_err)?;
    }
    if fig.x_axis == XAxis::Cpu {
        y += row_h;
        legend_area.draw_text("network demand is not", &small, (10, y)).map_err(drawing_err)?;
        y += row_h * 2 / 3;
        legend_area.draw_text("part of the offered load", &small, (10, y)).map_err(drawing_err)?;
    }
    Ok(())
}

/// A name made safe for a file name: ASCII letters, digits, `-`, `_` and `.` kept, anything
/// else replaced by `_`.
fn file_safe(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') { c } else { '_' }).collect()
}

/// Implementation of [`super::write_figures`] (documented there).
pub(super) fn write_figures(
    summary: &[SummaryRow],
    dir: &Path,
    x_axis: XAxis,
    drifting: &Drifting,
) -> anyhow::Result<Vec<PathBuf>> {
    let mut keys = BTreeSet::new();
    for r in summary {
        if !keys.insert((&r.topology, &r.kind, r.algorithm, r.load.to_bits())) {
            bail!("summary has two rows for {} / {} / {} / load {}", r.topology, r.kind, r.algorithm, r.load);
        }
    }
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;

    let mut written = Vec::new();
    let mut stems = BTreeSet::new();
    let mut captions = String::from(
        "# Figures (generated by coreserve-sim)\n\nOne figure per topology, kind and metric: mean ± 95 % \
         CI over the point's runs. A red ring marks a point whose success rate drifts (last quarter \
         against first beyond the tolerance, steady-state.md); a point without one is settled or undecided \
         (too few seeds to tell), and each caption counts the undecided; lines that lie within 1.5 % of the y \
         axis of each other at every load are marked `≈A`, `≈B`, ... in the legend (they overlap); a \
         figure where every line would overlap is not drawn: its values are the table in its place.\n",
    );
    for (topology, kind) in topology_kinds(summary) {
        let rows: Vec<&SummaryRow> = summary.iter().filter(|r| r.topology == topology && r.kind == kind).collect();
        for metric in [Metric::Success, Metric::Cost] {
            let stem = format!("{}-{}-{}", metric.file_prefix(), file_safe(&topology), file_safe(&kind));
            if !stems.insert(stem.clone()) {
                bail!("two (topology, kind) pairs give the same figure name {stem}");
            }
            let fig = build_figure(&topology, &kind, &rows, metric, x_axis, drifting);
            captions.push_str(&caption(&fig, &stem));
            let (svg, png) = (dir.join(format!("{stem}.svg")), dir.join(format!("{stem}.png")));
            if fig.shows_nothing() {
                // An earlier drawing of the same figure would outlive its table.
                for stale in [&svg, &png] {
                    let removed = fs::remove_file(stale);
                    if let Err(e) =
                        removed.or_else(|e| if e.kind() == std::io::ErrorKind::NotFound { Ok(()) } else { Err(e) })
                    {
                        return Err(e).with_context(|| format!("removing {}", stale.display()));
                    }
                }
                continue;
            }
            {
                let root = SVGBackend::new(&svg, (WIDTH, HEIGHT)).into_drawing_area();
                render(&root, &fig).with_context(|| format!("drawing {}", svg.display()))?;
                root.present().map_err(drawing_err).with_context(|| format!("writing {}", svg.display()))?;
            }
            written.push(svg);
            {
                let root = BitMapBackend::new(&png, (WIDTH, HEIGHT)).into_drawing_area();
                render(&root, &fig).with_context(|| format!("drawing {}", png.display()))?;
                root.present().map_err(drawing_err).with_context(|| format!("writing {}", png.display()))?;
            }
            written.push(png);
        }
    }
    if !stems.is_empty() {
        let path = dir.join("figures.md");
        fs::write(&path, captions).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(written)
}

/// One figure's section of `figures.md`: the figure (or, when it would show one line, the table
/// of its values instead) and its caption: which points drift and which lines coincide.
fn caption(fig: &Figure, stem: &str) -> String {
    use std::fmt::Write as _;
    let mut md = format!("\n## {}\n\n", fig.title);
    let names = |g: &[usize]| g.iter().map(|&i| fig.series[i].name.as_str()).collect::<Vec<_>>().join(", ");
    if fig.shows_nothing() {
        let _ = write!(
            md,
            "Not drawn: every line lies within {:.3} of another at every load, so the figure would show one \
             line. The values ({}):\n\n| algorithm |",
            fig.coincide_within(),
            fig.note
        );
        let loads: Vec<f64> =
            fig.series.iter().flat_map(|s| s.points.iter().map(|p| p.load)).fold(Vec::new(), |mut v, l| {
                if !v.contains(&l) {
                    v.push(l);
                }
                v
            });
        for l in &loads {
            let _ = write!(md, " load {l} |");
        }
        let _ = write!(md, "\n|---|{}\n", "---|".repeat(loads.len()));
        for s in &fig.series {
            let _ = write!(md, "| {} |", s.name);
            for l in &loads {
                match s.points.iter().find(|p| p.load == *l) {
                    Some(p) => {
                        let _ = write!(md, " {:.3} ± {:.3}{} |", p.mean, p.ci, if p.drifts { " (drifts)" } else { "" });
                    }
                    None => md.push_str(" — |"),
                }
            }
            md.push('\n');
        }
        return md;
    }
    let _ = write!(md, "![{}]({stem}.svg)\n\n{}.", fig.title, fig.note.replace("runs per point", "Runs per point"));
    let drifting: Vec<String> = fig
        .series
        .iter()
        .flat_map(|s| s.points.iter().filter(|p| p.drifts).map(move |p| format!("{} at {}", s.name, p.load)))
        .collect();
    let points: usize = fig.series.iter().map(|s| s.points.len()).sum();
    let undecided = fig.series.iter().flat_map(|s| &s.points).filter(|p| p.undecided).count();
    match (drifting.is_empty(), undecided) {
        (true, 0) => {
            let _ = write!(md, " No point drifts.");
        }
        (true, u) => {
            let _ = write!(md, " No point is shown to drift; {u} of {points} are undecided (too few seeds to tell).");
        }
        (false, u) => {
            let _ = write!(md, " Drifting (ringed), {} of {points} points: {}.", drifting.len(), drifting.join(", "));
            if u > 0 {
                let _ = write!(md, " Undecided (not ringed, too few seeds to tell): {u} of {points}.");
            }
        }
    }
    for (n, g) in fig.coinciding.iter().enumerate() {
        let _ = write!(
            md,
            " ≈{}: {} lie within {:.3} of each other at every load and overlap.",
            (b'A' + (n % 26) as u8) as char,
            names(g),
            fig.coincide_within()
        );
    }
    md.push('\n');
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(algorithm: &str, load: f64, cost: f64) -> SummaryRow {
        SummaryRow {
            success_rate_mean: 0.5,
            mean_cost_ci95: 0.1,
            ..SummaryRow::point("t", "workflow", algorithm, load, 0.5, cost)
        }
    }

    #[test]
    fn the_cost_axis_starts_at_zero_and_ours_are_marked() {
        let rows = [row("bir-cost", 0.2, 5.0), row("bir-cost", 0.4, 6.0), row("bbr-overlay-time", 0.2, 8.0)];
        let fig =
            build_figure("t", "workflow", &rows.iter().collect::<Vec<_>>(), Metric::Cost, XAxis::Cpu, &Drifting::new());
        assert_eq!(fig.y_range.0, 0.0, "costs of 5 to 8 are drawn from 0");
        assert!(fig.y_range.1 > 8.1);
        let names: Vec<&str> = fig.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["bir-cost", "bbr-overlay-time*"]);
    }

    /// Issue 51: drifting points were not marked, and lines drawn over one another were not
    /// said to be.
    #[test]
    fn drifting_points_are_ringed_and_overlapping_lines_named() {
        let p = |a: &str, load: f64, success: f64| SummaryRow::point("t", "workflow", a, load, success, 1.0);
        let rows = [
            p("bir-time", 0.2, 0.50),
            p("bir-time", 0.4, 0.60),
            p("bir-load", 0.2, 0.505),
            p("bir-load", 0.4, 0.60),
            p("bbr-time", 0.2, 0.20),
            p("bbr-time", 0.4, 0.30),
        ];
        let point = |a: &str, load: i64| ("t".to_owned(), "workflow".to_owned(), a.to_owned(), load);
        let drifting: Drifting = [
            (point("bir-time", 400), crate::steady::Verdict::Drifts),
            (point("bir-load", 400), crate::steady::Verdict::Undecided),
            (point("bbr-time", 400), crate::steady::Verdict::Settled),
        ]
        .into();
        let fig =
            build_figure("t", "workflow", &rows.iter().collect::<Vec<_>>(), Metric::Success, XAxis::Cpu, &drifting);
        let names: Vec<Vec<&str>> =
            fig.coinciding.iter().map(|g| g.iter().map(|&i| fig.series[i].name.as_str()).collect()).collect();
        assert_eq!(names, [["bir-time", "bir-load"]]);
        assert!(!fig.shows_nothing());
        let drifts: Vec<(String, f64)> = fig
            .series
            .iter()
            .flat_map(|s| s.points.iter().filter(|p| p.drifts).map(|p| (s.name.clone(), p.load)))
            .collect();
        assert_eq!(drifts, [("bir-time".to_owned(), 0.4)]);

        let dir = tempfile::tempdir().unwrap();
        let summary: Vec<SummaryRow> = rows.to_vec();
        write_figures(&summary, dir.path(), XAxis::Cpu, &drifting).unwrap();
        let svg = fs::read_to_string(dir.path().join("success-t-workflow.svg")).unwrap();
        assert!(svg.contains("bir-time ≈A") && svg.contains("drifts (steady-state.md)"), "legend");
        assert!(svg.contains("#DC0000"), "the ring is drawn");
        let md = fs::read_to_string(dir.path().join("figures.md")).unwrap();
        assert!(md.contains("Drifting (ringed), 1 of 6 points: bir-time at 0.4."), "{md}");
        assert!(md.contains("Undecided (not ringed, too few seeds to tell): 1 of 6."), "{md}");
        assert!(md.contains("≈A: bir-time, bir-load lie within 0.015"), "{md}");
    }

    /// Issue 51: a figure whose lines all coincide (RENATER's nine success lines at 0.03) shows
    /// nothing; it is replaced by a table of its values, and an old drawing of it removed.
    #[test]
    fn a_figure_of_one_line_is_a_table() {
        let p = |a: &str, load: f64, success: f64| {
            let cost = if a.starts_with("bir") { 1.0 } else { 1.5 };
            SummaryRow::point("r", "workflow", a, load, success, cost)
        };
        let rows = vec![
            p("bir-time", 0.2, 0.030),
            p("bir-time", 0.6, 0.031),
            p("bbr-time", 0.2, 0.028),
            p("bbr-time", 0.6, 0.033),
        ];
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("success-r-workflow.svg"), "old").unwrap();
        let written = write_figures(&rows, dir.path(), XAxis::Cpu, &Drifting::new()).unwrap();
        assert!(!written.iter().any(|w| w.to_string_lossy().contains("success-r-workflow")), "{written:?}");
        assert!(!dir.path().join("success-r-workflow.svg").exists(), "the old drawing is removed");
        assert!(dir.path().join("cost-r-workflow.svg").exists(), "the cost figure has two lines");
        let md = fs::read_to_string(dir.path().join("figures.md")).unwrap();
        assert!(md.contains("Not drawn: every line lies within 0.015"), "{md}");
        assert!(md.contains("| bbr-time | 0.028 ± 0.000 | 0.033 ± 0.000 |"), "{md}");
    }

    #[test]
    fn the_network_axis_plots_each_point_at_its_network_load() {
        let rows = [row("bir-time", 0.2, 5.0), row("bir-time", 0.6, 6.0)];
        let rows: Vec<&SummaryRow> = rows.iter().collect();
        let xs = |x_axis| -> Vec<f64> {
            build_figure("t", "workflow", &rows, Metric::Success, x_axis, &Drifting::new()).series[0]
                .points
                .iter()
                .map(|p| p.x)
                .collect()
        };
        assert_eq!(xs(XAxis::Cpu), [0.2, 0.6]);
        assert_eq!(xs(XAxis::Network), [0.1, 0.3]);
    }
}

//! Charts for the benchmark reports, drawn with plotters as SVG and PNG: horizontal bars per
//! configuration (like the PQC-DNS study's Figures 5–8) and lines over concurrency.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use pqdns_core::atomic_file::write_atomic_via;

/// Width of every chart, pixels.
pub const WIDTH: u32 = 1000;
/// Height of one bar, pixels (a chart grows with its bars).
pub const BAR_HEIGHT: u32 = 22;

/// What drawing a chart returns: drawing and file errors (for PNG also a missing system font).
pub type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// Draws with `$draw(area, args…)` once into `STEM.svg` and once into `STEM.png`, each
/// written atomically (a failed drawing leaves the previous chart).
macro_rules! svg_and_png {
    ($stem:expr, $size:expr, $draw:ident($($arg:expr),*)) => {{
        write_atomic_via(&$stem.with_extension("svg"), |svg| -> DrawResult {
            $draw(&SVGBackend::new(svg, $size).into_drawing_area(), $($arg),*)
        })?;
        write_atomic_via(&$stem.with_extension("png"), |png| -> DrawResult {
            $draw(&BitMapBackend::new(png, $size).into_drawing_area(), $($arg),*)
        })
    }};
}

/// `output` with `suffix` appended to its file name (`docs/bench/x` + `-cpu` →
/// `docs/bench/x-cpu`): the stem of one of a report's charts.
pub fn suffixed(output: &Path, suffix: &str) -> std::path::PathBuf {
    let mut s = output.as_os_str().to_owned();
    s.push(suffix);
    std::path::PathBuf::from(s)
}

/// Writes `STEM.svg` and `STEM.png`: one horizontal bar per `(label, value)`.
///
/// # Errors
/// Drawing or file errors (for PNG also a missing system font).
pub fn bars(stem: &Path, title: &str, unit: &str, items: &[(String, f64)]) -> DrawResult {
    let height = 120 + BAR_HEIGHT * items.len().max(1) as u32;
    svg_and_png!(stem, (WIDTH, height), draw_bars(title, unit, items))
}

fn draw_bars<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    items: &[(String, f64)],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let max = items
        .iter()
        .map(|(_, v)| *v)
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = items.len().max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(330)
        .build_cartesian_2d(0.0..max, (0..n).into_segmented())?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc(unit)
        .y_labels(n)
        .y_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => items.get(*i).map_or(String::new(), |(l, _)| l.clone()),
            _ => String::new(),
        })
        .draw()?;
    chart.draw_series(
        Histogram::horizontal(&chart)
            .style(BLUE.mix(0.7).filled())
            .margin(3)
            .data(items.iter().enumerate().map(|(i, (_, v))| (i, *v))),
    )?;
    chart.draw_series(items.iter().enumerate().map(|(i, (_, v))| {
        Text::new(
            format!("{v:.2}"),
            (*v, SegmentValue::CenterOf(i)),
            ("sans-serif", 13),
        )
    }))?;
    area.present()?;
    Ok(())
}

/// Writes `STEM.svg` and `STEM.png`: one line per `(label, points)` with a logarithmic x axis
/// (concurrency) and a logarithmic y axis.
///
/// # Errors
/// Drawing or file errors.
pub fn lines(
    stem: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> DrawResult {
    svg_and_png!(
        stem,
        (WIDTH, 600),
        draw_lines(title, x_desc, y_desc, series)
    )
}

fn draw_lines<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let points = || series.iter().flat_map(|(_, p)| p.iter());
    let x_max = points().map(|p| p.0).fold(1.0f64, f64::max) * 1.5;
    let y_min = points().map(|p| p.1).fold(f64::MAX, f64::min).max(1e-3) / 1.5;
    let y_max = points().map(|p| p.1).fold(1e-3f64, f64::max) * 1.5;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (0.8f64..x_max).log_scale(),
            (y_min..y_max.max(y_min * 2.0)).log_scale(),
        )?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))?
            .label(label.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    legend_and_present(&mut chart, area)
}

/// Draws the series legend in the upper left corner and writes the area out.
fn legend_and_present<'a, DB: DrawingBackend + 'a, CT: plotters::coord::CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    area: &DrawingArea<DB, Shift>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    area.present()?;
    Ok(())
}

/// Writes `STEM.svg` and `STEM.png`: measured points, their fitted line `intercept + slope × x`
/// and a horizontal reference line at `reference` (linear axes).
///
/// # Errors
/// Drawing or file errors.
pub fn fit(
    stem: &Path,
    title: &str,
    axes: (&str, &str),
    points: &[(f64, f64)],
    line: (f64, f64),
    reference: (&str, f64),
) -> DrawResult {
    svg_and_png!(
        stem,
        (WIDTH, 600),
        draw_fit(title, axes, points, line, reference)
    )
}

fn draw_fit<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    (x_desc, y_desc): (&str, &str),
    points: &[(f64, f64)],
    (intercept, slope): (f64, f64),
    (ref_label, reference): (&str, f64),
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    let x_max = points.iter().map(|p| p.0).fold(100.0f64, f64::max);
    let y_max = points.iter().map(|p| p.1).fold(reference, f64::max) * 1.2;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max.max(1e-9))?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()?;
    chart
        .draw_series(points.iter().map(|p| Circle::new(*p, 4, BLUE.filled())))?
        .label("measured")
        .legend(|(x, y)| Circle::new((x + 10, y), 4, BLUE.filled()));
    chart
        .draw_series(LineSeries::new(
            [(0.0, intercept), (x_max, intercept + slope * x_max)],
            BLUE.stroke_width(2),
        ))?
        .label(format!("fit: {intercept:.2} + {slope:.3} x"))
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    chart
        .draw_series(LineSeries::new(
            [(0.0, reference), (x_max, reference)],
            RED.stroke_width(2),
        ))?
        .label(ref_label.to_string())
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    legend_and_present(&mut chart, area)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn svg_bars_hold_every_label_and_value() {
        let dir = tempfile::tempdir().unwrap();
        let stem = dir.path().join("chart");
        let items = vec![
            ("X25519+ecdsa-p256".to_string(), 1.25),
            ("MLKEM".to_string(), 3.5),
        ];
        // The PNG needs a system font; the SVG does not: check the SVG whatever happens.
        let _ = bars(&stem, "latency", "ms", &items);
        let svg = std::fs::read_to_string(stem.with_extension("svg")).unwrap();
        assert!(svg.contains("X25519+ecdsa-p256") && svg.contains("MLKEM"));
        assert!(svg.contains("3.50") && svg.contains("1.25"));
    }
}

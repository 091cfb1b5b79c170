//! Line plots as inline SVG, written by hand: the plots are simple (a few
//! lines over time, linear axes), and about a hundred lines of code give
//! exactly the markup the HTML needs, with no dependency, no fonts or
//! scripts to load, and every label escaped in one place.

use super::markup::escape;
use std::fmt::Write;

/// Distinct colours (Tableau 10), by series position, so one mode has the
/// same colour in every plot.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 300.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 45.0;
/// Series with at most this many points get a dot on each.
const MARKED_POINTS: usize = 20;

/// One line.
pub struct Series {
    pub label: String,
    /// (x, y), in x order; empty: the series is in the legend only.
    pub points: Vec<(f64, f64)>,
}

/// A plot with linear axes starting at zero.
pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// A physical limit (the memcpy ceiling), drawn dashed in grey above
    /// the series and in the legend.
    pub limit: Option<Series>,
}

/// The colour of [`Plot::limit`].
const LIMIT_COLOUR: &str = "#555";

/// The plot as an `<svg>` element.
pub fn render(plot: &Plot) -> String {
    let all = || {
        plot.series
            .iter()
            .chain(&plot.limit)
            .flat_map(|s| s.points.iter())
    };
    let (x_step, x_max) = axis(all().map(|p| p.0).fold(0.0, f64::max));
    let (y_step, y_max) = axis(all().map(|p| p.1).fold(0.0, f64::max));
    let (plot_w, plot_h) = (WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM);
    let px = |x: f64| LEFT + x / x_max * plot_w;
    let py = |y: f64| TOP + plot_h - y / y_max * plot_h;

    let mut svg = format!(
        "<svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" \
         width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <title>{}</title>\n\
         <text x=\"{LEFT}\" y=\"18\" font-weight=\"bold\" font-size=\"14\">{}</text>\n",
        escape(&plot.title),
        escape(&plot.title)
    );
    // Grid lines and ticks.
    for i in 0..=(y_max / y_step).round() as usize {
        let y = i as f64 * y_step;
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{0:.1}\" x2=\"{1:.1}\" y2=\"{0:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"end\">{4}</text>",
            py(y),
            LEFT + plot_w,
            LEFT - 6.0,
            py(y) + 4.0,
            tick_label(y, y_step)
        );
    }
    for i in 0..=(x_max / x_step).round() as usize {
        let x = i as f64 * x_step;
        let _ = writeln!(
            svg,
            "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"#999\"/>\
             <text x=\"{0:.1}\" y=\"{3:.1}\" text-anchor=\"middle\">{4}</text>",
            px(x),
            TOP + plot_h,
            TOP + plot_h + 5.0,
            TOP + plot_h + 18.0,
            tick_label(x, x_step)
        );
    }
    // Axes and their labels.
    let _ = writeln!(
        svg,
        "<path d=\"M{LEFT},{TOP} V{0:.1} H{1:.1}\" fill=\"none\" stroke=\"#333\"/>\n\
         <text x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"middle\">{4}</text>\n\
         <text transform=\"translate(16 {5:.1}) rotate(-90)\" text-anchor=\"middle\">{6}</text>",
        TOP + plot_h,
        LEFT + plot_w,
        LEFT + plot_w / 2.0,
        HEIGHT - 8.0,
        escape(&plot.x_label),
        TOP + plot_h / 2.0,
        escape(&plot.y_label)
    );
    // One polyline per series, and the legend.
    for (i, series) in plot.series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        if !series.points.is_empty() {
            let points: Vec<String> = series
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                svg,
                "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\">\
                 <title>{}</title></polyline>",
                points.join(" "),
                escape(&series.label)
            );
            // Dots where a line is too short to see (a run under a second
            // has one sample).
            if series.points.len() <= MARKED_POINTS {
                for &(x, y) in &series.points {
                    let _ = writeln!(
                        svg,
                        "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\"/>",
                        px(x),
                        py(y)
                    );
                }
            }
        }
        let ly = TOP + 8.0 + 18.0 * i as f64;
        let lx = WIDTH - RIGHT + 15.0;
        let label = if series.points.is_empty() {
            format!("{} (no data)", series.label)
        } else {
            series.label.clone()
        };
        let _ = writeln!(
            svg,
            "<line x1=\"{lx}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{colour}\" stroke-width=\"3\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(&label)
        );
    }
    if let Some(limit) = plot.limit.as_ref().filter(|l| !l.points.is_empty()) {
        let points: Vec<String> = limit
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let ly = TOP + 8.0 + 18.0 * plot.series.len() as f64;
        let lx = WIDTH - RIGHT + 15.0;
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{LIMIT_COLOUR}\" stroke-width=\"2\" stroke-dasharray=\"6 4\" \
             points=\"{}\"><title>{}</title></polyline>\n\
             <line x1=\"{lx}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{LIMIT_COLOUR}\" \
             stroke-width=\"3\" stroke-dasharray=\"6 4\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            points.join(" "),
            escape(&limit.label),
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            escape(&limit.label)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// A "nice" tick step (1, 2 or 5 × 10^k) giving about five ticks up to
/// `max`, and the axis end (a multiple of the step at or above `max`).
fn axis(max: f64) -> (f64, f64) {
    if !(max > 0.0 && max.is_finite()) {
        return (1.0, 1.0);
    }
    let rough = max / 5.0;
    let magnitude = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= rough)
        .unwrap_or(10.0 * magnitude);
    (step, (max / step).ceil() * step)
}

/// A tick value with as many decimals as the step needs.
fn tick_label(value: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    format!("{value:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_axes() {
        assert_eq!(axis(10.0), (2.0, 10.0));
        assert_eq!(axis(412.0), (100.0, 500.0));
        assert_eq!(axis(0.37), (0.1, 0.4));
        assert_eq!(axis(0.0), (1.0, 1.0));
        assert_eq!(tick_label(0.30000000000000004, 0.1), "0.3");
    }

    #[test]
    fn one_polyline_per_series_with_data() {
        let plot = Plot {
            title: "t <1>".into(),
            x_label: "s".into(),
            y_label: "MB/s".into(),
            series: vec![
                Series {
                    label: "a".into(),
                    points: vec![(1.0, 2.0), (2.0, 3.0)],
                },
                Series {
                    label: "b&c".into(),
                    points: vec![],
                },
            ],
            limit: None,
        };
        let svg = render(&plot);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 2, "short lines get dots");
        assert!(svg.contains("b&amp;c (no data)"));
        assert!(svg.contains("t &lt;1&gt;") && !svg.contains("<1>"));
    }

    #[test]
    fn the_limit_is_dashed_in_the_legend_and_sets_the_scale() {
        let plot = Plot {
            title: "scaling".into(),
            x_label: "threads".into(),
            y_label: "MB/s".into(),
            series: vec![Series {
                label: "buffered".into(),
                points: vec![(1.0, 100.0), (2.0, 150.0)],
            }],
            limit: Some(Series {
                label: "memcpy".into(),
                points: vec![(1.0, 900.0), (2.0, 1600.0)],
            }),
        };
        let svg = render(&plot);
        assert_eq!(
            svg.matches("stroke-dasharray").count(),
            2,
            "line and legend"
        );
        assert!(svg.contains("<title>memcpy</title></polyline>"));
        // The axis reaches above the limit (1600): its last tick is 2000.
        assert!(svg.contains(">2000</text>"), "{svg}");
    }
}

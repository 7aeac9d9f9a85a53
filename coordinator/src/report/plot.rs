//! The scaling plot: exact match against model size, one line per setting (CrossCodeEval
//! Figure 4's shape), as a self-contained SVG.

use super::{setting_title, Report};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 400.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 180.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;
const COLOURS: [&str; 8] = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Exact match (mean over languages) against parameter count (log scale; models without a
/// count are placed in spec order), one polyline per setting.
pub fn scaling_svg(report: &Report) -> String {
    // Models in order, with an x value each.
    let mut models: Vec<(String, Option<f64>)> = Vec::new();
    for cell in &report.cceval {
        if !models.iter().any(|(m, _)| *m == cell.model) {
            models.push((cell.model.clone(), cell.parameters));
        }
    }
    let all_sized = models.iter().all(|(_, p)| p.is_some_and(|p| p > 0.0));
    let xs: Vec<f64> = models
        .iter()
        .enumerate()
        .map(|(i, (_, p))| if all_sized { p.unwrap_or(1.0).log10() } else { i as f64 })
        .collect();
    let (x_min, x_max) = xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
    let x_span = if x_max > x_min { x_max - x_min } else { 1.0 };
    let mut settings: Vec<String> = Vec::new();
    for cell in &report.cceval {
        if !settings.contains(&cell.setting) {
            settings.push(cell.setting.clone());
        }
    }
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + if x_max > x_min { (x - x_min) / x_span * plot_w } else { plot_w / 2.0 };
    let py = |em: f64| TOP + plot_h - em.clamp(0.0, 100.0) / 100.0 * plot_h;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{LEFT}\" y=\"18\" font-size=\"14\">CrossCodeEval exact match vs model size — {}</text>\n",
        escape(&report.run_id)
    );
    for tick in [0.0, 25.0, 50.0, 75.0, 100.0] {
        let y = py(tick);
        svg.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{tick}</text>\n",
            LEFT + plot_w,
            LEFT - 6.0,
            y + 4.0
        ));
    }
    for ((name, params), &x) in models.iter().zip(&xs) {
        let label = match params {
            Some(p) if all_sized => format!("{name} ({:.2}B)", p / 1e9),
            _ => name.clone(),
        };
        svg.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            px(x),
            TOP + plot_h + 20.0,
            escape(&label)
        ));
    }
    svg.push_str(&format!(
        "<text x=\"18\" y=\"{:.1}\" transform=\"rotate(-90 18 {:.1})\" text-anchor=\"middle\">EM (%)</text>\n",
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0
    ));
    for (s, setting) in settings.iter().enumerate() {
        let colour = COLOURS[s % COLOURS.len()];
        let mut points = Vec::new();
        for ((model, _), &x) in models.iter().zip(&xs) {
            let ems: Vec<f64> = report
                .cceval
                .iter()
                .filter(|c| &c.model == model && &c.setting == setting)
                .filter_map(|c| c.summary.map(|s| s.em))
                .collect();
            if !ems.is_empty() {
                points.push((px(x), py(ems.iter().sum::<f64>() / ems.len() as f64)));
            }
        }
        let path: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        svg.push_str(&format!("<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>\n", path.join(" ")));
        for (x, y) in &points {
            svg.push_str(&format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3.5\" fill=\"{colour}\"/>\n"));
        }
        let ly = TOP + 16.0 * s as f64 + 10.0;
        svg.push_str(&format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"12\" height=\"3\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            WIDTH - RIGHT + 16.0,
            ly - 4.0,
            WIDTH - RIGHT + 32.0,
            ly,
            escape(&setting_title(setting))
        ));
    }
    svg.push_str("</svg>\n");
    svg
}

//! Pieces of the Prometheus text format (0.0.4) shared by the node's metrics and the
//! stores that time their own work: family headers and fixed-bucket histograms. A leaf
//! module, so that a store can keep a histogram without depending on `metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

/// A histogram with fixed buckets; counts are per bucket (made cumulative on render).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// One per bound, plus the +Inf bucket.
    counts: Vec<AtomicU64>,
    sum_micros: AtomicU64,
}

/// A histogram's counts read at one moment (for values passed around by copy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramCounts {
    /// Per bucket, one per bound plus +Inf; empty when nothing was read.
    pub per_bucket: Vec<u64>,
    pub sum_micros: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Histogram { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum_micros: 0.into() }
    }

    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = self.bounds.iter().position(|b| secs <= *b).unwrap_or(self.bounds.len());
        self.counts[i].fetch_add(1, Relaxed);
        self.sum_micros.fetch_add(d.as_micros().min(u64::MAX as u128) as u64, Relaxed);
    }

    pub fn counts(&self) -> HistogramCounts {
        HistogramCounts {
            per_bucket: self.counts.iter().map(|c| c.load(Relaxed)).collect(),
            sum_micros: self.sum_micros.load(Relaxed),
        }
    }

    pub fn render(&self, out: &mut String, name: &str, help: &str) {
        render_histogram(out, name, help, self.bounds, &self.counts());
    }
}

impl HistogramCounts {
    /// Empty counts for a histogram with `bounds`.
    pub fn zero(bounds: &[f64]) -> Self {
        HistogramCounts { per_bucket: vec![0; bounds.len() + 1], sum_micros: 0 }
    }

    /// Counts one observation (for counts kept under a lock rather than in atomics).
    pub fn observe(&mut self, bounds: &[f64], d: Duration) {
        let secs = d.as_secs_f64();
        let i = bounds.iter().position(|b| secs <= *b).unwrap_or(bounds.len());
        if self.per_bucket.len() <= bounds.len() {
            self.per_bucket.resize(bounds.len() + 1, 0);
        }
        self.per_bucket[i] += 1;
        self.sum_micros = self.sum_micros.saturating_add(d.as_micros().min(u64::MAX as u128) as u64);
    }
}

/// Writes a histogram family; `counts` from a histogram with these `bounds` (or empty).
pub fn render_histogram(out: &mut String, name: &str, help: &str, bounds: &[f64], counts: &HistogramCounts) {
    header(out, name, help, "histogram");
    histogram_samples(out, name, "", bounds, counts);
}

/// The samples of one histogram series; `labels` are written before `le` (`a="b",`, or
/// empty), so one family can hold a series per label value.
pub fn histogram_samples(out: &mut String, name: &str, labels: &str, bounds: &[f64], counts: &HistogramCounts) {
    let mut cumulative = 0;
    for i in 0..=bounds.len() {
        cumulative += counts.per_bucket.get(i).copied().unwrap_or(0);
        let le = bounds.get(i).map_or_else(|| "+Inf".to_string(), |b| b.to_string());
        let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {cumulative}");
    }
    let (open, close) = match labels.strip_suffix(',') {
        Some(l) => (format!("{{{l}"), "}"),
        None => (String::new(), ""),
    };
    let _ = writeln!(out, "{name}_sum{open}{close} {}", counts.sum_micros as f64 / 1e6);
    let _ = writeln!(out, "{name}_count{open}{close} {cumulative}");
}

pub fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

pub fn metric(out: &mut String, name: &str, help: &str, kind: &str, value: u64) {
    header(out, name, help, kind);
    let _ = writeln!(out, "{name} {value}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_counts_into_cumulative_buckets_with_sum_and_count() {
        let h = Histogram::new(&[0.01, 0.1, 1.0]);
        h.observe(Duration::from_millis(5));
        h.observe(Duration::from_millis(10));
        h.observe(Duration::from_millis(500));
        h.observe(Duration::from_secs(3));
        let mut out = String::new();
        h.render(&mut out, "x", "help");
        assert_eq!(
            out,
            "# HELP x help\n# TYPE x histogram\n\
             x_bucket{le=\"0.01\"} 2\nx_bucket{le=\"0.1\"} 2\nx_bucket{le=\"1\"} 3\nx_bucket{le=\"+Inf\"} 4\n\
             x_sum 3.515\nx_count 4\n"
        );
        let mut empty = String::new();
        render_histogram(&mut empty, "y", "help", &[0.5], &HistogramCounts::default());
        assert!(empty.contains("y_bucket{le=\"+Inf\"} 0\ny_sum 0\ny_count 0\n"), "{empty}");
    }
}

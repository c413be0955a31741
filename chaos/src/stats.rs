//! Figures: percentiles of durations.

/// The `p`-th percentile (0..=100, nearest rank) of `values`; None when empty.
pub fn percentile(values: &[u64], p: u64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_unstable();
    let rank = ((p.min(100) * v.len() as u64).div_ceil(100)).max(1) as usize;
    Some(v[rank - 1])
}

/// "p50 X ms, max Y ms (n samples)" for microsecond samples, or "no samples".
pub fn summary_ms(values_us: &[u64]) -> String {
    match (percentile(values_us, 50), values_us.iter().max()) {
        (Some(p50), Some(max)) => {
            format!("p50 {} ms, max {} ms ({} samples)", p50 / 1000, max / 1000, values_us.len())
        }
        _ => "no samples".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        assert_eq!(percentile(&[], 50), None);
        assert_eq!(percentile(&[7], 50), Some(7));
        assert_eq!(percentile(&[4, 1, 3, 2], 50), Some(2));
        assert_eq!(percentile(&[4, 1, 3, 2], 100), Some(4));
        assert_eq!(summary_ms(&[1000, 3000]), "p50 1 ms, max 3 ms (2 samples)");
    }
}

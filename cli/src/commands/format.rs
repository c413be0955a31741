//! Text shapes shared by the operator commands: timestamps, ages, aligned tables.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in ms since the Unix epoch (the unit of every server timestamp).
pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// `2026-11-29T14:03:01Z` for ms since the Unix epoch (UTC, second precision).
pub fn rfc3339(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
}

/// Gregorian date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A short human duration: `850ms`, `3.2s`, `4m05s`, `2h03m`, `3d04h`.
pub fn duration_ms(ms: i64) -> String {
    let ms = ms.max(0);
    let s = ms / 1000;
    match ms {
        _ if ms < 1000 => format!("{ms}ms"),
        _ if s < 60 => format!("{}.{}s", s, ms % 1000 / 100),
        _ if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ if s < 86_400 => format!("{}h{:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d{:02}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// How long ago `since_ms` was (server clock against ours; never negative).
pub fn age(since_ms: i64) -> String {
    if since_ms <= 0 {
        return "-".into();
    }
    duration_ms(now_ms() - since_ms)
}

/// `5, 6` for a list of ids, `-` for none.
pub fn ids(list: &[u64]) -> String {
    if list.is_empty() {
        "-".into()
    } else {
        list.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
    }
}

/// `-` for an empty text.
pub fn or_dash(text: &str) -> String {
    if text.is_empty() {
        "-".into()
    } else {
        text.to_string()
    }
}

/// Rows under a header, columns padded to their widest cell (the last one is not padded).
pub fn table(header: &[&str], rows: &[Vec<String>], indent: &str) -> Vec<String> {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let render = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut line = indent.to_string();
        for (i, cell) in cells.into_iter().enumerate() {
            line.push_str(cell);
            if i < last {
                let pad = widths[i] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        line
    };
    let mut lines = vec![render(header.to_vec())];
    lines.extend(rows.iter().map(|r| render(r.iter().map(String::as_str).collect())));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_960_981_999), "2026-11-29T14:03:01Z");
        assert_eq!(rfc3339(-1000), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn durations() {
        assert_eq!(duration_ms(-5), "0ms");
        assert_eq!(duration_ms(850), "850ms");
        assert_eq!(duration_ms(3_250), "3.2s");
        assert_eq!(duration_ms(245_000), "4m05s");
        assert_eq!(duration_ms(7_380_000), "2h03m");
        assert_eq!(duration_ms(273_600_000), "3d04h");
        assert_eq!(age(0), "-");
    }

    #[test]
    fn tables_align() {
        let lines = table(&["TXN", "NAME"], &[vec!["5".into(), "worker".into()], vec!["123".into(), "-".into()]], "  ");
        assert_eq!(lines, vec!["  TXN  NAME", "  5    worker", "  123  -"]);
        assert_eq!(ids(&[5, 6]), "5, 6");
        assert_eq!(ids(&[]), "-");
    }
}

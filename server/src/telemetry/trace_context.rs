//! W3C Trace Context (`traceparent`, `tracestate`) as clients send it on gRPC metadata or
//! HTTP headers. Anything malformed is ignored, never an error: tracing must not make a
//! lock call fail.

/// Header (and gRPC metadata) names, as the W3C spec writes them.
pub const TRACEPARENT: &str = "traceparent";
pub const TRACESTATE: &str = "tracestate";

/// Longest `tracestate` passed on (the spec allows 32 members; vendors keep it short).
/// A longer one is dropped, the `traceparent` is still used.
const MAX_TRACESTATE: usize = 512;

/// The caller's span: spans the node exports become its children, in its trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: [u8; 16],
    pub parent_span_id: [u8; 8],
    /// The caller decided to record this trace (flag bit 0).
    pub sampled: bool,
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Parses a `traceparent` (and its `tracestate`); `None` when it is absent or malformed.
    pub fn parse(traceparent: Option<&str>, tracestate: Option<&str>) -> Option<TraceContext> {
        let tp = traceparent?.trim();
        let version = u8::from_str_radix(tp.get(0..2)?, 16).ok()?;
        // Version ff is invalid; version 00 is exactly 55 characters, and a later version
        // may append fields after a dash.
        let well_formed = match version {
            0xff => false,
            0 => tp.len() == 55,
            _ => tp.len() == 55 || tp.as_bytes().get(55) == Some(&b'-'),
        };
        if !well_formed || !tp.get(0..2)?.bytes().all(is_lower_hex) {
            return None;
        }
        let mut fields = tp[..55].split('-');
        let (_, trace, parent, flags) = (fields.next()?, fields.next()?, fields.next()?, fields.next()?);
        let trace_id: [u8; 16] = decode(trace)?;
        let parent_span_id: [u8; 8] = decode(parent)?;
        let [flags] = decode::<1>(flags)?;
        if trace_id == [0; 16] || parent_span_id == [0; 8] {
            return None;
        }
        let tracestate = tracestate
            .map(str::trim)
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .map(str::to_string);
        Some(TraceContext { trace_id, parent_span_id, sampled: flags & 1 == 1, tracestate })
    }
}

fn is_lower_hex(b: u8) -> bool {
    b.is_ascii_digit() || (b'a'..=b'f').contains(&b)
}

/// Exactly `2 * N` lowercase hex digits.
fn decode<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != 2 * N || !s.bytes().all(is_lower_hex) {
        return None;
    }
    let mut out = [0; N];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_parses_with_its_tracestate() {
        let c = TraceContext::parse(Some(GOOD), Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(c.trace_id[0], 0x4b);
        assert_eq!(c.parent_span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(c.sampled);
        assert_eq!(c.tracestate.as_deref(), Some("congo=t61rcWkgMzE"));
        let unsampled = TraceContext::parse(Some(&GOOD.replace("-01", "-00")), None).unwrap();
        assert!(!unsampled.sampled);
        // A later version may carry more fields.
        assert!(TraceContext::parse(Some(&format!("01{}-extra", &GOOD[2..])), None).is_some());
    }

    #[test]
    fn malformed_traceparents_are_ignored_and_an_oversized_tracestate_dropped() {
        let bad = [
            "",
            "garbage",
            &GOOD[..54],
            &format!("{GOOD}-x"),
            &GOOD.replace("4bf9", "4BF9"),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            &GOOD.replacen("00", "ff", 1),
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        ];
        for tp in bad {
            assert_eq!(TraceContext::parse(Some(tp), None), None, "{tp:?}");
        }
        let long = "a=".to_string() + &"b".repeat(MAX_TRACESTATE);
        assert_eq!(TraceContext::parse(Some(GOOD), Some(&long)).unwrap().tracestate, None);
        assert_eq!(TraceContext::parse(Some(GOOD), Some("a=\u{1}")).unwrap().tracestate, None);
    }
}

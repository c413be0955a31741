//! The query string of an HTTP API request.

/// `?name=value` pairs of a query string, decoded.
pub fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    q.as_deref().map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default()
}

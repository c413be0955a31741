//! Headers every answer of the HTTP port carries, so no other site can frame the
//! Playground (it keeps an API key in the browser's storage: a page that framed it could
//! trick its user into clicking its buttons) and no browser guesses a content type:
//! `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`, and a
//! `Content-Security-Policy` with `frame-ancestors 'none'`. The Playground's page brings its
//! own policy ([`PLAYGROUND_CSP`]); every other answer (JSON, metrics, text) loads nothing.

use axum::http::header::{CONTENT_SECURITY_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use axum::http::HeaderValue;
use axum::response::Response;

/// The policy of answers that are data, not pages.
const DATA_CSP: &str = "default-src 'none'; frame-ancestors 'none'";

/// The Playground page's policy: its own scripts, styles and API only. Inline styles are
/// allowed because the page sets element styles (the lease bars' widths); scripts stay
/// 'self' only, which is what keeps an injected script away from the stored key.
pub const PLAYGROUND_CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
     img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// Adds the headers to an answer; a policy the route set is kept, with `frame-ancestors
/// 'none'` added if it lacks one.
pub async fn protect(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let policy = match headers.get(CONTENT_SECURITY_POLICY).and_then(|v| v.to_str().ok()) {
        None => HeaderValue::from_static(DATA_CSP),
        Some(own) if own.contains("frame-ancestors") => return response,
        Some(own) => match HeaderValue::from_str(&format!("{own}; frame-ancestors 'none'")) {
            Ok(v) => v,
            Err(_) => HeaderValue::from_static(DATA_CSP),
        },
    };
    headers.insert(CONTENT_SECURITY_POLICY, policy);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::response::IntoResponse;

    fn csp(r: &Response) -> &str {
        r.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap()
    }

    #[tokio::test]
    async fn every_answer_refuses_framing_and_sniffing_and_keeps_a_route_s_own_policy() {
        let data = protect("{}".into_response()).await;
        assert_eq!(data.headers()[X_FRAME_OPTIONS], "DENY");
        assert_eq!(data.headers()[X_CONTENT_TYPE_OPTIONS], "nosniff");
        assert_eq!(csp(&data), DATA_CSP);

        let page = protect(([(CONTENT_SECURITY_POLICY, PLAYGROUND_CSP)], "<html>").into_response()).await;
        assert_eq!(csp(&page), PLAYGROUND_CSP);
        let lax = protect(([(CONTENT_SECURITY_POLICY, "default-src 'self'")], "").into_response()).await;
        assert_eq!(csp(&lax), "default-src 'self'; frame-ancestors 'none'");
    }
}

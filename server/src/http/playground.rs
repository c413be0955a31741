//! The Playground page and the API's OpenAPI file, compiled into the binary so the page
//! works offline: no CDN, no build step, nothing fetched from elsewhere.

use axum::http::header;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("../../assets/playground/index.html");
const APP_JS: &str = include_str!("../../assets/playground/app.js");
const STYLE: &str = include_str!("../../assets/playground/style.css");
const OPENAPI: &str = include_str!("../../assets/openapi.json");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    // no-cache: a restarted (maybe upgraded) binary's page is picked up at once.
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

pub fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/playground") }))
        .route("/playground", get(|| async { asset("text/html; charset=utf-8", INDEX) }))
        .route("/playground/", get(|| async { Redirect::permanent("/playground") }))
        .route("/playground/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/playground/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE) }))
        .route("/openapi.json", get(|| async { asset("application/json", OPENAPI) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openapi_file_is_valid_json() {
        let v: serde_json::Value = serde_json::from_str(OPENAPI).expect("assets/openapi.json parses");
        assert!(v["paths"]["/api/v1/transactions"].is_object());
    }
}

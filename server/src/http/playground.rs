//! The Playground page and the API's OpenAPI file, compiled into the binary so the page
//! works offline: no CDN, no build step, nothing fetched from elsewhere. The page's files
//! live with its browser tests in `playground/web/`; its scripts are ES modules that import
//! each other by relative path, so each one is served here under `/playground/<name>`.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use axum::Router;

use super::headers::PLAYGROUND_CSP;

const INDEX: &str = include_str!("../../../playground/web/index.html");
const OPENAPI: &str = include_str!("../../assets/openapi.json");

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// The page's files by name, with their content type: a browser runs a module script only
/// when it is served with a JavaScript type.
const FILES: &[(&str, &str, &str)] = &[
    ("style.css", CSS, include_str!("../../../playground/web/style.css")),
    ("app.js", JS, include_str!("../../../playground/web/app.js")),
    ("api.js", JS, include_str!("../../../playground/web/api.js")),
    ("cluster.js", JS, include_str!("../../../playground/web/cluster.js")),
    ("dom.js", JS, include_str!("../../../playground/web/dom.js")),
    ("election.js", JS, include_str!("../../../playground/web/election.js")),
    ("events.js", JS, include_str!("../../../playground/web/events.js")),
    ("graph.js", JS, include_str!("../../../playground/web/graph.js")),
    ("i18n.js", JS, include_str!("../../../playground/web/i18n.js")),
    ("lockdelay.js", JS, include_str!("../../../playground/web/lockdelay.js")),
    ("render.js", JS, include_str!("../../../playground/web/render.js")),
    ("scenarios.js", JS, include_str!("../../../playground/web/scenarios.js")),
    ("sse.js", JS, include_str!("../../../playground/web/sse.js")),
    ("state.js", JS, include_str!("../../../playground/web/state.js")),
    ("store.js", JS, include_str!("../../../playground/web/store.js")),
    ("timeline.js", JS, include_str!("../../../playground/web/timeline.js")),
    ("transactions.js", JS, include_str!("../../../playground/web/transactions.js")),
];

fn asset(content_type: &'static str, body: &'static str) -> Response {
    // no-cache: a restarted (maybe upgraded) binary's page is picked up at once.
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// The page, with the policy that keeps other sites' scripts and frames away from it.
async fn page() -> Response {
    let mut page = asset("text/html; charset=utf-8", INDEX);
    page.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PLAYGROUND_CSP));
    page
}

async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, body)) => asset(content_type, body),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

pub fn routes() -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::temporary("/playground") }))
        .route("/playground", get(page))
        .route("/playground/", get(|| async { Redirect::permanent("/playground") }))
        .route("/playground/:file", get(file))
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

    /// A module added to playground/web but not to FILES would fail to load in the browser
    /// (a 404 breaks every module that imports it); this names it instead.
    #[test]
    fn every_file_of_the_page_is_served() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../playground/web");
        for entry in std::fs::read_dir(&dir).expect("playground/web") {
            let name = entry.expect("dir entry").file_name().into_string().expect("utf-8 name");
            if name == "index.html" {
                continue;
            }
            assert!(FILES.iter().any(|(n, _, _)| *n == name), "playground/web/{name} is not in FILES");
        }
    }
}

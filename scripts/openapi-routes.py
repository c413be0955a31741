#!/usr/bin/env python3
"""The OpenAPI document against the HTTP router, route by route (part of `make lint`).

server/assets/openapi.json is written by hand; this check keeps it honest. It reads every
`.route("PATH", get(..).post(..))` call in server/src/http/ and compares the (method, path)
pairs under /api/ with the document's paths, both ways: a route the document does not
describe, or a documented call the router does not serve, fails. The operator and page
routes outside /api/ (metrics, health, the Playground, the document itself) are not part of
the JSON API and are listed in OUTSIDE_THE_API so a new one is a decision, not an accident.

The served side is tested too: server/tests/http_api.rs sends every documented call to a
real node and fails on the router's 404 or 405.
"""

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HTTP_SRC = ROOT / "server" / "src" / "http"
OPENAPI = ROOT / "server" / "assets" / "openapi.json"
METHODS = ("get", "post", "put", "delete", "patch")

# Routes the router serves that the JSON API document leaves out, on purpose.
OUTSIDE_THE_API = {
    ("get", "/metrics"),  # Prometheus text exposition
    ("get", "/healthz"),  # liveness probe, plain text
    ("get", "/readyz"),  # readiness probe, plain text
    ("get", "/"),  # redirect to the Playground
    ("get", "/playground"),
    ("get", "/playground/"),
    ("get", "/playground/{file}"),
    ("get", "/openapi.json"),  # the document itself
}


def call_arguments(text: str, start: int) -> str:
    """The text inside the parentheses that open at `start` (balanced, strings skipped)."""
    depth, i, in_string = 0, start, False
    while i < len(text):
        c = text[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return text[start + 1 : i]
        i += 1
    raise ValueError(f"unbalanced parentheses from offset {start}")


def top_level_methods(handlers: str) -> list:
    """`get(a).post(b)` → ["get", "post"]: the method calls outside any parentheses."""
    found, depth = [], 0
    for m in re.finditer(r"[()\[\]{}]|\b(" + "|".join(METHODS) + r")\s*\(", handlers):
        token = m.group(0)
        if m.group(1) and depth == 0:
            found.append(m.group(1))
            depth += 1
        elif token in "([{" or token.endswith("("):
            depth += 1
        elif token in ")]}":
            depth -= 1
    return found


def router_routes() -> set:
    routes = set()
    for path in sorted(HTTP_SRC.glob("*.rs")):
        text = path.read_text()
        for m in re.finditer(r"\.route\(", text):
            args = call_arguments(text, m.end() - 1)
            route = re.match(r'\s*"([^"]*)"\s*,(.*)', args, re.S)
            if not route:
                sys.exit(f"{path.relative_to(ROOT)}: cannot read the route in .route({args[:60]}…)")
            # axum's `:id` is OpenAPI's `{id}`.
            url = re.sub(r":(\w+)", r"{\1}", route.group(1))
            methods = top_level_methods(route.group(2))
            if not methods:
                sys.exit(f"{path.relative_to(ROOT)}: no method for route {url}")
            routes.update((method, url) for method in methods)
    return routes


def documented_routes() -> set:
    doc = json.loads(OPENAPI.read_text())
    return {(method, url) for url, item in doc["paths"].items() for method in item if method in METHODS}


def main() -> int:
    served, documented = router_routes(), documented_routes()
    api = served - OUTSIDE_THE_API
    problems = []
    for method, url in sorted(api - documented):
        problems.append(f"the router serves {method.upper()} {url}, which {OPENAPI.relative_to(ROOT)} does not describe")
    for method, url in sorted(documented - api):
        problems.append(f"{OPENAPI.relative_to(ROOT)} describes {method.upper()} {url}, which the router does not serve")
    for method, url in sorted(OUTSIDE_THE_API - served):
        problems.append(f"OUTSIDE_THE_API in {pathlib.Path(__file__).name} lists {method.upper()} {url}, which no longer exists")
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(f"openapi-routes: {len(documented)} calls, each served by the router and described in the document")
    return 0


if __name__ == "__main__":
    sys.exit(main())

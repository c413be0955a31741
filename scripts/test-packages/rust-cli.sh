#!/usr/bin/env bash
# The README's Rust and `dls lock` quick starts (and docs/es's `dls lock` ones) as printed,
# extracted by scripts/readme_snippets.py, against a real dls node:
# - Rust: `cargo new my-worker` next to a checkout (a symlink to this one), the README's
#   dependency lines under [dependencies], its main.rs as src/main.rs, `cargo run`. The
#   workspace's Cargo.lock is copied in and the target dir shared: the first run compiles
#   caerus-core's dependencies for the new project's profile, later runs only the new crate.
# - CLI: the crontab lines' commands with `dls` on PATH: while a first run holds the lock
#   for --min-hold, a second skips without a word; --once-per runs a slot once; the "try
#   it" blocks print the holder's line and not the skipped one.
# Used by `make test-rust-cli-snippets`.
#
#   DLS_BIN=/path/to/dls KIT_BIN=/path/to/dls-cluster scripts/test-packages/rust-cli.sh
#   SNIPPETS_ROOT=/old/checkout ...   # the snippets of another checkout's Markdown (e.g. an old one)
name=rust-cli
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

start_dls
unset CAERUS_API_KEY # as after `make run`: an open node, no key
export PATH="$(dirname "$DLS_BIN"):$PATH"
[ "$(command -v dls)" = "$DLS_BIN" ] || fail "dls on PATH is $(command -v dls), not $DLS_BIN"

# ---- Rust ------------------------------------------------------------------------------
snippets show rust-new >"$work/rust-new.sh"
new_line="$(grep '^cargo new ' "$work/rust-new.sh")" || fail "rust-new has no 'cargo new' line: $(cat "$work/rust-new.sh")"
grep -q '^cargo run\b' "$work/rust-new.sh" || fail "rust-new has no 'cargo run' line"
project="$(sed -n 's/^cargo new \([^ ]*\).*/\1/p' <<<"$new_line")"
# In the target dir, at the same path every run: cargo keys a path dependency's build by its
# path, so a new temp dir each time would rebuild caerus-core and its path dependencies.
rust="$target/readme-snippets"
rm -rf "$rust" && mkdir -p "$rust"
ln -s "$repo" "$rust/caerus-dls"
log "rust: $new_line (in $rust, next to caerus-dls -> $repo)"
(cd "$rust" && bash -euo pipefail -c "$new_line" >/dev/null 2>&1) || fail "'$new_line' failed"
tail -1 "$rust/$project/Cargo.toml" | grep -qx '\[dependencies\]' || fail "cargo new's Cargo.toml does not end with [dependencies]"
snippets show rust-deps >>"$rust/$project/Cargo.toml"
snippets show rust-main >"$rust/$project/src/main.rs"
cp "$repo/Cargo.lock" "$rust/$project/"
log "rust: cargo run in $project (target dir $target)"
out="$(cd "$rust/$project" && CARGO_TARGET_DIR="$target" timeout 900 cargo run 2>"$work/cargo.log")" ||
  fail "cargo run failed: $(tail -30 "$work/cargo.log") $out"
echo "$out"
token="$(sed -n 's/^Lock acquired\. Fencing token: \([0-9][0-9]*\)$/\1/p' <<<"$out")"
[ -n "$token" ] || fail "the README's main.rs printed no 'Lock acquired. Fencing token: N': $out"
grep -qx "charging with fencing token $token" <<<"$out" || fail "charge_subscriptions did not get token $token: $out"
log "ok: the README's Rust quick start took the lock (fencing token $token)"

# ---- CLI -------------------------------------------------------------------------------
cron_command() { # snippet -> the command of its one crontab line (the five schedule fields dropped)
  local lines
  lines="$(snippets show "$1" | grep -v '^#' | grep -v '^$')"
  [ "$(wc -l <<<"$lines")" -eq 1 ] || fail "$1: expected one crontab line: $lines"
  sed -E 's/^([^ ]+ +){5}//' <<<"$lines"
}

# The report cron line (README and docs/es): the first host runs the job and keeps the lock
# for --min-hold; a second host whose cron fires meanwhile skips, silent on both streams.
for snippet in cli-cron es-cli-cron; do
  cmd="$(cron_command "$snippet")"
  dir="$work/$snippet"
  mkdir -p "$dir"
  script="$(sed -n 's/.* -- \(\.\/[^ ]*\)$/\1/p' <<<"$cmd")"
  [ -n "$script" ] || fail "$snippet: no './SCRIPT' after -- in: $cmd"
  printf '#!/bin/sh\necho "$DLS_FENCING_TOKEN" >>ran\n' >"$dir/$script"
  chmod +x "$dir/$script"
  log "$snippet: $cmd (first host)"
  (cd "$dir" && exec bash -c "exec $cmd" >first.out 2>first.err) &
  first=$!
  for _ in $(seq 1 300); do [ -s "$dir/ran" ] && break; kill -0 "$first" 2>/dev/null || break; sleep 0.1; done
  [ -s "$dir/ran" ] || fail "$snippet: the first run did not run $script: $(cat "$dir/first.err")"
  kill -0 "$first" 2>/dev/null || fail "$snippet: the first run did not keep the lock (--min-hold): $(cat "$dir/first.err")"
  log "$snippet: the same line on a second host while the first holds the lock"
  (cd "$dir" && bash -c "exec $cmd" >second.out 2>second.err) || fail "$snippet: the skipped run exited $?"
  [ "$(wc -l <"$dir/ran")" -eq 1 ] || fail "$snippet: the job ran twice"
  [ ! -s "$dir/second.out" ] && [ ! -s "$dir/second.err" ] ||
    fail "$snippet: the skip was not quiet: $(cat "$dir/second.out" "$dir/second.err")"
  kill -TERM "$first" # ends --min-hold early: dls lock releases and exits with the job's status
  wait "$first" || fail "$snippet: the first run exited $? after SIGTERM during --min-hold"
  [ ! -s "$dir/first.err" ] || fail "$snippet: the first run wrote to stderr: $(cat "$dir/first.err")"
  log "ok: $snippet ran once (fencing token $(cat "$dir/ran")), the other host skipped quietly"
done

# --once-per: the slot runs once, later runs in the same slot skip, and none prints a word.
cmd="$(cron_command cli-once-per)"
dir="$work/once-per"
mkdir -p "$dir"
script="$(sed -n 's/.* -- \(\.\/[^ ]*\)$/\1/p' <<<"$cmd")"
printf '#!/bin/sh\necho "$DLS_SLOT" >>ran\n' >"$dir/$script"
chmod +x "$dir/$script"
log "cli-once-per: $cmd, three times"
for _ in 1 2 3; do
  out="$(cd "$dir" && bash -c "exec $cmd" 2>&1)" || fail "cli-once-per: '$cmd' exited $?: $out"
  [ -z "$out" ] || fail "cli-once-per: a run printed (cron would mail it): $out"
done
# Three runs within one 5-minute slot run the job once; a slot boundary between them makes
# it twice, once per slot.
[ "$(sort "$dir/ran" | uniq -d)" = "" ] || fail "cli-once-per: a slot ran twice: $(cat "$dir/ran")"
[ "$(wc -l <"$dir/ran")" -le 2 ] || fail "cli-once-per: the job ran three times: $(cat "$dir/ran")"
log "ok: cli-once-per ran slot $(head -1 "$dir/ran") once"

# The "try it" blocks, as printed: the holder's line, not the skipped one.
for snippet in cli-try es-cli-try; do
  snippets show "$snippet" >"$work/$snippet.sh"
  log "$snippet: $(tr '\n' ' ' <"$work/$snippet.sh")"
  out="$(cd "$work" && timeout 60 bash -euo pipefail "$work/$snippet.sh" 2>&1)" || fail "$snippet exited $?: $out"
  echo "$out"
  [ "$(wc -l <<<"$out")" -eq 1 ] && grep -Eq ' [0-9]+$' <<<"$out" ||
    fail "$snippet: expected the holder's one line ending in its fencing token: $out"
done
log "ok: the README's and docs/es's Rust and dls lock quick starts ran as printed"

#!/usr/bin/env bash
# Builds CaerusDlsFFI.xcframework (static libcaerus_uniffi for macOS, iOS and the iOS
# simulator, with the generated C header and module map) next to Package.swift.
# Needs macOS with Xcode command-line tools and rustup. Not run in CI (no Apple host).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
target_dir="${CARGO_TARGET_DIR:-$root/target}"
profile="${PROFILE:-release}"
targets=(aarch64-apple-darwin x86_64-apple-darwin aarch64-apple-ios aarch64-apple-ios-sim x86_64-apple-ios)

echo "==> rustup targets"
rustup target add "${targets[@]}"
for t in "${targets[@]}"; do
  echo "==> cargo rustc --target $t (staticlib, $profile)"
  (cd "$root" && cargo rustc -p caerus-uniffi --lib --crate-type staticlib --profile "$profile" --target "$t")
done

lib() { echo "$target_dir/$1/$profile/libcaerus_uniffi.a"; }
work="$target_dir/caerus-xcframework"
rm -rf "$work" && mkdir -p "$work/headers" "$work/macos" "$work/ios-sim"
cp "$here/FFI/CaerusDlsFFI.h" "$here/FFI/module.modulemap" "$work/headers/"
echo "==> lipo: universal macOS and simulator libraries"
lipo -create "$(lib aarch64-apple-darwin)" "$(lib x86_64-apple-darwin)" -output "$work/macos/libcaerus_uniffi.a"
lipo -create "$(lib aarch64-apple-ios-sim)" "$(lib x86_64-apple-ios)" -output "$work/ios-sim/libcaerus_uniffi.a"

echo "==> xcodebuild -create-xcframework"
rm -rf "$here/CaerusDlsFFI.xcframework"
xcodebuild -create-xcframework \
  -library "$work/macos/libcaerus_uniffi.a" -headers "$work/headers" \
  -library "$(lib aarch64-apple-ios)" -headers "$work/headers" \
  -library "$work/ios-sim/libcaerus_uniffi.a" -headers "$work/headers" \
  -output "$here/CaerusDlsFFI.xcframework"
echo "==> $here/CaerusDlsFFI.xcframework ready: swift build"

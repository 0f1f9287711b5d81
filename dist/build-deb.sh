#!/usr/bin/env bash
# Builds the Debian package `pqdns` (pqdns-server, pqdns-resolver, pqdns-zone, pqdns-resolve,
# their systemd units, man pages and bash completions, /etc/pqdns/pqdns-server.toml) with cargo-deb
# (`cargo install cargo-deb`); prints the path of the .deb. The package metadata is the
# [package.metadata.deb] table of crates/pqdns-server/Cargo.toml; maintainer scripts are
# dist/debian/. Honours CARGO_TARGET_DIR.
#
#   dist/build-deb.sh            # from anywhere; the .deb goes to <target>/debian/
#   PQDNS_DEB_NO_BUILD=1 dist/build-deb.sh   # package binaries already built (the
#                                            # package test, inside `cargo test`)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null || { echo "build-deb: cargo-deb is missing: cargo install cargo-deb --locked" >&2; exit 1; }
if [[ -z ${PQDNS_DEB_NO_BUILD:-} ]]; then
    cargo build --release --locked -p pqdns-server -p pqdns-resolver -p pqdns-zone --bins >&2
fi
TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
REL=$TARGET/release
mkdir -p "$REL/man" "$REL/completions"
for b in pqdns-server pqdns-resolver pqdns-ctl; do
    "$REL/$b" --generate man | gzip -9n >"$REL/man/$b.8.gz"
    "$REL/$b" --generate complete-bash >"$REL/completions/$b"
done
cargo deb -p pqdns-server --no-build --fast --no-dbgsym | tail -n 1

#!/usr/bin/env bash
# Builds throttled's release binaries: static (no cgo), stripped of local
# paths (-trimpath), one per target, with the version and the commit stamped
# in, and a SHA256SUMS file beside them.
#
#   scripts/release.sh                  # linux/amd64 and linux/arm64 into dist/
#   VERSION=0.2.0 scripts/release.sh    # stamp another version
#   TARGETS="linux/amd64" OUT=/tmp/rel scripts/release.sh
#
# The version defaults to commands.Version in the source; the commit is
# stamped by Go itself (vcs.revision, vcs.modified: -buildvcs=true, since a
# release is built from a git checkout and GOFLAGS may turn stamping off),
# which --version prints.
set -euo pipefail
cd "$(dirname "$0")/.."

# commands.Version is declared `var Version = "..."` (or inside a var block).
version="${VERSION:-$(sed -n 's/^[[:space:]]*\(var[[:space:]]\{1,\}\)\{0,1\}Version[[:space:]]*=[[:space:]]*"\(.*\)"$/\2/p' commands/server.go)}"
if [ -z "$version" ]; then
  echo "release: cannot read commands.Version from commands/server.go; set VERSION" >&2
  exit 1
fi
targets="${TARGETS:-linux/amd64 linux/arm64}"
out="${OUT:-dist}"
mkdir -p "$out"

# A source tree without git (a tarball, a Docker context without .git) builds
# without the commit rather than failing.
vcs=true
git rev-parse --git-dir >/dev/null 2>&1 || vcs=false

names=()
for target in $targets; do
  os="${target%/*}"
  arch="${target#*/}"
  name="throttled-${version}-${os}-${arch}"
  echo "building $name" >&2
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -buildvcs="$vcs" \
    -ldflags "-s -w -X github.com/throttleddb/throttled/commands.Version=${version}" \
    -o "$out/$name" ./cmd/throttled
  names+=("$name")
done

(cd "$out" && sha256sum "${names[@]}" > SHA256SUMS)
echo "wrote ${names[*]} and SHA256SUMS to $out" >&2

#!/usr/bin/env bash
# A signed release, end to end, on this machine: a throwaway cosign key, the
# release built and checked as the tag's workflow builds it (make
# release-check, signed), published to a registry on localhost (make
# publish), and verified with the cosign command itself, as docs/install.md
# tells people to: the image index by digest, SHA256SUMS and the chart
# package. It also checks that cosign refuses them under another key. Not in
# CI (it builds every platform and cosign's command, about 15 minutes cold);
# the release checklist in docs/development.md runs it before a tag.
#
#   hack/release-rehearsal.sh [VERSION]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version=${1:-v0.1.0}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

# cosign's command at the version hack/sign signs with.
cosign_version=$(cd hack/sign && go list -m -f '{{.Version}}' github.com/sigstore/cosign/v2)
GOBIN="$work/bin" go install "github.com/sigstore/cosign/v2/cmd/cosign@$cosign_version"
cosign="$work/bin/cosign"

export COSIGN_PASSWORD=rehearsal
(cd "$work" && "$cosign" generate-key-pair >/dev/null)
mkdir "$work/other" && (cd "$work/other" && "$cosign" generate-key-pair >/dev/null)

# go-containerregistry's registry, in memory, on a free local port.
go run github.com/google/go-containerregistry/cmd/registry@v0.22.1 -port 0 >"$work/registry.log" 2>&1 &
for _ in $(seq 100); do
  port=$(sed -n 's/.*serving on port \([0-9]*\).*/\1/p' "$work/registry.log")
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "${port:-}" ] || { echo "the registry did not start:"; cat "$work/registry.log"; exit 1; }
registry="localhost:$port/winready"

make release-check VERSION="$version" REGISTRY="$registry" COSIGN_KEY="$work/cosign.key"
make publish VERSION="$version" REGISTRY="$registry" HELM_PUSH_FLAGS=--plain-http

digest=$(cat dist/image.digest)
image="$registry/winready@$digest"
verify() { "$cosign" verify --key "$1" --insecure-ignore-tlog=true --allow-http-registry "$image" >/dev/null; }
verify_blob() { "$cosign" verify-blob --key "$1" --insecure-ignore-tlog=true --signature "dist/$2.sig" "dist/$2"; }

cmp "$work/cosign.pub" dist/winready.pub
verify dist/winready.pub
echo "cosign verify: $image is signed by winready.pub"
for blob in SHA256SUMS "winready-${version#v}.tgz"; do
  verify_blob dist/winready.pub "$blob"
done
if verify "$work/other/cosign.pub" 2>/dev/null; then
  echo "cosign verified the image under another key"; exit 1
fi
if verify_blob "$work/other/cosign.pub" SHA256SUMS 2>/dev/null; then
  echo "cosign verified SHA256SUMS under another key"; exit 1
fi
echo "release $version rehearsed: signed, published to $registry, verified with cosign $cosign_version; another key is refused"

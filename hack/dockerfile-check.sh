#!/usr/bin/env bash
# Emulates the Dockerfile's build stage without a Docker engine: copies what
# its COPY lines copy (leaving out what .dockerignore leaves out) into an empty
# directory and builds there, so that a package the binary needs and the
# Dockerfile misses fails CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT

# The build context as docker sees it: the checkout minus .dockerignore.
excludes=()
while read -r pattern; do
  [[ -z "$pattern" || "$pattern" == \#* ]] && continue
  # docker anchors a pattern at the context's root unless it starts with **/.
  if [[ "$pattern" == \*\*/* ]]; then
    excludes+=(--no-anchored --exclude="${pattern#\*\*/}")
  else
    excludes+=(--anchored --exclude="$pattern")
  fi
done < .dockerignore
git ls-files -z --cached --others --exclude-standard |
  tar "${excludes[@]}" --null -T - -cf - | tar -xf - -C "$ctx"

# The build stage's COPY lines (the first stage; not --from).
work="$ctx/.stage"
mkdir -p "$work"
awk '/^FROM/ {n++} n == 1 && /^COPY/ && !/--from/' Dockerfile | while read -r _ rest; do
  read -ra parts <<<"$rest"
  dest=${parts[-1]}
  unset 'parts[-1]'
  mkdir -p "$work/$dest"
  for src in "${parts[@]}"; do
    # A directory's contents are copied, as docker does; a source may be a glob.
    # shellcheck disable=SC2086
    (cd "$ctx" && for s in $src; do if [[ -d "$s" ]]; then cp -r "$s/." "$work/$dest"; else cp "$s" "$work/$dest"; fi; done)
  done
done

(cd "$work" && CGO_ENABLED=0 go build -trimpath -o /dev/null .) || {
  echo "the Dockerfile's build stage does not compile: a COPY line or .dockerignore misses a package" >&2
  exit 1
}
echo "the Dockerfile's build stage compiles ($(find "$work" -name '*.go' | wc -l) Go files copied)"

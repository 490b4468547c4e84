#!/usr/bin/env bash
# .ci/modules.sh: the repository's Go modules agree with versions.yaml, and a
# consumer can depend on them, today through a clone and once they are
# tagged through the module proxy.
#
# versions.yaml is the one list of modules: .ci/run checks every go.mod it
# finds, this script fails until versions.yaml lists it, and RELEASING.md
# tags what `-tags` prints. To add a module: its go.mod (requiring and
# replacing its siblings), a line in versions.yaml, and a `use` in go.work
# (or a go.work of its own beside it, as examples/pipeline has); each check
# below says which is missing.
#
# Why a script and not OpenTelemetry Go's release tools: multimod (versions
# and tags from versions.yaml) and crosslink (replace directives between
# sibling modules) check the same things from the same versions.yaml format,
# but the Go module proxy this project's machines and CI reach does not serve
# go.opentelemetry.io/build-tools/... at any version (404 on the module
# list, checked December 2026), so they cannot be run here, even pinned.
# Should the proxy serve them, `go run
# go.opentelemetry.io/build-tools/multimod@vX verify` and `crosslink` can
# replace the static checks; the consumer checks stay.
#
# Static checks (the working tree):
#   - every go.mod of the repository is listed in versions.yaml, in a module
#     set or under excluded-modules, and every module listed there exists;
#   - every module is in the root go.work, or has a go.work of its own in
#     its directory that uses it alone (a module kept out of the workspace);
#   - each module path matches its directory (the tag prefix is the
#     directory, RELEASING.md) and each version is a semantic version;
#   - a go.mod that requires a sibling module requires it at the version of
#     the sibling's module set, never an excluded module, and replaces it
#     with the sibling's directory (so GOWORK=off builds use the checkout);
#   - internal/version.Version is the root module's version without the "v";
#   - every `go get` of an aionotel module at a version in README.md names
#     the version versions.yaml releases it at.
# Self-test: each of the static checks above must fail on a copy of the
# repository's go.mod files, versions.yaml and internal/version broken in
# one way, with the expected message; the unbroken copy must pass.
# Consumer check (the committed tree, HEAD): each module set is served at its
# version from a local module proxy, as the tags would be, and a fresh module
# outside the repository must `go get` each released module on its own, then
# all of them together, and build every importable package, with no replace
# and no go.work. A temporary module cache keeps the simulated versions out of
# the real one.
# Clone check (the working tree): README.md's install commands (the blocks
# install and install-backend, run by .ci/readme.sh as written) in a new
# module beside a clone of the repository, whose program is README.md's
# first Go block: its build must succeed, and running it must print the
# instruments examples/quickstart/README.md lists.
#
# Usage: .ci/modules.sh [-static | -tags]
#   -static  the static checks only
#   -tags    print the release tags of the released modules, root first, at
#            the version of versions.yaml (RELEASING.md)
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."

static_only=false tags_only=false
case "${1:-}" in
  -static) static_only=true ;;
  -tags) tags_only=true ;;
  "") ;;
  *) echo "usage: $0 [-static | -tags]" >&2; exit 2 ;;
esac

problems=0
problem() { echo "modules.sh: $*" >&2; problems=$((problems + 1)); }

# gomod_module prints the module path of a go.mod file.
gomod_module() { awk '$1 == "module" { gsub(/"/, "", $2); print $2; exit }' "$1"; }

# gomod_requires prints "path version" for each requirement of a go.mod file.
gomod_requires() {
  awk '{ sub(/\/\/.*/, "") }
    /^require[ \t]*\(/ { block = 1; next }
    block && /^[ \t]*\)/ { block = 0; next }
    block && NF >= 2 { print $1, $2; next }
    /^require[ \t]/ && NF >= 3 { print $2, $3 }' "$1"
}

# gomod_replaces prints "old new" for each replace directive of a go.mod file
# (versions on either side are dropped).
gomod_replaces() {
  awk '{ sub(/\/\/.*/, "") }
    /^replace[ \t]*\(/ { block = 1; next }
    block && /^[ \t]*\)/ { block = 0; next }
    /^replace[ \t]/ && !/\(/ { $1 = ""; $0 = $0; line = 1 }
    (block || line) && NF >= 3 {
      for (i = 1; i <= NF; i++) if ($i == "=>") print $1, $(i + 1)
    }
    { line = 0 }' "$1"
}

# versions_entries prints "module version" for each module of versions.yaml,
# with the version "excluded" for excluded-modules.
versions_entries() {
  awk '{ sub(/#.*/, "") } /^[ \t]*$/ { next }
    /^[^ \t-]/ { section = $1; set = ""; list = ""; next }
    section == "module-sets:" && /^  [^ \t-][^ \t]*:[ \t]*$/ {
      set = $1; sub(/:$/, "", set); sets[set] = 1; list = ""; next }
    section == "module-sets:" && $1 == "version:" { version[set] = $2; next }
    section == "module-sets:" && $1 == "modules:" { list = set; next }
    section == "module-sets:" && $1 == "-" && list != "" { n++; mod[n] = $2; of[n] = list; next }
    section == "excluded-modules:" && $1 == "-" { n++; mod[n] = $2; of[n] = ""; next }
    { printf "versions.yaml: line %d not understood: %s\n", NR, $0 > "/dev/stderr"; bad = 1 }
    END {
      for (i = 1; i <= n; i++) {
        if (of[i] == "") { print mod[i], "excluded"; continue }
        if (version[of[i]] == "") { printf "versions.yaml: module set %s has no version\n", of[i] > "/dev/stderr"; bad = 1; continue }
        print mod[i], version[of[i]]
      }
      exit bad
    }' versions.yaml
}

[ -f versions.yaml ] || { echo "modules.sh: versions.yaml is missing" >&2; exit 1; }
root=$(gomod_module go.mod)
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$'

# The modules of the repository: directory -> module path, and back.
declare -A path_of dir_of want_version
for gomod in $(git ls-files --cached --others --exclude-standard -- go.mod '*/go.mod'); do
  [ -f "$gomod" ] || continue
  dir=$(dirname "$gomod")
  path=$(gomod_module "$gomod")
  want=$root; [ "$dir" = . ] || want="$root/$dir"
  if [ "$path" != "$want" ]; then
    problem "$gomod: module $path, want $want (the module path must match the directory, which is the tag prefix)"
  fi
  path_of[$dir]=$path
  dir_of[$path]=$dir
done

# The versions file.
if ! entries=$(versions_entries); then
  problem "versions.yaml cannot be read"
fi
while read -r mod version; do
  [ -n "$mod" ] || continue
  if [ -n "${want_version[$mod]:-}" ]; then
    problem "versions.yaml lists $mod twice"
  fi
  want_version[$mod]=$version
  if [ -z "${dir_of[$mod]:-}" ]; then
    problem "versions.yaml lists $mod, which is not a module of this repository"
  fi
  if [ "$version" != excluded ]; then
    if ! [[ $version =~ $semver ]]; then
      problem "versions.yaml: $mod at $version, which is not a semantic version vMAJOR.MINOR.PATCH"
    elif major=${version#v} major=${major%%.*}; [ "$major" -ge 2 ] && [[ $mod != */v"$major" ]]; then
      problem "versions.yaml: $mod at $version needs the major version suffix /v$major in its module path"
    fi
  fi
done <<<"$entries"
for mod in "${!dir_of[@]}"; do
  if [ -z "${want_version[$mod]:-}" ]; then
    problem "module $mod (${dir_of[$mod]}/go.mod) is missing from versions.yaml: add it to a module set or to excluded-modules"
  fi
done

# Requirements between siblings, and the replace directives that keep
# GOWORK=off builds on the checkout.
for dir in "${!path_of[@]}"; do
  gomod="$dir/go.mod"
  declare -A replaced=()
  while read -r old new; do
    [ -n "$old" ] && replaced[$old]=$new
  done < <(gomod_replaces "$gomod")
  while read -r req version; do
    [ -n "${dir_of[$req]:-}" ] || continue
    want=${want_version[$req]:-}
    if [ "$want" = excluded ]; then
      problem "$gomod requires $req, which versions.yaml excludes from releases"
    elif [ -n "$want" ] && [ "$version" != "$want" ]; then
      problem "$gomod requires $req $version, but versions.yaml releases it at $want"
    fi
    target=${replaced[$req]:-}
    if [ -z "$target" ]; then
      problem "$gomod requires $req without replacing it with ${dir_of[$req]} (GOWORK=off builds would use a published version)"
    elif [ "$(realpath -m --relative-to=. "$dir/$target")" != "${dir_of[$req]}" ]; then
      problem "$gomod replaces $req with $target, which is not that module's directory ${dir_of[$req]}"
    fi
  done < <(gomod_requires "$gomod")
  unset replaced
done

# The workspace: every module in the root go.work, or in a go.work of its
# own that uses only it.
use_dirs() { go work edit -json "$1" | sed -n 's/^.*"DiskPath": "\(.*\)".*$/\1/p' | sed 's#^\./##'; }
workspace=" $(use_dirs go.work | tr '\n' ' ')"
for dir in "${!path_of[@]}"; do
  [[ $workspace == *" $dir "* ]] && continue
  if [ -f "$dir/go.work" ]; then
    own=$(use_dirs "$dir/go.work" | tr '\n' ' ')
    [ "$own" = ". " ] || problem "$dir/go.work uses $own, want only its own module (.)"
  else
    problem "module ${path_of[$dir]} is not in go.work: add \`use ./$dir\` (or give it a go.work of its own, as examples/pipeline has)"
  fi
done

# The version the library reports as its instrumentation scope version.
constant=$(sed -n 's/^const Version = "\(.*\)"$/\1/p' internal/version/version.go)
case "${want_version[$root]:-}" in
  "" | excluded) problem "versions.yaml does not release the root module $root" ;;
  "v$constant") ;;
  *) problem "internal/version.Version is \"$constant\", but versions.yaml releases $root at ${want_version[$root]}" ;;
esac

# The versions README.md tells users to go get.
if [ -f README.md ]; then
  while read -r mod version; do
    [ -n "$mod" ] || continue
    want=${want_version[$mod]:-}
    if [ -z "$want" ] || [ "$want" = excluded ]; then
      problem "README.md: go get $mod@$version, but versions.yaml releases no module $mod"
    elif [ "$version" != "$want" ]; then
      problem "README.md: go get $mod@$version, but versions.yaml releases it at $want"
    fi
  done < <(grep -o "go get $root[^ @\`]*@v[^ \`]*" README.md | sed 's/^go get //; s/@/ /' | sort -u)
fi

if [ "$problems" -gt 0 ]; then
  echo "modules.sh: $problems problem(s)" >&2
  exit 1
fi
if $tags_only; then
  # The root module first: a nested module requires it.
  echo "${want_version[$root]}"
  for dir in $(printf '%s\n' "${!path_of[@]}" | grep -vx '\.' | sort); do
    version=${want_version[${path_of[$dir]}]}
    [ "$version" = excluded ] || echo "$dir/$version"
  done
  exit 0
fi
echo "modules.sh: ${#path_of[@]} modules agree with versions.yaml"
$static_only && exit 0

tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

# The self-test. Each case gets a fresh git repository holding copies of the
# files the static checks read, applies its mutation there and runs this
# script's static checks on it.
ver=${want_version[$root]}
cases=0
selftest() {
  local name=$1 want=$2 mutation=$3 copy="$tmp/selftest$cases" out rc=0
  cases=$((cases + 1))
  mkdir -p "$copy/.ci" "$copy/internal/version"
  cp "$self" "$copy/.ci/modules.sh"
  cp versions.yaml go.work README.md "$copy/"
  cp internal/version/version.go "$copy/internal/version/"
  for dir in "${!path_of[@]}"; do
    mkdir -p "$copy/$dir" && cp "$dir/go.mod" "$copy/$dir/go.mod"
    if [ "$dir" != . ] && [ -f "$dir/go.work" ]; then cp "$dir/go.work" "$copy/$dir/go.work"; fi
  done
  git -C "$copy" init -q && git -C "$copy" add -A
  if ! (cd "$copy" && eval "$mutation"); then
    echo "modules.sh: self-test \"$name\": the mutation failed" >&2
    exit 1
  fi
  out=$(bash "$copy/.ci/modules.sh" -static 2>&1) || rc=$?
  if [ -z "$want" ] && [ "$rc" -eq 0 ]; then return; fi
  if [ -n "$want" ] && [ "$rc" -ne 0 ] && grep -qF -- "$want" <<<"$out"; then return; fi
  echo "modules.sh: self-test \"$name\": exit status $rc, want ${want:+a failure saying: }${want:-success}; output:" >&2
  echo "$out" >&2
  exit 1
}
selftest "the repository as it is" "" ":"
selftest "a nested module requires the root at v0.0.0" \
  "keyspace/boltstore/go.mod requires $root v0.0.0, but versions.yaml releases it at $ver" \
  "sed -i 's#^\(\s*$root\) $ver\$#\1 v0.0.0#' keyspace/boltstore/go.mod"
selftest "a sibling required at another version" \
  "examples/go.mod requires $root/keyspace/pgstore v9.9.9, but versions.yaml releases it at $ver" \
  "sed -i 's#^\(\s*$root/keyspace/pgstore\) $ver\$#\1 v9.9.9#' examples/go.mod"
selftest "a single-line require of a sibling" \
  "keyspace/pgstore/go.mod requires $root/keyspace/boltstore v0.0.1, but" \
  "printf 'require $root/keyspace/boltstore v0.0.1 // indirect\nreplace $root/keyspace/boltstore => ../boltstore\n' >>keyspace/pgstore/go.mod"
selftest "internal/version disagrees" \
  "internal/version.Version is \"9.9.9\", but versions.yaml releases $root at $ver" \
  "sed -i 's/^const Version = .*/const Version = \"9.9.9\"/' internal/version/version.go"
selftest "a module missing from versions.yaml" \
  "module $root/keyspace/pgstore (keyspace/pgstore/go.mod) is missing from versions.yaml" \
  "sed -i '\#^ *- $root/keyspace/pgstore\$#d' versions.yaml"
selftest "a new module, not yet committed" \
  "module $root/tools (tools/go.mod) is missing from versions.yaml" \
  "mkdir tools && printf 'module $root/tools\n\ngo 1.26.0\n' >tools/go.mod"
selftest "versions.yaml lists a module that does not exist" \
  "versions.yaml lists $root/nosuch, which is not a module of this repository" \
  "sed -i 's#^\( *- \)$root\$#&\n\1$root/nosuch#' versions.yaml"
selftest "a version without v" "at ${ver#v}, which is not a semantic version" \
  "sed -i 's/^\( *version: \)v/\1/' versions.yaml"
selftest "v2 without the module path suffix" "at v2.0.0 needs the major version suffix /v2" \
  "sed -i 's/^\( *version: \).*/\1v2.0.0/' versions.yaml"
selftest "a sibling required without replace" \
  "keyspace/boltstore/go.mod requires $root without replacing it with ." \
  "sed -i '/^replace/d' keyspace/boltstore/go.mod"
selftest "a sibling replaced by the wrong directory" \
  "examples/go.mod replaces $root/keyspace/pgstore with ../keyspace/boltstore, which is not that module's directory" \
  "sed -i 's#pgstore => \.\./keyspace/pgstore#pgstore => ../keyspace/boltstore#' examples/go.mod"
selftest "a module path that does not match its directory" \
  "keyspace/boltstore/go.mod: module $root/boltstore, want $root/keyspace/boltstore" \
  "sed -i 's#^module .*#module $root/boltstore#' keyspace/boltstore/go.mod"
selftest "a module requires an excluded module" \
  "examples/go.mod requires $root/internal/exporttest, which versions.yaml excludes from releases" \
  "printf 'require $root/internal/exporttest $ver\nreplace $root/internal/exporttest => ../internal/exporttest\n' >>examples/go.mod"
selftest "a module listed twice" "versions.yaml lists $root/examples twice" \
  "printf '  - $root/examples\n' >>versions.yaml"
selftest "a line versions.yaml does not define" "versions.yaml: line" \
  "sed -i 's/^module-sets:/&\n  what is this/' versions.yaml"
selftest "a module outside every workspace" \
  "module $root/keyspace/pgstore is not in go.work: add \`use ./keyspace/pgstore\`" \
  "go work edit -dropuse=./keyspace/pgstore go.work"
selftest "a module's own go.work that uses another module" \
  "examples/pipeline/go.work uses . .. , want only its own module" \
  "go work edit -use=.. examples/pipeline/go.work"
selftest "README.md tells users to go get another version" \
  "README.md: go get $root@v0.0.9, but versions.yaml releases it at $ver" \
  "printf 'go get $root@v0.0.9\n' >>README.md"
selftest "README.md tells users to go get a module that is not released" \
  "README.md: go get $root/internal/exporttest@$ver, but versions.yaml releases no module" \
  "printf 'go get $root/internal/exporttest@$ver\n' >>README.md"
echo "modules.sh: self-test: each of $((cases - 1)) broken copies fails with its message"

# The consumer check. The proxy serves each released module at HEAD, zipped
# as the go command zips a tagged module (without its nested modules); then
# the real module cache's downloads and the configured proxy for the rest.
stamp=$(git log -1 --format=%cI HEAD)
released=()
imports=()
declare -A imports_of
for dir in $(printf '%s\n' "${!path_of[@]}" | sort); do
  mod=${path_of[$dir]}
  version=${want_version[$mod]:-excluded}
  [ "$version" != excluded ] || continue
  released+=("$mod@$version")
  at="$tmp/proxy/$(sed 's/[A-Z]/!\L&/g' <<<"$mod")/@v"
  mkdir -p "$at"
  echo "$version" >>"$at/list"
  printf '{"Version":"%s","Time":"%s"}\n' "$version" "$stamp" >"$at/$version.info"
  tree="HEAD:"; [ "$dir" = . ] || tree="HEAD:$dir"
  gomod=go.mod; [ "$dir" = . ] || gomod="$dir/go.mod"
  git show "HEAD:$gomod" >"$at/$version.mod"
  nested=()
  for other in "${!path_of[@]}"; do
    [ "$other" != "$dir" ] || continue
    if [ "$dir" = . ]; then nested+=(":(exclude)$other")
    elif [[ $other == "$dir"/* ]]; then nested+=(":(exclude)${other#"$dir"/}")
    fi
  done
  git archive --format=zip --prefix="$mod@$version/" -o "$at/$version.zip" "$tree" -- . "${nested[@]}"
  # The packages a consumer can import: not main, not internal.
  while read -r pkg; do
    [ -n "$pkg" ] && imports+=("$pkg") && imports_of[$dir]+="$pkg "
  done < <(env -C "$dir" GOWORK=off go list -f '{{if ne .Name "main"}}{{.ImportPath}}{{end}}' ./... | grep -v -e '/internal/' -e '/internal$' || true)
done

# The proxies after ours: the real module cache's downloads, then the
# configured proxy without "direct" (a module that is missing must fail here,
# not be looked for in version control).
upstream=$(go env GOPROXY | tr ',|' '\n\n' | grep -v -x -e direct -e off | paste -sd, -)
proxy="file://$tmp/proxy,file://$(go env GOMODCACHE)/cache/download${upstream:+,$upstream}"

# consumer DIR ARGS... runs a go command in the consumer module DIR, quietly
# unless it fails. PROXY (default: ours first) says where modules come from.
consumer() {
  local dir=$1; shift
  if ! env -C "$dir" GOWORK=off GOFLAGS=-modcacherw GOTOOLCHAIN=local \
    GOMODCACHE="$tmp/modcache" GONOSUMDB="$root" GOPROXY="${PROXY:-$proxy}" \
    "$@" >"$tmp/log" 2>&1; then
    cat "$tmp/log" >&2
    echo "modules.sh: in a consumer, \`$*\` failed" >&2
    exit 1
  fi
}

# writemain DIR PKG... writes a command in DIR that imports the packages.
writemain() {
  local dir=$1; shift
  {
    echo "// Command consumer imports packages of aionotel."
    echo "package main"
    echo
    echo "import ("
    printf '\t_ "%s"\n' "$@"
    echo ")"
    echo
    echo "func main() {}"
  } >"$dir/main.go"
}

# Each released module on its own, as a user gets it.
n=0
for release in "${released[@]}"; do
  n=$((n + 1))
  mkdir "$tmp/consumer$n"
  consumer "$tmp/consumer$n" go mod init example.com/consumer
  consumer "$tmp/consumer$n" go get "$release"
  echo "modules.sh: a consumer can go get $release"
done

# Then all of them together, building every importable package.
mkdir "$tmp/consumer"
writemain "$tmp/consumer" "${imports[@]}"
consumer "$tmp/consumer" go mod init example.com/consumer
consumer "$tmp/consumer" go get "${released[@]}"
consumer "$tmp/consumer" go mod tidy
consumer "$tmp/consumer" go build ./...
consumer "$tmp/consumer" go list -m -f '{{.Version}}' "$root"
got=$(cat "$tmp/log")
if [ "$got" != "${want_version[$root]}" ]; then
  echo "modules.sh: the consumer's build uses $root $got, want ${want_version[$root]}" >&2
  exit 1
fi
echo "modules.sh: a consumer builds the ${#imports[@]} importable packages of the released modules, without replace or go.work"

# The clone check: what README.md says works before any release, its install
# commands as written (.ci/readme.sh runs them), in a new module whose
# directory has the working tree beside it as ../aionotel. The proxies are
# the real ones, without ours: nothing of aionotel may come from a proxy.
# The module's program is README.md's first Go block, as a reader pastes
# it; a second file imports every package of the root module and of the
# backend the install commands add.
mkdir -p "$tmp/beside/app"
ln -s "$PWD" "$tmp/beside/aionotel"
awk '/^```go[ \t]*$/ && !done { inblock = 1; next } inblock && /^```[ \t]*$/ { inblock = 0; done = 1 } inblock' README.md >"$tmp/beside/app/main.go"
if ! grep -q '^func main()' "$tmp/beside/app/main.go"; then
  echo "modules.sh: README.md's first Go block is not a program (no func main)" >&2
  exit 1
fi
{
  echo "package main"
  echo
  echo "import ("
  # shellcheck disable=SC2086 # the lists are space-separated import paths
  printf '\t_ "%s"\n' ${imports_of[.]} ${imports_of[keyspace/boltstore]}
  echo ")"
} >"$tmp/beside/app/imports.go"
PROXY="file://$(go env GOMODCACHE)/cache/download${upstream:+,$upstream}"
consumer "$tmp/beside/app" go mod init example.com/app
consumer "$tmp/beside/app" bash "$PWD/.ci/readme.sh" -C "$tmp/beside/app" install install-backend
consumer "$tmp/beside/app" go mod tidy
consumer "$tmp/beside/app" go build ./...
echo "modules.sh: a new module builds on the checkout through README.md's install commands"
# Run it: it prints every instrument examples/quickstart/README.md lists
# (the quickstart is the same program, byte for byte, and its tests check
# the values).
consumer "$tmp/beside/app" go run .
missing=()
for name in $(sed -n 's/^- `\([a-z_.]*\)`.*/\1/p' examples/quickstart/README.md); do
  grep -q "\"Name\":\"$name\"" "$tmp/log" || missing+=("$name")
done
for name in append "workflow greeting" "activity send_email"; do # its spans
  grep -q "\"Name\":\"$name\"" "$tmp/log" || missing+=("span $name")
done
if [ ${#missing[@]} -gt 0 ] || ! grep -q '"Name":"aion\.' "$tmp/log"; then
  cat "$tmp/log" >&2
  echo "modules.sh: README.md's program, in a new module, did not print ${missing[*]:-any aion. instrument}" >&2
  exit 1
fi
echo "modules.sh: README.md's program runs in a new module and prints the instruments examples/quickstart/README.md lists"

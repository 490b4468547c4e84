#!/usr/bin/env bash
# .ci/readme.sh: runs README.md's commands exactly as the README gives them,
# so that the README cannot drift from what works.
#
# A command is a fenced ```sh block right after a marker line
#
#   <!-- ci: NAME -->
#
# (an HTML comment: invisible where the README is rendered). Each block runs
# on its own in `bash -euxo pipefail` (every command is echoed), from the
# repository root unless -C says where, with the caller's environment: CI
# adds GOFLAGS, CI=true and the like, never other commands.
#
#   .ci/readme.sh NAME...         run the named blocks, in the order given
#   .ci/readme.sh -C DIR NAME...  run them in DIR
#   .ci/readme.sh -print NAME     print a block
#   .ci/readme.sh -list           print the names, in README order
#   .ci/readme.sh -selftest       check this script on broken READMEs
#
# A marker not followed by a ```sh block, a name marked twice or a name the
# README does not mark is an error, as is a failing block.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
readme="${AIONOTEL_README:-$root/README.md}" # another file: for -selftest

usage() {
  echo "usage: $0 [-C DIR] NAME... | -print NAME | -list" >&2
  exit 2
}

# blocks prints every marked block of README.md as "NAME<TAB>LINE" for its
# marker, then the block's lines each prefixed by "NAME<TAB>|", and fails
# on a malformed or duplicate marker.
blocks() {
  awk '
    function fail(msg) { printf "README.md:%d: %s\n", NR, msg > "/dev/stderr"; bad = 1 }
    match($0, /^<!-- ci: [A-Za-z0-9_-]+ -->[ \t]*$/) {
      if (name != "") fail("marker " name " is not followed by a ```sh block")
      name = $3
      if (name in seen) fail("block " name " is marked twice")
      seen[name] = 1
      printf "%s\t%d\n", name, NR
      next
    }
    name != "" && !inblock {
      if ($0 ~ /^```(sh|bash)[ \t]*$/) { inblock = 1; next }
      fail("marker " name " is not followed by a ```sh block"); name = ""; next
    }
    inblock && /^```[ \t]*$/ { inblock = 0; name = ""; next }
    inblock { printf "%s\t|%s\n", name, $0 }
    END {
      if (inblock) { printf "README.md: block %s is not closed\n", name > "/dev/stderr"; bad = 1 }
      else if (name != "") { printf "README.md: marker %s is not followed by a ```sh block\n", name > "/dev/stderr"; bad = 1 }
      exit bad
    }' "$readme"
}

# block prints the body of the block NAME.
block() {
  local all
  all=$(blocks) || exit 1
  if ! awk -F'\t' -v n="$1" '$1 == n && $2 !~ /^\|/ { found = 1 } END { exit !found }' <<<"$all"; then
    echo "readme.sh: README.md marks no block $1 (have: $(awk -F'\t' '$2 !~ /^\|/ { printf "%s ", $1 }' <<<"$all"))" >&2
    exit 1
  fi
  awk -F'\t' -v n="$1" '$1 == n && $2 ~ /^\|/ { sub(/^[^\t]*\t\|/, ""); print }' <<<"$all"
}

# selftest runs this script on small READMEs, each broken in one way (or
# not), and expects the exit status and message each case names.
selftest() {
  local tmp fence='```' cases=0
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  expect() { # NAME WANT-STATUS WANT-OUTPUT README-TEXT ARGS...
    local name=$1 want_rc=$2 want=$3 text=$4 out rc=0
    shift 4
    cases=$((cases + 1))
    printf '%s\n' "$text" >"$tmp/README.md"
    out=$(AIONOTEL_README="$tmp/README.md" bash "${BASH_SOURCE[0]}" "$@" 2>&1) || rc=$?
    if [ "$rc" -ne "$want_rc" ] || [[ $out != *"$want"* ]]; then
      echo "readme.sh: self-test \"$name\": exit $rc, want $want_rc and output containing \"$want\"; output:" >&2
      echo "$out" >&2
      exit 1
    fi
  }
  local good="text
<!-- ci: a -->
${fence}sh
echo one two
${fence}

<!-- ci: b -->
${fence}sh
echo \"\$PWD\" >where
false
echo never
${fence}"
  expect "print a block" 0 "echo one two" "$good" -print a
  expect "list" 0 "a
b" "$good" -list
  expect "run a block" 0 "one two" "$good" a
  expect "a failing command fails the block" 1 "+ false" "$good" -C "$tmp" b
  [ "$(cat "$tmp/where")" = "$tmp" ] || { echo "readme.sh: self-test: -C did not run the block in its directory" >&2; exit 1; }
  expect "an unknown name, before anything runs" 1 "marks no block c (have: a b" "$good" a c
  expect "a marker without a block" 1 "marker x is not followed by a ${fence}sh block" "<!-- ci: x -->
text" -list
  expect "a marker at the end" 1 "marker x is not followed by a ${fence}sh block" "<!-- ci: x -->" -list
  expect "a block of another language" 1 "marker x is not followed by a ${fence}sh block" "<!-- ci: x -->
${fence}go
${fence}" -list
  expect "a name marked twice" 1 "block a is marked twice" "$good
<!-- ci: a -->
${fence}sh
${fence}" -list
  expect "a block not closed" 1 "block x is not closed" "<!-- ci: x -->
${fence}sh
echo" -list
  echo "readme.sh: self-test: $cases cases"
}

dir="$root"
case "${1:-}" in
  "") usage ;;
  -selftest)
    selftest
    exit 0
    ;;
  -list)
    [ $# -eq 1 ] || usage
    blocks | awk -F'\t' '$2 !~ /^\|/ { print $1 }'
    exit 0
    ;;
  -print)
    [ $# -eq 2 ] || usage
    block "$2"
    exit 0
    ;;
  -C)
    [ $# -ge 3 ] || usage
    dir=$2
    shift 2
    ;;
esac

# Every name is looked up before the first block runs, so a typo fails at
# once rather than after minutes of building.
declare -a bodies
for name in "$@"; do
  bodies+=("$(block "$name")")
done
i=0
for name in "$@"; do
  echo "readme.sh: README block $name, in $dir:"
  (cd "$dir" && bash -euxo pipefail -c "${bodies[$i]}")
  i=$((i + 1))
done

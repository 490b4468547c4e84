#!/usr/bin/env bash
# .ci/readme.sh: runs the commands of the repository's Markdown pages
# exactly as the pages give them, so that the pages cannot drift from what
# works. The pages are README.md, CONTRIBUTING.md, RELEASING.md and every
# README.md below the root (an example's own README, a module's): what the
# front page gave up to them keeps its check.
#
# A command is a fenced ```sh block right after a marker line
#
#   <!-- ci: NAME -->
#
# (an HTML comment: invisible where the page is rendered). A name is
# unique across the pages. Each block runs on its own in
# `bash -euxo pipefail` (every command is echoed), from the repository root
# (whichever page holds it) unless -C says where, with the caller's
# environment: CI adds GOFLAGS, CI=true and the like, never other commands.
#
#   .ci/readme.sh NAME...         run the named blocks, in the order given
#   .ci/readme.sh -C DIR NAME...  run them in DIR
#   .ci/readme.sh -print NAME     print a block
#   .ci/readme.sh -list           print the names, in page order, with their page
#   .ci/readme.sh -links          check that every relative link of the pages
#                                 names a file or directory of the repository
#   .ci/readme.sh -selftest       check this script on broken pages
#
# A marker not followed by a ```sh block, a name marked twice or a name no
# page marks is an error, as is a failing block.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The pages, front page first; AIONOTEL_README names other files instead,
# separated by colons (for -selftest).
pages() {
  if [ -n "${AIONOTEL_README:-}" ]; then
    tr ':' '\n' <<<"$AIONOTEL_README"
    return
  fi
  echo "$root/README.md"
  for page in CONTRIBUTING.md RELEASING.md; do
    [ ! -f "$root/$page" ] || echo "$root/$page"
  done
  git -C "$root" ls-files --cached --others --exclude-standard -- '*/README.md' | sort | sed "s#^#$root/#" |
    while read -r page; do [ ! -f "$page" ] || echo "$page"; done
}

usage() {
  echo "usage: $0 [-C DIR] NAME... | -print NAME | -list | -links | -selftest" >&2
  exit 2
}

# blocks prints every marked block of the pages as "NAME<TAB>PAGE:LINE" for
# its marker, then the block's lines each prefixed by "NAME<TAB>|", and
# fails on a malformed or duplicate marker.
blocks() {
  local files
  mapfile -t files < <(pages)
  awk -v root="$root/" '
    function where() { f = FILENAME; if (index(f, root) == 1) f = substr(f, length(root) + 1); return f ":" FNR }
    function fail(msg) { printf "%s: %s\n", where(), msg > "/dev/stderr"; bad = 1 }
    function unclosed(file) {
      if (inblock) { printf "%s: block %s is not closed\n", file, name > "/dev/stderr"; bad = 1 }
      else if (name != "") { printf "%s: marker %s is not followed by a ```sh block\n", file, name > "/dev/stderr"; bad = 1 }
      inblock = 0; name = ""
    }
    FNR == 1 && NR > 1 { unclosed(prev) }
    { prev = FILENAME }
    match($0, /^<!-- ci: [A-Za-z0-9_-]+ -->[ \t]*$/) {
      if (name != "") fail("marker " name " is not followed by a ```sh block")
      name = $3
      if (name in seen) fail("block " name " is marked twice (first at " seen[name] ")")
      seen[name] = where()
      printf "%s\t%s\n", name, where()
      next
    }
    name != "" && !inblock {
      if ($0 ~ /^```(sh|bash)[ \t]*$/) { inblock = 1; next }
      fail("marker " name " is not followed by a ```sh block"); name = ""; next
    }
    inblock && /^```[ \t]*$/ { inblock = 0; name = ""; next }
    inblock { printf "%s\t|%s\n", name, $0 }
    END {
      unclosed(prev)
      exit bad
    }' "${files[@]}"
}

# links checks every relative Markdown link of the pages, [text](target),
# against the working tree: the target (without its #fragment) must exist
# beside the page. Links with a scheme, and bare #fragments, are not
# checked.
links() {
  local page target dir bad=0 n=0
  while read -r page; do
    dir=$(dirname "$page")
    while read -r target; do
      target=${target%%#*}
      [ -n "$target" ] || continue
      n=$((n + 1))
      if [ ! -e "$dir/$target" ]; then
        echo "readme.sh: ${page#"$root"/}: the link ($target) names nothing in the repository" >&2
        bad=1
      fi
    done < <(grep -o '\](\([^)]*\))' "$page" | sed 's/^](//; s/)$//; s/ .*//' | grep -v -E '^[a-z][a-z0-9+.-]*:|^#' || true)
  done < <(pages)
  [ "$bad" -eq 0 ] || return 1
  echo "readme.sh: $n relative links resolve"
}

# block prints the body of the block NAME.
block() {
  local all
  all=$(blocks) || exit 1
  if ! awk -F'\t' -v n="$1" '$1 == n && $2 !~ /^\|/ { found = 1 } END { exit !found }' <<<"$all"; then
    echo "readme.sh: no page marks a block $1 (have: $(awk -F'\t' '$2 !~ /^\|/ { printf "%s ", $1 }' <<<"$all"))" >&2
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
  # The second page, for the cases that need two (none when empty).
  local second=""
  expect() { # NAME WANT-STATUS WANT-OUTPUT README-TEXT ARGS...
    local name=$1 want_rc=$2 want=$3 text=$4 out rc=0 files="$tmp/README.md"
    shift 4
    cases=$((cases + 1))
    printf '%s\n' "$text" >"$tmp/README.md"
    if [ -n "$second" ]; then
      mkdir -p "$tmp/sub" && printf '%s\n' "$second" >"$tmp/sub/README.md"
      files="$files:$tmp/sub/README.md"
    fi
    out=$(AIONOTEL_README="$files" bash "${BASH_SOURCE[0]}" "$@" 2>&1) || rc=$?
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
  expect "list" 0 "README.md:7" "$good" -list
  expect "run a block" 0 "one two" "$good" a
  expect "a failing command fails the block" 1 "+ false" "$good" -C "$tmp" b
  [ "$(cat "$tmp/where")" = "$tmp" ] || { echo "readme.sh: self-test: -C did not run the block in its directory" >&2; exit 1; }
  expect "an unknown name, before anything runs" 1 "no page marks a block c (have: a b" "$good" a c
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
  second="<!-- ci: c -->
${fence}sh
echo from the second page
${fence}"
  expect "a block of a second page" 0 "from the second page" "$good" c
  expect "a second page listed after the first" 0 "sub/README.md:1" "$good" -list
  second="<!-- ci: a -->
${fence}sh
${fence}"
  expect "a name marked in two pages" 1 "block a is marked twice (first at" "$good" -list
  second="text"
  expect "a marker at the end of a page that is not the last" 1 "marker x is not followed by a ${fence}sh block" "<!-- ci: x -->" -list
  expect "a block left open at the end of a page" 1 "block x is not closed" "<!-- ci: x -->
${fence}sh" -list
  second="[there](../nothing-here.md) and [a site](https://example.com) and [up](#top)"
  expect "a link to nothing" 1 "the link (../nothing-here.md) names nothing" "$good" -links
  second="[the page above](../README.md#a) and [a site](https://example.com)"
  expect "links that resolve" 0 "1 relative links resolve" "$good" -links
  second=""
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
    blocks | awk -F'\t' '$2 !~ /^\|/ { print $1 "\t" $2 }'
    exit 0
    ;;
  -links)
    [ $# -eq 1 ] || usage
    links
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

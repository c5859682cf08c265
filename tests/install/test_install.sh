#!/usr/bin/env bash
# The installed program, as a user gets it: `cmake --install` into a staging prefix, the tree then
# moved elsewhere (the GUI finds its demo relative to its executable), and from there:
#   - the installed CLI runs on the installed demo;
#   - mumoe-studio --help and --version work with no display at all;
#   - the desktop entry and AppStream metainfo validate (desktop-file-validate, appstreamcli;
#     skipped with a message where the tool is missing — scripts/setup.sh installs both);
#   - the manual pages render without warnings and name every CLI subcommand;
#   - bash completion completes subcommands, options and option values.
#
#   tests/install/test_install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
check() { local what=$1; shift; if "$@"; then echo "ok: $what"; else fail "$what"; fi; }

cmake --install "$build" --prefix "$work/stage/usr" >/dev/null
mv "$work/stage/usr" "$work/moved"
prefix=$work/moved
for f in bin/mumoe bin/mumoe-studio share/mumoe-studio/demo/demo.mumoe.safetensors \
         share/mumoe-studio/demo/vit-blocks-fmnist.mumoe.safetensors \
         share/applications/org.mumoe.Studio.desktop share/metainfo/org.mumoe.Studio.metainfo.xml \
         share/icons/hicolor/scalable/apps/org.mumoe.Studio.svg share/mime/packages/org.mumoe.Studio.mime.xml \
         share/man/man1/mumoe.1.gz share/man/man1/mumoe-studio.1.gz \
         share/bash-completion/completions/mumoe share/bash-completion/completions/mumoe-studio; do
  check "installed $f" test -e "$prefix/$f"
done

# The CLI on the installed demo.
demo=$prefix/share/mumoe-studio/demo/demo.mumoe.safetensors
info=$("$prefix/bin/mumoe" info "$demo" --json)
check "installed mumoe reads the installed demo" grep -q '"layers"' <<<"$info"
check "mumoe --version" grep -qx '[0-9.]*' <<<"$("$prefix/bin/mumoe" --version)"
check "mumoe help ablate" grep -q -- '--experts' <<<"$("$prefix/bin/mumoe" help ablate)"
for sub in $("$prefix/bin/mumoe" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }'); do
  [[ $sub == cache ]] && sub="cache check"  # cache's and slurm's work is in their subcommands
  [[ $sub == slurm ]] && sub="slurm analyze"
  check "mumoe $sub takes --quiet" grep -q -- '--quiet' <<<"$("$prefix/bin/mumoe" $sub --help)"
done

# The GUI's text-only options with no display whatsoever.
nodisplay=(env -u DISPLAY -u WAYLAND_DISPLAY -u QT_QPA_PLATFORM)
help=$("${nodisplay[@]}" "$prefix/bin/mumoe-studio" --help 2>&1) || fail "mumoe-studio --help exited with $?"
check "mumoe-studio --help without a display" grep -q -- '--layer' <<<"$help"
# (Qt wraps the help at 80 columns, inside the path too: joined again here.)
check "mumoe-studio --help names the relocated demo" grep -qF "$demo" <<<"$(tr -d '\n ' <<<"$help")"
version=$("${nodisplay[@]}" "$prefix/bin/mumoe-studio" --version 2>&1) || fail "mumoe-studio --version exited with $?"
check "mumoe-studio --version without a display" grep -q 'mumoe-studio [0-9]' <<<"$version"

# Desktop integration files.
if command -v desktop-file-validate >/dev/null; then
  check "desktop-file-validate" desktop-file-validate "$prefix/share/applications/org.mumoe.Studio.desktop"
else
  echo "skipped: desktop-file-validate is not installed (package desktop-file-utils; scripts/setup.sh installs it)"
fi
if command -v appstreamcli >/dev/null; then
  check "appstreamcli validate" appstreamcli validate --no-net "$prefix/share/metainfo/org.mumoe.Studio.metainfo.xml"
else
  echo "skipped: appstreamcli is not installed (package appstream; scripts/setup.sh installs it)"
fi

# Manual pages: no groff warnings, every subcommand documented.
if command -v man >/dev/null; then
  for page in mumoe mumoe-studio; do
    warnings=$(MANWIDTH=80 man --warnings -l "$prefix/share/man/man1/$page.1.gz" 2>&1 >/dev/null || true)
    check "man $page renders without warnings" test -z "$warnings"
  done
fi
while read -r sub; do
  check "mumoe.1 documents $sub" zgrep -qx "\.B $sub" "$prefix/share/man/man1/mumoe.1.gz"
done < <("$prefix/bin/mumoe" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 }')

# Bash completion, as bash calls it.
complete_line() {  # WORDS…: prints COMPREPLY for the last word
  PATH="$prefix/bin:$PATH" bash -c '
    . "$1/share/bash-completion/completions/mumoe"; shift
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    if [[ $1 == mumoe-studio ]]; then _mumoe_studio; else _mumoe; fi
    echo "${COMPREPLY[*]}"' _ "$prefix" "$@"
}
check "completion: mumoe ab → ablate" test "$(complete_line mumoe ab)" = ablate
check "completion: mumoe help ga → gallery" test "$(complete_line mumoe help ga)" = gallery
check "completion: mumoe ablate --al → --all" test "$(complete_line mumoe ablate --al)" = --all
check "completion: mumoe gallery --order '' → random top" test "$(complete_line mumoe gallery --order '')" = "random top"
check "completion: mumoe-studio --lay → --layer" test "$(complete_line mumoe-studio --lay)" = --layer

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "install tree: all checks passed"

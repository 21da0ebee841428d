#!/bin/sh
# Style gate: clang-format in dry-run mode over every C file, a grep for banned calls, no
# assignment inside an if condition (scripts/cond-assign.py), and clang-tidy (.clang-tidy:
# braces, misleading bodies, names) over every C file the build compiles.
# An exception to the banned-call list carries /* lint-ok: reason */ on the same line.
# Usage: scripts/check-style.sh [BUILD_DIR]   (compile_commands.json for clang-tidy; default build)
set -u
build=${1:+$(realpath "$1" 2>/dev/null || echo "$1")}
cd "$(dirname "$0")/.."
build=${build:-build}
rc=0
files=$(git ls-files '*.c' '*.h')
fmt=$(command -v clang-format || command -v clang-format-14 || true)
if [ -n "$fmt" ]; then
    # shellcheck disable=SC2086
    if ! $fmt --dry-run -Werror $files; then
        echo "check-style: clang-format differences (run: clang-format -i <file>)" >&2
        rc=1
    fi
else
    echo "check-style: clang-format not found; skipping the format check" >&2
fi
banned='\b(sprintf|strcpy|strcat|strtok|gets|atoi|atol|atof|rand|system)[[:space:]]*\('
# shellcheck disable=SC2086
hits=$(grep -nE "$banned" $files | grep -v 'lint-ok:' || true)
if [ -n "$hits" ]; then
    echo "check-style: banned calls:" >&2
    echo "$hits" >&2
    rc=1
fi
if ! python3 scripts/cond-assign.py $files; then
    echo "check-style: assignments inside if conditions" >&2
    rc=1
fi
tidy=$(command -v clang-tidy || command -v clang-tidy-14 || true)
if [ -z "$tidy" ]; then
    echo "check-style: clang-tidy not found; skipping the clang-tidy pass (scripts/deps.sh)" >&2
elif [ ! -f "$build/compile_commands.json" ]; then
    echo "check-style: no $build/compile_commands.json; skipping clang-tidy (meson setup first)" >&2
else
    # The C files both git and the build know (a file only some builds compile is skipped).
    tidy_files=$(python3 - "$build/compile_commands.json" $files <<'PY'
import json, os, sys
known = {os.path.realpath(os.path.join(e["directory"], e["file"])) for e in json.load(open(sys.argv[1]))}
print("\n".join(f for f in sys.argv[2:] if f.endswith(".c") and os.path.realpath(f) in known))
PY
)
    # shellcheck disable=SC2086
    out=$(printf '%s\n' $tidy_files | xargs -P "$(nproc)" -n 8 "$tidy" -p "$build" --quiet 2>/dev/null)
    if [ $? -ne 0 ] || [ -n "$out" ]; then
        printf '%s\n' "$out" | grep -E 'warning:|error:' | sort -u >&2
        echo "check-style: clang-tidy findings (.clang-tidy lists the checks)" >&2
        rc=1
    fi
fi
exit $rc

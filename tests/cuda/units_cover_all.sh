#!/usr/bin/env bash
# ctest tstat.cuda.units_cover_all: every unit's filter in units.txt selects at
# least one test of the binary, and the units together select each test
# exactly once (a filter that matched nothing would pass without testing).
#   units_cover_all.sh TEST_BINARY UNITS_TXT
set -euo pipefail
binary="$1"
units="$2"
list() {  # FILTER -> "Suite.test" lines
  "$binary" --gtest_list_tests --gtest_filter="$1" |
    awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}'
}
all="$(list '*' | sort)"
[[ -n "$all" ]] || { echo "FAIL: $binary lists no tests" >&2; exit 1; }
selected=""
while read -r unit filter _; do
  [[ -z "$unit" || "$unit" == \#* ]] && continue
  got="$(list "$filter")"
  [[ -n "$got" ]] || { echo "FAIL: unit $unit: filter '$filter' selects no test" >&2; exit 1; }
  selected+="$got"$'\n'
done < "$units"
selected="$(printf '%s' "$selected" | sed '/^$/d' | sort)"
dup="$(printf '%s\n' "$selected" | uniq -d)"
[[ -z "$dup" ]] || { echo "FAIL: selected by more than one unit: $dup" >&2; exit 1; }
missing="$(comm -23 <(printf '%s\n' "$all") <(printf '%s\n' "$selected"))"
[[ -z "$missing" ]] || { echo "FAIL: in no unit: $missing" >&2; exit 1; }
echo "units_cover_all: $(printf '%s\n' "$all" | wc -l) tests in $(grep -c '^[a-z]' "$units") units"

#!/usr/bin/env bash
# Run the official array-api-tests suite against ember.array_api.
# Usage: tests/array_api/run_array_api_tests.sh PATH/TO/array-api-tests [extra pytest args...]
# The checkout needs its array-api submodule (git submodule update --init) and
# `pip install hypothesis ndindex pytest-json-report pytest-xdist`. MAX_EXAMPLES (default 50) sets
# hypothesis's examples per test; extra arguments go to pytest (e.g. -n 2).
set -euo pipefail
suite=${1:?usage: $0 PATH/TO/array-api-tests [pytest args...]}
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
export ARRAY_API_TESTS_MODULE=ember.array_api
export ARRAY_API_TESTS_VERSION=${ARRAY_API_TESTS_VERSION:-2024.12}
# Ember has no uint16/32/64 and no complex dtypes: the suite skips what the namespace lacks.
export ARRAY_API_TESTS_SKIP_DTYPES=${ARRAY_API_TESTS_SKIP_DTYPES:-uint16,uint32,uint64,complex64,complex128}
python "$here/patch_suite.py" "$suite"  # the suite assumes some complex dtype exists
# xfails.txt gives each id a trailing "# reason"; the suite matches whole lines, so pass it the bare ids.
xfails=$(mktemp)
trap 'rm -f "$xfails"' EXIT
sed -e 's/[[:space:]][[:space:]]*#.*$//' "$here/xfails.txt" > "$xfails"
cd "$suite"
python -m pytest array_api_tests/ -p no:cacheprovider --max-examples "${MAX_EXAMPLES:-50}" \
    --xfails-file "$xfails" -q -rxXfE "$@"

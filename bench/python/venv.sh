#!/usr/bin/env bash
# bench/python/venv.sh: the Python environments of the suite's Python rows, made or brought up to
# date (the driver, bench/cmd/bench, runs it before them; it is idempotent):
#
#   bin/py        the venv `make test-python` builds, by the same commands (the pinned
#                 client/python/requirements-dev.txt, then the client from the tree): the Python
#                 SDK's row (sdkbench.py) runs in it
#   bin/py-bench  bench/python/requirements.txt (LangGraph's Postgres and SQLite savers, pinned),
#                 then the client from the tree: the LangGraph savers' row (lgbench.py), so that
#                 `make test`'s venv stays lean
#
#   bash bench/python/venv.sh [BIN]    # BIN: where the venvs go (default bin)
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=${1:-bin}
pip=(-q --disable-pip-version-check)

python3 -m venv "$bin/py"
"$bin/py/bin/pip" install "${pip[@]}" -r client/python/requirements-dev.txt
"$bin/py/bin/pip" install "${pip[@]}" --force-reinstall --no-deps ./client/python

python3 -m venv "$bin/py-bench"
"$bin/py-bench/bin/pip" install "${pip[@]}" -r bench/python/requirements.txt
"$bin/py-bench/bin/pip" install "${pip[@]}" --force-reinstall --no-deps ./client/python

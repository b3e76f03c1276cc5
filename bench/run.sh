#!/usr/bin/env bash
# bench/run.sh: what `make bench` runs. It installs Baton's peers from
# Debian's packages when they are absent (etcd-server for etcd 3.4,
# postgresql), then runs the suite's driver, which builds batond and the
# peers' program, runs every workload on every system one after the other,
# and writes docs/benchmarks.md, the SVG charts and docs/bench/results.json.
# Before the Python rows (sdk, langgraph) the driver runs
# bench/python/venv.sh, which makes bin/py (as make test-python does) and
# bin/py-bench (bench/python/requirements.txt) when absent.
#
#   bash bench/run.sh            # the full suite (make bench)
#   QUICK=1 bash bench/run.sh    # a short version (make bench QUICK=1)
#   bash bench/run.sh --workloads cas --systems baton,etcd   # any driver flags
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
cmd="make bench"
if [[ -n "${QUICK:-}" && "${QUICK}" != 0 ]]; then
	quick=(--quick)
	cmd="make bench QUICK=1"
fi

need=()
command -v etcd >/dev/null 2>&1 || need+=(etcd-server)
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || need+=(postgresql)
if ((${#need[@]})); then
	sudo=()
	[[ "$(id -u)" -eq 0 ]] || sudo=(sudo)
	echo "bench: installing ${need[*]}" >&2
	"${sudo[@]}" apt-get update -qq
	DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >&2
fi
etcd --version 2>&1 | sed -n 1p >&2

exec go run ./bench/cmd/bench "${quick[@]}" --command "$cmd" "$@"

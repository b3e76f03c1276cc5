#!/bin/sh
# Prints the path of a promtool: the one on PATH, else Debian's prometheus
# package unpacked into bin/tools/prometheus (apt-get download, no daemon
# installed or started). Fails loudly when neither can be had.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
if p=$(command -v promtool 2>/dev/null); then
	echo "$p"
	exit 0
fi
dir=$root/bin/tools/prometheus
if [ -x "$dir/usr/bin/promtool" ]; then
	echo "$dir/usr/bin/promtool"
	exit 0
fi
if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg-deb >/dev/null 2>&1; then
	echo "promtool.sh: no promtool on PATH and no apt-get/dpkg-deb to fetch Debian's: install Prometheus' promtool" >&2
	exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 0755 "$tmp"
cd "$tmp"
if ! apt-get download prometheus >&2; then
	apt-get update >&2
	apt-get download prometheus >&2
fi
mkdir -p "$dir"
dpkg-deb -x "$tmp"/prometheus_*.deb "$dir"
"$dir/usr/bin/promtool" --version >&2
echo "$dir/usr/bin/promtool"

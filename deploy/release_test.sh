#!/bin/sh
# make test-release: deploy/release.sh for one cross-compiled platform
# (darwin/arm64; all four take minutes, so make release is not in make
# test), checked: the archive's files, SHA256SUMS, static binaries for
# that platform with the version stamped, and a refused VERSION.
set -eu
GO=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test-release: FAIL: $*" >&2; exit 1; }

if VERSION=dev OUT="$tmp/bad" sh deploy/release.sh >"$tmp/bad.log" 2>&1; then
	fail "VERSION=dev was accepted"
fi
grep -q "must be a semantic version" "$tmp/bad.log" || fail "VERSION=dev refused without saying why: $(cat "$tmp/bad.log")"

VERSION=v0.0.0-test OUT="$tmp/out" PLATFORMS=darwin/arm64 IMAGE_ARCHIVE=0 GO="$GO" sh deploy/release.sh
name=baton-v0.0.0-test-darwin-arm64
[ -f "$tmp/out/$name.tar.gz" ] || fail "no $name.tar.gz"
(cd "$tmp/out" && sha256sum -c SHA256SUMS) || fail "SHA256SUMS does not verify"
[ "$(wc -l < "$tmp/out/SHA256SUMS")" -eq 1 ] || fail "SHA256SUMS lists $(wc -l < "$tmp/out/SHA256SUMS") files, want 1"
tar -xzf "$tmp/out/$name.tar.gz" -C "$tmp"
for f in batond baton LICENSE README.md CHANGELOG.md; do
	[ -f "$tmp/$name/$f" ] || fail "$name.tar.gz lacks $f"
done
for cmd in batond baton; do
	info=$($GO version -m "$tmp/$name/$cmd")
	for want in "GOOS=darwin" "GOARCH=arm64" "CGO_ENABLED=0" "-trimpath=true"; do
		printf '%s\n' "$info" | grep -q -- "$want" || fail "$cmd: go version -m lacks $want:
$info"
	done
	# -trimpath leaves -ldflags out of the build info: look for the
	# stamped version in the binary itself.
	grep -aq "v0.0.0-test" "$tmp/$name/$cmd" || fail "$cmd: the version v0.0.0-test is not stamped in"
done
echo "test-release: ok (darwin/arm64 archive, checksums, static binaries stamped v0.0.0-test)"

#!/bin/sh
# make release VERSION=vX.Y.Z: static batond and baton (CGO_ENABLED=0) for
# each of PLATFORMS, one tar.gz per platform with LICENSE, README.md and
# CHANGELOG.md, the container image saved as a tar.gz when a Docker engine
# answers, and SHA256SUMS over all of them, in OUT (bin/release).
# Archives are reproducible: sorted names, fixed times and owners, gzip -n.
set -eu
: "${VERSION:?VERSION=vX.Y.Z is required}"
GO=${GO:-go}
OUT=${OUT:-bin/release}
PLATFORMS=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
IMAGE_ARCHIVE=${IMAGE_ARCHIVE:-1}

if ! printf '%s\n' "$VERSION" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$'; then
	echo "release: VERSION must be a semantic version with a v (v1.2.3, v0.2.0-rc.1), got '$VERSION'" >&2
	exit 2
fi
for f in LICENSE README.md CHANGELOG.md; do
	[ -f "$f" ] || { echo "release: $f is missing (run from the repository's root)" >&2; exit 1; }
done

ldflags="-X github.com/baton-dev/baton/cmd/internal/buildinfo.version=$VERSION"
rm -rf "$OUT"
mkdir -p "$OUT"
for p in $PLATFORMS; do
	os=${p%/*}
	arch=${p#*/}
	name=baton-$VERSION-$os-$arch
	dir=$OUT/$name
	mkdir -p "$dir"
	for cmd in batond baton; do
		echo "release: $name/$cmd"
		CGO_ENABLED=0 GOOS=$os GOARCH=$arch $GO build -trimpath -buildvcs=auto -ldflags "$ldflags" -o "$dir/$cmd" "./cmd/$cmd"
	done
	cp LICENSE README.md CHANGELOG.md "$dir/"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$OUT" -cf - "$name" | gzip -n -9 > "$OUT/$name.tar.gz"
	rm -rf "$dir"
done

if [ "$IMAGE_ARCHIVE" = 1 ] && docker info >/dev/null 2>&1; then
	make image VERSION="$VERSION" IMAGE="baton:$VERSION"
	docker save "baton:$VERSION" | gzip -n -9 > "$OUT/baton-$VERSION-image.tar.gz"
else
	echo "release: no Docker engine answers (docker info failed): the image is not built; make image VERSION=$VERSION on a machine with one"
fi

(cd "$OUT" && sha256sum -- *.tar.gz > SHA256SUMS)
echo "release: $VERSION in $OUT:"
cat "$OUT/SHA256SUMS"

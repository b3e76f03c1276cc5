# The Baton image: batond and baton, static (CGO_ENABLED=0), FROM scratch.
# Build it with `make image` (builds the binaries on the host and stages
# them in bin/image, then runs the classic builder: DOCKER_BUILDKIT=0).
# A plain `docker build .` without `make image` finds nothing to copy.
#
# Runs as the unprivileged 65532:65532; the data dir /data is a volume.
# Configuration is all BATON_* environment variables (one per batond flag,
# see `batond --help`); deploy/compose.yaml is a three-node example.
FROM scratch

ARG VERSION=dev
LABEL org.opencontainers.image.title="baton" \
      org.opencontainers.image.description="Baton: a Raft-replicated coordination store" \
      org.opencontainers.image.version="${VERSION}"

# /etc/passwd, /etc/group, /etc/nsswitch.conf and /tmp (1777), root-owned.
COPY bin/image/rootfs/ /
# /data, /tls and /ca (0700), owned by the user batond runs as: a named
# volume mounted there starts with this owner and mode.
COPY --chown=65532:65532 bin/image/state/ /
COPY bin/image/bin/batond bin/image/bin/baton /usr/local/bin/

ENV PATH=/usr/local/bin \
    BATON_DATA_DIR=/data \
    BATON_HTTP_ADDR=0.0.0.0:7001 \
    BATON_RAFT_ADDR=0.0.0.0:8001

USER 65532:65532
WORKDIR /data
VOLUME ["/data"]
EXPOSE 7001 8001

# batond healthcheck reads the node's own BATON_* variables: its port,
# https when BATON_TLS_CERT_FILE is set, the CA in BATON_PEER_CA_FILE.
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
    CMD ["/usr/local/bin/batond", "healthcheck"]

ENTRYPOINT ["/usr/local/bin/batond"]

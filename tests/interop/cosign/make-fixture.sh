#!/usr/bin/env bash
# Makes tests/fixtures/cosign with sigstore-rs (the reference format's
# tooling that builds here: cosign itself needs a Go this machine cannot
# fetch) and checks agentsite's own signature with it:
#
#   1. a loopback registry (Debian's docker-registry) gets the 0.1.0
#      conformance agent, pushed unsigned by agentsite;
#   2. sigstore-rs makes an ed25519 key and signs the manifest (a
#      `sha256-….sig` tag of simple-signing layers), and the registry's
#      manifests and blobs are kept as the fixture with the public key;
#   3. agentsite signs the same manifest with tests/fixtures/cosign/
#      agentsite-test.key (a key for tests only), sigstore-rs verifies that
#      signature against its public key, and agentsite's layer is kept.
#
# The suite (tests/oci.rs) then pulls the fixture with agentsite and
# checks that agentsite's signing still makes, byte for byte, the layer
# sigstore-rs verified (ed25519 signatures are deterministic).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
out=$repo/tests/fixtures/cosign
port=5077
registry=127.0.0.1:$port
repository=fixtures/conformance
work=$(mktemp -d)
registry_pid=
trap 'kill $registry_pid 2>/dev/null || true; rm -rf "$work"' EXIT

target=${CARGO_TARGET_DIR:-$here/target}
(cd "$here" && CARGO_TARGET_DIR=$target cargo build --release --locked -q)
tool=$target/release/cosign-interop
agentsite=${AGENTSITE:-$CARGO_TARGET_DIR/debug/agentsite}

cat > "$work/config.yml" <<YAML
version: 0.1
log: { level: error }
storage: { filesystem: { rootdirectory: $work/registry } }
http: { addr: $registry, secret: fixture }
YAML
docker-registry serve "$work/config.yml" >/dev/null 2>&1 & registry_pid=$!
for _ in $(seq 50); do curl -sf "http://$registry/v2/" >/dev/null && break; sleep 0.1; done

export AGENTSITE_DATA_DIR=$work/node
"$agentsite" add "$repo/tests/fixtures/agent-0.1.0/conformance.wasm" --name conformance
"$agentsite" push conformance "oci://$registry/$repository:0.1.0"

mkdir -p "$out"
"$tool" keygen "$work"
cp "$work/cosign.pub" "$out/cosign.pub"
"$tool" sign "$work/cosign.key" "$registry/$repository:0.1.0"
"$tool" verify "$out/cosign.pub" "$registry/$repository:0.1.0"

accept='application/vnd.oci.image.manifest.v1+json'
fetch() { curl -sf -H "Accept: $accept" "http://$registry/v2/$repository/$1"; }
fetch manifests/0.1.0 > "$out/manifest.json"
digest=sha256:$(sha256sum "$out/manifest.json" | cut -d' ' -f1)
sig_tag=sha256-${digest#sha256:}.sig
fetch "manifests/$sig_tag" > "$out/signature-manifest.json"
blob() { python3 -c "import json,sys; m=json.load(open(sys.argv[1])); print($2)" "$1"; }
fetch "blobs/$(blob "$out/manifest.json" 'm["config"]["digest"]')" > "$out/config.json"
fetch "blobs/$(blob "$out/signature-manifest.json" 'm["config"]["digest"]')" > "$out/signature-config.json"
fetch "blobs/$(blob "$out/signature-manifest.json" 'm["layers"][0]["digest"]')" > "$out/signature-payload.json"

# agentsite's own signature, checked by sigstore-rs, in a repository of its own.
pinned=$("$agentsite" push conformance "oci://$registry/agentsite/conformance:0.1.0" \
    --key "$out/agentsite-test.key")
ours=${pinned##*@}
openssl pkey -in "$out/agentsite-test.key" -pubout -out "$work/agentsite-test.pub"
"$tool" verify "$work/agentsite-test.pub" "$registry/agentsite/conformance:0.1.0"
repository=agentsite/conformance
fetch "manifests/sha256-${ours#sha256:}.sig" > "$out/agentsite-signature-manifest.json"
fetch "blobs/$(blob "$out/agentsite-signature-manifest.json" 'm["layers"][0]["digest"]')" \
    > "$out/agentsite-signature-payload.json"
echo "fixture written to $out (manifests $digest, ours $ours)"

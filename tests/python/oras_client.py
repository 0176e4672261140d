"""ORAS (the `oras` Python SDK) as an independent OCI client, for tests/oci.rs.

  oras_client.py pull REGISTRY/REPO:TAG OUTDIR
      pulls the artifact into OUTDIR; prints its manifest and config as JSON
  oras_client.py push REGISTRY/REPO:TAG FILE.wasm
      pushes a component in the Wasm OCI artifact layout (config
      application/vnd.wasm.config.v0+json, one application/wasm layer)
"""

import json
import os
import sys
import tempfile

import oras.client


def client(target):
    registry = target.split("/", 1)[0]
    return oras.client.OrasClient(hostname=registry, insecure=True)


def pull(target, outdir):
    oras_client = client(target)
    oras_client.pull(target=target, outdir=outdir)
    manifest = oras_client.get_manifest(target)
    container = oras_client.get_container(target)
    response = oras_client.get_blob(container, manifest["config"]["digest"])
    response.raise_for_status()
    print(json.dumps({"manifest": manifest, "config": response.json()}))


def push(target, wasm):
    import hashlib

    with open(wasm, "rb") as f:
        digest = "sha256:" + hashlib.sha256(f.read()).hexdigest()
    config = {
        "created": "2026-11-27T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [digest],
        "component": {"exports": [], "imports": [], "target": None},
    }
    with tempfile.TemporaryDirectory() as scratch:
        config_file = os.path.join(scratch, "config.json")
        with open(config_file, "w") as f:
            json.dump(config, f)
        # ORAS names a layer by the path it is given: push from its folder.
        os.chdir(os.path.dirname(os.path.abspath(wasm)))
        client(target).push(
            target=target,
            files=[os.path.basename(wasm) + ":application/wasm"],
            manifest_config=config_file + ":application/vnd.wasm.config.v0+json",
            disable_path_validation=True,
        )
    print("pushed", target)


if __name__ == "__main__":
    command, target, argument = sys.argv[1:4]
    {"pull": pull, "push": push}[command](target, argument)

#!/usr/bin/env python3
"""tests/env/image/oci.py — owns: writing an OCI image layout directory from layer tarballs.

No image registry or engine is reachable, so the test environment assembles its images
itself: each layer is an uncompressed tar already on disk (hard-linked into the blob
store, not copied), the config names user, environment, entry point and working
directory, and the index carries `io.containerd.image.name`, under which
`ctr images import` registers the image (the name pods use).
"""
import argparse
import hashlib
import json
import os
import shutil


def digest_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def put_blob(blobs, data):
    d = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, d), "wb") as f:
        f.write(data)
    return d, len(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--name", required=True, help="full image name, e.g. docker.io/apache/kafka:4.1.2")
    p.add_argument("--layer", action="append", default=[], help="uncompressed layer tar, bottom first")
    p.add_argument("--user", default="")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--entrypoint", action="append", default=[])
    p.add_argument("--workdir", default="/")
    p.add_argument("--out", required=True, help="layout directory to create (must not exist)")
    a = p.parse_args()

    blobs = os.path.join(a.out, "blobs", "sha256")
    os.makedirs(blobs)
    layers, diff_ids = [], []
    for layer in a.layer:
        d = digest_of(layer)
        target = os.path.join(blobs, d)
        try:
            os.link(layer, target)
        except OSError:
            shutil.copyfile(layer, target)
        layers.append({"mediaType": "application/vnd.oci.image.layer.v1.tar",
                       "digest": "sha256:" + d, "size": os.path.getsize(layer)})
        diff_ids.append("sha256:" + d)
    config = {
        "architecture": "amd64", "os": "linux",
        "config": {"User": a.user, "Env": a.env, "Entrypoint": a.entrypoint or None,
                   "WorkingDir": a.workdir},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }
    cd, cs = put_blob(blobs, json.dumps(config, sort_keys=True).encode())
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": "sha256:" + cd, "size": cs},
                "layers": layers}
    md, ms = put_blob(blobs, json.dumps(manifest, sort_keys=True).encode())
    tag = a.name.rsplit(":", 1)[1] if ":" in a.name.rsplit("/", 1)[-1] else "latest"
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                            "digest": "sha256:" + md, "size": ms,
                            "platform": {"architecture": "amd64", "os": "linux"},
                            "annotations": {"io.containerd.image.name": a.name,
                                            "org.opencontainers.image.ref.name": tag}}]}
    with open(os.path.join(a.out, "index.json"), "w") as f:
        json.dump(index, f, sort_keys=True)
    with open(os.path.join(a.out, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)


if __name__ == "__main__":
    main()

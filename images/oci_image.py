#!/usr/bin/env python3
"""images/oci_image.py — owns: writing one single-layer OCI image archive (an OCI image layout
in a tar, what `skopeo copy oci-archive:...` reads) from host files, with no container engine.

Python's standard library only, so the engine-free build (scripts/build-images.sh) needs nothing
installed. The output is reproducible: entries sorted, one fixed mtime, owner 0:0 (except the
non-root user's home), gzip without a name or timestamp, so the same inputs and --epoch give
the same digests.
"""

import argparse
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile
import time

# Same accounts as distroless's `nonroot` images: the charts run the pods as 65532:65532.
PASSWD = (
    "root:x:0:0:root:/root:/sbin/nologin\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
    "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
)
GROUP = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"
# glibc's defaults without this file are the same, but name lookups should not depend on that.
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"

MT_INDEX = "application/vnd.oci.image.index.v1+json"
MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
EM_X86_64 = 0x3E


def fail(msg):
    print(f"[oci_image] error: {msg}", file=sys.stderr)
    sys.exit(1)


def check_elf_x86_64(path):
    """The image says linux/amd64: refuse a binary that would not run there."""
    with open(path, "rb") as f:
        head = f.read(20)
    if head[:4] != b"\x7fELF" or head[4] != 2 or int.from_bytes(head[18:20], "little") != EM_X86_64:
        fail(f"{path} is not an x86-64 ELF executable; the image is linux/amd64")


class Layer:
    """Collects entries by path; `tar()` writes them sorted so parents come first."""

    def __init__(self, mtime):
        self.mtime = mtime
        self.entries = {}  # path -> (TarInfo, bytes | None)

    def _info(self, path, kind, mode, uid=0, gid=0, size=0):
        info = tarfile.TarInfo(path)
        info.type, info.mode, info.uid, info.gid = kind, mode, uid, gid
        info.uname = info.gname = ""
        info.mtime, info.size = self.mtime, size
        return info

    def dir(self, path, mode=0o755, uid=0, gid=0):
        path = path.strip("/")
        self._parents(path)
        self.entries[path] = (self._info(path, tarfile.DIRTYPE, mode, uid, gid), None)

    def _parents(self, path):
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/".join(parts[:i])
            if parent not in self.entries:
                self.entries[parent] = (self._info(parent, tarfile.DIRTYPE, 0o755), None)

    def file(self, path, data, mode=0o644):
        path = path.strip("/")
        if path in self.entries:
            fail(f"/{path} is added twice")
        self._parents(path)
        self.entries[path] = (self._info(path, tarfile.REGTYPE, mode, size=len(data)), data)

    def symlink(self, path, target):
        path = path.strip("/")
        self._parents(path)
        info = self._info(path, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.entries[path] = (info, None)

    def tar(self):
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for path in sorted(self.entries, key=lambda p: p.split("/")):
                info, data = self.entries[path]
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return buf.getvalue()


def gzip_bytes(data):
    buf = io.BytesIO()
    # filename="" and mtime=0: no name or time in the gzip header, for reproducible digests.
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=6, mtime=0) as gz:
        gz.write(data)
    return buf.getvalue()


def blob(data):
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="the .oci.tar to write")
    p.add_argument("--name", required=True, help="full reference, e.g. ghcr.io/kstretch/kstretch-central:0.1.0")
    p.add_argument("--binary", required=True, help="host binary; goes to --binary-path, 0755")
    p.add_argument("--binary-path", required=True, help="its path in the image, also the entrypoint")
    p.add_argument("--file", action="append", default=[], metavar="SRC:DEST",
                   help="host file SRC copied (dereferenced) to DEST in the image; mode kept (0755 or 0644)")
    p.add_argument("--symlink", action="append", default=[], metavar="PATH:TARGET")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--user", default="65532:65532")
    p.add_argument("--epoch", type=int, required=True, help="mtime of every entry and the image's created time")
    args = p.parse_args()

    if ":" not in args.name.rsplit("/", 1)[-1]:
        fail(f"--name {args.name} has no tag")
    tag = args.name.rsplit(":", 1)[1]
    check_elf_x86_64(args.binary)

    layer = Layer(args.epoch)
    with open(args.binary, "rb") as f:
        layer.file(args.binary_path, f.read(), 0o755)
    for spec in args.file:
        src, _, dest = spec.partition(":")
        if not dest.startswith("/"):
            fail(f"--file {spec}: DEST must be absolute")
        with open(src, "rb") as f:
            data = f.read()
        layer.file(dest, data, 0o755 if os.stat(src).st_mode & 0o111 else 0o644)
    for spec in args.symlink:
        path, _, target = spec.partition(":")
        layer.symlink(path, target)
    layer.file("/etc/passwd", PASSWD.encode())
    layer.file("/etc/group", GROUP.encode())
    layer.file("/etc/nsswitch.conf", NSSWITCH.encode())
    layer.dir("/home/nonroot", 0o700, 65532, 65532)
    layer.dir("/root", 0o700)
    layer.dir("/tmp", 0o1777)

    layer_tar = layer.tar()
    diff_id = "sha256:" + hashlib.sha256(layer_tar).hexdigest()
    layer_digest, layer_gz = blob(gzip_bytes(layer_tar))

    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(args.epoch))
    labels = dict(kv.split("=", 1) for kv in args.label)
    config = {
        "created": created,
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "User": args.user,
            "Entrypoint": [args.binary_path],
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
            "WorkingDir": "/home/nonroot",
            "Labels": labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "scripts/build-images.sh (images/oci_image.py)"}],
    }
    config_digest, config_json = blob(canonical(config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": config_digest, "size": len(config_json)},
        "layers": [{"mediaType": MT_LAYER, "digest": layer_digest, "size": len(layer_gz)}],
        "annotations": {k: v for k, v in labels.items() if k.startswith("org.opencontainers.image.")},
    }
    manifest_digest, manifest_json = blob(canonical(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": MT_INDEX,
        "manifests": [{
            "mediaType": MT_MANIFEST,
            "digest": manifest_digest,
            "size": len(manifest_json),
            "platform": {"architecture": "amd64", "os": "linux"},
            # ref.name is the tag (skopeo/umoci `...:0.1.0`); containerd's import takes the full name.
            "annotations": {"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": args.name},
        }],
    }

    out = Layer(args.epoch)
    out.file("oci-layout", canonical({"imageLayoutVersion": "1.0.0"}))
    out.file("index.json", canonical(index))
    for digest, data in ((layer_digest, layer_gz), (config_digest, config_json), (manifest_digest, manifest_json)):
        out.file("blobs/sha256/" + digest.split(":", 1)[1], data)
    tmp = args.out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(out.tar())
    os.replace(tmp, args.out)
    print(json.dumps({"manifest": manifest_digest, "config": config_digest, "layer": layer_digest,
                      "layer_bytes": len(layer_gz), "rootfs_bytes": len(layer_tar)}))


if __name__ == "__main__":
    main()

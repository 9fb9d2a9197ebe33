#!/usr/bin/env python3
"""Packs a root filesystem folder into a one-layer OCI image layout tar that
`ctr images import` accepts, with no Docker engine and no registry. Timestamps and owners
are fixed, so the same input gives the same digests.

usage: oci_image.py ROOTFS NAME OUT.tar --entrypoint JSON [--cmd JSON] [--user UID:GID] [--port N ...]
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import tarfile

EPOCH = "1970-01-01T00:00:00Z"


def layer(rootfs):
    """The root filesystem as an uncompressed tar, sorted, with owners and mtimes zeroed."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for folder, dirs, files in os.walk(rootfs):
            dirs.sort()
            for name in dirs + sorted(files):
                path = os.path.join(folder, name)
                info = tar.gettarinfo(path, arcname=os.path.relpath(path, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rootfs")
    ap.add_argument("name", help="e.g. localhost/skiff/skiff:dev")
    ap.add_argument("out")
    ap.add_argument("--entrypoint", required=True)
    ap.add_argument("--cmd", default="null")
    ap.add_argument("--user", default="")
    ap.add_argument("--port", action="append", default=[])
    args = ap.parse_args()

    blobs = {}

    def blob(data):
        digest = hashlib.sha256(data).hexdigest()
        blobs[digest] = data
        return "sha256:" + digest, len(data)

    raw = layer(args.rootfs)
    layer_digest, layer_size = blob(gzip.compress(raw, mtime=0))
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": EPOCH,
        "config": {
            "Entrypoint": json.loads(args.entrypoint),
            "Cmd": json.loads(args.cmd),
            "WorkingDir": "/",
            **({"User": args.user} if args.user else {}),
            **({"ExposedPorts": {f"{p}/tcp": {} for p in args.port}} if args.port else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
        "history": [{"created": EPOCH, "created_by": "images/oci_image.py"}],
    }
    config_digest, config_size = blob(json.dumps(config, separators=(",", ":")).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": layer_size}],
    }
    manifest_digest, manifest_size = blob(json.dumps(manifest, separators=(",", ":")).encode())
    tag = args.name.rsplit(":", 1)[1] if ":" in args.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": manifest_digest,
            "size": manifest_size,
            "platform": {"architecture": "amd64", "os": "linux"},
            # containerd names the imported image by this annotation.
            "annotations": {"io.containerd.image.name": args.name, "org.opencontainers.image.ref.name": tag},
        }],
    }
    with tarfile.open(args.out, "w") as tar:
        def put(name, data):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            tar.addfile(info, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", json.dumps(index).encode())
        for digest, data in sorted(blobs.items()):
            put(f"blobs/sha256/{digest}", data)
    print(f"{args.name} -> {args.out} ({layer_size} bytes compressed, manifest {manifest_digest})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks the skiff image archive against what the project requires of it: an OCI layout
that containerd can import under its name, a non-root user (65532), a static binary (no
ELF interpreter) of at most 15 MiB, no shell, the same layout as the Dockerfile, and a
binary that runs. Exits 1 with the reasons otherwise.

usage: check_image.py target/images/skiff.oci.tar [BINARY]   (BINARY: skiff, the default, or skiff-operator)
"""
import gzip
import io
import json
import os
import re
import struct
import subprocess
import sys
import tarfile
import tempfile

LIMIT = 15 * 1024 * 1024


def has_interpreter(elf):
    """True if the ELF file has a PT_INTERP segment (it needs a dynamic loader)."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    phoff = struct.unpack_from("<Q", elf, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    return any(struct.unpack_from("<I", elf, phoff + i * phentsize)[0] == 3 for i in range(phnum))


def main():
    archive = sys.argv[1]
    name_of_binary = sys.argv[2] if len(sys.argv) > 2 else "skiff"
    problems = []
    with tarfile.open(archive) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    if json.loads(files["oci-layout"]).get("imageLayoutVersion") != "1.0.0":
        problems.append("oci-layout is not 1.0.0")
    index = json.loads(files["index.json"])
    entry = index["manifests"][0]
    name = entry.get("annotations", {}).get("io.containerd.image.name", "")
    if not name:
        problems.append("no io.containerd.image.name annotation")
    blob = lambda digest: files["blobs/sha256/" + digest.split(":", 1)[1]]
    manifest = json.loads(blob(entry["digest"]))
    config = json.loads(blob(manifest["config"]["digest"]))["config"]
    if config.get("User") != "65532:65532":
        problems.append(f"user is {config.get('User')!r}, not 65532:65532")
    if config.get("Entrypoint") != ["/" + name_of_binary]:
        problems.append(f"entrypoint is {config.get('Entrypoint')!r}")
    layer = tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob(manifest["layers"][0]["digest"]))))
    members = {m.name: m for m in layer.getmembers()}
    binary = layer.extractfile(members[name_of_binary]).read()
    if has_interpreter(binary):
        problems.append(f"/{name_of_binary} needs a dynamic loader: it is not static")
    if len(binary) > LIMIT:
        problems.append(f"/{name_of_binary} is {len(binary)} bytes, over 15 MiB")
    image_size = sum(len(b) for b in files.values())
    if image_size > LIMIT:
        problems.append(f"the image is {image_size} bytes, over 15 MiB")
    if any(n in members for n in ("bin/sh", "bin/busybox", "usr/bin/sh")):
        problems.append("the image has a shell")
    if "65532" not in layer.extractfile(members["etc/passwd"]).read().decode():
        problems.append("/etc/passwd does not name 65532")
    # The Dockerfile must produce the same top-level layout.
    dockerfile = open(os.path.join(os.path.dirname(__file__), name_of_binary, "Dockerfile")).read()
    docker_paths = {p.lstrip("/") for p in re.findall(r"^COPY .* (/\S+)$", dockerfile, re.M)}
    built_paths = {n for n in (name_of_binary, "srv/www", "etc/passwd", "etc/group") if n in members}
    if docker_paths != built_paths:
        problems.append(f"Dockerfile copies {sorted(docker_paths)}, the OCI build has {sorted(built_paths)}")
    # And it runs.
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, name_of_binary)
        with open(path, "wb") as f:
            f.write(binary)
        os.chmod(path, 0o755)
        out = subprocess.run([path, "--version"], capture_output=True, text=True)
        if out.returncode != 0 or not out.stdout.startswith(name_of_binary + " "):
            problems.append(f"/{name_of_binary} --version failed: {out.stderr}")
    print(f"{archive}: {name}, binary {len(binary)} bytes, image {image_size} bytes, user {config.get('User')}")
    if problems:
        print("\n".join("problem: " + p for p in problems))
        sys.exit(1)
    print("image ok")


if __name__ == "__main__":
    main()

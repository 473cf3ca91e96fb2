"""Fetch the JavaScript that torchrecorder's HTML page inlines, check it, and copy it into the package.

    python tools/update_vendor.py            # fetch the pinned version, check its hash, copy
    python tools/update_vendor.py --check    # only check that the vendored file is the pinned one

The pinned package is ``@viz-js/viz`` (Graphviz compiled to WebAssembly, in one
file that defines the global ``Viz``).  ``npm pack`` fetches its tarball from the
npm registry; the tarball's SHA-256 must equal :data:`TARBALL_SHA256`, and the
copied file's SHA-256 must equal :data:`FILE_SHA256`.  To move to a new version:
change :data:`VERSION`, run with ``--new-hashes`` (which prints the hashes of what
it fetched instead of checking them), read the diff of the package, put the
printed hashes here and in ``torchrecorder/renderer/_vendor/README.md``, and run
the tests (``tests/test_html.py`` drives the page in Chromium).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

PACKAGE = "@viz-js/viz"
VERSION = "3.31.0"
#: SHA-256 of the tarball ``npm pack @viz-js/viz@VERSION`` downloads
TARBALL_SHA256 = "7dc0189874849cca2fed7cbe88bf334cd0e6e012db16657794a812ad6f2b8c70"
#: the file of the tarball that is vendored, and the name it gets in the package
MEMBER = "package/dist/viz-global.js"
FILE_SHA256 = "c9e0b310f9883910e01c66054b48b7ff4be3d8695141116635e72b0af152692e"

VENDOR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "torchrecorder", "renderer", "_vendor")
TARGET = os.path.join(VENDOR_DIR, "viz-global.js")


def sha256(path: str) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(workdir: str) -> str:
    """``npm pack`` the pinned version into ``workdir``; the tarball's path."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to fetch the tarball from the npm registry")
    out = subprocess.run([npm, "pack", f"{PACKAGE}@{VERSION}", "--silent"], cwd=workdir, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()
    if not out:
        raise SystemExit("npm pack printed no file name")
    return os.path.join(workdir, out[-1].strip())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the vendored file's hash")
    parser.add_argument("--new-hashes", action="store_true",
                        help="print the hashes of what was fetched instead of checking them (new version)")
    args = parser.parse_args()
    if args.check:
        got = sha256(TARGET)
        if got != FILE_SHA256:
            print(f"{TARGET}: sha256 {got}, expected {FILE_SHA256}", file=sys.stderr)
            return 1
        print(f"{TARGET}: {PACKAGE} {VERSION}, sha256 ok")
        return 0
    with tempfile.TemporaryDirectory() as workdir:
        tarball = fetch(workdir)
        tar_hash = sha256(tarball)
        with tarfile.open(tarball, "r:gz") as tar:
            member = tar.getmember(MEMBER)
            if not member.isfile():
                raise SystemExit(f"{MEMBER} in the tarball is not a plain file")
            extracted = tar.extractfile(member)
            if extracted is None:
                raise SystemExit(f"cannot read {MEMBER} from the tarball")
            staged = os.path.join(workdir, "viz-global.js")
            with open(staged, "wb") as fh:
                shutil.copyfileobj(extracted, fh)
        file_hash = sha256(staged)
        if args.new_hashes:
            print(f"TARBALL_SHA256 = {tar_hash!r}\nFILE_SHA256 = {file_hash!r}")
            return 0
        if tar_hash != TARBALL_SHA256:
            raise SystemExit(f"tarball sha256 {tar_hash}, expected {TARBALL_SHA256}: not copied")
        if file_hash != FILE_SHA256:
            raise SystemExit(f"{MEMBER} sha256 {file_hash}, expected {FILE_SHA256}: not copied")
        os.makedirs(VENDOR_DIR, exist_ok=True)
        shutil.copyfile(staged, TARGET)
    print(f"copied {PACKAGE} {VERSION} {MEMBER} to {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

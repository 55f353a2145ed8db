"""The `perdure` command as a person uses it: `perdure dev`, then `perdure workflow ...`."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from perdure.cli.dev_cmd import HTTP_OFFSET, free_base_port
from tests.fixtures.cluster import REPO_ROOT, wait_until
from tests.fixtures.dev import (
    children_of,
    cli_env,
    data_dir_of,
    environ_of,
    listening,
    perdure,
    running_dev,
)

SERVICES = ("gateway", "history", "scheduler")
# Secrets a shell might hold: dev must hand neither to anyone, and make a fresh one instead.
INHERITED = {
    "PERDURE_INTERNAL_SECRET": "from-the-shell-" + "s" * 32,
    "PERDURE_INTERNAL_SECRET_ACCEPTED": "from-the-shell-accepted-" + "a" * 32,
}


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`perdure dev` running on its own ports and data directory, from a shell that holds
    internal secrets of its own (which dev must not pass on)."""
    with running_dev(tmp_path, env=INHERITED) as running:
        yield running


def approve(address: str, workflow_id: str) -> None:
    """`perdure approve --address ADDRESS WORKFLOW_ID`, once the run has asked for its approval
    (until then the command says it has none pending)."""
    done: list[subprocess.CompletedProcess[str]] = []

    def decided() -> bool:
        done[:] = [
            subprocess.run(
                [sys.executable, "-m", "perdure.cli", "approve", "--address", address, workflow_id],
                cwd=REPO_ROOT,
                env=cli_env(address),
                capture_output=True,
                text=True,
                timeout=120,
            )
        ]
        assert done[0].returncode == 0 or "has no pending approval" in done[0].stderr, done[0]
        return done[0].returncode == 0

    wait_until(decided, 120, f"{workflow_id}'s approval", interval=0.5)
    assert f"{workflow_id}: approved" in done[0].stdout


def test_dev_cluster_runs_the_example_from_the_cli(
    dev_cluster: tuple[str, subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    address, dev, log = dev_cluster
    assert_on_loopback_with_the_secret_in_the_services_alone(address, dev, log)
    assert "API key    prd_" in log.read_text()  # dev made an admin key and said so
    keyless = subprocess.run(
        [sys.executable, "-m", "perdure.cli", "workflow", "--address", address, "list"],
        cwd=REPO_ROOT,
        env={**cli_env(address), "PERDURE_DATA_DIR": str(log.parent)},  # a directory with none
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert keyless.returncode == 1 and "(API_KEY_MISSING)" in keyless.stderr
    assert "Traceback" not in keyless.stderr
    (tmp_path / "input.json").write_text('{"topic": "fencing"}')
    start = ("start", "research_agent", "--input", f"@{tmp_path / 'input.json'}", "--id", "cli-1")
    started = perdure(address, *start)
    assert started.returncode == 0, started.stderr
    # The run waits for a human's approval before its report: a wait that runs out says so.
    blocked = perdure(address, *start, "--wait", "--timeout", "0.5")
    assert blocked.returncode == 124 and "still running after 0.5s" in blocked.stderr
    assert "Traceback" not in blocked.stderr and not blocked.stdout
    approve(address, "cli-1")
    done = perdure(address, *start, "--wait")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["topic"] == "fencing"  # the result itself
    described = json.loads(perdure(address, "describe", "cli-1", "--namespace", "default").stdout)
    assert described["workflow"]["status"] == "WORKFLOW_STATUS_COMPLETED"
    assert [s["step_id"] for s in described["steps"]] == [
        "create_plan",
        "research_1",
        "research_2",
        "analyze",
        "recommend",
        "report",
        "notify",
    ]

    history = perdure(address, "history", "cli-1")
    assert history.returncode == 0, history.stderr
    types = [json.loads(line)["event_type"] for line in history.stdout.splitlines()]
    assert types[0] == "EVENT_TYPE_WORKFLOW_STARTED"
    assert types[-1] == "EVENT_TYPE_WORKFLOW_COMPLETED"
    assert types.count("EVENT_TYPE_STEP_COMPLETED") == 7
    assert (
        types.count("EVENT_TYPE_APPROVAL_REQUESTED")
        == types.count("EVENT_TYPE_APPROVAL_DECIDED")
        == 1
    )

    listed = perdure(address, "list")
    assert "cli-1\tresearch_agent\tCOMPLETED" in listed.stdout
    watched = perdure(address, "watch", "cli-1")  # a closed run: its journal, then the end
    assert watched.returncode == 0, watched.stderr
    assert [json.loads(line)["event_type"] for line in watched.stdout.splitlines()] == types
    for command in ("list", "history cli-1", "watch cli-1"):  # a reader that stops early
        piped = subprocess.run(
            f"{sys.executable} -m perdure.cli workflow --address {address} {command} | head -1",
            shell=True,
            cwd=REPO_ROOT,
            env=cli_env(address),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert piped.returncode == 0 and piped.stdout.count("\n") == 1, piped
        assert piped.stderr == "", (command, piped.stderr)

    # The web UI's address, with the admin key in its fragment; the page, and the HTTP API
    # with that key.
    [(ui, key)] = re.findall(r"web UI +(http://\S+/)#key=(prd_\S+)", log.read_text())
    assert requests.get(ui, timeout=30).status_code == 200
    over_http = requests.get(
        f"{ui}v1/workflows/cli-1", headers={"Authorization": f"Bearer {key}"}, timeout=30
    )
    assert over_http.json()["workflow"]["status"] == "WORKFLOW_STATUS_COMPLETED"

    again = perdure(
        address, "start", "research_agent", "--input", '{"topic": "fencing"}', "--id", "cli-1"
    )
    assert json.loads(again.stdout).get("started", False) is False

    bad_json = perdure(address, "start", "research_agent", "--input", "{not json")
    assert bad_json.returncode == 2 and "not valid JSON" in bad_json.stderr
    missing = perdure(address, "describe", "no-such-run")
    assert missing.returncode == 1 and "(WORKFLOW_NOT_FOUND)" in missing.stderr
    assert missing.stderr.startswith("error: ") and "Traceback" not in missing.stderr

    # The command dev tells a person to try works as printed, from another directory and
    # without PERDURE_DATA_DIR: it names the data directory that holds the key.
    [tried] = re.findall(r"^Try: (.*)$", log.read_text(), re.MULTILINE)
    assert "PERDURE_DATA_DIR=" in tried  # not the default data directory
    tried = tried.replace("perdure workflow", f"{sys.executable} -m perdure.cli workflow")
    shell = {
        k: v for k, v in os.environ.items() if k not in ("PERDURE_DATA_DIR", "PERDURE_API_KEY")
    }
    run = subprocess.run(
        tried, shell=True, cwd=tmp_path, env=shell, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["workflow_id"] == "demo-1"

    dev.send_signal(signal.SIGTERM)
    assert dev.wait(timeout=60) == 0, log.read_text()
    assert "worker" in log.read_text() and "stopped" in log.read_text()


def test_dev_restarts_a_killed_worker_which_resumes_the_workflow(
    dev_cluster: tuple[str, subprocess.Popen[bytes], Path],
) -> None:
    address, _, log = dev_cluster
    started = perdure(
        address,
        "start",
        "research_agent",
        "--id",
        "demo-kill",
        "--input",
        '{"topic": "recovery", "slow_seconds": 5}',
    )
    assert started.returncode == 0, started.stderr

    def research_running() -> bool:
        # One of the two slow research steps under way: a window of about ten seconds, wide
        # enough for a describe (a process of its own) on a loaded machine to see.
        steps = json.loads(perdure(address, "describe", "demo-kill").stdout).get("steps", [])
        completed = [s["step_id"] for s in steps if s["status"] == "STEP_STATUS_COMPLETED"]
        return completed in (["create_plan"], ["create_plan", "research_1"])

    wait_until(research_running, 120, "the slow research step to start")
    (worker_pid,) = re.findall(r"worker \S+:(\d+) connected:", log.read_text())
    os.kill(int(worker_pid), signal.SIGKILL)
    approve(address, "demo-kill")  # once the restarted worker has brought the run to it

    wait_until(
        lambda: '"WORKFLOW_STATUS_COMPLETED"' in perdure(address, "describe", "demo-kill").stdout,
        90,
        "the restarted worker to finish the workflow",
    )
    described = json.loads(perdure(address, "describe", "demo-kill").stdout)
    fences = {s["step_id"]: int(s.get("fence", 0)) for s in described["steps"]}
    # After the crash, a higher fence: the next lease recorded the killed attempt as lost, and
    # the steps went on under the lease of its retry.
    assert fences["create_plan"] == 1 and fences["notify"] >= 3
    assert "the worker exited with -9; starting it again" in log.read_text()
    assert "Skipping completed step: create_plan" in log.read_text()


def dev_processes(dev: subprocess.Popen[bytes], log: Path) -> dict[str, int]:
    """The gateway, history, scheduler and worker `dev` started: its child processes (by parent
    pid), told apart by the module each runs; the worker is the one that said it connected."""
    children = children_of(dev.pid)
    found = {
        name: pid
        for pid, argv in children.items()
        for name in (*SERVICES, "worker")
        if argv[1:3] == ["-m", f"perdure.{name}"]
    }
    assert sorted(found) == sorted((*SERVICES, "worker")), children
    (worker_pid,) = re.findall(r"worker \S+:(\d+) connected:", log.read_text())
    assert int(worker_pid) == found["worker"]
    return found


def other_addresses() -> set[str]:
    """This machine's addresses that are not loopback (none on a machine without a network)."""
    found: set[str] = set()
    with contextlib.suppress(OSError):
        found.update(str(i[4][0]) for i in socket.getaddrinfo(socket.gethostname(), None))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:  # a UDP "connect" sends nothing: it only picks the outgoing interface
            probe.connect(("198.51.100.1", 9))
            found.add(probe.getsockname()[0])
        except OSError:
            pass
    return {a for a in found if not ipaddress.ip_address(a.split("%")[0]).is_loopback}


def assert_loopback_only(processes: dict[str, int], address: str) -> None:
    """Each service listens on its ports on 127.0.0.1 and nowhere else, no child of dev
    listens beyond loopback, and the machine's other addresses reach none of the ports."""
    base = int(address.rsplit(":", 1)[1])
    ports = {"gateway": {base, base + HTTP_OFFSET}, "history": {base + 1}, "scheduler": {base + 2}}
    loopback = ipaddress.ip_address("127.0.0.1")
    for service, expected in ports.items():
        assert listening(processes[service]) == {(loopback, p) for p in expected}, service
    for name, pid in processes.items():
        assert all(ip.is_loopback for ip, _ in listening(pid)), (name, listening(pid))
    for host in other_addresses():
        for port in set().union(*ports.values()):
            try:
                socket.create_connection((host, port), timeout=3).close()
            except OSError:
                continue  # refused (or dropped): not reachable there
            raise AssertionError(f"port {port} answers on {host}, beyond loopback")


def assert_on_loopback_with_the_secret_in_the_services_alone(
    address: str, dev: subprocess.Popen[bytes], log: Path
) -> None:
    """`perdure dev` listens on 127.0.0.1 only, and gives the internal secret it made for this
    run to its services alone."""
    said = log.read_text()
    assert "listen on 127.0.0.1 only (loopback: nothing outside this machine" in said
    assert "listening  127.0.0.1 only (loopback" in said
    processes = dev_processes(dev, log)
    assert_loopback_only(processes, address)

    environs = {name: environ_of(pid) for name, pid in processes.items()}
    [secret] = {environs[s].get("PERDURE_INTERNAL_SECRET") for s in SERVICES}  # one, shared
    assert secret is not None and len(secret) >= 32
    assert secret not in INHERITED.values()  # made for this run, not the shell's
    assert all("PERDURE_INTERNAL_SECRET_ACCEPTED" not in environs[s] for s in SERVICES)
    worker = environs["worker"]
    assert not [name for name in worker if name.startswith("PERDURE_INTERNAL_SECRET")]
    assert secret not in worker.values() and "PERDURE_DATABASE_URL" not in worker
    assert worker["PERDURE_API_KEY"].startswith("prd_")  # its own key, and only that
    # Shown nowhere and kept in no file.
    assert secret not in log.read_text()
    for path in data_dir_of(address).rglob("*"):
        try:
            kept = path.read_bytes() if path.is_file() else b""
        except OSError:
            continue
        assert secret.encode() not in kept, path


def test_dev_refuses_to_run_open_beyond_loopback(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    for flags, env in ((["--bind", "0.0.0.0"], {}), ([], {"PERDURE_DEV_BIND": "0.0.0.0"})):
        refused = subprocess.run(
            [
                *(sys.executable, "-m", "perdure.cli", "dev", "--insecure"),
                *("--data-dir", str(data_dir), "--base-port", str(free_base_port()), *flags),
            ],
            cwd=REPO_ROOT,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 2, refused.stdout + refused.stderr
        assert "refusing --insecure with --bind 0.0.0.0" in refused.stderr
        assert "loopback only" in refused.stderr
        assert not data_dir.exists()  # nothing started, not even the database


def test_dev_runs_open_only_when_asked_and_says_so_loudly(tmp_path: Path) -> None:
    with running_dev(tmp_path, "--insecure", env=INHERITED) as (address, dev, log):
        assert "INSECURE: no API keys" in log.read_text()
        assert "LOOPBACK ONLY (127.0.0.1) because nothing is authenticated" in log.read_text()
        assert "AUTHENTICATION IS OFF" in log.read_text()  # each service warns too
        processes = dev_processes(dev, log)
        assert_loopback_only(processes, address)
        for name, pid in processes.items():  # no process needs a secret, none gets the shell's
            assert not [n for n in environ_of(pid) if n.startswith("PERDURE_INTERNAL")], name
        listed = subprocess.run(
            [sys.executable, "-m", "perdure.cli", "workflow", "--address", address, "list"],
            cwd=REPO_ROOT,
            env={**os.environ, "PERDURE_DATA_DIR": str(tmp_path)},  # no key anywhere
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert listed.returncode == 0, listed.stderr

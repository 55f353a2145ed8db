"""`make k8s-check`: every overlay renders with `kubectl kustomize`, validates strictly against
a pinned Kubernetes version, and agrees with the services' own configuration."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from perdure.common.flags import DEFAULT_PORTS, GATEWAY_HTTP_PORT

REPO = Path(__file__).resolve().parents[2]
OVERLAYS = ("dev", "prod")
KUBERNETES_VERSION = "1.30.0"
HEALTH_PORTS = {"gateway": 7410, "history": 7411, "scheduler": 7412, "worker": 7413}
SOURCES = [REPO / "services", REPO / "examples", REPO / "sdk" / "node" / "src"]
# The names the flags module builds per service (f"PERDURE_{SERVICE}_LISTEN", ...).
PER_SERVICE = ("LISTEN", "HEALTH_LISTEN", "ADDRESS", "DATABASE_URL")
Resource = dict[str, Any]


def kubectl() -> str:
    """kubectl, or a skip (a failure where PERDURE_REQUIRE_KUBECTL is set, as in CI)."""
    found = shutil.which("kubectl")
    if found is not None:
        return found
    message = "kubectl is needed to render deploy/k8s (it carries kustomize)"
    if os.environ.get("PERDURE_REQUIRE_KUBECTL"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> list[Resource]:
    """One overlay, rendered."""
    overlay = REPO / "deploy" / "k8s" / "overlays" / request.param
    done = subprocess.run(
        [kubectl(), "kustomize", str(overlay)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(resources: list[Resource], kind: str) -> list[Resource]:
    return [r for r in resources if r["kind"] == kind]


def component(resource: Resource) -> str:
    return str(resource["metadata"].get("labels", {}).get("app.kubernetes.io/component", ""))


def containers(resources: list[Resource]) -> Iterator[tuple[Resource, Resource]]:
    """Every Perdure container, with the workload holding it."""
    for workload in of_kind(resources, "Deployment") + of_kind(resources, "Job"):
        for container in workload["spec"]["template"]["spec"]["containers"]:
            if "perdure" in container["image"]:
                yield workload, container


def test_every_resource_validates_strictly(rendered: list[Resource]) -> None:
    for resource in rendered:
        kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)


def test_every_deployment_has_probes_limits_and_no_root(rendered: list[Resource]) -> None:
    deployments = [d for d in of_kind(rendered, "Deployment") if component(d) in HEALTH_PORTS]
    assert sorted(component(d) for d in deployments) == sorted(HEALTH_PORTS)
    for workload, container in containers(rendered):
        name = workload["metadata"]["name"]
        assert container["resources"]["limits"] and container["resources"]["requests"], name
        context = container["securityContext"]
        assert context["runAsNonRoot"] and context["readOnlyRootFilesystem"], name
        assert not context["allowPrivilegeEscalation"] and context["capabilities"]["drop"] == [
            "ALL"
        ], name
    for deployment in deployments:
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        health = HEALTH_PORTS[component(deployment)]
        for probe in ("readinessProbe", "livenessProbe"):
            assert container[probe]["grpc"]["port"] == health, (component(deployment), probe)


def test_ports_and_addresses_match_the_services(rendered: list[Resource]) -> None:
    env_of: dict[str, dict[str, str]] = {}
    for workload, container in containers(rendered):
        env_of[component(workload)] = {
            e["name"]: e.get("value", "") for e in container.get("env", [])
        }
        if component(workload) in DEFAULT_PORTS:
            service = component(workload)
            ports = {p["containerPort"] for p in container["ports"]}
            http = {GATEWAY_HTTP_PORT} if service == "gateway" else set()
            assert ports == {DEFAULT_PORTS[service], HEALTH_PORTS[service], *http}, service
            upper = service.upper()
            assert env_of[service][f"PERDURE_{upper}_LISTEN"].endswith(f":{DEFAULT_PORTS[service]}")
            assert env_of[service][f"PERDURE_{upper}_HEALTH_LISTEN"].endswith(
                f":{HEALTH_PORTS[service]}"
            )
    [config] = [
        c for c in of_kind(rendered, "ConfigMap") if "perdure-config" in c["metadata"]["name"]
    ]
    for service in ("history", "scheduler"):
        address = config["data"][f"PERDURE_{service.upper()}_ADDRESS"]
        assert address.endswith(f":{DEFAULT_PORTS[service]}"), address
        [target] = [
            s for s in of_kind(rendered, "Service") if s["metadata"]["name"] == f"perdure-{service}"
        ]
        assert [p["port"] for p in target["spec"]["ports"]] == [DEFAULT_PORTS[service]]
        assert target["spec"]["clusterIP"] == "None"  # headless: clients see every replica


def test_every_setting_is_one_the_code_reads(rendered: list[Resource]) -> None:
    """No typo passes silently: each PERDURE_* name in the manifests appears in the sources."""
    code = "\n".join(p.read_text() for root in SOURCES for p in root.rglob("*.[pj][ys]"))
    names: set[str] = set()
    for resource in rendered:
        names.update(re.findall(r"\bPERDURE_[A-Z_]+\b", yaml.safe_dump(resource)))
    built = {f"PERDURE_{s.upper()}_{suffix}" for s in DEFAULT_PORTS for suffix in PER_SERVICE}
    assert names
    assert sorted(name for name in names if name not in code and name not in built) == []


def test_one_image_tag_everywhere(rendered: list[Resource]) -> None:
    images = {container["image"] for _, container in containers(rendered)}
    assert len(images) == 1 and ":" in next(iter(images)), images

"""`make k8s-check`: every overlay renders with `kubectl kustomize`, validates strictly against
a pinned Kubernetes version, agrees with the services' own configuration, gives the internal
secret to the services alone, and lets each pod reach exactly what it needs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
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
# Custom resources, which kubernetes-validate does not know: each against its CRD's schema cut
# to the fields the manifests use, every other field refused (tools/crd_schema.py).
SCHEMAS = Path(__file__).parent / "schemas"
CUSTOM_KINDS = {("postgresql.cnpg.io/v1", "Cluster"): "postgresql.cnpg.io_v1_cluster.json"}
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
        custom = CUSTOM_KINDS.get((resource["apiVersion"], resource["kind"]))
        if custom is None:
            kubernetes_validate.validate(resource, KUBERNETES_VERSION, strict=True)
            continue
        schema = json.loads((SCHEMAS / custom).read_text())
        jsonschema.validate(resource, schema)


def test_a_misspelt_custom_field_is_refused() -> None:
    """The custom schemas are strict: a field the CRD lacks, or a wrong type, fails."""
    schema = json.loads((SCHEMAS / CUSTOM_KINDS[("postgresql.cnpg.io/v1", "Cluster")]).read_text())
    cluster = {
        "apiVersion": "postgresql.cnpg.io/v1",
        "kind": "Cluster",
        "metadata": {"name": "x"},
        "spec": {"instances": 3, "postgresql": {"synchronous": {"method": "any", "number": 1}}},
    }
    jsonschema.validate(cluster, schema)
    for broken in (
        {"instances": 3, "minSyncReplica": 1},
        {"instances": "3"},
        {"instances": 3, "postgresql": {"synchronous": {"method": "all", "number": 1}}},
        {"instances": 3, "postgresql": {"synchronous": {"method": "any"}}},
    ):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**cluster, "spec": broken}, schema)


def test_prod_database_is_replicated_synchronously(rendered: list[Resource]) -> None:
    """prod: three CloudNativePG instances, a commit confirmed by at least one standby and
    never by the primary alone; every database user takes the operator's URL of the primary."""
    clusters = [r for r in rendered if r["kind"] == "Cluster"]
    if namespace_of(rendered) != "perdure":
        assert clusters == []
        return
    [cluster] = clusters
    spec = cluster["spec"]
    assert spec["instances"] >= 3
    synchronous = spec["postgresql"]["synchronous"]
    assert synchronous["number"] >= 1 and synchronous["dataDurability"] == "required"
    assert spec["postgresql"]["parameters"]["lc_messages"] == "C"
    users = set()
    for workload, container in containers(rendered):
        env = {e["name"]: e for e in container.get("env", [])}
        if "PERDURE_DATABASE_URL" in env:
            users.add(component(workload))
            reference = env["PERDURE_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
            assert reference == {"name": f"{cluster['metadata']['name']}-app", "key": "uri"}
    assert users == set(DATABASE_USERS)


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


# The internal credential: gateway, history and scheduler prove with it that a call comes from
# a Perdure service. In dev the cluster makes it (a service-account token Secret, key `token`);
# in prod an operator creates Secret perdure-internal with key `secret`.
INTERNAL_SECRET = "perdure-internal"
INTERNAL_HOLDERS = ("gateway", "history", "scheduler")
INTERNAL_KEY = {"perdure-dev": "token", "perdure": "secret"}


def namespace_of(resources: list[Resource]) -> str:
    [namespace] = of_kind(resources, "Namespace")
    return str(namespace["metadata"]["name"])


def test_the_internal_secret_reaches_the_services_alone(rendered: list[Resource]) -> None:
    key = INTERNAL_KEY[namespace_of(rendered)]
    seen = set()
    for workload, container in containers(rendered):
        name = component(workload)
        seen.add(name)
        env = {e["name"]: e for e in container.get("env", [])}
        # envFrom would hand over every key of the Secret, under names nobody checks.
        assert all(
            source.get("secretRef", {}).get("name") != INTERNAL_SECRET
            for source in container.get("envFrom", [])
        ), name
        if name in INTERNAL_HOLDERS:
            sent = env["PERDURE_INTERNAL_SECRET"]
            assert sent == {
                "name": "PERDURE_INTERNAL_SECRET",
                "valueFrom": {"secretKeyRef": {"name": INTERNAL_SECRET, "key": key}},
            }, name  # required: a service without it does not start
            assert env["PERDURE_INTERNAL_SECRET_ACCEPTED"] == {
                "name": "PERDURE_INTERNAL_SECRET_ACCEPTED",
                "valueFrom": {
                    "secretKeyRef": {"name": INTERNAL_SECRET, "key": "accepted", "optional": True}
                },
            }, name
        else:
            assert not [n for n in env if n.startswith("PERDURE_INTERNAL")], name
            assert INTERNAL_SECRET not in yaml.safe_dump(workload), name  # nor as a volume
    assert seen == {*INTERNAL_HOLDERS, "worker", "migrate"}, seen
    for config in of_kind(rendered, "ConfigMap"):  # never in a ConfigMap, which anyone reads
        assert "INTERNAL" not in yaml.safe_dump(config), config["metadata"]["name"]


def test_no_internal_secret_is_committed(rendered: list[Resource]) -> None:
    """prod references a Secret the operator creates; dev has Kubernetes fill in a token."""
    made = [s for s in of_kind(rendered, "Secret") if s["metadata"]["name"] == INTERNAL_SECRET]
    if namespace_of(rendered) == "perdure":
        assert made == []
        return
    [secret] = made
    assert secret["type"] == "kubernetes.io/service-account-token"
    assert not secret.get("data") and not secret.get("stringData")  # the cluster writes it
    owner = secret["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    [account] = [a for a in of_kind(rendered, "ServiceAccount") if a["metadata"]["name"] == owner]
    assert account["automountServiceAccountToken"] is False
    # As a Kubernetes credential the token can do nothing: no binding names its account, and no
    # pod runs as it.
    for binding in of_kind(rendered, "RoleBinding") + of_kind(rendered, "ClusterRoleBinding"):
        assert owner not in yaml.safe_dump(binding), binding["metadata"]["name"]
    for workload in workloads(rendered):
        assert workload["spec"]["template"]["spec"].get("serviceAccountName") != owner


def workloads(resources: list[Resource]) -> list[Resource]:
    return [r for r in resources if r["kind"] in ("Deployment", "StatefulSet", "Job")]


# Who reaches what, pod to pod (from, to, port): everything else is denied.
CALLS = {
    ("gateway", "history", 7401),
    ("gateway", "scheduler", 7402),
    ("history", "scheduler", 7402),
    ("scheduler", "history", 7401),
    ("worker", "history", 7401),  # JournalService
    ("worker", "scheduler", 7402),  # TaskService
}
DATABASE_USERS = ("history", "scheduler", "migrate")
# What accepts connections from outside the namespace (anyone, the kubelet): the public API and
# the health ports.
FROM_OUTSIDE = {
    "gateway": {7400, GATEWAY_HTTP_PORT, HEALTH_PORTS["gateway"]},
    "history": {HEALTH_PORTS["history"]},
    "scheduler": {HEALTH_PORTS["scheduler"]},
    "worker": {HEALTH_PORTS["worker"]},
    "migrate": set(),
    "postgres": set(),
}
DNS = {("UDP", 53), ("TCP", 53)}
# Ports a pod might try to reach beyond the namespace.
OUTSIDE_PORTS = {
    *DNS,
    *(("TCP", p) for p in (80, 443, 4317, 4318, 5432, 6443, 7400, 7401, 7402, GATEWAY_HTTP_PORT)),
}


def selects(selector: Resource, labels: dict[str, str]) -> bool:
    """Whether a label selector matches these labels."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        matched = {
            "In": key in labels and labels[key] in (values or []),
            "NotIn": key not in labels or labels[key] not in (values or []),
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[operator]
        if not matched:
            return False
    return True


def rule_allows(
    rule: Resource, peers: str, peer: dict[str, str] | None, proto: str, port: int
) -> bool:
    """Whether one ingress or egress rule lets `peer` (a pod's labels in this namespace, or None
    for anything outside it) through on proto/port."""
    ports = rule.get("ports")
    if ports and not any(
        p.get("protocol", "TCP") == proto
        and (p.get("port") is None or p["port"] <= port <= p.get("endPort", p["port"]))
        for p in ports
    ):
        return False
    sources = rule.get(peers)
    if not sources:  # missing or empty: every peer
        return True
    for source in sources:
        in_namespace = set(source) == {"podSelector"}
        if peer is None and not in_namespace:  # an ipBlock or another namespace
            return True
        if peer is not None and in_namespace and selects(source["podSelector"], peer):
            return True
    return False


def allowed(
    policies: list[Resource],
    pod: dict[str, str],
    direction: str,
    peer: dict[str, str] | None,
    proto: str,
    port: int,
) -> bool:
    """Whether the policies let `pod` accept (Ingress) or open (Egress) this connection."""
    isolating = [
        p
        for p in policies
        if direction in p["spec"].get("policyTypes", ["Ingress"])
        and selects(p["spec"]["podSelector"], pod)
    ]
    if not isolating:
        return True
    rules, peers = ("ingress", "from") if direction == "Ingress" else ("egress", "to")
    return any(
        rule_allows(rule, peers, peer, proto, port)
        for policy in isolating
        for rule in policy["spec"].get(rules, [])
    )


def test_network_policies_say_exactly_who_reaches_what(rendered: list[Resource]) -> None:
    policies = of_kind(rendered, "NetworkPolicy")
    pods: dict[str, tuple[dict[str, str], set[int]]] = {}
    for workload in workloads(rendered):
        labels = workload["spec"]["template"]["metadata"]["labels"]
        name = component(workload) if labels["app.kubernetes.io/name"] == "perdure" else "postgres"
        ports = {
            p["containerPort"]
            for c in workload["spec"]["template"]["spec"]["containers"]
            for p in c.get("ports", [])
        }
        pods[name] = (labels, ports)
    # An operator's database (prod): its instances' labels and ports (PostgreSQL, and the
    # instance manager the operator calls).
    operated = [r for r in rendered if r["kind"] == "Cluster"]
    for cluster in operated:
        pods["postgres"] = ({"cnpg.io/cluster": cluster["metadata"]["name"]}, {5432, 8000})
    assert "postgres" in pods

    calls = {
        (source, target, port)
        for source, (source_labels, _) in pods.items()
        for target, (target_labels, ports) in pods.items()
        for port in ports
        if allowed(policies, source_labels, "Egress", target_labels, "TCP", port)
        and allowed(policies, target_labels, "Ingress", source_labels, "TCP", port)
    }
    database = {(user, "postgres", 5432) for user in DATABASE_USERS}
    replication = {("postgres", "postgres", 5432)} if operated else set()
    assert calls == CALLS | database | replication

    for name, (labels, ports) in pods.items():
        open_to_outside = {p for p in ports if allowed(policies, labels, "Ingress", None, "TCP", p)}
        operator = {8000} if name == "postgres" and operated else set()
        assert open_to_outside == FROM_OUTSIDE[name] | operator, name
        reaches_outside = {
            (proto, port)
            for proto, port in OUTSIDE_PORTS
            if allowed(policies, labels, "Egress", None, proto, port)
        }
        expected = set(DNS)
        if operated:  # prod: the OTLP collector; the operator's instances, the Kubernetes API
            expected |= {("TCP", 4317)} if name != "postgres" else {("TCP", 443), ("TCP", 6443)}
        assert reaches_outside == expected, name

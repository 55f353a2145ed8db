"""Cut a CustomResourceDefinition's schema down to the fields a manifest uses, for the offline
manifest checks (tests/deploy/test_k8s.py): kubernetes-validate knows the built-in kinds
only. Each object keeps the properties the manifest sets, with their whole schema, and refuses
any other (additionalProperties: false), which is what the API server's strict field
validation does with an unknown field.

    python tools/crd_schema.py <the CRD's YAML> <a rendered manifest> <version> <source> \
        > schema.json

(<source>: where the CRD came from, kept in the schema's $comment.)

The CRD comes from the operator's release of the version the manifest needs (for
CloudNativePG: config/crd/bases/postgresql.cnpg.io_clusters.yaml)."""

from __future__ import annotations

import json
import sys
from typing import Any

import yaml

DROPPED = ("description", "x-kubernetes-validations")


def cut(schema: dict[str, Any], used: Any) -> dict[str, Any]:
    """`schema` with only what `used` (a value it validates) needs, descriptions dropped."""
    kept = {key: value for key, value in schema.items() if key not in DROPPED}
    if isinstance(used, dict) and "properties" in schema:
        properties = schema["properties"]
        kept["properties"] = {
            name: cut(properties[name], value) if name in properties else {}
            for name, value in used.items()
        }
        kept["additionalProperties"] = False
    elif isinstance(used, list) and "items" in schema and used:
        merged: dict[str, Any] = {}
        for item in used:
            if isinstance(item, dict):
                merged.update(item)
        kept["items"] = cut(schema["items"], merged or used[0])
    else:
        kept = strip(kept)
    return kept


def strip(schema: Any) -> Any:
    """A whole schema without descriptions."""
    if isinstance(schema, dict):
        return {k: strip(v) for k, v in schema.items() if k not in DROPPED}
    if isinstance(schema, list):
        return [strip(v) for v in schema]
    return schema


def main(crd_path: str, manifest_path: str, version: str, source: str) -> None:
    with open(crd_path) as crd_file:
        crd = yaml.safe_load(crd_file)
    with open(manifest_path) as manifest_file:
        manifests = [d for d in yaml.safe_load_all(manifest_file) if d]
    kind = crd["spec"]["names"]["kind"]
    api_version = f"{crd['spec']['group']}/{version}"
    used = [m for m in manifests if m.get("kind") == kind and m.get("apiVersion") == api_version]
    if not used:
        raise SystemExit(f"no {api_version} {kind} in {manifest_path}")
    [served] = [v for v in crd["spec"]["versions"] if v["name"] == version]
    schema = served["schema"]["openAPIV3Schema"]
    union: dict[str, Any] = {}
    for manifest in used:
        union.update({k: v for k, v in manifest.items() if k != "spec"})
        union.setdefault("spec", {}).update(manifest["spec"])
    out = cut(schema, union)
    out["properties"]["metadata"] = {"type": "object"}  # ObjectMeta: checked by the API server
    out["properties"]["apiVersion"] = {"const": api_version}
    out["properties"]["kind"] = {"const": kind}
    out["$comment"] = f"made by tools/crd_schema.py from {source}"
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:5])

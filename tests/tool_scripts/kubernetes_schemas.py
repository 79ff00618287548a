"""Kubernetes manifests against their schemas, run by the interpreter of the ``kubernetes-validate`` tool venv
(scripts/tool_env.py), which has kubernetes-validate (Kubernetes' own OpenAPI schemas for each release) and
jsonschema; nothing of the project is imported here.

stdin: ``{"documents": {name: document}, "crd_schemas": path, "versions": ["1.30.0", ...]}``; stdout: ``{name:
[error, ...]}``. A built-in kind is validated strictly (unknown fields refused) against each Kubernetes version;
a custom resource against the ``openAPIV3Schema`` in ``crd_schemas`` (tests/data/kubernetes/crd-schemas.json),
made strict the same way: every object schema that lists its properties refuses others, as ``kubectl apply``'s
strict field validation does.
"""
# tool venv: kubernetes-validate

from __future__ import annotations

import json
import sys
from typing import Any

import jsonschema
import kubernetes_validate


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` wherever properties are listed and unknown fields are not
    preserved (``x-kubernetes-preserve-unknown-fields``)."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    made = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in made
        and "additionalProperties" not in made
        and not made.get("x-kubernetes-preserve-unknown-fields")
    ):
        made["additionalProperties"] = False
    return made


def errors(document: dict[str, Any], crds: dict[str, Any], versions: list[str]) -> list[str]:
    key = f"{document.get('apiVersion')}/{document.get('kind')}"
    if key in crds:
        validator = jsonschema.Draft7Validator(strict(crds[key]))
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(document)]
    found = []
    for version in versions:
        try:
            kubernetes_validate.validate(document, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            found.append(f"Kubernetes {version}: {'/'.join(map(str, exc.path))}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            found.append(f"Kubernetes {version}: {exc}")
    return found


def main() -> None:
    job = json.load(sys.stdin)
    with open(job["crd_schemas"]) as file:
        crds = json.load(file)["schemas"]
    json.dump({name: errors(doc, crds, job["versions"]) for name, doc in job["documents"].items()}, sys.stdout)


if __name__ == "__main__":
    main()

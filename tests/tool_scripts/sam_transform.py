"""The SAM transform of a template as ``sam deploy`` has CloudFormation run it, in the ``sam`` tool venv (aws-sam-cli
brings samtranslator, whose pins conflict with the product's).

    <sam venv>/bin/python tests/tool_scripts/sam_transform.py template.yaml

Prints the transformed template as JSON. Code locations are replaced by the ``s3://`` URI ``sam package`` would
put there.
"""
# tool venv: sam

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse


def transform(path: Path) -> dict:
    template = yaml_parse(path.read_text())
    for resource in template["Resources"].values():
        for uri in ("CodeUri", "ContentUri"):
            if isinstance(resource.get("Properties", {}).get(uri), str):
                resource["Properties"][uri] = "s3://artifacts/code.zip"
    return Translator(managed_policy_map={}, sam_parser=Parser()).translate(template, parameter_values={})


if __name__ == "__main__":
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    print(json.dumps(transform(Path(sys.argv[1]))))

"""The IAM policy ``hadar cluster`` and the AWS provider need, generated from the EC2 calls
``hadar/providers/aws/provider.py`` makes (read from its source: ``self.ec2.<operation>(...)``,
``self._call("<operation>", ...)``, paginators and waiters), so it cannot fall behind the code.

``python -m hadar.providers.aws.iam_policy`` prints it; ``--write`` updates
``docs/aws-iam-policy.json`` (``tests/hadar/providers/test_aws_cost_and_safety.py`` checks that
file and, against moto, that every call a real up/dry-run/status/down makes is allowed by it).
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).with_name("provider.py")
DOC = Path(__file__).resolve().parents[3] / "docs" / "aws-iam-policy.json"

WAITER_OPERATIONS = {
    "instance_running": "describe_instances",
    "instance_terminated": "describe_instances",
}
"""The operation each boto3 waiter polls."""
IMPLIED = {"run_instances": ("create_tags",)}
"""Permissions an operation needs besides its own: tags given at launch (TagSpecifications)
need ``ec2:CreateTags``."""


def operations(source: str) -> list[str]:
    """The EC2 operations (snake_case) the source calls, sorted."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr, owner = node.func.attr, node.func.value
        first = node.args[0] if node.args else None
        literal = first.value if isinstance(first, ast.Constant) else None
        if attr in ("get_paginator", "_call") and isinstance(literal, str):
            found.add(literal)
        elif attr == "get_waiter" and isinstance(literal, str):
            found.add(WAITER_OPERATIONS[literal])
        elif isinstance(owner, ast.Attribute) and owner.attr == "ec2":  # self.ec2.run_instances
            found.add(attr)
    for op in list(found):
        found.update(IMPLIED.get(op, ()))
    return sorted(found)


def action(operation: str) -> str:
    """``run_instances`` -> ``ec2:RunInstances``."""
    return "ec2:" + "".join(part.capitalize() for part in operation.split("_"))


def policy(source: str | None = None) -> dict[str, Any]:
    """The IAM policy document allowing exactly the EC2 actions the provider uses."""
    ops = operations(SOURCE.read_text() if source is None else source)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "HadarClusterEc2",
                "Effect": "Allow",
                "Action": [action(op) for op in ops],
                "Resource": "*",
            }
        ],
    }


def text() -> str:
    return json.dumps(policy(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m hadar.providers.aws.iam_policy", description=__doc__
    )
    p.add_argument("--write", action="store_true", help=f"write {DOC.name} in docs/")
    args = p.parse_args(argv)
    if args.write:
        DOC.write_text(text())
        print(f"wrote {DOC}")
    else:
        print(text(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The IAM policy ``hadar cluster`` and the AWS provider need, generated from the EC2 calls
the modules of ``hadar/providers/aws/`` make (read from their source: ``self.ec2.<operation>(...)``,
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

from hadar.providers.aws import CLUSTER_TAG

SOURCES = tuple(
    Path(__file__).with_name(f"{name}.py") for name in ("ec2", "ssh_side", "lifecycle", "provider")
)
"""The modules that call EC2."""
DOC = Path(__file__).resolve().parents[3] / "docs" / "aws-iam-policy.json"

WAITER_OPERATIONS = {
    "instance_running": "describe_instances",
    "instance_terminated": "describe_instances",
}
"""The operation each boto3 waiter polls."""
IMPLIED = {"run_instances": ("create_tags",)}
"""Permissions an operation needs besides its own: tags given at launch (TagSpecifications)
need ``ec2:CreateTags``."""
INSTANCE_CHANGING = frozenset(
    {"terminate_instances", "stop_instances", "start_instances", "reboot_instances"}
)
"""Operations that change an existing instance's state: allowed only on instances that carry
the cluster tag (:data:`CLUSTER_TAG`), never on every instance in the account."""
LAUNCH_ONLY = frozenset({"create_tags"})
"""Operations allowed only as part of a launch (``ec2:CreateAction`` = ``RunInstances``): the
provider tags instances when it launches them and never retags another instance."""
INSTANCE_ARN = "arn:aws:ec2:*:*:instance/*"


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


def policy(source: str | None = None, cluster: str | None = None) -> dict[str, Any]:
    """The IAM policy document allowing exactly the EC2 actions the provider uses: terminating
    (or stopping) only instances tagged ``hadar-cluster`` (with ``cluster``: that cluster's
    only), tagging only at launch, the rest (describe, launch, console output) on any resource."""
    texts = [p.read_text() for p in SOURCES] if source is None else [source]
    ops = sorted({op for text in texts for op in operations(text)})
    changing = [op for op in ops if op in INSTANCE_CHANGING]
    launch = [op for op in ops if op in LAUNCH_ONLY]
    other = [op for op in ops if op not in INSTANCE_CHANGING and op not in LAUNCH_ONLY]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "HadarClusterEc2",
            "Effect": "Allow",
            "Action": [action(op) for op in other],
            "Resource": "*",
        }
    ]
    if launch:
        statements.append(
            {
                "Sid": "HadarTagAtLaunch",
                "Effect": "Allow",
                "Action": [action(op) for op in launch],
                "Resource": "*",
                "Condition": {"StringEquals": {"ec2:CreateAction": "RunInstances"}},
            }
        )
    if changing:
        tag = f"aws:ResourceTag/{CLUSTER_TAG}"
        statements.append(
            {
                "Sid": "HadarClusterInstancesOnly",
                "Effect": "Allow",
                "Action": [action(op) for op in changing],
                "Resource": INSTANCE_ARN,
                "Condition": {"StringEquals": {tag: cluster}}
                if cluster is not None
                else {"StringLike": {tag: "?*"}},
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def text(cluster: str | None = None) -> str:
    return json.dumps(policy(cluster=cluster), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m hadar.providers.aws.iam_policy", description=__doc__
    )
    p.add_argument("--write", action="store_true", help=f"write {DOC.name} in docs/")
    p.add_argument(
        "--cluster",
        metavar="NAME",
        help="allow terminating only this cluster's instances (its hadar-cluster tag's value)",
    )
    args = p.parse_args(argv)
    if args.write:
        if args.cluster is not None:
            p.error("--write writes the policy for every cluster; --cluster prints one")
        DOC.write_text(text())
        print(f"wrote {DOC}")
    else:
        print(text(args.cluster), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

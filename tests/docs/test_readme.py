"""The README's first section names every system and baseline the harness runs (a policy
registered from ``baselines/`` or a seed system's package), so a new user sees what Hadar is
compared with."""

from __future__ import annotations

from pathlib import Path

from hadar.policy import POLICY_REGISTRY

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_intro_names_every_registered_baseline() -> None:
    intro = README.read_text().split("\n## ", 1)[0]
    homes = ("baselines.", "pollux.", "afs.", "bftrainer.", "malletrain.")
    baselines = [c for c in POLICY_REGISTRY.values() if c.__module__.startswith(homes)]
    assert len(baselines) >= 10
    missing = sorted({c.info.title.split(" (")[0] for c in baselines} - {w for w in _words(intro)})
    assert not missing, f"README.md's first section does not name {missing}"


def _words(text: str) -> set[str]:
    return {w.strip("*,;:.()") for w in text.split()}

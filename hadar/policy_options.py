"""Policy knobs from the command line: ``--policy-opt KEY=VALUE``, typed by the policy's config.

Every policy class names its frozen config dataclass (``config_class``); a value is converted to
its field's type (bool, int, float, str, optional int) and the config's own checks run, so an
unknown key or a bad value is one line naming the option. HadarE also takes Hadar's knobs (they
configure the Hadar decision it forks from). ``preset=legacy`` selects Hadar's original
configuration (see :meth:`hadar.scheduler.HadarConfig.legacy`).
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from hadar.core.errors import InputError, shorten
from hadar.core.suggest import did_you_mean
from hadar.policy import Policy, make_policy, policy_class

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def parse_pairs(
    items: Sequence[str] | None, flag: str = "--policy-opt", policy: str | None = None
) -> dict[str, str]:
    """``["a=1", "b=x"]`` -> ``{"a": "1", "b": "x"}``; a malformed item or a repeated key is an error.

    With ``policy`` (a command that runs one policy), ``POLICY:KEY=VALUE`` as ``hadar compare``
    takes it is read too when POLICY is that policy, and refused naming both when it is another."""
    out: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if policy is not None and ":" in key:
            named, _, key = (part.strip() for part in key.partition(":"))
            if named != policy:
                setting = shorten(f"{key}={value.strip()}")
                raise InputError(
                    f"{flag}: {shorten(item)!r} is for policy {shorten(named)!r}, but --policy is "
                    f"{policy!r} (write {setting} or {policy}:{setting})"
                )
        if not sep or not key:
            raise InputError(f"{flag}: expected KEY=VALUE (got {shorten(item)!r})")
        if key in out:
            raise InputError(f"{flag}: {shorten(key)!r} given twice")
        out[key] = value.strip()
    return out


def policy_with_options(
    name: str, options: Mapping[str, str] | None = None, **fixed: Any
) -> Policy:
    """The policy ``name`` configured from string ``options`` (and typed ``fixed`` knobs)."""
    if not options:
        return make_policy(name, **fixed)
    return make_policy(name, config=build_config(name, options, **fixed))


def config_knobs(name: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that policy ``name``'s config has a field of that name for
    (a driver's knobs that a policy takes, like HadarE's ``aggregation_overhead_s``)."""
    config_cls = policy_class(name).config_class
    fields = {f.name for f in dataclasses.fields(config_cls)} if config_cls else set()
    return {k: v for k, v in values.items() if k in fields}


def build_config(name: str, options: Mapping[str, str], **fixed: Any) -> Any:
    """The config dataclass of policy ``name`` with ``options`` applied (InputError when bad)."""
    cls = policy_class(name)
    config_cls = getattr(cls, "config_class", None)
    if config_cls is None:
        raise InputError(f"--policy-opt: policy {name!r} has no options")
    opts = dict(options)
    base = _preset(name, config_cls, opts.pop("preset", None))
    nested = _nested_config_field(config_cls)
    own = {f.name: f for f in dataclasses.fields(config_cls) if f.name != nested}
    inner_cls = type(getattr(base, nested)) if nested else None
    inner = {f.name: f for f in dataclasses.fields(inner_cls)} if inner_cls else {}
    outer_values: dict[str, Any] = dict(fixed)
    inner_values: dict[str, Any] = {}
    hints = typing.get_type_hints(config_cls)
    inner_hints = typing.get_type_hints(inner_cls) if inner_cls else {}
    for key, raw in opts.items():
        if key in own:
            outer_values[key] = _convert(key, raw, hints[key])
        elif key in inner:
            inner_values[key] = _convert(key, raw, inner_hints[key])
        else:
            known = sorted({*own, *inner, "preset"})
            raise InputError(
                f"--policy-opt: unknown option {shorten(key)!r} for policy {name}"
                f"{did_you_mean(key, known)} (known: {', '.join(known)})"
            )
    try:
        if nested and inner_values:
            outer_values[nested] = dataclasses.replace(getattr(base, nested), **inner_values)
        return dataclasses.replace(base, **outer_values)
    except (ValueError, TypeError) as exc:
        raise InputError(f"--policy-opt: {shorten(str(exc), 300)}") from None


def effective_options(
    name: str, options: Mapping[str, str] | None = None, **fixed: Any
) -> dict[str, str]:
    """Every knob of policy ``name``'s config once ``options`` are applied, defaults included, as
    ``{"field": "value", "nested.field": "value"}`` (what a run's identity records: a knob added
    later, like ``max_wait_s``, is covered without being named)."""
    config_cls = getattr(policy_class(name), "config_class", None)
    if config_cls is None:
        if options:
            build_config(name, options)  # raises: the policy has no options
        return {}
    config = build_config(name, options or {}, **fixed)
    out: dict[str, str] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value):
            out.update(
                {
                    f"{f.name}.{g.name}": _text(getattr(value, g.name))
                    for g in dataclasses.fields(value)
                }
            )
        else:
            out[f.name] = _text(value)
    return out


def _text(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _preset(name: str, config_cls: type, preset: str | None) -> Any:
    if preset in (None, "", "default"):
        return config_cls()
    maker = getattr(config_cls, "preset", None)
    if maker is None:
        raise InputError(f"--policy-opt: policy {name} has no presets")
    try:
        return maker(preset)
    except ValueError as exc:
        raise InputError(f"--policy-opt: preset: {exc}") from None


def _nested_config_field(config_cls: type) -> str | None:
    """The field holding a nested policy config (HadarE's ``hadar``), if any."""
    for f in dataclasses.fields(config_cls):
        if dataclasses.is_dataclass(f.default) and not isinstance(f.default, type):
            return f.name
    return None


def _convert(key: str, raw: str, hint: Any) -> Any:
    options = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    if type(None) in options and raw.lower() in ("none", "null", ""):
        return None
    target = next(t for t in options if t is not type(None))
    text = raw.strip()
    if target is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise InputError(f"--policy-opt: {key}: expected true or false (got {shorten(raw)!r})")
    if target is int:
        try:
            return int(text)
        except ValueError:
            raise InputError(
                f"--policy-opt: {key}: expected an integer (got {shorten(raw)!r})"
            ) from None
    if target is float:
        try:
            value = float(text)
        except ValueError:
            raise InputError(
                f"--policy-opt: {key}: expected a number (got {shorten(raw)!r})"
            ) from None
        if not math.isfinite(value):
            raise InputError(f"--policy-opt: {key}: must be finite (got {shorten(raw)!r})")
        return value
    return text

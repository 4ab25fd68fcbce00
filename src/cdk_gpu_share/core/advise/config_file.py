"""The advice written into the platform config, every comment and every other field kept.

With ``--config``, the advisor works on the scenario ``simulate --config`` builds from one
backend, whose capacity names one instance type: guarantees and capacity then move by
whole instances of it (:func:`instance_of`). :func:`checked_config_text` edits the file's own
YAML tree (a round trip through ``ruamel.yaml``, not a rewrite): only the fields the
advisor decided and that changed are touched (a team's guarantee of that type, its
``sharing``, its ``borrow_limit_percent``, and with ``--fleet size`` the backend's
capacity), plus ``objectives.entitlement`` of a team whose guarantee now differs from what
it was promised, and the result is read back through the config's validation before it
replaces anything.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.advise.space import Candidate, Choice
from cdk_gpu_share.core.advise.windows import guarantees_of, team_windows
from cdk_gpu_share.core.catalog import instances
from cdk_gpu_share.core.configuration import backends
from cdk_gpu_share.core.configuration.objectives import ENTITLEMENT_KEY
from cdk_gpu_share.core.configuration.parse import PlatformConfig, parse_config
from cdk_gpu_share.core.errors import ConfigError, Problem

__all__ = ["REWRITTEN_COMMENT", "accepted_percents", "advised_config_text", "checked_config_text", "instance_of", "least_guarantee"]


def instance_of(config: PlatformConfig, backend: str) -> tuple[str, int]:
    """The backend's one instance type and its GPUs; a ConfigError when it has several (the
    advisor moves guarantees by whole instances of one type) or one without GPUs."""
    section = config.backend(backend)
    types = list(section.capacity) if section is not None else []
    if len(types) != 1:
        raise ConfigError(Problem(field=f"{backend}.capacity", value=", ".join(types),
                                  message="names more than one instance type; the advisor moves guarantees by "
                                          "whole instances of one type",
                                  fix="advise on a scenario instead (gpu-share simulate's --scenario format), "
                                      "or on a config whose backend has one instance type"))
    info = instances.lookup(types[0])
    if info is None or not info.gpus:
        raise ConfigError(Problem(field=f"{backend}.capacity", value=types[0], message="has no GPUs in the catalog",
                                  fix="use a GPU instance type"))
    return types[0], int(info.gpus)


def least_guarantee(config: PlatformConfig, backend: str) -> float:
    """The least guarantee (GPUs) a team may have on the backend: its spec's least number of
    instances (one on ``batch_quota``, whose quota shares refuse a capacity limit of 0)."""
    return float(backends.spec(backend).least_guarantee_instances * instance_of(config, backend)[1])


def accepted_percents(raw: Mapping[str, Any], backend: str, team: str, ladder: tuple[int, ...]) -> tuple[int, ...]:
    """The borrow limits of ``ladder`` the config's validation accepts for ``team`` lending and
    borrowing (HyperPod, for one, takes no -1): asked of the validation itself, not a copy of it."""
    import copy

    kept = []
    for percent in ladder:
        trial = copy.deepcopy(dict(raw))
        for t in trial.get("teams", []):
            if isinstance(t, dict) and t.get("name") == team:
                t["sharing"] = "lend_and_borrow"
                t["borrow_limit_percent"] = percent
        try:
            parse_config(trial, source="advise")
        except ConfigError as exc:
            if any(p.field.endswith("borrow_limit_percent") for p in exc.problems):
                continue
        kept.append(percent)
    return tuple(kept)


def _load(text: str) -> tuple[Any, Any]:
    """The round-trip YAML tree of ``text`` and a dumper that writes it in the file's own indentation."""
    from ruamel.yaml import YAML
    from ruamel.yaml.util import load_yaml_guess_indent

    # The guess: a sequence item's content column (``indent``) and its dash's (``offset``).
    _, indent, offset = load_yaml_guess_indent(text)
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 4096  # never fold a long line the user wrote on one
    indent, offset = indent or 2, offset or 0
    y.indent(mapping=max(2, indent - offset), sequence=indent, offset=offset)
    return y.load(text), y


#: What the end-of-line comment of a value the advice changed says instead: the comment described
#: the value that was there.
REWRITTEN_COMMENT = "# gpu-share advise: was {was}"


def _end_of_line(mapping: Any, key: str) -> Any:
    """The comment token after ``key``'s value when its line ends with a comment, else None."""
    item = mapping.ca.items.get(key) if hasattr(mapping, "ca") else None
    token = item[2] if item is not None and len(item) > 2 else None
    return token if token is not None and token.value.startswith("#") else None


def _recomment(mapping: Any, key: str, was: Any) -> None:
    """``key``'s value was changed: a comment at the end of its line, which described the old
    value, says what the value was instead. The lines after it (blank lines, comments) stay."""
    token = _end_of_line(mapping, key)
    if token is not None:
        _, newline, rest = token.value.partition("\n")
        token.value = REWRITTEN_COMMENT.format(was=was) + newline + rest


def _set(mapping: Any, key: str, value: Any, *, also: tuple[Any, str] | None = None) -> None:
    """Change ``key``'s value, rewriting the comment on its line (and on ``also``'s, the line a
    flow mapping such as ``guarantee: {g5.xlarge: 1}`` stands on)."""
    was = mapping[key]
    if was == value:
        return
    mapping[key] = value
    _recomment(mapping, key, was)
    if also is not None and _flow(mapping):
        _recomment(also[0], also[1], f"{{{key}: {was}}}")


def _put(mapping: Any, key: str, value: Any, after: str | None = None) -> None:
    """Set ``key``; a new key goes right after ``after`` (else last). What followed the key it
    now follows (a blank line, a comment) moves below it, so the file's layout stays."""
    if key in mapping:
        _set(mapping, key, value)
        return
    keys = list(mapping)
    anchor = after if after in mapping else (keys[-1] if keys else None)
    position = keys.index(anchor) + 1 if anchor is not None else len(keys)
    mapping.insert(position, key, value)
    if anchor is not None and anchor in mapping.ca.items and position == len(keys):
        mapping.ca.items[key] = mapping.ca.items.pop(anchor)


def _flow(mapping: Any) -> bool:
    """Whether ``mapping`` was written on one line (``{g5.xlarge: 1}``)."""
    fa = getattr(mapping, "fa", None)
    return bool(fa is not None and fa.flow_style())


def _drop(mapping: Any, key: str) -> None:
    """Remove ``key`` and the comment on its line; what followed its line (blank lines,
    comments) stays, after the key before it."""
    if key not in mapping:
        return
    keys = list(mapping)
    item = mapping.ca.items.pop(key, None)
    del mapping[key]
    token = item[2] if item is not None and len(item) > 2 else None
    rest = token.value.partition("\n")[2] if token is not None else ""
    position = keys.index(key)
    if token is None or not rest or position == 0:
        return
    # The key before it ends where the dropped line stood: the last line of a block value.
    owner, last = mapping, keys[position - 1]
    while isinstance(owner[last], Mapping) and owner[last] and not _flow(owner[last]):
        owner, last = owner[last], list(owner[last])[-1]
    kept = owner.ca.items.get(last)
    if kept is not None and len(kept) > 2 and kept[2] is not None:
        kept[2].value += rest
    else:
        token.value = "\n" + rest
        owner.ca.items[last] = [None, None, token, None]


def advised_config_text(text: str, config: PlatformConfig, backend: str, candidate: Candidate,
                        was: Candidate, names: tuple[str, ...], *, fleet: str,
                        entitlements: Mapping[str, float] | None = None) -> str:
    """``text`` (the config file) with the candidate's decisions that differ from ``was``, and
    ``objectives.entitlement`` for each team whose advised guarantee differs from its entitlement
    (``entitlements``: GPUs by team; the team's input guarantee when it gave none)."""
    instance_type, per = instance_of(config, backend)
    data, y = _load(text)
    by_name = {t["name"]: t for t in data.get("teams", []) if isinstance(t, Mapping) and "name" in t}
    default_percent = backends.spec(backend).default_borrow_percent
    windows = [w.name for w in config.windows]
    for i, (name, new, old) in enumerate(zip(names, candidate.choices, was.choices)):
        team = by_name[name]
        _apply(team, new, old, instance_type, per, -1 if default_percent is None else default_percent)
        if windows:
            _apply_windows(team, team_windows(candidate, windows, i), windows, instance_type, per)
        e = (entitlements or {}).get(name)
        if e is not None and any(abs(g - e) > 1e-9 for g in guarantees_of(candidate, i)):
            _entitle(team, name, e, instance_type, per)
    if fleet == "size" and candidate.capacity != was.capacity:
        _set(data[backend]["capacity"], instance_type, int(round(candidate.capacity / per)),
             also=(data[backend], "capacity"))
    out = io.StringIO()
    y.dump(data, out)
    return out.getvalue()


def _entitle(team: Any, name: str, gpus: float, instance_type: str, per: int) -> None:
    """Write the team's entitlement (whole instances of ``instance_type``) unless it gives one:
    the promise its objectives were judged against, now that its guarantee is another."""
    objectives = team.get("objectives")
    if isinstance(objectives, Mapping) and ENTITLEMENT_KEY in objectives:
        return
    count = gpus / per
    if abs(count - round(count)) > 1e-9:
        raise ConfigError(Problem(field=f"teams ({name}).guarantee", value=f"{gpus:g} GPUs",
                                  message=f"is not whole instances of {instance_type}, so it cannot be written as the "
                                          "team's entitlement",
                                  fix=f"give the team objectives.entitlement in whole instances of {instance_type}"))
    from ruamel.yaml.comments import CommentedMap

    entitlement = CommentedMap({instance_type: int(round(count))})
    if objectives is None:
        objectives = CommentedMap({ENTITLEMENT_KEY: entitlement})
        _put(team, "objectives", objectives)
        _sink(team, "objectives")
    else:
        _put(objectives, ENTITLEMENT_KEY, entitlement)
        _sink(objectives, ENTITLEMENT_KEY)


def _sink(mapping: Any, key: str) -> None:
    """Move what follows ``key``'s new block value (a blank line, a comment) below the block's
    last line, where it stood before the block was added."""
    trailing = mapping.ca.items.pop(key, None) if key in mapping.ca.items else None
    if trailing is None:
        return
    inner = mapping[key]
    while isinstance(inner, Mapping) and inner and isinstance(inner[list(inner)[-1]], Mapping):
        inner = inner[list(inner)[-1]]
    inner.ca.items[list(inner)[-1]] = trailing


def _apply(team: Any, new: Choice, old: Choice, instance_type: str, per: int, default_percent: int) -> None:
    if new.guarantee != old.guarantee:
        _set(team["guarantee"], instance_type, int(round(new.guarantee / per)), also=(team, "guarantee"))
    if new.sharing != old.sharing:
        _put(team, "sharing", new.sharing, after="guarantee")
    if new.percent is None:  # a team that never borrows takes no borrow limit
        for key in ("borrow_limit_percent", "borrow_limit"):
            _drop(team, key)
    elif new.percent != old.percent or ("borrow_limit_percent" not in team and new.percent != default_percent):
        _put(team, "borrow_limit_percent", new.percent, after="sharing")


def _apply_windows(team: Any, values: Mapping[str, Mapping[str, Any]], windows: list[str], instance_type: str,
                   per: int) -> None:
    """The team's ``windows:`` with the advised values (``values``: per window, in GPUs, where they
    differ from the team's own): a window's guarantee of ``instance_type`` and its
    ``borrow_limit_percent`` set or removed; what else the team gives in a window (a
    ``borrow_limit``, other instance types) kept; a window left with nothing removed."""
    from ruamel.yaml.comments import CommentedMap

    given = team.get("windows")
    if given is None and not values:
        return
    if given is None:
        given = CommentedMap()
        _put(team, "windows", given)
        _sink(team, "windows")
    for name in windows:
        wanted = values.get(name, {})
        entry = given.get(name)
        if entry is None and not wanted:
            continue
        if entry is None:
            entry = CommentedMap()
            _put(given, name, entry)
        if "guarantee" in wanted:
            count = int(round(float(wanted["guarantee"]["gpu"]) / per))
            if isinstance(entry.get("guarantee"), Mapping):
                _set(entry["guarantee"], instance_type, count, also=(entry, "guarantee")) \
                    if instance_type in entry["guarantee"] else _put(entry["guarantee"], instance_type, count)
            else:  # the team's own instance types, this one advised (a window names the same types)
                _put(entry, "guarantee", CommentedMap({**dict(team["guarantee"]), instance_type: count}))
        elif isinstance(entry.get("guarantee"), Mapping) and instance_type in entry["guarantee"]:
            _set(entry["guarantee"], instance_type, team["guarantee"][instance_type], also=(entry, "guarantee"))
            if dict(entry["guarantee"]) == dict(team["guarantee"]):
                _drop(entry, "guarantee")
        if "borrow_limit_percent" in wanted:
            _put(entry, "borrow_limit_percent", wanted["borrow_limit_percent"])
        else:
            _drop(entry, "borrow_limit_percent")
        if not entry:
            _drop(given, name)
    if not given:
        _drop(team, "windows")


def checked_config_text(path: str, source: str, config: PlatformConfig, backend: str, candidate: Candidate,
                        was: Candidate, names: tuple[str, ...], *, fleet: str,
                        entitlements: Mapping[str, float] | None = None) -> str:
    """The advised config's text for ``path``, checked by what ``gpu-share validate`` checks
    (the command writes it; an invalid result raises :class:`ConfigError` and writes nothing)."""
    text = advised_config_text(V.read_text(source), config, backend, candidate, was, names, fleet=fleet,
                               entitlements=entitlements)
    parse_config(V.load_yaml(text, source=path), source=path)  # what gpu-share validate checks
    return text

"""The validation toolkit: one set of helpers for every input the library reads.

The platform config (:mod:`cdk_gpu_share.core.configuration.parse`), the inference section
(:mod:`cdk_gpu_share.inference.config`), the reclaim planner's state
(:mod:`cdk_gpu_share.core.policy.reclaim`) and the simulator's scenario and trace
(:mod:`cdk_gpu_share.core.simulate`) all read user input through these:

- **Field paths**, written one way: :func:`key` and :func:`item`
  (``teams[1] (team-b).guarantee.ml.g5.xlarge``). A list entry always carries its
  index, and its name when it has one.
- **Bounded quoting** (:func:`quote`): a message shows at most
  :data:`QUOTE_LIMIT` characters of a value, whatever its size (a 5,000-digit
  number, a megabyte string, an alias bomb).
- **Safe numbers**: :func:`read_int` and :func:`read_number` check type,
  finiteness and range of parsed values without converting huge integers to
  float; :func:`parse_decimal` checks the *text* of a number (digits, exponent)
  before building it, so ``1e999999999`` is refused at once instead of building a
  billion-digit integer.
- **Safe loaders**: :func:`load_yaml` refuses oversized files, duplicate keys (with
  the line of each), nesting deeper than :data:`MAX_DEPTH` and alias expansion
  beyond :data:`MAX_EXPANDED_NODES`, each with line and column;
  :func:`load_json` refuses numbers with too many digits and nesting too deep.

Everything here is pure Python (no CDK, no boto3) and raises or records
:class:`~cdk_gpu_share.core.errors.Problem` objects, never a traceback.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any

from cdk_gpu_share.core.errors import ConfigError, Problem

# Bounded quoting lives below the errors, which quote a problem's value; read here as part of the toolkit.
from cdk_gpu_share.core.quoting import QUOTE_LIMIT as QUOTE_LIMIT
from cdk_gpu_share.core.quoting import OutOfRange as OutOfRange
from cdk_gpu_share.core.quoting import quote
from cdk_gpu_share.core.quoting import short_text as _short_text

# ---------------------------------------------------------------------------
# Limits, in one place.

#: Largest config or state file read (bytes). A real platform.yaml is a few KiB; a
#: 5 MB file is refused before it is parsed.
MAX_INPUT_BYTES = 256 * 1024
#: Deepest nesting of mappings and lists (a platform config needs 6).
MAX_DEPTH = 64
#: Most nodes a YAML document may stand for once its aliases are expanded.
MAX_EXPANDED_NODES = 100_000
#: Most characters of a number written as text (digits, sign, point, exponent).
MAX_NUMBER_CHARS = 40
#: Largest exponent in a number written as text (``1e30``).
MAX_EXPONENT = 30
#: Integers AWS APIs take (32-bit); the default upper bound of :func:`read_int`.
MAX_INT = 2**31 - 1
#: Largest magnitude of any number read: every integer below it is exact as a float,
#: and sums of many of them never overflow.
SAFE_NUMBER = 2**53

AddProblem = Callable[[str, object, str, str], None]


# ---------------------------------------------------------------------------
# Field paths.


def key(where: str, name: object) -> str:
    """The path of mapping key ``name`` under ``where`` (``teams[0] (a).guarantee``)."""
    text = _short_text(str(name), 60)
    return f"{where}.{text}" if where else text


def item(where: str, index: int, name: object = None) -> str:
    """The path of list entry ``index`` under ``where``, with its name when it has one.

    ``item("teams", 1, "team-b")`` is ``teams[1] (team-b)``.
    """
    path = f"{where}[{index}]"
    if isinstance(name, str) and name:
        path += f" ({_short_text(name, 60)})"
    return path


# ---------------------------------------------------------------------------
# Problems.


class Problems:
    """Collects every problem of one input, so that all are reported at once."""

    def __init__(self) -> None:
        self.items: list[Problem] = []

    def add(self, field_: str, value: object, message: str, fix: str = "") -> None:
        self.items.append(Problem(field=field_, value=value, message=message, fix=fix))

    def __len__(self) -> int:
        return len(self.items)

    def raise_if_any(self, *, source: str | None = None, label: str | None = None) -> None:
        if self.items:
            raise ConfigError(self.items, source=source, label=label)


def unknown_keys(raw: Mapping, allowed: Iterable[str], where: str, add: AddProblem) -> None:
    """Record every key of ``raw`` not in ``allowed``, suggesting the closest allowed key."""
    allowed = sorted(allowed)
    for k in raw:
        if k not in allowed:
            close = difflib.get_close_matches(str(k), allowed, n=1)
            fix = f"did you mean '{close[0]}'?" if close else f"allowed keys: {', '.join(allowed)}"
            add(key(where, k), raw[k], "unknown key", fix)


def read_mapping(value: object, where: str, add: AddProblem, *, required: bool = False,
                 required_fix: str = "add it (`gpu-share init` writes a complete example)") -> Mapping | None:
    """``value`` when it is a mapping; None when it is absent (``None``), recording "is required"
    with ``required_fix`` if ``required``, or when it is anything else, recording what it is. The
    one check of a section or field that must be ``key: value`` pairs."""
    if value is None:
        if required:
            add(where, None, "is required", required_fix)
        return None
    if not isinstance(value, Mapping):
        add(where, value, f"must be a mapping, not {kind(value)}", "write key: value pairs")
        return None
    return value


def json_kind(value: object) -> str:
    """:func:`kind` in JSON's words (``an object`` for a mapping)."""
    return "an object" if isinstance(value, Mapping) else kind(value)


def kind(value: object) -> str:
    """What a value is, in the words of YAML (``a string``, ``a mapping``, ``a list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, OutOfRange):
        return "a number out of range"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return type(value).__name__


# ---------------------------------------------------------------------------
# Numbers.


def is_number(value: object) -> bool:
    """A finite int or float (not a bool) of magnitude at most :data:`SAFE_NUMBER`.

    Never converts a huge int to float (``math.isfinite(10**400)`` overflows).
    """
    t = type(value)
    if t is int:
        return -SAFE_NUMBER <= value <= SAFE_NUMBER  # type: ignore[operator]
    if t is float:
        return -SAFE_NUMBER <= value <= SAFE_NUMBER  # type: ignore[operator]  # False for nan and inf
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    if isinstance(value, int):
        return -SAFE_NUMBER <= value <= SAFE_NUMBER
    return -SAFE_NUMBER <= float(value) <= SAFE_NUMBER


def number_problem(value: object, *, integer: bool = False) -> str | None:
    """Why ``value`` is not a usable number (``None`` when it is)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"must be a {'whole number' if integer else 'number'}, not {kind(value)}"
    if isinstance(value, float) and math.isnan(value):
        return "must be a number, not NaN"
    if isinstance(value, float) and math.isinf(value) and not isinstance(value, OutOfRange):
        return "must be a finite number, not infinity"
    if not is_number(value):
        return f"is too large (at most {SAFE_NUMBER:,})"
    if integer and isinstance(value, float) and not value.is_integer():
        return "must be a whole number"
    return None


def read_int(
    value: Any,
    where: str,
    add: AddProblem,
    *,
    minimum: int | None = None,
    maximum: int | None = MAX_INT,
    fix: str = "",
) -> int | None:
    """A whole number within ``[minimum, maximum]`` (``2.0`` counts as 2), or ``None`` with a problem."""
    why = number_problem(value, integer=True)
    if why is not None:
        if why.startswith("is too large"):
            bound = maximum if maximum is not None else SAFE_NUMBER
            add(where, value, f"is too large (at most {bound:,})", fix or f"use a value <= {bound}")
        else:
            add(where, value, why, fix or "write a whole number such as 1")
        return None
    value = int(value)
    if minimum is not None and value < minimum:
        add(where, value, f"must be at least {minimum}", fix or f"use a value >= {minimum}")
        return None
    if maximum is not None and value > maximum:
        add(where, value, f"must be at most {maximum:,}", fix or f"use a value <= {maximum}")
        return None
    return value


def read_number(
    value: Any,
    where: str,
    add: AddProblem,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    fix: str = "",
    type_fix: str = "",
) -> float | None:
    """A finite number within the bounds (``above`` is exclusive), or ``None`` with a problem.

    ``fix`` replaces every default fix; ``type_fix`` only the one for a value that is no
    number at all, so a value out of range still gets the bound it crossed.
    """
    why = number_problem(value)
    if why is not None:
        if why.startswith("is too large") and maximum is not None:
            why = f"is too large (at most {_shown(maximum, grouped=True)})"
        add(where, value, why, fix or type_fix or "write a number such as 4")
        return None
    number = float(value)
    if minimum is not None and number < minimum:
        add(where, value, f"must be at least {_shown(minimum)}", fix or f"use a value >= {_shown(minimum)}")
        return None
    if above is not None and number <= above:
        add(where, value, f"must be above {_shown(above)}", fix or f"use a value > {_shown(above)}")
        return None
    if maximum is not None and number > maximum:
        add(where, value, f"must be at most {_shown(maximum, grouped=True)}", fix or f"use a value <= {_shown(maximum)}")
        return None
    return number


def _shown(bound: float, *, grouped: bool = False) -> str:
    """A bound as a reader writes it: 10,000,000 in a message (not ``:g``'s 1e+07), 0.5 as is.

    ``grouped=False`` for fixes, whose numbers are meant to be copied into YAML.
    """
    if float(bound).is_integer():
        return f"{int(bound):,}" if grouped else str(int(bound))
    return f"{bound:,}" if grouped else repr(float(bound))


_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?")


def decimal_problem(text: str) -> str | None:
    """Why ``text`` is not a plain decimal number of sane size (``None`` when it is).

    Checks the text before any number is built: Python's ``Fraction('1e999999999')``
    builds a billion-digit integer.
    """
    text = text.strip()
    if len(text) > MAX_NUMBER_CHARS:
        return f"is too long for a number ({len(text):,} characters, at most {MAX_NUMBER_CHARS})"
    match = _DECIMAL.fullmatch(text)
    if match is None:
        return "is not a finite number"
    if match.group(1) is not None and abs(int(match.group(1))) > MAX_EXPONENT:
        return f"has an exponent beyond +-{MAX_EXPONENT}"
    return None


def parse_decimal(text: str) -> Fraction:
    """The exact value of a decimal text; raises ``ValueError`` naming why it is refused."""
    why = decimal_problem(text)
    if why is not None:
        raise ValueError(why)
    value = Fraction(text.strip())
    if abs(value) > SAFE_NUMBER:
        raise ValueError(f"is out of range (at most {SAFE_NUMBER:,})")
    return value


# ---------------------------------------------------------------------------
# Reading files.


def read_text(path: str | os.PathLike[str], *, field: str = "config",
              what: str = "a platform config (`gpu-share init` writes one: platform.yaml)",
              max_bytes: int = MAX_INPUT_BYTES, label: str | None = None) -> str:
    """The UTF-8 text of ``path``; a :class:`ConfigError` for a missing, unreadable or oversized file.

    The size is checked before the file is read, so a huge file costs nothing.
    """
    p = os.fspath(path)
    try:
        size = os.stat(p).st_size
        if os.path.isdir(p):
            raise IsADirectoryError(21, "is a directory")
        if size > max_bytes:
            raise ConfigError(
                Problem(field, p, f"is {size:,} bytes, above the {max_bytes:,} this library reads",
                        "split the platform or remove unused entries; a real config is a few KiB"),
                label=label,
            )
        with open(p, encoding="utf-8") as fh:
            return fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise ConfigError(Problem(field, p, "file not found", f"pass the path of {what}"), label=label) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(Problem(field, p, f"is not UTF-8 text (byte {exc.start})", "save the file as UTF-8"),
                          label=label) from None
    except OSError as exc:
        raise ConfigError(Problem(field, p, f"cannot be read: {exc.strerror or exc}", f"pass the path of {what}"),
                          label=label) from None


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "the document"


def load_yaml(text: str, *, source: str | None = None, max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """Parse one YAML document safely; raise :class:`ConfigError` with line and column.

    Refused: text above ``max_bytes``, duplicate mapping keys, nesting deeper than
    :data:`MAX_DEPTH`, alias expansion beyond :data:`MAX_EXPANDED_NODES` nodes and
    any YAML syntax error. An empty document is refused too (it holds no config).
    """
    import yaml

    if len(text) > max_bytes:
        raise ConfigError(
            Problem("config", f"{len(text):,} characters", f"is above the {max_bytes:,} this library reads",
                    "split the platform or remove unused entries"),
            source=source,
        )
    try:
        loader = _SafeLoader(text)
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(Problem(f"line {line}", None, f"holds the character #x{exc.character:04x}, which YAML does not allow",
                                  "save the file as plain UTF-8 text"), source=source) from None
    try:
        if not loader.check_node():
            raise ConfigError(
                Problem("config", None, "the file is empty",
                        "start from the platform.yaml `gpu-share init` writes: a platform name, a list of teams and a backend"),
                source=source,
            )
        node = loader.get_node()
        if loader.check_node():
            raise _Refusal(loader.peek_event().start_mark, "holds more than one YAML document",
                           "keep one document (remove the second ---)")
        data = loader.construct_document(node)
    except _Refusal as exc:
        raise ConfigError(Problem(_at(exc.mark), None, exc.message, exc.fix), source=source) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = exc.problem or exc.context or "syntax error"
        if exc.context and exc.context_mark is not None and exc.problem_mark is not None:
            what += f" ({exc.context} at {_at(exc.context_mark)})"
        raise ConfigError(
            Problem(_at(mark), None, f"is not valid YAML: {what}", "fix the indentation or quoting there"),
            source=source,
        ) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise ConfigError(Problem(f"line {line}", None, f"holds the character #x{exc.character:04x}, which YAML does not allow",
                                  "save the file as plain UTF-8 text"), source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(Problem("config", None, f"is not valid YAML: {str(exc).splitlines()[0]}",
                                  "save the file as YAML text"), source=source) from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH stops nesting long before
        raise ConfigError(Problem("config", None, "is nested too deeply", f"nest at most {MAX_DEPTH} levels"),
                          source=source) from None
    finally:
        loader.dispose()
    return data


class _Refusal(Exception):
    def __init__(self, mark: Any, message: str, fix: str) -> None:
        super().__init__(message)
        self.mark, self.message, self.fix = mark, message, fix


def _make_loader() -> type:
    import yaml
    from yaml.nodes import MappingNode, SequenceNode

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self._depth = 0
            self._expanded = 0
            self._sizes: dict[int, int] = {}

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                node = super().compose_node(parent, index)
                self._count(self._size(node), event.start_mark)
                return node
            self._depth += 1
            if self._depth > MAX_DEPTH:
                raise _Refusal(self.peek_event().start_mark, f"is nested more than {MAX_DEPTH} levels deep",
                               "flatten the structure; a platform config needs about 6 levels")
            try:
                node = super().compose_node(parent, index)
            finally:
                self._depth -= 1
            if node is not None:
                self._count(1, node.start_mark)
            return node

        def _count(self, n: int, mark: Any) -> None:
            self._expanded += n
            if self._expanded > MAX_EXPANDED_NODES:
                raise _Refusal(mark, f"expands to more than {MAX_EXPANDED_NODES:,} values (aliases repeat anchored"
                               " values)", "write the values out, or use fewer aliases")

        def _size(self, node: Any) -> int:
            known = self._sizes.get(id(node))
            if known is not None:
                return known
            self._sizes[id(node)] = 1  # a recursive alias counts once
            total = 1
            if isinstance(node, SequenceNode):
                total += sum(self._size(child) for child in node.value)
            elif isinstance(node, MappingNode):
                total += sum(self._size(k) + self._size(v) for k, v in node.value)
            total = min(total, MAX_EXPANDED_NODES + 1)
            self._sizes[id(node)] = total
            return total

        def construct_yaml_int(self, node: Any) -> Any:
            # int() of a 5,001-digit text raises ValueError; keep the text for the message.
            digits = sum(c.isdigit() for c in node.value)
            if digits > 18:
                return OutOfRange(node.value)
            return super().construct_yaml_int(node)

        def construct_yaml_float(self, node: Any) -> Any:
            value = super().construct_yaml_float(node)
            if math.isinf(value) and not node.value.lstrip("+-").lower().startswith(".inf"):
                return OutOfRange(node.value)  # 1e999 written as a number, not .inf
            return value

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, MappingNode):
                _refuse_repeated_keys(self, node)
            return super().construct_mapping(node, deep=deep)

    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)
    return Loader


def _refuse_repeated_keys(loader: Any, node: Any) -> None:
    """A mapping that names a key twice is refused at the second: YAML would keep the last silently."""
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        k = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(k)
        except TypeError:
            continue  # unhashable: PyYAML reports it
        if first is not None:
            raise _Refusal(
                key_node.start_mark,
                f"repeats the key {quote(k, 40)} (first at line {first.line + 1})",
                "keep one of them: YAML would silently drop the first",
            )
        seen[k] = key_node.start_mark


class _LazyLoader:
    cls: type | None = None


def _SafeLoader(text: str) -> Any:  # noqa: N802 - a factory standing for the class
    if _LazyLoader.cls is None:
        _LazyLoader.cls = _make_loader()
    return _LazyLoader.cls(text)


def _json_int(text: str) -> int | float:
    if len(text) > 18:
        return OutOfRange(text)
    return int(text)


def _json_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS or decimal_problem(text) is not None:
        return OutOfRange(text)
    value = float(text)
    return value if math.isfinite(value) else OutOfRange(text)


def _json_constant(text: str) -> float:
    return OutOfRange(text)  # NaN, Infinity and -Infinity are not JSON


class _DuplicateKey(Exception):
    pass


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)  # json.loads would keep the last one silently
        out[k] = v
    return out


def load_json(text: str, *, source: str, what: str = "a JSON object", label: str | None = None,
              max_bytes: int = MAX_INPUT_BYTES * 64) -> Any:
    """Parse JSON safely: line and column on a syntax error; numbers too long or not finite
    become :class:`OutOfRange` (refused, with the field named, by the validators)."""
    if len(text) > max_bytes:
        raise ConfigError(Problem(source, f"{len(text):,} characters", f"is above the {max_bytes:,} this library reads",
                                  "pass a smaller input"), label=label)
    if not text.strip():
        raise ConfigError(Problem(source, None, "is empty, so it is not JSON", f"pass {what}"), label=label)
    try:
        return json.loads(text, parse_int=_json_int, parse_float=_json_float, parse_constant=_json_constant,
                          object_pairs_hook=_json_object)
    except _DuplicateKey as exc:
        k = str(exc.args[0])
        at = text.find(json.dumps(k), text.find(json.dumps(k)) + 1)
        line = text.count("\n", 0, at) + 1 if at >= 0 else None
        where = f"{source} line {line}" if line else source
        raise ConfigError(Problem(where, None, f"repeats the key {quote(k, 40)}",
                                  "keep one of them: JSON readers silently drop the first"), label=label) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            Problem(f"{source} line {exc.lineno}, column {exc.colno}", None, f"is not JSON: {exc.msg}", f"pass {what}"),
            label=label,
        ) from None
    except RecursionError:
        raise ConfigError(Problem(source, None, "is nested too deeply", f"pass {what}, nested at most a few levels"),
                          label=label) from None

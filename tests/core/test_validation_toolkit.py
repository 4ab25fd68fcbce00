"""The validation toolkit (core/validation.py): table-driven tests of each helper."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import pytest

from cdk_gpu_share.core import validation as V
from cdk_gpu_share.core.errors import ConfigError, Problem


@pytest.mark.parametrize(
    ("value", "limit"),
    [("x" * 10_000_000, 200), (10**5000, 60), (list(range(100_000)), 200), ({str(i): "v" * 100 for i in range(10_000)}, 200),
     ([[[[[[1]]]]]], 60), (V.OutOfRange("9" * 5001), 60)],
    ids=["string", "int", "list", "dict", "nested", "out-of-range"],
)
def test_quote_is_bounded_whatever_the_value(value, limit):
    start = time.perf_counter()
    text = V.quote(value)
    assert len(text) <= limit + 80, len(text)
    assert time.perf_counter() - start < 5


def test_quote_keeps_short_values_exact_and_says_how_long_long_ones_were():
    assert V.quote("team-a") == "'team-a'"
    assert V.quote({"a": 1}) == "{'a': 1}"
    assert "(5,001 characters)" in V.quote(V.OutOfRange("1" * 5001))
    assert "1,000 characters" in V.quote("y" * 1000)
    assert V.quote("/a/very/long/" + "p" * 300 + "/name.csv").endswith("/name.csv' (322 characters)")


def test_problem_messages_quote_through_the_toolkit():
    text = str(Problem("teams[0] (a).name", "n" * 100_000, "is too long", "shorten it"))
    assert len(text) < 400 and "100,000 characters" in text


def test_config_error_lists_at_most_100_problems():
    err = ConfigError([Problem(f"f{i}", i, "bad") for i in range(5000)])
    assert len(err.problems) == 5000
    assert "4900 more" in str(err) and str(err).count("\n") == 101


@pytest.mark.parametrize(
    ("problems", "label"),
    [([Problem("--trace", "x", "m")], "invalid argument"), ([Problem("FILE", "x", "m")], "invalid argument"),
     ([Problem("teams", "x", "m")], "invalid configuration"),
     ([Problem("--trace", "x", "m"), Problem("teams", 1, "m")], "invalid configuration")],
)
def test_labels(problems, label):
    assert str(ConfigError(problems)).startswith(label + ":")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(1, True), (-1.5, True), (2**53, True), (2**53 + 1, False), (10**400, False), (float("inf"), False),
     (float("nan"), False), (True, False), ("1", False), (None, False), (V.OutOfRange("1e999"), False)],
    ids=lambda v: V.quote(v, 20) if not isinstance(v, bool) else str(v),
)
def test_is_number(value, expected):
    assert V.is_number(value) is expected


@pytest.mark.parametrize(
    ("value", "kwargs", "result", "message"),
    [(3, {}, 3, None), (3.0, {}, 3, None), (3.5, {}, None, "whole number"), (True, {}, None, "whole number"),
     ("3", {}, None, "not a string"), (None, {}, None, "not null"), (10**5000, {}, None, "too large"),
     (V.OutOfRange("1" * 30), {}, None, "too large"), (-1, {"minimum": 0}, None, "at least 0"),
     (101, {"maximum": 100}, None, "at most 100"), (float("inf"), {}, None, "finite"), (float("nan"), {}, None, "NaN")],
    ids=lambda v: V.quote(v, 20),
)
def test_read_int(value, kwargs, result, message):
    found = []
    assert V.read_int(value, "f", lambda *a: found.append(a), **kwargs) == result
    if message is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0][0] == "f" and message in found[0][2], found


@pytest.mark.parametrize(
    ("value", "kwargs", "ok"),
    [(0.5, {}, True), (0, {"above": 0}, False), (1e-9, {"above": 0}, True), (float("inf"), {}, False),
     (10**400, {"maximum": 10}, False), (5, {"maximum": 10}, True), (11, {"maximum": 10}, False)],
    ids=lambda v: V.quote(v, 20),
)
def test_read_number(value, kwargs, ok):
    found = []
    out = V.read_number(value, "f", lambda *a: found.append(a), **kwargs)
    assert (out is not None) is ok and (found == []) is ok


@pytest.mark.parametrize(
    ("text", "value"),
    [("1", Fraction(1)), ("0.46", Fraction(46, 100)), ("1e3", Fraction(1000)), (" 2.5 ", Fraction(5, 2)), ("-.5", Fraction(-1, 2))],
)
def test_parse_decimal_accepts_plain_decimals(text, value):
    assert V.parse_decimal(text) == value


@pytest.mark.parametrize(
    ("text", "why"),
    [("1e999999999", "exponent"), ("1e-999999999", "exponent"), ("9" * 5001, "too long"), ("nan", "not a finite number"),
     ("inf", "not a finite number"), ("1/2", "not a finite number"), ("0x10", "not a finite number"), ("", "not a finite number"),
     ("1e20", "out of range")],
)
def test_parse_decimal_refuses_before_building_the_number(text, why):
    start = time.perf_counter()
    with pytest.raises(ValueError, match=why):
        V.parse_decimal(text)
    assert time.perf_counter() - start < 1


def yaml_problem(text: str) -> Problem:
    with pytest.raises(ConfigError) as info:
        V.load_yaml(text, source="t.yaml")
    assert len(info.value.problems) == 1
    return info.value.problems[0]


def test_yaml_duplicate_keys_name_both_lines():
    p = yaml_problem("a: 1\nb:\n  c: 1\n  c: 2\n")
    assert p.field == "line 4, column 3" and "'c'" in p.message and "first at line 3" in p.message


def test_yaml_merge_keys_may_override():
    assert V.load_yaml("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n")["d"] == {"x": 3, "y": 2}


def test_yaml_nesting_limit_is_exact():
    ok = "a: " + "[" * (V.MAX_DEPTH - 1) + "]" * (V.MAX_DEPTH - 1) + "\n"
    V.load_yaml(ok)
    p = yaml_problem("a: " + "[" * V.MAX_DEPTH + "]" * V.MAX_DEPTH + "\n")
    assert "nested more than" in p.message and p.field.startswith("line 1, column")


def test_yaml_aliases_within_the_limit_are_fine_and_a_bomb_is_refused():
    assert V.load_yaml("a: &a [1, 2]\nb: [*a, *a]\n") == {"a": [1, 2], "b": [[1, 2], [1, 2]]}
    bomb = "a: &a [" + ",".join(["x"] * 10) + "]\n"
    prev = "a"
    for c in "bcdef":
        bomb += f"{c}: &{c} [" + ",".join([f"*{prev}"] * 10) + "]\n"
        prev = c
    p = yaml_problem(bomb)
    assert "expands to more than" in p.message and p.field.startswith("line ")


def test_yaml_numbers_too_long_are_kept_as_text_to_quote():
    value = V.load_yaml("n: " + "1" * 5001 + "\n")["n"]
    assert isinstance(value, V.OutOfRange) and not V.is_number(value) and "5,001 characters" in repr(value)


def test_yaml_oversized_text_is_refused_before_parsing():
    start = time.perf_counter()
    p = yaml_problem("a: 1\n" * 2_000_000)
    assert "above the" in p.message and time.perf_counter() - start < 2


def test_yaml_syntax_error_gives_line_and_column_not_a_value():
    p = yaml_problem("a: [1, 2\nb: 3\n")
    assert p.field.startswith("line ") and "column" in p.field and p.value is None


def test_json_loader():
    assert V.load_json('{"a": [1, 2.5]}', source="s") == {"a": [1, 2.5]}
    assert isinstance(V.load_json('{"a": ' + "1" * 5001 + "}", source="s")["a"], V.OutOfRange)
    assert isinstance(V.load_json('{"a": 1e400}', source="s")["a"], V.OutOfRange)
    assert isinstance(V.load_json('{"a": NaN}', source="s")["a"], V.OutOfRange)
    for text, needle in (('{"a": 1, "a": 2}', "repeats the key 'a'"), ("{", "line 1, column 2"), ("", "is empty"),
                         ("[" * 100_000, "nested too deeply")):
        with pytest.raises(ConfigError, match=needle):
            V.load_json(text, source="s")


def test_field_paths_always_carry_the_index_and_the_name():
    assert V.item("teams", 1, "team-b") == "teams[1] (team-b)"
    assert V.item("teams", 1) == "teams[1]"
    assert V.key(V.item("teams", 0, "a") + ".guarantee", "ml.g5.xlarge") == "teams[0] (a).guarantee.ml.g5.xlarge"
    assert len(V.item("teams", 0, "n" * 10_000)) < 100


def test_read_text_refuses_an_oversized_file_without_reading_it(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(50 * 1024 * 1024)  # sparse: 50 MB
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="above the"):
        V.read_text(big)
    assert time.perf_counter() - start < 1
    assert math.isfinite(1.0)


@pytest.mark.parametrize("value, kwargs, result, problem", [
    ({"a": 1}, {}, {"a": 1}, None),
    (None, {}, None, None),
    (None, {"required": True}, None, ("f", None, "is required", "add it (`gpu-share init` writes a complete example)")),
    ([1], {}, None, ("f", [1], "must be a mapping, not a list", "write key: value pairs")),
    ("x", {"required": True}, None, ("f", "x", "must be a mapping, not a string", "write key: value pairs")),
])
def test_read_mapping(value, kwargs, result, problem):
    found: list[tuple] = []
    assert V.read_mapping(value, "f", lambda *a: found.append(a), **kwargs) == result
    assert found == ([problem] if problem else [])


def test_the_platform_config_and_the_inference_section_check_a_mapping_alike():
    """One check of ``key: value`` pairs serves both parsers: the same words, each pointing at its
    own example when the mapping is required."""
    from cdk_gpu_share.core.configuration.parse import parse_config
    from cdk_gpu_share.inference.config import parse_inference

    found: list[tuple] = []
    parse_inference(None, [], lambda *a: found.append(a))
    parse_inference([1], [], lambda *a: found.append(a))
    assert found == [("inference", None, "is required", "add it (see examples/inference.yaml for an example)"),
                     ("inference", [1], "must be a mapping, not a list", "write key: value pairs")]
    with pytest.raises(ConfigError) as err:
        parse_config([1])
    assert [(p.message, p.fix) for p in err.value.problems] == [("must be a mapping, not a list", "write key: value pairs")]

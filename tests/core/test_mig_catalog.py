"""MIG catalog: profile tables, the placement rule, maximal layouts, presets, errors.

Expected values come from NVIDIA's MIG user guide (the profiles of each GPU, their
placements and memory) and the SageMaker API reference, written out here rather than read
back from the module, and a brute-force oracle that tries
every combination of start indices.
"""

from __future__ import annotations

import functools
import itertools
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdk_gpu_share.core.catalog import mig
from cdk_gpu_share.core.errors import ConfigError

# Contract table: GPU -> names of (1g 1 mem, 1g 2 mem, 2g, 3g, 4g, 7g).
TABLE = {
    "A100-40GB": ("mig-1g.5gb", "mig-1g.10gb", "mig-2g.10gb", "mig-3g.20gb", "mig-4g.20gb", "mig-7g.40gb"),
    "A100-80GB": ("mig-1g.10gb", "mig-1g.20gb", "mig-2g.20gb", "mig-3g.40gb", "mig-4g.40gb", "mig-7g.80gb"),
    "H100-80GB": ("mig-1g.10gb", "mig-1g.20gb", "mig-2g.20gb", "mig-3g.40gb", "mig-4g.40gb", "mig-7g.80gb"),
    "H200-141GB": ("mig-1g.18gb", "mig-1g.35gb", "mig-2g.35gb", "mig-3g.71gb", "mig-4g.71gb", "mig-7g.141gb"),
    "B200-180GB": ("mig-1g.23gb", "mig-1g.45gb", "mig-2g.45gb", "mig-3g.90gb", "mig-4g.90gb", "mig-7g.180gb"),
}
# Contract placement table, same column order: (compute slices, memory slices, starts).
SHAPES = (
    (1, 1, (0, 1, 2, 3, 4, 5, 6)),
    (1, 2, (0, 2, 4, 6)),
    (2, 2, (0, 2, 4)),
    (3, 4, (0, 4)),
    (4, 4, (0,)),
    (7, 8, (0,)),
)
GPUS = list(TABLE)


def names(gpu: str) -> dict[str, str]:
    one, one_wide, two, three, four, seven = TABLE[gpu]
    return {"1g": one, "1g-2m": one_wide, "2g": two, "3g": three, "4g": four, "7g": seven}


def shape(gpu: str, name: str) -> tuple[int, int, tuple[int, ...]]:
    return SHAPES[TABLE[gpu].index(name)]


def oracle_fits(gpu: str, profiles: list[str]) -> bool:
    """Brute force: try every combination of allowed starts."""
    if not profiles or len(profiles) > 7:
        return False
    shapes = [shape(gpu, p) for p in profiles]
    if sum(c for c, _, _ in shapes) > 7:
        return False
    for starts in itertools.product(*(s for _, _, s in shapes)):
        used: set[int] = set()
        ok = True
        for (_, mem, _), start in zip(shapes, starts):
            cells = set(range(start, start + mem))
            if cells & used or max(cells) > 7:
                ok = False
                break
            used |= cells
        if ok:
            return True
    return False


def assert_valid_placement(gpu: str, profiles: list[str], placement: list[tuple[str, int]]) -> None:
    assert Counter(n for n, _ in placement) == Counter(profiles)
    used: set[int] = set()
    for name, start in placement:
        _, mem, starts = shape(gpu, name)
        assert start in starts, f"{name}@{start} is not an allowed start"
        cells = set(range(start, start + mem))
        assert not cells & used, f"{name}@{start} overlaps"
        used |= cells
    assert sum(shape(gpu, n)[0] for n, _ in placement) <= 7
    assert [s for _, s in placement] == sorted(s for _, s in placement)


# --------------------------------------------------------------------------- catalog


def test_catalog_lists_exactly_the_contract_gpus_and_profiles():
    assert {gpu: set(profiles) for gpu, profiles in mig.GPUS.items()} == {
        gpu: set(row) for gpu, row in TABLE.items()
    }


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("column", range(6))
def test_profile_has_the_contract_shape(gpu, column):
    name = TABLE[gpu][column]
    compute, memory, starts = SHAPES[column]
    p = mig.profile(gpu, name)
    assert (p.name, p.gpu, p.compute_slices, p.memory_slices, p.allowed_starts) == (
        name,
        gpu,
        compute,
        memory,
        starts,
    )
    assert p.memory_gb == int(name.split(".")[1].removesuffix("gb"))


def test_profile_parses_mig_3g_40gb():
    p = mig.profile("H100-80GB", "mig-3g.40gb")
    assert (p.compute_slices, p.memory_slices, p.allowed_starts) == (3, 4, (0, 4))


def test_profile_accepts_other_spellings_and_returns_the_canonical_name():
    assert mig.profile("h100-80gb", "MIG-3G.40GB").name == "mig-3g.40gb"
    assert mig.profile("H100 80GB", "3g.40gb").name == "mig-3g.40gb"


def test_instance_type_map_is_the_contract_list():
    assert {t: (i.gpu, i.gpu_count) for t, i in mig.INSTANCE_TYPES.items()} == {
        "ml.p4d.24xlarge": ("A100-40GB", 8),
        "ml.p4de.24xlarge": ("A100-80GB", 8),
        "ml.p5.48xlarge": ("H100-80GB", 8),
        "ml.p5e.48xlarge": ("H200-141GB", 8),
        "ml.p5en.48xlarge": ("H200-141GB", 8),
        "ml.p6-b200.48xlarge": ("B200-180GB", 8),
    }


def test_resolve_gpu_from_instance_type_or_gpu():
    assert mig.resolve_gpu(instance_type="ml.p5en.48xlarge") == "H200-141GB"
    assert mig.resolve_gpu(gpu="b200-180gb") == "B200-180GB"
    assert mig.resolve_gpu(gpu="A100-80GB", instance_type="ml.p4de.24xlarge") == "A100-80GB"


def test_resolve_gpu_refuses_a_gpu_that_disagrees_with_the_instance_type():
    with pytest.raises(mig.MigError, match=r"ml.p4d.24xlarge has A100-40GB GPUs"):
        mig.resolve_gpu(gpu="H100-80GB", instance_type="ml.p4d.24xlarge")


def test_resolve_gpu_needs_one_of_the_two():
    with pytest.raises(mig.MigError, match="give a GPU or an instance type"):
        mig.resolve_gpu()


# --------------------------------------------------------------------------- errors


def test_mig_error_is_a_config_error():
    assert issubclass(mig.MigError, ConfigError)


def test_unknown_gpu_names_value_and_choices_and_closest_match():
    with pytest.raises(mig.MigError) as exc:
        mig.profile("H100", "mig-3g.40gb")
    text = str(exc.value)
    assert "'H100'" in text and "did you mean H100-80GB" in text
    for gpu in GPUS:
        assert gpu in text


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("p5.48xlarge", "use ml.p5.48xlarge"),
        ("ml.p5.4xlarge", "use ml.p5.48xlarge"),
        ("ml.p4.24xlarge", "did you mean ml.p4d.24xlarge"),
        ("ml.g5.48xlarge", "not a SageMaker instance type with MIG-capable GPUs"),
    ],
)
def test_unknown_instance_type_names_value_and_fix(value, hint):
    with pytest.raises(mig.MigError) as exc:
        mig.resolve_gpu(instance_type=value)
    text = str(exc.value)
    assert repr(value) in text and hint in text and "instance_type" in text


def test_profile_of_another_gpu_suggests_the_same_shape_on_this_gpu():
    with pytest.raises(mig.MigError) as exc:
        mig.profile("H100-80GB", "mig-3g.20gb")
    assert "mig-3g.20gb is an A100-40GB profile; on H100-80GB use mig-3g.40gb" in str(exc.value).replace(
        " (got 'mig-3g.20gb')", ""
    )


def test_name_that_is_a_different_shape_on_different_gpus_offers_both():
    # mig-1g.10gb: 2 memory slices on A100-40GB, 1 memory slice on A100-80GB/H100-80GB.
    with pytest.raises(mig.MigError) as exc:
        mig.profile("H200-141GB", "mig-1g.10gb")
    text = str(exc.value)
    assert "mig-1g.35gb (1g with 2 memory slices, as on A100-40GB)" in text
    assert "mig-1g.18gb (1g with 1 memory slice, as on A100-80GB and H100-80GB)" in text


def test_unknown_profile_suggests_same_compute_and_lists_valid_profiles():
    with pytest.raises(mig.MigError) as exc:
        mig.profile("H100-80GB", "mig-3g.41gb")
    text = str(exc.value)
    assert "did you mean mig-3g.40gb" in text
    assert all(name in text for name in TABLE["H100-80GB"])


@pytest.mark.parametrize("gpu", GPUS)
def test_plus_me_profiles_are_refused(gpu):
    base = TABLE[gpu][0]
    with pytest.raises(mig.MigError) as exc:
        mig.profile(gpu, base + "+me")
    text = str(exc.value)
    assert "not accepted by SageMaker" in text and f"use {base}" in text
    with pytest.raises(mig.MigError):
        mig.check(gpu, [base + "+me", base])


def test_check_reports_every_unknown_profile_with_its_index():
    with pytest.raises(mig.MigError) as exc:
        mig.check("H100-80GB", ["mig-3g.40gb", "nope", "mig-9g.1gb"])
    fields = [p.field for p in exc.value.problems]
    assert fields == ["profiles[1]", "profiles[2]"]


# --------------------------------------------------------------------------- placement


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (["3g", "3g"], [("3g", 0), ("3g", 4)]),
        (["3g", "4g"], [("4g", 0), ("3g", 4)]),
        (["1g"] * 7, [("1g", i) for i in range(7)]),
        (["1g", "2g", "2g", "2g"], [("2g", 0), ("2g", 2), ("2g", 4), ("1g", 6)]),
        (["7g"], [("7g", 0)]),
    ],
    ids=["3g+3g", "4g+3g", "7x1g", "3x2g+1g", "7g"],
)
def test_contract_examples_that_fit(gpu, kinds, expected):
    n = names(gpu)
    profiles = [n[k] for k in kinds]
    result = mig.check(gpu, profiles)
    assert result.fits and result.reason == ""
    assert result.placement == [(n[k], s) for k, s in expected]
    assert mig.place(gpu, profiles) == result.placement
    assert_valid_placement(gpu, profiles, result.placement)


@pytest.mark.parametrize("gpu", GPUS)
def test_3g_3g_1g_does_not_fit_no_memory_left(gpu):
    n = names(gpu)
    result = mig.check(gpu, [n["3g"], n["3g"], n["1g"]])
    assert not result.fits and result.placement is None
    assert result.reason.startswith(f"no memory slices left for {n['1g']}")
    assert mig.place(gpu, [n["3g"], n["3g"], n["1g"]]) is None


@pytest.mark.parametrize("gpu", GPUS)
def test_4g_4g_does_not_fit_compute(gpu):
    n = names(gpu)
    result = mig.check(gpu, [n["4g"], n["4g"]])
    assert not result.fits
    assert result.reason.startswith("compute slices sum to 8 > 7")


@pytest.mark.parametrize("gpu", GPUS)
def test_more_than_7_instances_does_not_fit(gpu):
    result = mig.check(gpu, [names(gpu)["1g"]] * 8)
    assert not result.fits
    assert result.reason.startswith("more than 7 instances")


def test_memory_failure_names_the_profile_without_room_and_its_starts():
    result = mig.check("H100-80GB", ["mig-1g.20gb", "mig-3g.40gb", "mig-3g.40gb"])
    assert not result.fits
    assert result.reason == (
        "no memory slices left for mig-1g.20gb: after mig-3g.40gb@0 mig-3g.40gb@4 it needs "
        "2 free memory slices starting at 0, 2, 4 or 6 (memory slices sum to 10 > 8)"
    )


def test_empty_profile_list_does_not_fit():
    result = mig.check("H100-80GB", [])
    assert not result.fits and "no profiles" in result.reason


def test_placement_does_not_depend_on_input_order():
    profiles = ["mig-1g.10gb", "mig-2g.20gb", "mig-1g.10gb", "mig-3g.40gb"]
    first = mig.place("H100-80GB", profiles)
    for perm in itertools.permutations(profiles):
        assert mig.place("H100-80GB", list(perm)) == first


profile_lists = st.sampled_from(GPUS).flatmap(
    lambda gpu: st.tuples(st.just(gpu), st.lists(st.sampled_from(TABLE[gpu]), max_size=9))
)


@settings(max_examples=600, deadline=None)
@given(profile_lists)
def test_check_agrees_with_brute_force(case):
    gpu, profiles = case
    result = mig.check(gpu, profiles)
    assert result.fits == oracle_fits(gpu, profiles)
    if result.fits:
        assert_valid_placement(gpu, profiles, result.placement)
    else:
        assert result.placement is None and result.reason


# --------------------------------------------------------------------------- layouts


@functools.cache  # pure test code, seconds per GPU: compute it once per process
def maximal_oracle(gpu: str) -> frozenset[tuple[str, ...]]:
    found = set()
    row = TABLE[gpu]
    for size in range(1, 8):
        for combo in itertools.combinations_with_replacement(row, size):
            if oracle_fits(gpu, list(combo)) and not any(
                oracle_fits(gpu, list(combo) + [extra]) for extra in row
            ):
                found.add(tuple(sorted(combo)))
    return frozenset(found)


@pytest.mark.parametrize("gpu", GPUS)
def test_layouts_are_exactly_the_maximal_layouts_each_once(gpu):
    listed = [tuple(sorted(layout.profiles)) for layout in mig.layouts(gpu)]
    assert len(listed) == len(set(listed)), "a layout is listed twice"
    assert set(listed) == maximal_oracle(gpu)
    assert len(listed) == 28


@pytest.mark.parametrize("gpu", GPUS)
def test_every_listed_layout_fits_and_its_starts_are_a_valid_placement(gpu):
    for layout in mig.layouts(gpu):
        assert len(layout.profiles) == len(layout.starts)
        assert mig.check(gpu, list(layout.profiles)).fits
        assert_valid_placement(gpu, list(layout.profiles), list(zip(layout.profiles, layout.starts)))


@pytest.mark.parametrize("gpu", GPUS)
def test_adding_any_profile_to_a_listed_layout_does_not_fit(gpu):
    for layout in mig.layouts(gpu):
        for extra in TABLE[gpu]:
            result = mig.check(gpu, [*layout.profiles, extra])
            assert not result.fits, f"{layout} + {extra} fits"


def test_layouts_order_is_deterministic_largest_first():
    layouts = mig.layouts("H100-80GB")
    assert layouts == mig.layouts("H100-80GB")
    assert layouts[0] == mig.Layout(("mig-7g.80gb",), (0,))
    assert layouts[1] == mig.Layout(("mig-4g.40gb", "mig-3g.40gb"), (0, 4))
    assert layouts[-1] == mig.Layout(("mig-1g.10gb",) * 7, tuple(range(7)))
    assert layouts[0].to_dict() == {"profiles": ["mig-7g.80gb"], "starts": [0]}
    assert str(layouts[1]) == "mig-4g.40gb@0 mig-3g.40gb@4"


def test_layouts_has_the_same_shapes_on_every_gpu():
    def shapes(gpu):
        return [tuple(TABLE[gpu].index(n) for n in layout.profiles) for layout in mig.layouts(gpu)]

    first = shapes(GPUS[0])
    for gpu in GPUS[1:]:
        assert shapes(gpu) == first


# --------------------------------------------------------------------------- presets


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("preset", list(mig.PRESETS))
def test_every_preset_fits_every_gpu(gpu, preset):
    profiles = mig.resolve_layout(gpu, preset)
    assert profiles and all(p in TABLE[gpu] for p in profiles)
    assert oracle_fits(gpu, profiles)


@pytest.mark.parametrize("gpu", GPUS)
def test_named_presets_have_the_documented_profiles(gpu):
    n = names(gpu)
    assert Counter(mig.resolve_layout(gpu, "balanced")) == Counter([n["3g"], n["2g"], n["1g"], n["1g"]])
    assert mig.resolve_layout(gpu, "max-instances") == [n["1g"]] * 7
    assert mig.resolve_layout(gpu, "half") == [n["3g"], n["3g"]]
    assert mig.resolve_layout(gpu, "whole") == [n["7g"]]


def test_resolve_layout_accepts_a_list_and_canonicalises_names():
    assert mig.resolve_layout("H100-80GB", ["3G.40GB", "mig-4g.40gb"]) == ["mig-3g.40gb", "mig-4g.40gb"]
    assert mig.resolve_layout("H100-80GB", "mig-7g.80gb") == ["mig-7g.80gb"]


def test_resolve_layout_refuses_a_layout_that_does_not_fit_with_the_reason():
    with pytest.raises(mig.MigError) as exc:
        mig.resolve_layout("A100-40GB", ["mig-4g.20gb", "mig-4g.20gb"], field="variants[0].layout")
    problem = exc.value.problems[0]
    assert problem.field == "variants[0].layout"
    assert "compute slices sum to 8 > 7" in problem.message
    assert "gpu-share mig layouts --gpu A100-40GB" in problem.fix


def test_resolve_layout_unknown_preset_suggests_closest():
    with pytest.raises(mig.MigError) as exc:
        mig.resolve_layout("A100-40GB", "balance")
    text = str(exc.value)
    assert "did you mean balanced" in text and "max-instances" in text


def test_resolve_layout_unknown_profile_names_its_index():
    with pytest.raises(mig.MigError) as exc:
        mig.resolve_layout("A100-40GB", ["mig-3g.20gb", "mig-3g.40gb"])
    assert exc.value.problems[0].field == "layout[1]"


def test_core_module_imports_no_cdk_or_boto3():
    code = (
        "import sys, cdk_gpu_share.core.catalog.mig; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('aws_cdk', 'boto3', 'botocore', 'constructs')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

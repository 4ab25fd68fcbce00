"""MIG rules a reader acts on: exact reasons, the profile an error names, suggested layouts.

These pin the words of every refusal: which profile has no room (also when
it is not the last one placed), the numbers in the reason, the layouts suggested by
``resolve_layout``, and the field paths of lookup errors. Expected strings are written
out from NVIDIA's MIG user guide and the SageMaker API reference, not read back from the module.
"""

from __future__ import annotations

import pytest

from cdk_gpu_share.core.catalog import mig
from cdk_gpu_share.core.errors import Problem

H100 = "H100-80GB"


def refusal(fn, *args, **kwargs) -> Problem:
    with pytest.raises(mig.MigError) as info:
        fn(*args, **kwargs)
    (problem,) = info.value.problems
    return problem


# --- the reason a set of profiles does not fit -------------------------------------------


NO_ROOM_1G = "it needs 1 free memory slice starting at 0, 1, 2, 3, 4, 5 or 6"
NO_ROOM_1G_2M = "it needs 2 free memory slices starting at 0, 2, 4 or 6"


@pytest.mark.parametrize(
    "profiles, reason",
    [
        ([], "no profiles given: a layout needs at least one MIG profile"),
        (["mig-1g.10gb"] * 8, "more than 7 instances: 8 profiles given, a GPU holds at most 7 MIG instances"),
        (
            ["mig-4g.40gb", "mig-4g.40gb"],
            "compute slices sum to 8 > 7 (4 + 4); each H100-80GB GPU has 7 compute slices",
        ),
        (  # the parts are listed largest first, whatever the input order
            ["mig-1g.10gb", "mig-4g.40gb", "mig-3g.40gb"],
            "compute slices sum to 8 > 7 (4 + 3 + 1); each H100-80GB GPU has 7 compute slices",
        ),
        (
            ["mig-1g.10gb", "mig-3g.40gb", "mig-3g.40gb"],
            "no memory slices left for mig-1g.10gb: after mig-3g.40gb@0 mig-3g.40gb@4 "
            f"{NO_ROOM_1G} (memory slices sum to 9 > 8)",
        ),
        (  # the 1g that has no room is not the last profile placed: the second 1g is
            ["mig-1g.10gb", "mig-1g.20gb", "mig-3g.40gb", "mig-1g.10gb", "mig-1g.20gb"],
            "no memory slices left for mig-1g.10gb: after mig-3g.40gb@0 mig-1g.20gb@4 mig-1g.20gb@6 "
            f"{NO_ROOM_1G} (memory slices sum to 10 > 8)",
        ),
        (  # the third 1g-2m has no room; the 1g after it is never tried
            ["mig-1g.20gb", "mig-1g.20gb", "mig-1g.20gb", "mig-3g.40gb", "mig-1g.10gb"],
            "no memory slices left for mig-1g.20gb: after mig-3g.40gb@0 mig-1g.20gb@4 mig-1g.20gb@6 "
            f"{NO_ROOM_1G_2M} (memory slices sum to 11 > 8)",
        ),
        (
            ["mig-4g.40gb", "mig-1g.20gb", "mig-1g.20gb", "mig-1g.20gb"],
            "no memory slices left for mig-1g.20gb: after mig-4g.40gb@0 mig-1g.20gb@4 mig-1g.20gb@6 "
            f"{NO_ROOM_1G_2M} (memory slices sum to 10 > 8)",
        ),
        (
            ["mig-2g.20gb", "mig-1g.20gb", "mig-1g.20gb", "mig-1g.20gb", "mig-1g.10gb", "mig-1g.10gb"],
            "no memory slices left for mig-1g.10gb: after mig-2g.20gb@0 mig-1g.20gb@2 mig-1g.20gb@4 "
            f"mig-1g.20gb@6 {NO_ROOM_1G} (memory slices sum to 10 > 8)",
        ),
        (
            ["mig-7g.80gb", "mig-1g.10gb"],
            "compute slices sum to 8 > 7 (7 + 1); each H100-80GB GPU has 7 compute slices",
        ),
        (
            ["mig-3g.40gb", "mig-3g.40gb", "mig-2g.20gb"],
            "compute slices sum to 8 > 7 (3 + 3 + 2); each H100-80GB GPU has 7 compute slices",
        ),
    ],
)
def test_check_says_exactly_why_profiles_do_not_fit(profiles, reason):
    result = mig.check(H100, profiles)
    assert (result.fits, result.placement, result.reason) == (False, None, reason)
    assert mig.place(H100, profiles) is None


def test_the_reason_names_profiles_of_the_gpu_asked_about():
    result = mig.check("A100-40GB", ["mig-3g.20gb", "mig-3g.20gb", "mig-1g.5gb"])
    assert result.reason == (
        "no memory slices left for mig-1g.5gb: after mig-3g.20gb@0 mig-3g.20gb@4 "
        f"{NO_ROOM_1G} (memory slices sum to 9 > 8)"
    )


@pytest.mark.parametrize(
    "profiles, placement",
    [
        (["mig-7g.80gb"], [("mig-7g.80gb", 0)]),
        (["mig-3g.40gb", "mig-4g.40gb"], [("mig-4g.40gb", 0), ("mig-3g.40gb", 4)]),
        (["mig-1g.10gb"] * 7, [("mig-1g.10gb", s) for s in range(7)]),
        (["mig-2g.20gb"] * 3 + ["mig-1g.10gb"], [("mig-2g.20gb", 0), ("mig-2g.20gb", 2), ("mig-2g.20gb", 4), ("mig-1g.10gb", 6)]),
        (["mig-1g.20gb"] * 4, [("mig-1g.20gb", s) for s in (0, 2, 4, 6)]),
        (  # 3g+2g+2g only fits with the 3g at 4: the search must backtrack
            ["mig-2g.20gb", "mig-3g.40gb", "mig-2g.20gb"],
            [("mig-2g.20gb", 0), ("mig-2g.20gb", 2), ("mig-3g.40gb", 4)],
        ),
        (
            ["mig-1g.10gb", "mig-1g.20gb", "mig-3g.40gb", "mig-1g.10gb"],
            # a 1g cannot start at 7, so the 1g-2m moves to 6 and the two 1g take 4 and 5
            [("mig-3g.40gb", 0), ("mig-1g.10gb", 4), ("mig-1g.10gb", 5), ("mig-1g.20gb", 6)],
        ),
    ],
)
def test_check_places_profiles_that_fit_at_their_lowest_starts(profiles, placement):
    result = mig.check(H100, profiles)
    assert (result.fits, result.placement, result.reason) == (True, placement, "")
    assert mig.place(H100, profiles) == placement
    assert mig.format_placement(placement) == " ".join(f"{n}@{s}" for n, s in placement)


def test_check_takes_one_profile_name_as_a_string():
    assert mig.check(H100, "mig-3g.40gb").placement == [("mig-3g.40gb", 0)]


# --- suggested layouts -------------------------------------------------------------------


FIRST_THREE = {
    "H100-80GB": "[mig-7g.80gb]; [mig-4g.40gb, mig-3g.40gb]; [mig-4g.40gb, mig-2g.20gb, mig-1g.20gb]",
    "A100-40GB": "[mig-7g.40gb]; [mig-4g.20gb, mig-3g.20gb]; [mig-4g.20gb, mig-2g.10gb, mig-1g.10gb]",
    "B200-180GB": "[mig-7g.180gb]; [mig-4g.90gb, mig-3g.90gb]; [mig-4g.90gb, mig-2g.45gb, mig-1g.45gb]",
}


@pytest.mark.parametrize("gpu", list(FIRST_THREE))
def test_a_layout_that_does_not_fit_suggests_the_first_three_layouts(gpu):
    three, one = mig.GPUS[gpu][3], mig.GPUS[gpu][0]
    p = refusal(mig.resolve_layout, gpu, [three, three, one], field="variants[0].layout")
    assert p.field == "variants[0].layout"
    assert p.value == [three, three, one]
    assert p.message.startswith(f"does not fit one {gpu} GPU: no memory slices left for {one}: ")
    assert p.fix == (
        f"choose a layout that fits, e.g. {FIRST_THREE[gpu]} (list all with: gpu-share mig layouts --gpu {gpu})"
    )


def test_a_layout_refused_for_compute_gives_the_sum_and_the_suggestions():
    p = refusal(mig.resolve_layout, H100, ["mig-4g.40gb", "4g.40gb"])
    assert (p.field, p.value) == ("layout", ["mig-4g.40gb", "4g.40gb"])
    assert p.message == (
        "does not fit one H100-80GB GPU: compute slices sum to 8 > 7 (4 + 4); each H100-80GB GPU has 7 compute slices"
    )
    assert p.fix.startswith("choose a layout that fits, e.g. [mig-7g.80gb]; ")


def test_suggestions_are_computed_again_after_the_cache_is_cleared():
    first = mig.layouts(H100)
    mig.clear_layout_cache()
    again = mig.layouts(H100)
    assert again == first and again is not first
    assert len(again) == 28


def test_layouts_returns_a_copy_a_caller_cannot_spoil():
    mine = mig.layouts(H100)
    mine.clear()
    assert len(mig.layouts(H100)) == 28


# --- layout input errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout, message, fix",
    [
        (
            "balance",
            "unknown MIG layout preset",
            "did you mean balanced? use a preset (whole, half, four-three, balanced, thirds, quarters,"
            " max-instances) or a list of H100-80GB profiles (mig-1g.10gb, mig-1g.20gb, mig-2g.20gb,"
            " mig-3g.40gb, mig-4g.40gb, mig-7g.80gb)",
        ),
        (
            "nothing-like-it",
            "unknown MIG layout preset",
            "use a preset (whole, half, four-three, balanced, thirds, quarters, max-instances) or a list of"
            " H100-80GB profiles (mig-1g.10gb, mig-1g.20gb, mig-2g.20gb, mig-3g.40gb, mig-4g.40gb, mig-7g.80gb)",
        ),
        (
            7,
            "a MIG layout is a preset name or a list of profile names",
            "for example 'balanced' or ['mig-3g.40gb', 'mig-3g.40gb']",
        ),
    ],
)
def test_resolve_layout_refuses_what_is_not_a_layout(layout, message, fix):
    p = refusal(mig.resolve_layout, H100, layout, field="layout")
    assert (p.field, p.value, p.message, p.fix) == ("layout", layout, message, fix)


@pytest.mark.parametrize(
    "layout, expected",
    [
        ("  Balanced ", ["mig-3g.40gb", "mig-2g.20gb", "mig-1g.10gb", "mig-1g.10gb"]),
        ("four-three", ["mig-4g.40gb", "mig-3g.40gb"]),
        ("thirds", ["mig-2g.20gb"] * 3),
        ("quarters", ["mig-1g.20gb"] * 4),
        ("3g.40gb", ["mig-3g.40gb"]),
        (("MIG-3G.40GB", "mig-3g.40gb"), ["mig-3g.40gb", "mig-3g.40gb"]),
    ],
)
def test_resolve_layout_takes_presets_and_profile_names(layout, expected):
    assert mig.resolve_layout(H100, layout) == expected


# --- lookups: the field, the value and the fix --------------------------------------------


ALL_GPUS = "A100-40GB, A100-80GB, H100-80GB, H200-141GB or B200-180GB"
ALL_TYPES = (
    "MIG instance types: ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge, ml.p5e.48xlarge,"
    " ml.p5en.48xlarge or ml.p6-b200.48xlarge"
)
H100_PROFILES = "valid H100-80GB profiles: mig-1g.10gb, mig-1g.20gb, mig-2g.20gb, mig-3g.40gb, mig-4g.40gb, mig-7g.80gb"


@pytest.mark.parametrize(
    "call, field, value, message, fix",
    [
        (lambda: mig.resolve_gpu("h100 80gb"), None, None, None, None),
        (lambda: mig.resolve_gpu(""), "gpu", "", "a GPU name is required", f"use one of {ALL_GPUS}"),
        (lambda: mig.resolve_gpu(None, None), "gpu", None, "give a GPU or an instance type",
         f"GPUs: {ALL_GPUS}; instance types: ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p5.48xlarge, ml.p5e.48xlarge,"
         " ml.p5en.48xlarge or ml.p6-b200.48xlarge"),
        (lambda: mig.resolve_gpu("H100"), "gpu", "H100", "unknown MIG GPU",
         f"did you mean H100-80GB? valid GPUs: {ALL_GPUS}"),
        (lambda: mig.resolve_gpu("A100"), "gpu", "A100", "unknown MIG GPU",
         f"did you mean A100-80GB or A100-40GB? valid GPUs: {ALL_GPUS}"),
        (lambda: mig.resolve_gpu("T4"), "gpu", "T4", "unknown MIG GPU", f"valid GPUs: {ALL_GPUS}"),
        # too short for a close match: the GPUs whose name starts the same are offered
        (lambda: mig.resolve_gpu("h"), "gpu", "h", "unknown MIG GPU",
         f"did you mean H100-80GB or H200-141GB? valid GPUs: {ALL_GPUS}"),
        (lambda: mig.resolve_gpu("b-1"), "gpu", "b-1", "unknown MIG GPU",
         f"did you mean B200-180GB? valid GPUs: {ALL_GPUS}"),
        (lambda: mig.resolve_gpu("H100-80GB", "ml.p4d.24xlarge"), "gpu", "H100-80GB",
         "ml.p4d.24xlarge has A100-40GB GPUs", "drop gpu or set it to A100-40GB"),
        (lambda: mig.resolve_gpu(instance_type=" "), "instance_type", " ", "an instance type is required", ALL_TYPES),
        (lambda: mig.resolve_gpu(instance_type="p5.48xlarge"), "instance_type", "p5.48xlarge",
         "SageMaker instance types start with 'ml.'", "use ml.p5.48xlarge"),
        (lambda: mig.resolve_gpu(instance_type="ml.p5.4xlarge"), "instance_type", "ml.p5.4xlarge",
         "this size has no verified MIG support in SageMaker", f"use ml.p5.48xlarge; {ALL_TYPES}"),
        (lambda: mig.resolve_gpu(instance_type="ml.p4.24xlarge"), "instance_type", "ml.p4.24xlarge",
         "not a SageMaker instance type with MIG-capable GPUs",
         f"did you mean ml.p4d.24xlarge or ml.p4de.24xlarge? {ALL_TYPES}"),
        (lambda: mig.resolve_gpu(instance_type="ml.g5.xlarge"), "instance_type", "ml.g5.xlarge",
         "not a SageMaker instance type with MIG-capable GPUs",
         f"did you mean ml.p5.48xlarge or ml.p5e.48xlarge? {ALL_TYPES}"),
        (lambda: mig.resolve_gpu(instance_type="trn1"), "instance_type", "trn1",
         "not a SageMaker instance type with MIG-capable GPUs", ALL_TYPES),
        (lambda: mig.profile(H100, ""), "profile", "", "a MIG profile name is required", H100_PROFILES),
        (lambda: mig.profile(H100, "mig-3g.40gb+me"), "profile", "mig-3g.40gb+me",
         "'+me' profiles are not accepted by SageMaker Inference", f"use mig-3g.40gb; {H100_PROFILES}"),
        (lambda: mig.profile(H100, "mig-3g.30gb+me"), "profile", "mig-3g.30gb+me",
         "'+me' profiles are not accepted by SageMaker Inference", H100_PROFILES),
        (lambda: mig.profile(H100, "mig-3g.20gb", field="models[0].profile"), "models[0].profile", "mig-3g.20gb",
         "mig-3g.20gb is an A100-40GB profile", f"on H100-80GB use mig-3g.40gb; {H100_PROFILES}"),
        (lambda: mig.profile(H100, "mig-1g.23gb"), "profile", "mig-1g.23gb",
         "mig-1g.23gb is a B200-180GB profile", f"on H100-80GB use mig-1g.10gb; {H100_PROFILES}"),
        (lambda: mig.profile(H100, "mig-5g.40gb"), "profile", "mig-5g.40gb",
         "not a MIG profile of H100-80GB", f"did you mean mig-4g.40gb or mig-3g.40gb? {H100_PROFILES}"),
        (lambda: mig.profile(H100, "mig-2g.99gb"), "profile", "mig-2g.99gb",
         "not a MIG profile of H100-80GB", f"did you mean mig-2g.20gb? {H100_PROFILES}"),
        (lambda: mig.profile(H100, "bogus"), "profile", "bogus", "not a MIG profile of H100-80GB", H100_PROFILES),
    ],
)
def test_lookup_errors_name_the_field_the_value_and_the_fix(call, field, value, message, fix):
    if field is None:
        assert call() == "H100-80GB"
        return
    p = refusal(call)
    assert (p.field, p.value, p.message, p.fix) == (field, value, message, fix)


def test_a_name_of_different_shapes_on_other_gpus_offers_each():
    # mig-1g.10gb is a 1g with 2 memory slices on A100-40GB but 1 memory slice on H100/A100-80GB.
    p = refusal(mig.profile, "H200-141GB", "mig-1g.10gb")
    assert p.message == "mig-1g.10gb is an A100-40GB, A100-80GB and H100-80GB profile"
    assert p.fix.startswith(
        "on H200-141GB use mig-1g.35gb (1g with 2 memory slices, as on A100-40GB)"
        " or mig-1g.18gb (1g with 1 memory slice, as on A100-80GB and H100-80GB); "
    )


def test_every_unknown_profile_of_a_list_is_reported_with_its_index():
    with pytest.raises(mig.MigError) as info:
        mig.check(H100, ["mig-3g.40gb", "nope", "mig-9g.1gb"])
    assert [p.field for p in info.value.problems] == ["profiles[1]", "profiles[2]"]


@pytest.mark.parametrize("spelling", [" mig-3g.40gb ", "MIG-3G.40GB", "3g.40gb", "mig-3g. 40gb", "\tmig-3g.40gb\n"])
def test_profile_names_are_read_without_case_or_white_space(spelling):
    assert mig.profile(H100, spelling).name == "mig-3g.40gb"


@pytest.mark.parametrize(
    "name, memory_gb, compute, memory, starts",
    [
        ("mig-1g.10gb", 10, 1, 1, (0, 1, 2, 3, 4, 5, 6)),
        ("mig-1g.20gb", 20, 1, 2, (0, 2, 4, 6)),
        ("mig-7g.80gb", 80, 7, 8, (0,)),
    ],
)
def test_profile_carries_its_shape(name, memory_gb, compute, memory, starts):
    p = mig.profile(H100, name.upper())
    assert (p.name, p.gpu, p.memory_gb, p.compute_slices, p.memory_slices, p.allowed_starts) == (
        name, H100, memory_gb, compute, memory, starts
    )


def test_exports_are_the_used_api():
    assert mig.__all__ == [
        "COMPUTE_SLICES",
        "MEMORY_SLICES",
        "MAX_INSTANCES",
        "KINDS",
        "Kind",
        "GPUS",
        "INSTANCE_TYPES",
        "InstanceGpuInfo",
        "Profile",
        "CheckResult",
        "Layout",
        "PRESETS",
        "MigError",
        "resolve_gpu",
        "profile",
        "place",
        "check",
        "layouts",
        "clear_layout_cache",
        "resolve_layout",
        "format_placement",
        "format_layout",
    ]
    assert all(hasattr(mig, name) for name in mig.__all__)

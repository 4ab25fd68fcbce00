"""``gpu-share mig fit``: memory estimates, the smallest profile, the cheapest plan, -o, bad input."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter

import pytest
import yaml
from aws_cdk import assertions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdk_gpu_share.cli import main
from cdk_gpu_share.core.catalog import instances, mig
from cdk_gpu_share.core.configuration.parse import load_config, parse_config
from cdk_gpu_share.core.errors import ConfigError
from cdk_gpu_share.inference import fit as F
from cdk_gpu_share.inference.config import Copies
from cdk_gpu_share.stacks.app import build_platform
from tests.helpers import ROOT, new_app, synth

MODELS = ROOT / "examples" / "mig" / "models.yaml"
KIB = 1024


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def decoder(**kw) -> F.ModelSpec:
    return F.ModelSpec(name=kw.pop("name", "m"), **kw)


# --------------------------------------------------------------------------- memory against published figures

# Each row: the model card's parameter count, and from its config.json the decoder layers,
# key-value heads and head dimension (hidden_size / num_attention_heads), with the KV cache per
# token they give in bf16 (2 x layers x KV heads x head dim x 2 bytes).
PUBLISHED = [
    # meta-llama/Meta-Llama-3-8B: "8B" (8.03B parameters); config.json: num_hidden_layers 32,
    # num_key_value_heads 8, hidden_size 4096 / num_attention_heads 32 = 128. 128 KiB per token.
    pytest.param(8.03, 32, 8, 128, 128, id="llama-3-8b"),
    # mistralai/Mistral-7B-v0.1: 7.24B parameters; config.json: num_hidden_layers 32,
    # num_key_value_heads 8, hidden_size 4096 / num_attention_heads 32 = 128. 128 KiB per token.
    pytest.param(7.24, 32, 8, 128, 128, id="mistral-7b"),
    # Qwen/Qwen2.5-7B: "Number of Parameters: 7.61B"; config.json: num_hidden_layers 28,
    # num_key_value_heads 4, hidden_size 3584 / num_attention_heads 28 = 128 (k_proj 3584 -> 512).
    # 56 KiB per token.
    pytest.param(7.61, 28, 4, 128, 56, id="qwen2.5-7b"),
]


@pytest.mark.parametrize("params, layers, kv_heads, head_dim, kib_per_token", PUBLISHED)
def test_kv_cache_per_token_matches_the_published_config(params, layers, kv_heads, head_dim, kib_per_token):
    one = decoder(params_billion=params, layers=layers, kv_heads=kv_heads, head_dim=head_dim, context_tokens=1)
    assert F.memory(one).kv_cache_gib * 2**30 == kib_per_token * KIB
    # Linear in context and concurrency; fp8 halves it.
    many = decoder(params_billion=params, layers=layers, kv_heads=kv_heads, head_dim=head_dim,
                   context_tokens=8192, concurrent_sequences=4, kv_dtype="fp8")
    assert F.memory(many).kv_cache_gib * 2**30 == kib_per_token * KIB * 8192 * 4 / 2


@pytest.mark.parametrize("params, layers, kv_heads, head_dim, kib_per_token", PUBLISHED)
@pytest.mark.parametrize("dtype, bytes_per_param", [("fp32", 4), ("bf16", 2), ("fp16", 2), ("fp8", 1),
                                                    ("int8", 1), ("int4", 0.5)])
def test_weights_are_parameters_times_the_dtype(params, layers, kv_heads, head_dim, kib_per_token, dtype,
                                                bytes_per_param):
    m = decoder(params_billion=params, weight_dtype=dtype, layers=layers, kv_heads=kv_heads, head_dim=head_dim,
                context_tokens=1)
    assert F.memory(m).weights_gib == pytest.approx(params * 1e9 * bytes_per_param / 2**30)


def test_llama_3_8b_in_bf16_is_about_16_gb_of_weights_and_the_rest_adds_up():
    """8.03B x 2 bytes = 16.06 GB (14.96 GiB), as the model card's bf16 size; 8K context x 4 sequences
    of 128 KiB a token = 4 GiB of KV cache; overhead 20 % of the weights; headroom to 0.9."""
    m = decoder(params_billion=8.03, layers=32, kv_heads=8, head_dim=128, context_tokens=8192, concurrent_sequences=4)
    mem = F.memory(m)
    assert mem.weights_gib * 2**30 / 1e9 == pytest.approx(16.06)
    assert mem.kv_cache_gib == 4.0
    assert mem.overhead_gib == pytest.approx(0.2 * mem.weights_gib)
    used = mem.weights_gib + mem.kv_cache_gib + mem.overhead_gib
    assert mem.total_gib == pytest.approx(used / 0.9) and mem.headroom_gib == pytest.approx(mem.total_gib - used)
    assert [F.smallest_profile(m, g) for g in ("A100-40GB", "A100-80GB", "H200-141GB")] == [
        "mig-7g.40gb", "mig-3g.40gb", "mig-1g.35gb"]


def test_a_measured_peak_replaces_the_estimate_and_keeps_the_headroom():
    mem = F.memory(decoder(memory_gib=18, gpu_memory_utilization=0.8))
    assert (mem.weights_gib, mem.kv_cache_gib, mem.overhead_gib) == (None, None, None)
    assert mem.total_gib == pytest.approx(22.5) and mem.headroom_gib == pytest.approx(4.5)


def test_compute_slices_scale_linearly_with_the_throughput_needed():
    t = F.Throughput("H100-80GB", whole_gpu_tokens_per_s=2400, needed_tokens_per_s=600)
    m = decoder(memory_gib=5, throughput=t)
    assert F.compute_slices(m) == 2  # ceil(7 x 600 / 2400) = ceil(1.75)
    assert F.smallest_profile(m, "H100-80GB") == "mig-2g.20gb"  # memory alone: mig-1g.10gb
    assert F.smallest_profile(m, "A100-80GB") is None  # measured on another GPU model
    exact = decoder(memory_gib=5, throughput=F.Throughput("H100-80GB", 700, 300))
    assert F.compute_slices(exact) == 3
    assert F.compute_slices(decoder(memory_gib=5)) == 1


def test_a_model_larger_than_a_whole_gpu_is_named_with_what_it_needs():
    big = decoder(name="llama3-70b", params_billion=70.6, layers=80, kv_heads=8, head_dim=128, context_tokens=8192)
    cands, _ = F.candidates({}, gpu="A100-40GB")
    with pytest.raises(ConfigError) as err:
        F.check_fits([big], cands)
    [p] = err.value.problems
    assert p.field == "models[0]" and p.value == "llama3-70b"
    assert "needs 178.1 GiB and 1 of 7 compute slices per copy, more than a whole GPU of A100-40GB" in p.message
    assert "MIG cannot serve it" in p.message and "whole_gpu" in p.fix


# --------------------------------------------------------------------------- packing: exact against exhaustive search


def _variant_key(group, cand, layout, kinds):
    """Fewest instances of ``cand`` with ``layout`` for ``group`` given each model's profile, by trying counts."""
    counts = Counter(layout)
    load = Counter()
    for m, k in zip(group, kinds):
        load[k] += m.copies.max + max(1, -(-m.copies.max * 5 // 100))
    k = 1
    while any(load[p] > counts[p] * cand.gpus * k for p in load):
        k += 1
    return k


def _set_partitions(items):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _set_partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


def _exhaustive(models, cands, isolate, whole=False):
    """Every split of the models into variants, every type, layout (or only whole GPUs) and profile
    choice: the least (cost, compute slices left free negated, instances, variants)."""
    best = None
    for blocks in _set_partitions(list(models)):
        if isolate and any(len({m.team for m in b}) > 1 for b in blocks):
            continue
        total = (0.0, 0, 0, 0)
        for block in blocks:
            options = []
            for c in cands:
                for layout in ([mig.Layout((mig.GPUS[c.gpu][-1],), (0,))] if whole else mig.layouts(c.gpu)):
                    per_model = []
                    for m in block:
                        mem, slices = F.memory(m).total_gib, F.compute_slices(m)
                        per_model.append([p for p in set(layout.profiles) if mig.profile(c.gpu, p).memory_gb >= mem - 1e-9
                                          and mig.profile(c.gpu, p).compute_slices >= slices
                                          and (m.throughput is None or m.throughput.measured_on == c.gpu)])
                    for kinds in itertools.product(*per_model):
                        n = _variant_key(block, c, layout.profiles, kinds)
                        slices = n * c.gpus * sum(mig.profile(c.gpu, p).compute_slices for p in layout.profiles)
                        used = sum(F.demand(m) * mig.profile(c.gpu, k).compute_slices for m, k in zip(block, kinds))
                        options.append((round(c.hourly_usd * n, 6), used - slices, n, 1))
            if not options:
                break
            o = min(options)
            total = (round(total[0] + o[0], 6), total[1] + o[1], total[2] + o[2], total[3] + o[3])
        else:
            if best is None or total < best:
                best = total
    return best


model_strategy = st.builds(
    lambda name, mem, copies, team: F.ModelSpec(name=name, memory_gib=mem, copies=Copies(copies, copies, copies),
                                                team=team),
    st.just("m"), st.floats(min_value=1, max_value=60), st.integers(min_value=1, max_value=12),
    st.sampled_from(["a", "b"]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models=st.lists(model_strategy, min_size=1, max_size=3),
       types=st.sampled_from([("ml.p4d.24xlarge",), ("ml.p4de.24xlarge",), ("ml.p4d.24xlarge", "ml.p4de.24xlarge")]),
       isolate=st.booleans())
def test_the_plan_is_the_cheapest_an_exhaustive_search_finds(models, types, isolate):
    models = [F.ModelSpec(**{**m.__dict__, "name": f"m{i}"}) for i, m in enumerate(models)]
    cands, _ = F.candidates({"ml.p4de.24xlarge": 47.11}, instance_types=types)
    expected = _exhaustive(models, cands, isolate)
    got = F.plan(models, cands, isolate_teams=isolate)
    if expected is None:
        assert got is None
        return
    assert got is not None and got.exact
    free = sum(v.gpus * sum(mig.profile(v.candidate.gpu, p).compute_slices for p in v.layout) for v in got.variants)
    free -= sum(F.demand(m) * mig.profile(v.candidate.gpu, p).compute_slices
                for v in got.variants for n, p in v.profiles for m in models if m.name == n)
    assert (round(got.hourly_usd, 6), -free, got.instances, len(got.variants)) == expected
    # The whole-GPU baseline is the cheapest packing of whole GPUs, with the same freedom.
    whole = _exhaustive(models, cands, isolate, whole=True)
    assert F.whole_gpu_cost(models, cands, isolate_teams=isolate)[0] == pytest.approx(whole[0])
    assert got.hourly_usd <= whole[0] + 1e-6
    # Every copy, and its rolling-update batch, has a partition at least its own size.
    for v in got.variants:
        counts, load = Counter(v.layout), Counter()
        for name, profile in v.profiles:
            m = next(m for m in models if m.name == name)
            own = F.smallest_profile(m, v.candidate.gpu)
            assert mig.GPUS[v.candidate.gpu].index(profile) >= mig.GPUS[v.candidate.gpu].index(own)
            load[profile] += F.demand(m)
        assert all(load[p] <= counts[p] * v.candidate.gpus * v.instance_count for p in load)
        if isolate:
            assert len({next(m for m in models if m.name == n).team for n, _ in v.profiles}) == 1
    assert got.hourly_usd >= got.lower_bound - 1e-6


def test_many_models_are_planned_by_team_with_a_stated_bound():
    models = [F.ModelSpec(name=f"m{i}", memory_gib=4 + i, team=f"t{i % 3}", copies=Copies(2, 2, 2))
              for i in range(F.EXACT_MODELS + 2)]
    cands, _ = F.candidates({})
    got = F.plan(models, cands)
    assert got is not None and not got.exact
    assert got.hourly_usd >= got.lower_bound > 0
    assert got.gap == pytest.approx(got.hourly_usd / got.lower_bound - 1)


def test_the_shipped_example_re_planned_costs_no_more_than_its_own_layout():
    """examples/inference.yaml's models, each measured at the partition the example gives it, are
    planned by mig fit for no more than the example's own endpoint."""
    config = load_config(ROOT / "examples" / "inference.yaml")
    [endpoint] = config.inference.endpoints
    gpu = mig.INSTANCE_TYPES[endpoint.instance_type].gpu
    models = [F.ModelSpec(name=m.name, team=m.team, copies=m.copies,
                          memory_gib=mig.profile(gpu, m.profile).memory_gb * F.DEFAULT_GPU_MEMORY_UTILIZATION)
              for m in endpoint.models]
    own = endpoint.instance_count * instances.ON_DEMAND_USD_PER_HOUR[endpoint.instance_type]
    cands, _ = F.candidates({})
    got = F.plan(models, cands)
    assert got is not None and got.exact
    assert got.hourly_usd <= own
    assert [F.smallest_profile(m, gpu) for m in models] == [m.profile for m in endpoint.models]


# --------------------------------------------------------------------------- the command


def test_fit_prints_the_memory_table_the_plan_the_saving_and_the_isolation_line(capsys):
    code, out, err = run(capsys, "mig", "fit", str(MODELS))
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("Each copy needs")
    llama = next(line for line in lines if line.strip().startswith("llama3-8b "))
    assert llama.split()[1:7] == ["15.0", "4.0", "3.0", "2.4", "24.4", "1"]
    assert "ticket-embedder  measured  measured  measured" in out
    assert "Cheapest plan: $47.11/h, 1 instance(s) in 1 variant(s)" in out
    assert "Whole GPUs (each copy on its own GPU, 3 x ml.p4de.24xlarge): $141.33/h; MIG saves $94.22/h (67%)" in out
    assert "Whole GPUs on a type the plan does not use (3 x ml.p4d.24xlarge) would cost $113.06/h" in out
    assert "put models of different teams on one instance: MIG isolates" in out
    assert "system memory, storage, network and the endpoint's routing" in out


def test_isolate_teams_gives_each_team_its_own_variants(capsys):
    code, out, _ = run(capsys, "mig", "fit", str(MODELS), "--isolate-teams", "--json")
    assert code == 0
    result = json.loads(out)
    data = yaml.safe_load(MODELS.read_text())
    team = {m["name"]: m["team"] for m in data["models"]}
    assert all(len({team[n] for n in v["copies"]}) == 1 for v in result["variants"])
    code, text, _ = run(capsys, "mig", "fit", str(MODELS), "--isolate-teams")
    assert "different teams" not in text


def test_json_has_the_documented_shape(capsys):
    code, out, _ = run(capsys, "mig", "fit", str(MODELS), "--json", "--gpu", "A100-40GB")
    assert code == 0
    result = json.loads(out)
    assert set(result) == {"models", "variants", "priced", "hourly_usd", "gpus", "whole_gpu_hourly_usd"}
    assert result["priced"] is True
    llama = result["models"]["llama3-8b"]
    assert set(llama) == {"memory", "compute_slices", "set_by", "profile"}
    assert llama["set_by"] == "memory"
    assert set(llama["memory"]) == {"weights_gib", "kv_cache_gib", "overhead_gib", "headroom_gib", "total_gib"}
    assert llama["profile"] == {"A100-40GB": "mig-7g.40gb"}
    for v in result["variants"]:
        assert set(v) == {"instance_type", "instance_count", "layout", "hourly_usd", "gpus", "copies"}
        assert v["instance_type"] == "ml.p4d.24xlarge"
        assert all(isinstance(p, list) for p in v["copies"].values())
    assert result["hourly_usd"] == pytest.approx(sum(v["hourly_usd"] for v in result["variants"]))
    assert result["models"]["ticket-embedder"]["memory"]["weights_gib"] is None


def test_output_validates_and_synthesizes(capsys, tmp_path):
    out = tmp_path / "inference.yaml"
    code, _, _ = run(capsys, "mig", "fit", str(MODELS), "-o", str(out))
    assert code == 0
    section = yaml.safe_load(out.read_text())
    base = yaml.safe_load((ROOT / "examples" / "inference.yaml").read_text())
    base["inference"] = section["inference"]
    config_path = tmp_path / "platform.yaml"
    config_path.write_text(yaml.safe_dump(base))
    code, text, err = run(capsys, "validate", str(config_path))
    assert code == 0, err
    config = parse_config(base)
    app = new_app()
    platform = build_platform(app, config, checks=False)
    synth(app)
    template = assertions.Template.from_stack(platform.platform)
    [endpoint] = config.inference.endpoints
    assert endpoint.instance_type == "ml.p4de.24xlarge" and endpoint.instance_count == 1
    assert len(template.find_resources("AWS::SageMaker::Model")) == 4


def test_output_needs_an_image_and_host_memory(capsys, tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  - {name: a, copies: 1, memory_gib: 5}\n")
    code, out, err = run(capsys, "mig", "fit", str(models), "-o", str(tmp_path / "out.yaml"))
    assert code == 2 and "Traceback" not in err
    assert "models[0]" in err and "has no image or memory_mb" in err and "give image" in err
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize("model, field, words", [
    ({"name": "a", "copies": 1, "memory_gib": 5, "weight_dtyp": "bf16"}, "models[0].weight_dtyp", "did you mean"),
    ({"name": "a", "copies": 1, "params_billion": 8, "layers": 32, "kv_heads": 8, "head_dim": 128,
      "context_tokens": 4096, "weight_dtype": "fp7"}, "models[0].weight_dtype", "use one of fp32, bf16"),
    ({"name": "a", "copies": 0, "memory_gib": 5}, "models[0].copies", "at least 1"),
    ({"name": "a", "copies": 1}, "models[0].memory_gib", "give memory_gib"),
    ({"name": "a", "copies": 1, "memory_gib": -3}, "models[0].memory_gib", "above 0"),
    ({"name": "a", "copies": 1, "memory_gib": 5, "gpu_memory_utilization": 1.5},
     "models[0].gpu_memory_utilization", "at most 1"),
    ({"name": "a", "copies": 1, "memory_gib": 5, "throughput": {"measured_on": "H100", "whole_gpu_tokens_per_s": 1,
                                                                 "needed_tokens_per_s": 1}},
     "models[0].throughput.measured_on", "use one of A100-40GB"),
    ({"name": "a", "copies": 1, "memory_gib": 500}, "models[0]", "MIG cannot serve it"),
])
def test_bad_input_names_the_field_the_value_and_the_fix(capsys, tmp_path, model, field, words):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": [model]}))
    code, out, err = run(capsys, "mig", "fit", str(path))
    assert code == 2 and out == "" and "Traceback" not in err
    assert field in err and words in err


def test_bad_arguments_and_prices_exit_2(capsys, tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {name: a, copies: 1, memory_gib: 5}\nprices: {ml.p4d.24xlarge: free}\n")
    code, _, err = run(capsys, "mig", "fit", str(path))
    assert code == 2 and "prices.ml.p4d.24xlarge" in err
    path.write_text("models:\n  - {name: a, copies: 1, memory_gib: 5}\n")
    code, _, err = run(capsys, "mig", "fit", str(path), "--instance-type", "ml.p4x.24xlarge")
    assert code == 2 and "ml.p4x.24xlarge" in err
    code, _, err = run(capsys, "mig", "fit", str(tmp_path / "missing.yaml"))
    assert code == 2 and "missing.yaml" in err
    code, _, err = run(capsys, "mig", "fit", str(MODELS), "-o", str(tmp_path / "no" / "such" / "out.yaml"))
    assert code == 2 and "-o" in err and "names a folder that does not exist" in err and "Traceback" not in err


def test_output_is_never_the_models_file_and_a_link_is_replaced_not_followed(capsys, tmp_path, monkeypatch):
    models = tmp_path / "models.yaml"
    models.write_text(MODELS.read_text())
    searched = []
    monkeypatch.setattr(F, "plan", lambda *a, **k: searched.append(1))
    code, out, err = run(capsys, "mig", "fit", str(models), "-o", str(models))
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"-o: is the input {models}" in err
    assert models.read_text() == MODELS.read_text() and searched == [], "refused before the search"
    monkeypatch.undo()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    link = tmp_path / "inference.yaml"
    link.symlink_to(victim)
    code, _, err = run(capsys, "mig", "fit", str(models), "-o", str(link))
    assert code == 0, err
    assert victim.read_text() == "keep me" and not link.is_symlink() and "inference:" in link.read_text()


# --------------------------------------------------------------------------- types without a price


def test_a_type_without_a_price_still_gets_the_plan_with_the_fewest_gpus(capsys, tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {name: a, copies: 3, memory_gib: 30}\n  - {name: b, copies: 2, memory_gib: 8}\n")
    assert "ml.p5.48xlarge" not in instances.ON_DEMAND_USD_PER_HOUR
    code, out, err = run(capsys, "mig", "fit", str(path), "--instance-type", "ml.p5.48xlarge")
    assert code == 0 and err == ""
    assert "Fewest GPUs (unpriced): 8 GPUs, 1 instance(s) in 1 variant(s)" in out
    assert "variant 1: 1 x ml.p5.48xlarge (H100-80GB)" in out and out.count("unpriced") >= 2
    assert "Whole GPUs (each copy on its own GPU, 1 x ml.p5.48xlarge): 8 GPUs" in out
    assert "no price for ml.p5.48xlarge: the plan has the fewest GPUs" in out and "prices:" in out
    code, out, _ = run(capsys, "mig", "fit", str(path), "--instance-type", "ml.p5.48xlarge", "--json")
    result = json.loads(out)
    assert code == 0 and result["priced"] is False and result["hourly_usd"] is None
    assert result["gpus"] == 8 and result["whole_gpus"] == 8
    assert [v["hourly_usd"] for v in result["variants"]] == [None]


def test_the_priced_types_plan_while_every_model_fits_them():
    small = [F.ModelSpec(name="a", memory_gib=5, copies=Copies(3, 3, 3))]
    choice = F.choose(small, *F.candidates({}))
    assert choice.priced and [c.instance_type for c in choice.candidates] == ["ml.p4d.24xlarge"]
    assert "ml.p5.48xlarge" in choice.left_out
    # 60 GiB does not fit an A100-40GB, the only priced type: every type, by GPUs, none left out.
    large = [F.ModelSpec(name="a", memory_gib=60, copies=Copies(3, 3, 3))]
    choice = F.choose(large, *F.candidates({}))
    assert not choice.priced and choice.left_out == ()
    assert [c.instance_type for c in choice.candidates] == list(mig.INSTANCE_TYPES)
    got = F.plan(large, list(choice.candidates))
    assert got is not None and not got.priced and got.cost == got.gpus == 8
    # Every type costs its 8 GPUs: an H200's mig-3g.71gb holds the model and leaves the most slices free.
    assert got.hourly_usd is None and got.variants[0].candidate.instance_type == "ml.p5e.48xlarge"
    assert got.variants[0].profiles == (("a", "mig-3g.71gb"),)
    # A price for every type makes it a priced plan again.
    every = {t: 10.0 for t in mig.INSTANCE_TYPES}
    choice = F.choose(large, *F.candidates(every))
    assert choice.priced and F.plan(large, list(choice.candidates)).hourly_usd == pytest.approx(10.0)


def test_the_saving_is_against_each_copy_on_its_own_gpu():
    cands, _ = F.candidates({}, instance_types=["ml.p4d.24xlarge"])
    models = [F.ModelSpec(name="a", memory_gib=5, copies=Copies(3, 3, 3))]  # 3 + 1 partitions
    cost, count = F.whole_gpu_cost(models, cands)
    assert count == {"ml.p4d.24xlarge": 1} and cost == pytest.approx(37.688)
    many = [F.ModelSpec(name="a", memory_gib=5, copies=Copies(8, 8, 8))]  # 9 GPUs: 2 instances
    assert F.whole_gpu_cost(many, cands)[1] == {"ml.p4d.24xlarge": 2}
    assert math.isclose(F.plan(many, cands).hourly_usd, 37.688)


def test_the_saving_is_the_same_whatever_unused_types_are_listed(capsys, tmp_path):
    """A model too large for an A100-40GB makes the plan count GPUs; listing ml.p4d.24xlarge beside
    ml.p5.48xlarge changes neither the plan (one ml.p5.48xlarge) nor its saving."""
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {name: big, copies: 2, memory_gib: 50}\n  - {name: small, copies: 3, memory_gib: 5}\n")
    answers = []
    for types in (["ml.p5.48xlarge"], ["ml.p4d.24xlarge", "ml.p5.48xlarge"]):
        code, out, _ = run(capsys, "mig", "fit", str(path), "--instance-type", *types)
        assert code == 0 and "variant 1: 1 x ml.p5.48xlarge" in out
        answers.append(next(line for line in out.splitlines() if line.startswith("Whole GPUs")))
    assert answers == ["Whole GPUs (each copy on its own GPU, 1 x ml.p5.48xlarge): 8 GPUs; MIG saves 0 GPUs (0%)"] * 2


def _saving(models, prices, types, isolate):
    choice = F.choose(models, *F.candidates(prices, instance_types=types, catalog={}))
    cands = list(choice.candidates)
    if any(not any(F.smallest_profile(m, c.gpu) for c in cands) for m in models):
        return None
    got = F.plan(models, cands, isolate_teams=isolate)
    whole, _ = F.whole_gpu_cost(models, F.plan_types(got, cands), isolate_teams=isolate)
    return round(whole - got.cost, 6), {v.candidate.instance_type for v in got.variants}, got.priced


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models=st.lists(st.tuples(st.floats(min_value=1, max_value=150), st.integers(min_value=1, max_value=10),
                                 st.sampled_from(["a", "b"])), min_size=1, max_size=4),
       prices=st.dictionaries(st.sampled_from(list(mig.INSTANCE_TYPES)), st.sampled_from([30.0, 40.0, 47.11, 60.0])),
       types=st.lists(st.sampled_from(list(mig.INSTANCE_TYPES)), min_size=2, max_size=4, unique=True),
       isolate=st.booleans())
def test_a_type_the_plan_does_not_use_never_changes_the_saving(models, prices, types, isolate):
    """Adding a type changes the saving only when the MIG plan uses it, priced or not: the whole-GPU
    comparison packs the plan's own types."""
    specs = [F.ModelSpec(name=f"m{i}", memory_gib=mem, copies=Copies(n, n, n), team=team)
             for i, (mem, n, team) in enumerate(models)]
    *base, extra = types
    without, with_extra = _saving(specs, prices, base, isolate), _saving(specs, prices, types, isolate)
    if without is None or with_extra is None or without[2] != with_extra[2]:
        return  # a model fits only the extra type, or its price changed what the plan counts
    if extra not in with_extra[1]:
        assert with_extra[0] == without[0]
    unpriced = _saving(specs, {}, types, isolate)
    mig_only = F.plan(specs, list(F.choose(specs, *F.candidates({}, instance_types=types, catalog={})).candidates),
                      isolate_teams=isolate)
    if extra not in {v.candidate.instance_type for v in mig_only.variants}:
        assert unpriced[0] == _saving(specs, {}, base, isolate)[0]
    assert with_extra[0] >= 0 and unpriced[0] >= 0


def test_a_listed_type_that_packs_whole_gpus_cheaper_is_said_beside_the_saving_not_in_it(capsys):
    """The priced example's plan uses ml.p4de.24xlarge; ml.p4d.24xlarge packs whole GPUs for less.
    Listing it changes neither the plan nor its saving; a line says what whole GPUs on it would cost."""
    models = str(ROOT / "examples" / "mig" / "models.yaml")
    outs = []
    for types in (["ml.p4de.24xlarge"], ["ml.p4de.24xlarge", "ml.p4d.24xlarge"]):
        code, out, _ = run(capsys, "mig", "fit", models, "--instance-type", *types)
        assert code == 0 and "variant 1: 1 x ml.p4de.24xlarge" in out
        outs.append(out.splitlines())
    saving = [next(line for line in lines if line.startswith("Whole GPUs (")) for lines in outs]
    assert saving == ["Whole GPUs (each copy on its own GPU, 3 x ml.p4de.24xlarge): $141.33/h; MIG saves $94.22/h (67%)"] * 2
    assert not any("a type the plan does not use" in line for line in outs[0])
    assert ("Whole GPUs on a type the plan does not use (3 x ml.p4d.24xlarge) would cost $113.06/h: the plan still "
            "saves $65.95/h against them") in outs[1]


def test_at_equal_cost_the_plan_leaves_the_most_slices_free(capsys, tmp_path):
    """Any layout holds these two models on one instance: each takes its own partition, not a whole
    GPU, and the rest of the GPUs stays free for more copies."""
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {name: a, copies: 1, memory_gib: 30}\n  - {name: b, copies: 1, memory_gib: 5}\n")
    code, out, _ = run(capsys, "mig", "fit", str(path), "--instance-type", "ml.p5.48xlarge")
    assert code == 0
    assert "a: 1 copies on mig-3g.40gb" in out and "b: 1 copies on mig-1g.10gb" in out
    assert "mig-7g.80gb]" not in out.split("Whole GPUs")[0]
    cands, _ = F.candidates({}, instance_types=["ml.p4d.24xlarge"])
    models = [F.ModelSpec(name="a", memory_gib=15, copies=Copies(1, 1, 1)),
              F.ModelSpec(name="b", memory_gib=4, copies=Copies(1, 1, 1))]
    got = F.plan(models, cands)
    assert [p for _, p in got.variants[0].profiles] == ["mig-3g.20gb", "mig-1g.5gb"]


def test_the_table_says_whether_memory_or_compute_set_the_partition(capsys, tmp_path):
    path = tmp_path / "models.yaml"
    fast = "{measured_on: H100-80GB, whole_gpu_tokens_per_s: 2100, needed_tokens_per_s: 900}"  # 3 slices
    path.write_text("models:\n"
                    "  - {name: roomy, copies: 1, memory_gib: 30}\n"
                    f"  - {{name: busy, copies: 1, memory_gib: 5, throughput: {fast}}}\n"
                    f"  - {{name: both, copies: 1, memory_gib: 30, throughput: {fast}}}\n")
    code, out, _ = run(capsys, "mig", "fit", str(path), "--gpu", "H100-80GB")
    assert code == 0
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith("  ") and "mig-" in line}
    assert rows["roomy"][-2:] == ["memory", "mig-3g.40gb"]
    assert rows["busy"][-2:] == ["compute", "mig-3g.40gb"]
    assert rows["both"][-4:] == ["memory", "and", "compute", "mig-3g.40gb"]
    code, out, _ = run(capsys, "mig", "fit", str(path), "--gpu", "H100-80GB", "--json")
    assert {n: m["set_by"] for n, m in json.loads(out)["models"].items()} == {
        "roomy": "memory", "busy": "compute", "both": "memory and compute"}


def test_the_worked_example_of_the_docs_is_what_the_command_prints(capsys):
    page = (ROOT / "docs" / "backends" / "mig-inference.md").read_text()
    start = page.index("$ gpu-share mig fit examples/mig/models.yaml\n") + len("$ gpu-share mig fit examples/mig/models.yaml\n")
    code, out, _ = run(capsys, "mig", "fit", str(MODELS))
    assert code == 0 and page[start:page.index("```", start)] == out


# --------------------------------------------------------------------------- --prices aws


@pytest.fixture
def price_list(monkeypatch):
    """The Price List API, answered by an in-memory model behind a real boto3 client."""
    from cdk_gpu_share.inference import cli as mig_cli
    from tests.pricing_model import PricingModel, product

    model = PricingModel([
        product("ml.p4d.24xlarge", "us-east-1", "37.6880000000"),
        product("ml.p4de.24xlarge", "us-east-1", "47.1100000000"),
        product("ml.p4de.24xlarge", "us-east-1", "0.0000000000"),  # a free-tier row: never the price
        product("ml.p4de.24xlarge", "us-east-1", "39.0000000000", component="Training"),  # not inference
        product("ml.p5.48xlarge", "eu-west-1", "120.0000000000"),
    ])
    endpoints = []

    def client(endpoint):
        endpoints.append(endpoint)
        return model.client

    monkeypatch.setattr(mig_cli, "make_pricing_client", client)
    for variable in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(variable, raising=False)
    return model, endpoints


def test_prices_aws_reads_getproducts_for_the_endpoints_region(capsys, price_list):
    model, endpoints = price_list
    code, out, err = run(capsys, "mig", "fit", str(MODELS), "--prices", "aws", "--region", "us-east-1", "--json")
    assert code == 0, err
    request = model.requests[0]
    assert request["ServiceCode"] == "AmazonSageMaker"
    assert {f["Field"]: f["Value"] for f in request["Filters"]} == {
        "instanceName": "ml.p4d.24xlarge", "regionCode": "us-east-1", "component": "Hosting"}
    assert endpoints == ["us-east-1"]
    # The file prices ml.p4de.24xlarge itself: only the other five types are asked for.
    asked = [next(f["Value"] for f in r["Filters"] if f["Field"] == "instanceName") for r in model.requests]
    assert sorted(set(asked)) == sorted(t for t in mig.INSTANCE_TYPES if t != "ml.p4de.24xlarge")
    assert json.loads(out)["priced"] is True


def test_prices_aws_prices_every_type_the_list_prices_and_leaves_the_others_unpriced(capsys, price_list, tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {name: a, copies: 3, memory_gib: 60}\n")
    code, out, err = run(capsys, "mig", "fit", str(path), "--prices", "aws", "--region", "us-east-1")
    assert code == 0, err
    # 60 GiB does not fit an A100-40GB; the A100-80GB is now priced (the Hosting row, not Training's).
    assert "Cheapest plan: $47.11/h" in out and "ml.p4de.24xlarge" in out
    assert "the AWS Price List API, on-demand real-time inference in us-east-1, read " in out
    assert "not priced, left out: ml.p5.48xlarge, ml.p5e.48xlarge, ml.p5en.48xlarge, ml.p6-b200.48xlarge" in out


def test_prices_aws_asks_the_nearest_pricing_endpoint_and_takes_the_region_from_aws_region(
        capsys, price_list, tmp_path, monkeypatch):
    model, endpoints = price_list
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  - {name: a, copies: 3, memory_gib: 30}\n")
    code, out, err = run(capsys, "mig", "fit", str(path), "--prices", "aws", "--instance-type", "ml.p5.48xlarge")
    assert code == 0, err
    assert endpoints == ["eu-central-1"]
    assert {f["Field"]: f["Value"] for f in model.requests[0]["Filters"]}["regionCode"] == "eu-west-1"
    assert "Cheapest plan: $120.00/h" in out and "in eu-west-1" in out


@pytest.mark.parametrize("fault, words", [
    ("AccessDeniedException", "grant your identity pricing:GetProducts"),
    ("ThrottlingException", "retry in a minute"),
    ("network", "cannot reach the AWS Price List API"),
])
def test_prices_aws_failures_are_one_line(capsys, price_list, fault, words):
    model, _ = price_list
    model.fault = fault
    code, out, err = run(capsys, "mig", "fit", str(MODELS), "--prices", "aws", "--region", "us-east-1")
    assert code != 0 and out == "" and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and words in err and "SageMaker's on-demand prices" in err


def test_prices_aws_without_credentials_is_one_line(capsys, monkeypatch, tmp_path):
    import boto3

    from cdk_gpu_share.inference import cli as mig_cli

    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setattr(mig_cli, "make_pricing_client",
                        lambda endpoint: boto3.session.Session().client("pricing", region_name=endpoint))
    code, out, err = run(capsys, "mig", "fit", str(MODELS), "--prices", "aws", "--region", "us-east-1")
    assert code != 0 and out == "" and "Traceback" not in err
    assert "no AWS credentials to read SageMaker's on-demand prices" in err


def test_region_without_prices_aws_is_refused(capsys):
    code, _, err = run(capsys, "mig", "fit", str(MODELS), "--region", "eu-west-1")
    assert code == 2 and "--region" in err and "--prices aws" in err


def test_the_plan_reports_its_progress_and_the_command_draws_it_only_on_a_terminal(capsys):
    models = [F.ModelSpec(name=f"m{i}", memory_gib=4 + i, copies=Copies(2, 2, 2)) for i in range(6)]
    seen: list[float] = []
    got = F.plan(models, F.candidates({})[0], progress=seen.append)
    assert got is not None and seen and seen == sorted(seen) and 0 < seen[-1] <= 1
    code, _, err = run(capsys, "mig", "fit", str(MODELS))
    assert code == 0 and "planning" not in err  # captured output is no terminal


# --------------------------------------------------------------------------- numbers nobody bounded


@pytest.mark.parametrize("copies, field", [(2147483647, "models[0].copies"),
                                           ({"max": 10**9}, "models[0].copies.max")])
def test_copies_past_what_an_endpoint_holds_are_refused_in_one_line(capsys, tmp_path, copies, field):
    from cdk_gpu_share.inference.config import MAX_COPIES

    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": [{"name": "a", "copies": copies, "memory_gib": 5}]}))
    code, out, err = run(capsys, "mig", "fit", str(path))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert field in err and f"must be at most {MAX_COPIES:,}" in err


def test_a_spent_search_budget_answers_at_once_whatever_the_copies(monkeypatch):
    """The instance-count loop stops with the budget: its work no longer grows with the copies."""
    from cdk_gpu_share.inference.config import MAX_COPIES

    calls = []
    assign = F._assign
    monkeypatch.setattr(F, "_assign", lambda *a: calls.append(1) or assign(*a))
    monkeypatch.setattr(F, "SEARCH_BUDGET", 0)
    models = [decoder(name="big", copies=Copies(MAX_COPIES, MAX_COPIES, MAX_COPIES), memory_gib=30),
              decoder(name="small", copies=Copies(MAX_COPIES, MAX_COPIES, MAX_COPIES), memory_gib=4)]
    cands, _ = F.candidates({"ml.p4de.24xlarge": 47.11}, instance_types=["ml.p4de.24xlarge"])
    plan = F.plan(models, cands)
    assert plan is not None and not plan.exact and calls == []
    held = sum(v.instance_count for v in plan.variants) * 8 * mig.MAX_INSTANCES
    assert held >= sum(F.demand(m) for m in models)

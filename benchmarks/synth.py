#!/usr/bin/env python3
"""Synth time of our constructs against the raw-CloudFormation floor, at 3 and 50 teams.

The floor is a *raw replay*: an app that creates the same stacks, with the same
logical ids, as bare ``CfnResource`` / ``CfnOutput`` elements carrying the final
properties read back from our own synthesized templates. It pays what any CDK app
pays for those templates (jsii start-up, the aws-cdk-lib modules, token resolution,
the CloudFormation rule engine that ``@aws-cdk/core:validateAgainstDefaultRules``
turns on, writing the cloud assembly); what our app spends beyond it is the cost of
our constructs (L2 constructs, grants, acknowledgements, outputs, lazies, asset
staging). cdk-nag's extra is the same app with and without ``-c nag=false``.

app.py builds CDK's CloudFormation rule engine before any construct (``template_validator``:
building it forces 100+ full V8 garbage collections, each marking the whole heap, so it costs
less on a small heap). Any app can do that, so a second replay does it too ("replay, engine
1st"): the ratio to it is what our constructs cost beyond CDK's floor for the same templates;
the ratio to the plain replay is the issue's target.

Two more floors say how much of the gap is code loaded rather than work done. aws-cdk-lib
loads each class's file when it is first used, and the raw replay uses none outside its core:
"+ L1 classes" is the engine-first replay that also imports the Python module and loads the L1
class (``CfnRole``, ``CfnJobQueue``...) of every AWS type in the templates, which any app of typed
classes loads, even one with no L2 at all; "+ our classes" loads instead every aws-cdk-lib class
and Python module our app uses (recorded in an untimed run of it), building none of them. The
second is a lower bound of what our app loads: L2 constructors require more files as they run
(counted once with a Node preload listing ``require.cache`` at exit: at 3 teams
our app ends with 409 of aws-cdk-lib's files loaded, this floor with 279, the L1 floor with 250,
the raw replay with 206). What our app costs beyond it is the work our constructs
and CDK's L2s do for these templates, plus the files their constructors load.

Each app runs in a fresh process, as ``cdk synth`` runs it, REPEAT times, interleaved;
medians are compared within one run. Two clocks: wall time, and the CPU time of the
app's process tree (Python + jsii's Node), which on this shared 2-core machine is the
steadier of the two; the CPU ratio of the minima (the runs the machine's other users disturbed
least: load only adds) is printed too, with the load average.

Each app's jsii round trips (requests from Python to jsii's Node process) are counted in one
more, untimed, run: a count does not depend on the machine's load, and every round trip costs
both processes CPU, so it is the steadiest measure of what our constructs add.

Targets (printed, never asserted): synth <= 1.15x its raw replay at 3 teams
(``platform.yaml``) and at 50 teams; cdk-nag adds <= 10%.

    .venv/bin/python benchmarks/synth.py        # REPEAT=5 for more samples
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
REPEAT = int(os.environ.get("REPEAT", "3"))
RATIO_TARGET = 1.15
NAG_TARGET = 0.10

REPLAY_APP = '''
import json, sys
import aws_cdk as cdk

src = sys.argv[1]
app = cdk.App()
# As app.py does (see template_validator): CDK's rule engine built before any construct.
early = "--engine-first" in sys.argv
engine = cdk.CloudFormationValidatePlugin() if early else None
if "--load" in sys.argv:
    # A floor: load the code an app of typed classes would load (a JSON list of Python modules
    # and of jsii classes), building nothing into the app. jsii's kernel checks a constructor's
    # argument count, then requires the class's file, then converts the arguments: nulls for
    # the scope or props are refused there, after the file is loaded. A class whose parameters
    # are all optional (PolicyStatement, Code...) is built, with no scope: in no template.
    import importlib
    import re
    import jsii
    from jsii._kernel.types import CreateRequest

    def load_class(fqn: str) -> None:
        arity = 3  # (scope, id, props), as most constructors: one call
        while True:
            try:
                jsii.kernel.provider.create(CreateRequest(fqn=fqn, args=[None] * arity))
                return
            except jsii.errors.JSIIError as e:  # the kernel's own checks, before loading
                fewer = re.match(r"Too many arguments \(method accepts (\d+)", str(e))
                if fewer:
                    arity = int(fewer.group(1))
                elif str(e).startswith("Not enough arguments") and arity < 8:
                    arity += 1
                elif str(e).endswith("not found"):
                    return  # no L1 in this aws-cdk-lib (AWS::SageMaker::ComputeQuota: a CfnResource)
                else:
                    raise
            except RuntimeError:  # the nulls refused, or the constructor threw: the file is loaded
                return

    load = json.load(open(sys.argv[sys.argv.index("--load") + 1]))
    for module in load["python"]:
        importlib.import_module(module)
    for fqn in load["classes"]:
        load_class(fqn)
manifest = json.load(open(f"{src}/manifest.json"))
stacks = {}
for aid, art in manifest["artifacts"].items():
    if art["type"] != "aws:cloudformation:stack":
        continue
    template = json.load(open(f"{src}/{art['properties']['templateFile']}"))
    stack = cdk.Stack(app, aid, description=template.get("Description"))
    for lid, res in template.get("Resources", {}).items():
        r = cdk.CfnResource(stack, lid, type=res["Type"], properties=res.get("Properties"))
        for key in ("DependsOn", "UpdateReplacePolicy", "DeletionPolicy", "Condition", "Metadata",
                    "UpdatePolicy", "CreationPolicy"):
            if key in res:
                r.add_override(key, res[key])
        if res["Type"] == "AWS::SageMaker::ComputeQuota":
            # As our construct does: CDK's default rules do not know this type yet.
            cdk.Validations.of(r).acknowledge(cdk.Acknowledgment(
                id="CloudFormation-Validate::F3006", reason="a valid type that CDK's rules do not know yet"))
    for oid, out in template.get("Outputs", {}).items():
        export = out.get("Export", {}).get("Name")
        cdk.CfnOutput(stack, oid, value=cdk.Token.as_string(out["Value"]), description=out.get("Description"),
                      export_name=None if export is None else cdk.Token.as_string(export))
    stacks[aid] = (stack, art.get("dependencies", []))
for stack, deps in stacks.values():
    for dep in deps:
        if dep in stacks:
            stack.add_dependency(stacks[dep][0])
if engine is not None:
    cdk.Validations.of(app).add_plugins(engine)
app.synth()
'''


# Runs an app (argv[1:]) as `python app.py` would, counting its requests to jsii's Node
# process (create, invoke, get...: each a round trip) into the file $JSII_CALLS_FILE.
# A count is the same on every run, unlike a time on a shared machine. It wraps a private
# jsii method: if that moves, the count is reported as unavailable.
COUNT_APP = '''
import json, os, runpy, sys
count = [0]
classes = set()
try:
    from jsii._kernel.providers import process
    send = process._NodeProcess.send
    def counting_send(self, request, response_type):
        count[0] += 1
        fqn = getattr(request, "fqn", "")
        if fqn.startswith(("aws-cdk-lib.aws_", "aws-cdk-lib.custom_resources.")):
            classes.add(fqn)
        return send(self, request, response_type)
    process._NodeProcess.send = counting_send
except (ImportError, AttributeError):
    count[0] = -1
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
finally:
    python = sorted(m for m in sys.modules if m.startswith(("aws_cdk.aws_", "aws_cdk.custom_resources"))
                    and "._" not in m)
    with open(os.environ["JSII_CALLS_FILE"], "w") as f:
        json.dump({"calls": count[0], "python": python, "classes": sorted(classes)}, f)
'''


FLOOR_L1 = "replay + L1 classes, engine 1st"
FLOOR_OURS = "replay + our classes, engine 1st"


def counted_run(cmd: list[str], env: dict, count_file: Path) -> dict:
    """Runs ``cmd`` (``python app.py ...``) under COUNT_APP: its round trips, modules and classes."""
    run([sys.executable, "-c", COUNT_APP, *cmd[1:]], dict(env, JSII_CALLS_FILE=str(count_file)))
    return json.loads(count_file.read_text())


def l1_classes(src: Path) -> dict:
    """The Python module and the L1 class (``CfnRole``...) of every AWS type in ``src``'s templates.

    What any app of typed classes loads to write these templates, even one with no L2 at all
    (aws-cdk-lib requires each class's file lazily, so an L1 loads its module's generated file only).
    """
    types = set()
    for path in src.glob("*.template.json"):
        types |= {r["Type"] for r in json.loads(path.read_text()).get("Resources", {}).values()}
    aws = sorted(t.split("::") for t in types if t.startswith("AWS::") and not t.startswith("AWS::CDK::"))
    return {"python": sorted({f"aws_cdk.aws_{svc.lower()}" for _, svc, _ in aws}),
            "classes": [f"aws-cdk-lib.aws_{svc.lower()}.Cfn{res}" for _, svc, res in aws]}


def fifty_teams() -> dict:
    teams = [
        {
            "name": f"team-{i:02d}",
            "guarantee": {"ml.p5.48xlarge": 1, "g5.xlarge": 1},
            "sharing": "lend_and_borrow",
            "borrow_limit_percent": 100,
            "fair_share_weight": 2,
        }
        for i in range(50)
    ]
    return {
        "platform": {"name": "fifty"},
        "teams": teams,
        "hyperpod": {
            "cluster_arn": "arn:aws:sagemaker:us-east-1:111122223333:cluster/abcdef123456",
            "capacity": {"ml.p5.48xlarge": 50},
        },
        "fairshare": {"capacity": {"g5.xlarge": 50}},
    }


def run(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall and CPU seconds (the process tree's user + system) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def resources_in(outdir: Path) -> int:
    return sum(len(json.loads(p.read_text()).get("Resources", {})) for p in outdir.glob("*.template.json"))


def byte_compile_ours() -> None:
    """Byte-compile our package, as ``pip install`` does for every installed package.

    aws-cdk-lib, jsii and the rest were byte-compiled by pip; our editable install never is
    when PYTHONDONTWRITEBYTECODE is set (as on the team's machines), so every timed run of our
    app would recompile our sources from scratch, a cost no installed copy pays.
    """
    import compileall

    compileall.compile_dir(str(ROOT / "src"), quiet=1)


def main() -> int:
    byte_compile_ours()
    work = Path(tempfile.mkdtemp(prefix="bench-synth-"))
    (work / "replay.py").write_text(REPLAY_APP)
    (work / "fifty.yaml").write_text(yaml.safe_dump(fifty_teams()))
    node_bin = ROOT / "node_modules" / ".bin"
    base_env = dict(os.environ, PATH=f"{node_bin}{os.pathsep}{os.environ['PATH']}",
                    JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1")
    # The context `cdk synth` would pass: cdk.json's feature flags, for every app alike.
    flags = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items() if k.startswith("@")}

    def env_for(out: Path, **context) -> dict:
        return dict(base_env, CDK_OUTDIR=str(out), CDK_CONTEXT_JSON=json.dumps({**flags, **context}))

    platforms = {"3 teams (platform.yaml)": str(ROOT / "platform.yaml"), "50 teams": str(work / "fifty.yaml")}
    # Our templates, synthesized once: what the raw replays replay.
    sources = {}
    for name, config in platforms.items():
        src = work / f"src-{len(sources)}"
        run([sys.executable, "app.py"], env_for(src, config=config, nag="false"))
        sources[name] = src
    # What our app loads: counted in an untimed run of it, before the floors that need it.
    used = {name: counted_run([sys.executable, "app.py"], env_for(work / f"out-used-{i}", config=config, nag="false"),
                              work / f"used-{i}")
            for i, (name, config) in enumerate(platforms.items())}
    cases = {}
    for i, (name, config) in enumerate(platforms.items()):
        replay = [sys.executable, str(work / "replay.py"), str(sources[name])]
        l1_load, ours_load = work / f"load-l1-{i}.json", work / f"load-ours-{i}.json"
        l1_load.write_text(json.dumps(l1_classes(sources[name])))
        ours_load.write_text(json.dumps({"python": used[name]["python"], "classes": used[name]["classes"]}))
        cases[(name, "ours")] = ([sys.executable, "app.py"], dict(config=config, nag="false"))
        cases[(name, "ours + cdk-nag")] = ([sys.executable, "app.py"], dict(config=config))
        cases[(name, "raw replay")] = (replay, {})
        cases[(name, "replay, engine 1st")] = ([*replay, "--engine-first"], {})
        cases[(name, FLOOR_L1)] = ([*replay, "--engine-first", "--load", str(l1_load)], {})
        cases[(name, FLOOR_OURS)] = ([*replay, "--engine-first", "--load", str(ours_load)], {})
    wall: dict = {k: [] for k in cases}
    cpu: dict = {k: [] for k in cases}
    for i in range(REPEAT):
        for k, (cmd, context) in cases.items():
            w, c = run(cmd, env_for(work / f"out-{i}-{len(wall[k])}-{abs(hash(k))}", **context))
            wall[k].append(w)
            cpu[k].append(c)
    # jsii round trips of each app, counted in one more (untimed) run of each.
    # Our app's were counted above; -1: the counting hook found no jsii method to wrap.
    counts = {(name, "ours"): used[name] for name in platforms}
    for k, (cmd, context) in cases.items():
        if k not in counts:
            counts[k] = counted_run(cmd, env_for(work / f"out-calls-{abs(hash(k))}", **context),
                                    work / f"calls-{abs(hash(k))}")
    calls = {k: c["calls"] if c["calls"] >= 0 else None for k, c in counts.items()}
    print(f"synth, median of {REPEAT} fresh processes each (interleaved); ratios within this run;"
          " our package byte-compiled first, as pip does")
    for name in platforms:
        med = {k[1]: (statistics.median(wall[k]), statistics.median(cpu[k]), min(cpu[k])) for k in cases if k[0] == name}
        print(f"  {name}: {resources_in(sources[name])} resources; our app uses"
              f" {len(used[name]['classes'])} aws-cdk-lib classes from {len(used[name]['python'])} Python modules")
        for what, (w, c, c_min) in med.items():
            n = calls[(name, what)]
            print(f"    {what:<32} wall {w:6.2f} s   cpu {c:6.2f} s (min {c_min:5.2f})"
                  f"   jsii round trips {n if n is not None else 'n/a':>5}")
        ours, raw, nag = med["ours"], med["raw replay"], med["ours + cdk-nag"]
        early, l1, loaded = med["replay, engine 1st"], med[FLOOR_L1], med[FLOOR_OURS]
        # The minimum is the run the other users of the machine disturbed least (load only adds).
        for clock, i in (("wall", 0), ("cpu", 1), ("cpu min", 2)):
            ratio = ours[i] / raw[i]
            extra = nag[i] / ours[i] - 1
            print(f"    {clock:<7}: synth / raw replay {ratio:4.2f}x (target <= {RATIO_TARGET}x: "
                  f"{'met' if ratio <= RATIO_TARGET else 'MISSED'});  cdk-nag adds {extra * 100:4.1f}% "
                  f"(target <= {NAG_TARGET * 100:.0f}%: {'met' if extra <= NAG_TARGET else 'MISSED'})")
            print(f"             floors / raw replay: engine 1st {early[i] / raw[i]:4.2f}x, + L1 classes"
                  f" {l1[i] / raw[i]:4.2f}x, + our classes {loaded[i] / raw[i]:4.2f}x;"
                  f"  synth / + our classes {ours[i] / loaded[i]:4.2f}x")
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} (2 cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

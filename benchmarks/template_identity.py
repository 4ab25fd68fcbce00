#!/usr/bin/env python3
"""Template identity check for synth-speed work: synthesize every config before and after a change, diff.

A change made for speed must leave every template as it was. ``snap`` runs ``app.py`` (as
``cdk synth`` does, cdk.json's feature flags, with and without cdk-nag) for ``platform.yaml``,
each ``examples/*.yaml``, the 50 teams of ``benchmarks/synth.py``, ``platform.yaml`` with
``alerts`` (new topic, imported topic) and with ``fairshare.vpc``; ``diff`` compares two such
folders: every template identical once the ``CDKMetadata`` resource (CDK's record of the
construct types and methods used, written by ``cdk synth`` only) is left out, and every asset
manifest byte-identical (asset hashes and keys).

    .venv/bin/python benchmarks/template_identity.py snap /tmp/before   # on the old commit
    .venv/bin/python benchmarks/template_identity.py snap /tmp/after    # on the new one
    .venv/bin/python benchmarks/template_identity.py diff /tmp/before /tmp/after
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

def configs(work: Path) -> dict:
    from synth import fifty_teams
    out = {"platform": ROOT / "platform.yaml"}
    for p in sorted((ROOT / "examples").glob("*.yaml")):
        out[p.stem] = p
    (work / "fifty.yaml").write_text(yaml.safe_dump(fifty_teams()))
    out["fifty"] = work / "fifty.yaml"
    cfg = yaml.safe_load((ROOT / "platform.yaml").read_text())
    cfg["alerts"] = {"emails": ["gpu-oncall@example.com"]}
    (work / "alerts.yaml").write_text(yaml.safe_dump(cfg))
    out["alerts"] = work / "alerts.yaml"
    cfg2 = yaml.safe_load((ROOT / "platform.yaml").read_text())
    cfg2["alerts"] = {"topic_arn": "arn:aws:sns:us-east-1:111122223333:gpu-alarms"}
    (work / "alerts_topic.yaml").write_text(yaml.safe_dump(cfg2))
    out["alerts_topic"] = work / "alerts_topic.yaml"
    cfg3 = yaml.safe_load((ROOT / "platform.yaml").read_text())
    cfg3["fairshare"]["vpc"] = {"vpc_id": "vpc-0123456789abcdef0",
        "subnet_ids": ["subnet-0123456789abcdef0", "subnet-0fedcba9876543210"],
        "security_group_ids": ["sg-0123456789abcdef0"]}
    (work / "vpc.yaml").write_text(yaml.safe_dump(cfg3))
    out["vpc"] = work / "vpc.yaml"
    return out

def snap(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    flags = {k: v for k, v in json.loads((ROOT / "cdk.json").read_text())["context"].items() if k.startswith("@")}
    env = dict(os.environ, PATH=f"{ROOT}/node_modules/.bin:{os.environ['PATH']}",
               JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION="1")
    for name, cfg in configs(out).items():
        for nag in ("true", "false"):
            d = out / f"{name}-nag{nag}"
            e = dict(env, CDK_OUTDIR=str(d), CDK_CONTEXT_JSON=json.dumps({**flags, "config": str(cfg), "nag": nag}))
            r = subprocess.run([sys.executable, "app.py"], cwd=ROOT, env=e, capture_output=True, text=True)
            (out / f"{name}-nag{nag}.log").write_text(r.stdout + r.stderr)
            print(name, nag, "rc", r.returncode, len(list(d.glob("*.template.json"))), "templates")

def strip(p: Path) -> str:
    t = json.loads(p.read_text())
    t.get("Resources", {}).pop("CDKMetadata", None)
    t.get("Conditions", {}).pop("CDKMetadataAvailable", None)
    return json.dumps(t, indent=1)

def diff(a: Path, b: Path) -> int:
    fa = sorted(p.relative_to(a) for p in a.rglob("*.template.json"))
    fb = sorted(p.relative_to(b) for p in b.rglob("*.template.json"))
    bad = 0
    if fa != fb:
        print("file sets differ", set(fa) ^ set(fb)); bad += 1
    for rel in fa:
        if (b / rel).exists() and strip(a / rel) != strip(b / rel):
            print("DIFF", rel); bad += 1
    # asset manifests too (asset hashes and keys)
    for rel in sorted(p.relative_to(a) for p in a.rglob("*.assets.json")):
        if (a / rel).read_text() != (b / rel).read_text():
            print("ASSET DIFF", rel); bad += 1
    print(f"{len(fa)} templates compared (and their asset manifests), {bad} differences")
    return bad

if __name__ == "__main__":
    if sys.argv[1] == "snap":
        snap(Path(sys.argv[2]))
    else:
        sys.exit(1 if diff(Path(sys.argv[2]), Path(sys.argv[3])) else 0)

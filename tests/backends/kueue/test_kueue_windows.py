"""Time windows on Kueue: the switcher's objects against the Kubernetes 1.30 schema and the
pinned Kueue CRDs, its ClusterRole and admission policy, its CronJobs against the boundaries the
config's windows have (daylight saving included), and the switcher itself run against an
in-memory API server (conflicts, runs twice, late, failing, lowering before raising)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cdk_gpu_share.backends.kueue import switcher as S
from cdk_gpu_share.backends.kueue.manifests import GPU, cluster_queue, config_objects
from cdk_gpu_share.backends.kueue.quota_windows import (
    CLUSTER_QUEUE_SPEC_FIELDS,
    COHORT_SPEC_FIELDS,
    SERVICE_ACCOUNT,
    shipped_modules,
    switcher_namespace,
)
from cdk_gpu_share.core.configuration import parse as C
from cdk_gpu_share.core.configuration.model import config_at
from cdk_gpu_share.core.configuration.window_crons import boundary_schedules
from cdk_gpu_share.core.configuration.windows import Window, boundaries, window_at
from tests.backends.kueue.apiserver_model import TOKEN, ApiServerModel, admission_refusals, matching_policies, opener
from tests.backends.kueue.schema_check import CRDS, cel_errors, kubernetes_errors, schema_errors
from tests.helpers import ROOT

BERLIN = ZoneInfo("Europe/Berlin")
USER = f"system:serviceaccount:gpu-share-windows:{SERVICE_ACCOUNT}"
#: Monday 2026-03-02 21:00 in Berlin: the night window is open.
NIGHT = datetime(2026, 3, 2, 21, 0, tzinfo=BERLIN)
#: Tuesday 2026-03-03 12:00 in Berlin: no window is open (the base).
NOON = datetime(2026, 3, 3, 12, 0, tzinfo=BERLIN)


def raw() -> dict[str, Any]:
    """Six p4d nodes: research 2 (borrowing up to as much again) and training 1 in the base; at
    night research 1 (borrowing half of it) and training 3; early on Sundays (in the hour
    daylight saving skips each March) training 2."""
    return {
        "platform": {"name": "gpu-share"},
        "windows": [
            {"name": "night", "days": ["mon", "tue", "wed", "thu", "fri"], "start": "20:00", "end": "08:00",
             "timezone": "Europe/Berlin"},
            {"name": "early", "days": ["sun"], "start": "02:30", "end": "04:00", "timezone": "Europe/Berlin"},
        ],
        "teams": [
            {"name": "research", "guarantee": {"p4d.24xlarge": 2}, "borrow_limit_percent": 100,
             "windows": {"night": {"guarantee": {"p4d.24xlarge": 1}, "borrow_limit_percent": 50}}},
            {"name": "training", "guarantee": {"p4d.24xlarge": 1},
             "windows": {"night": {"guarantee": {"p4d.24xlarge": 3}},
                         "early": {"guarantee": {"p4d.24xlarge": 2}}}},
        ],
        "kueue": {"eks_cluster_name": "gpu-eks", "capacity": {"p4d.24xlarge": 6}},
    }


@pytest.fixture(scope="module")
def config() -> C.PlatformConfig:
    return C.parse_config(raw())


@pytest.fixture(scope="module")
def objects(config) -> list[dict[str, Any]]:
    return config_objects(config)


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def gpus(obj: dict[str, Any], field: str = "nominalQuota") -> Any:
    """The GPUs of ``field`` of a ClusterQueue's or Cohort's p4d flavor (None: not set)."""
    resources = {r["name"]: r for r in obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    return resources[GPU].get(field)


# -- the objects ------------------------------------------------------------------------


def test_every_object_is_valid_for_kubernetes_1_30_and_the_pinned_kueue_crds(objects):
    assert [e for o in objects for e in schema_errors(o) + cel_errors(o)] == []
    kinds = {o["kind"] for o in objects}
    assert {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob", "Job"} <= kinds
    for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "CronJob", "Job"):
        for o in of_kind(objects, kind).values():
            assert kubernetes_errors(o) == [], kind


def test_the_kubernetes_schema_check_refuses_what_kubernetes_would(objects):
    cron = copy.deepcopy(next(iter(of_kind(objects, "CronJob").values())))
    cron["spec"]["timezone"] = "Europe/Berlin"  # misspelt: Kubernetes' field is timeZone
    assert kubernetes_errors(cron)
    role = copy.deepcopy(next(iter(of_kind(objects, "ClusterRole").values())))
    role["rules"][0]["resourceNames"] = "research"
    assert kubernetes_errors(role)


def test_without_windows_no_switcher_object_is_made():
    config = raw()
    del config["windows"]
    for team in config["teams"]:
        del team["windows"]
    kinds = {o["kind"] for o in config_objects(C.parse_config(config))}
    assert kinds.isdisjoint({"ServiceAccount", "ClusterRole", "ConfigMap", "CronJob", "Job"})


def test_the_cluster_role_may_only_get_and_patch_the_platforms_queues_and_cohort_by_name(objects):
    (role,) = of_kind(objects, "ClusterRole").values()
    assert role["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "resourceNames": ["research", "training"],
         "verbs": ["get", "patch"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["cohorts"], "resourceNames": ["gpu-share"],
         "verbs": ["get", "patch"]},
    ]
    (binding,) = of_kind(objects, "ClusterRoleBinding").values()
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": "gpu-share-windows"}]
    namespace = of_kind(objects, "Namespace")["gpu-share-windows"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"


def test_one_cronjob_per_boundary_in_the_windows_zone(objects):
    crons = {name: (o["spec"]["schedule"], o["spec"]["timeZone"]) for name, o in of_kind(objects, "CronJob").items()}
    assert crons == {
        "night-open": ("0 20 * * 1,2,3,4,5", "Europe/Berlin"),
        "night-close": ("0 8 * * 2,3,4,5,6", "Europe/Berlin"),  # the next morning
        "early-open": ("30 2 * * 0", "Europe/Berlin"),
        "early-open-dst": ("30 3 * * 0", "Europe/Berlin"),  # 02:30 is skipped on the last Sunday of March
        "early-close": ("0 4 * * 0", "Europe/Berlin"),
    }
    for o in of_kind(objects, "CronJob").values():
        job = o["spec"]["jobTemplate"]["spec"]
        assert job["backoffLimit"] == 3 and o["spec"]["startingDeadlineSeconds"] == 3600
        assert job["template"]["spec"]["serviceAccountName"] == SERVICE_ACCOUNT


def _fires(schedule: str, zone: str, first: date, days: int) -> set[datetime]:
    """When Kubernetes' cron fires a ``M H * * DOWS`` line in ``zone``: at that wall-clock time on
    those days where it exists (a time a daylight-saving change skips does not fire; a repeated
    one fires at its first occurrence)."""
    minute, hour, _, _, dows = schedule.split()
    wanted = {int(d) for d in dows.split(",")}
    tz, out = ZoneInfo(zone), set()
    for i in range(days):
        day = first + timedelta(days=i)
        if (day.weekday() + 1) % 7 not in wanted:
            continue
        local = datetime(day.year, day.month, day.day, int(hour), int(minute), tzinfo=tz)
        if local.astimezone(timezone.utc).astimezone(tz).replace(tzinfo=None) == local.replace(tzinfo=None):
            out.add(local.astimezone(timezone.utc))
    return out


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"])
def test_every_boundary_over_two_years_has_a_cronjob_firing_at_its_instant(zone):
    """Including the days daylight saving skips or repeats the boundary's wall-clock time: one
    window closes at 02:15 on Sundays, the other opens at 02:45 (both skipped in March in Berlin
    and New York, the first in Lord Howe's half-hour gap, both repeated in autumn)."""
    windows = [Window("shut", ("sat",), "20:00", "02:15", zone), Window("gap", ("sun",), "02:45", "04:00", zone)]
    first = date(2026, 1, 1)
    fires: set[datetime] = set()
    for w in windows:
        for _, schedule in boundary_schedules(w, first):
            fires |= _fires(schedule, zone, first - timedelta(days=1), 2 * 366 + 2)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    instants = [t for t, _ in boundaries(windows, start, start + timedelta(days=2 * 365))[1:]]
    assert len(instants) > 400
    assert [t for t in instants if t not in fires] == []


# -- the switcher's admission policy -------------------------------------------------------


def _switch_objects(objects):
    return {o["metadata"]["name"]: o for o in objects if o["kind"] in ("ClusterQueue", "Cohort")}


def test_only_the_switchers_policy_matches_an_update_of_a_queue_or_the_cohort(objects):
    """The teams' policies hold their namespaces' workloads: their resource rules never name a
    ClusterQueue or a Cohort (a namespace selector would not keep a cluster-scoped object out)."""
    assert len(of_kind(objects, "ValidatingAdmissionPolicy")) == 3
    assert matching_policies(objects, "ClusterQueue") == matching_policies(objects, "Cohort") == [
        "gpu-share-windows.gpu-share"]


def test_the_platforms_policies_let_the_switcher_patch_the_quotas(objects):
    old = of_kind(objects, "ClusterQueue")["research"]
    new = copy.deepcopy(old)
    for r in new["spec"]["resourceGroups"][0]["flavors"][0]["resources"]:
        r["nominalQuota"] = 1
        r.pop("borrowingLimit", None)
    assert admission_refusals(objects, old, new, USER) == []
    cohort = of_kind(objects, "Cohort")["gpu-share"]
    raised = copy.deepcopy(cohort)
    raised["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 40
    assert admission_refusals(objects, cohort, raised, USER) == []


@pytest.mark.parametrize("change", ["namespaceSelector", "cohortName", "lendingLimit", "label", "flavor", "resource",
                                    "preemption", "fairSharing", "queueingStrategy", "stopPolicy", "other queue"])
def test_the_switchers_policy_refuses_any_other_change(objects, change):
    old = copy.deepcopy(of_kind(objects, "ClusterQueue")["research"])
    if change == "other queue":
        old["metadata"]["name"] = "someone-else"
    new = copy.deepcopy(old)
    spec, resources = new["spec"], new["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    if change == "namespaceSelector":
        spec["namespaceSelector"] = {}
    elif change == "cohortName":
        spec["cohortName"] = "another"
    elif change == "lendingLimit":
        resources[2]["lendingLimit"] = 0
    elif change == "label":
        new["metadata"]["labels"]["extra"] = "1"
    elif change == "flavor":
        new["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "p5.48xlarge"
    elif change == "resource":
        resources.pop()
        new["spec"]["resourceGroups"][0]["coveredResources"].pop()
    elif change == "preemption":
        spec["preemption"]["withinClusterQueue"] = "LowerPriority"
    elif change == "fairSharing":
        spec["fairSharing"] = {"weight": 10}
    elif change == "queueingStrategy":
        spec["queueingStrategy"] = "StrictFIFO"
    elif change == "stopPolicy":
        spec["stopPolicy"] = "Hold"
    else:
        resources[2]["nominalQuota"] = 0
    assert admission_refusals(objects, old, new, USER)
    # Anyone else (Kueue's controller, an administrator) is not held by it.
    assert admission_refusals(objects, old, new, "system:serviceaccount:kueue-system:kueue-controller-manager") == []


def test_the_policy_names_every_spec_field_of_the_pinned_crds_but_the_quotas():
    import yaml

    for kind, plural, fields in (("ClusterQueue", "clusterqueues", CLUSTER_QUEUE_SPEC_FIELDS),
                                 ("Cohort", "cohorts", COHORT_SPEC_FIELDS)):
        crd = yaml.safe_load((CRDS / f"kueue.x-k8s.io_{plural}.yaml").read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
        spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        assert set(spec) - {"resourceGroups"} == set(fields), kind
        resource = spec["resourceGroups"]["items"]["properties"]["flavors"]["items"]["properties"]["resources"]
        assert set(resource["items"]["properties"]) == {"name", "nominalQuota", "borrowingLimit", "lendingLimit"}


# -- the switcher against the API server -------------------------------------------------------


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr(S, "_sleep", lambda seconds: None)


def _model(objects) -> ApiServerModel:
    return ApiServerModel.of(objects, USER)


def run(model: ApiServerModel, objects, now: datetime, tmp_path: Path) -> int:
    """The switcher's ``main`` with the settings its ConfigMap holds, at ``now``, through urllib
    to ``model`` with the service account's token."""
    (cm,) = of_kind(objects, "ConfigMap").values()
    settings = tmp_path / "settings.json"
    settings.write_text(cm["data"]["settings.json"])
    account = tmp_path / "account"
    account.mkdir(exist_ok=True)
    (account / "token").write_text(TOKEN + "\n")
    api = S.ApiServer("https://kubernetes.default.svc", account=str(account), opener=opener(model))
    return S.main([str(settings)], api=api, now=now)


def expected(config, now: datetime) -> dict[str, Any]:
    """The GPUs and borrowing limits of each ClusterQueue, and the Cohort's GPUs, in force at ``now``."""
    objects = config_objects(config_at(config, now))
    out = {name: (gpus(o), gpus(o, "borrowingLimit")) for name, o in of_kind(objects, "ClusterQueue").items()}
    out["gpu-share"] = (gpus(of_kind(objects, "Cohort")["gpu-share"]), None)
    return out


def deployed(model: ApiServerModel) -> dict[str, Any]:
    return {name: (gpus(o), gpus(o, "borrowingLimit")) for (kind, name), o in model.objects.items()}


def patches(model: ApiServerModel) -> list[str]:
    return [path for method, path, _, _ in model.requests if method == "PATCH"]


def test_a_run_at_night_puts_each_queue_and_the_cohort_at_the_nights_values(config, objects, tmp_path, capsys):
    model = _model(objects)
    assert run(model, objects, NIGHT, tmp_path) == 0
    # Research 1 node (8 GPUs) borrowing half (4), training 3 (24), the cohort the other 2 (16).
    assert deployed(model) == expected(config, NIGHT) == {
        "research": (8, 4), "training": (24, None), "gpu-share": (16, None)}
    assert expected(config, NOON) == {"research": (16, 16), "training": (8, None), "gpu-share": (24, None)}
    method, path, headers, body = model.requests[1]
    assert (method, path) == ("PATCH", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research"
                                       "?fieldManager=gpu-share-window-switcher")
    assert headers["Content-type"] == "application/merge-patch+json"
    assert set(body) == {"metadata", "spec"} and set(body["spec"]) == {"resourceGroups"}
    assert set(body["metadata"]) == {"resourceVersion"}  # at the version read: another writer's change is a conflict
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["window"] == "night"


def test_it_lowers_before_it_raises_so_the_quotas_never_exceed_the_nodes(config, objects, tmp_path):
    model = _model(objects)
    totals = []
    handle = model.handle

    def watched(*args):
        answer = handle(*args)
        totals.append(sum(gpus(o) for o in model.objects.values()))
        return answer

    model.handle = watched  # type: ignore[method-assign]
    assert run(model, objects, NIGHT, tmp_path) == 0
    assert max(totals) == 48  # six p4d nodes of 8 GPUs
    assert patches(model)[:2] == ["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/research"
                                  "?fieldManager=gpu-share-window-switcher",
                                  "/apis/kueue.x-k8s.io/v1beta2/cohorts/gpu-share?fieldManager=gpu-share-window-switcher"]
    assert patches(model)[-1].startswith("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/training")


def test_a_run_twice_changes_nothing_the_second_time(objects, tmp_path):
    model = _model(objects)
    assert run(model, objects, NIGHT, tmp_path) == 0
    after = copy.deepcopy(model.objects)
    model.requests.clear()
    assert run(model, objects, NIGHT + timedelta(minutes=1), tmp_path) == 0
    assert patches(model) == [] and model.objects == after


def test_a_run_works_the_window_out_at_its_own_clock_late_or_early(config, objects, tmp_path):
    model = _model(objects)
    # The night's opening run, an hour late: the night.
    assert run(model, objects, datetime(2026, 3, 2, 21, 0, tzinfo=BERLIN), tmp_path) == 0
    assert deployed(model) == expected(config, NIGHT)
    # The same CronJob's run held back until after the night closed: the base, not the night.
    assert run(model, objects, datetime(2026, 3, 3, 9, 0, tzinfo=BERLIN), tmp_path) == 0
    assert deployed(model) == expected(config, NOON)


def test_a_conflicting_patch_is_read_again_and_retried(config, objects, tmp_path, capsys):
    model = _model(objects)
    model.conflicts = 2
    assert run(model, objects, NIGHT, tmp_path) == 0
    assert deployed(model) == expected(config, NIGHT)
    statuses = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["conflict"] for e in statuses if e["event"] == "retrying"] == [True, True]
    assert model.objects[("ClusterQueue", "research")]["status"]  # the other writer's change is kept


def test_a_patch_whose_answer_was_lost_is_read_again_and_left(config, objects, tmp_path):
    model = _model(objects)
    model.lost = 1
    assert run(model, objects, NIGHT, tmp_path) == 0
    assert deployed(model) == expected(config, NIGHT)


def test_a_run_that_cannot_switch_fails_with_one_line_and_raises_nothing(config, objects, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(S, "TERMINATION_LOG", str(tmp_path / "termination-log"))
    model = _model(objects)
    model.errors = 1 + S.ATTEMPTS  # the first read passes nothing; research's lowering fails every try
    before = deployed(model)
    assert run(model, objects, NIGHT, tmp_path) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("quota window not applied: window 'night' for ClusterQueue/research")
    assert (tmp_path / "termination-log").read_text() == err
    # The cohort was lowered; training, whose raise would now over-promise, was not raised.
    assert deployed(model)["training"] == before["training"]
    # The Job's next Pod (backoffLimit) finds the API server answering and completes the switch.
    assert run(model, objects, NIGHT + timedelta(seconds=30), tmp_path) == 0
    assert deployed(model) == expected(config, NIGHT)


def test_a_queue_that_is_not_the_one_deployed_fails_the_run_at_once(objects, tmp_path, capsys):
    model = _model(objects)
    cq = model.objects[("ClusterQueue", "research")]
    cq["spec"]["resourceGroups"][0]["flavors"][0]["name"] = "p5.48xlarge"
    assert run(model, objects, NIGHT, tmp_path) == 1
    assert "has no quota for p4d.24xlarge/" in capsys.readouterr().err


def test_the_switcher_account_may_not_touch_another_queue(objects, tmp_path):
    model = _model(objects)
    other = copy.deepcopy(model.objects[("ClusterQueue", "research")])
    other["metadata"]["name"] = "someone-else"
    model.put(other)
    status, _ = model.handle("PATCH", "https://k/apis/kueue.x-k8s.io/v1beta2/clusterqueues/someone-else",
                             {"Authorization": f"Bearer {TOKEN}", "Content-type": "application/merge-patch+json"},
                             b"{}")
    assert status == 403


def test_the_base_is_written_back_and_the_deploys_job_puts_the_window_again(config, objects, tmp_path):
    """A deploy in the middle of the night applies the base; the deploy's Job (named after what
    it applies) switches back to the night."""
    model = _model(objects)
    assert run(model, objects, NIGHT, tmp_path) == 0
    for o in objects:  # kubectl apply of the ClusterQueues and the Cohort
        if o["kind"] in ("ClusterQueue", "Cohort"):
            model.put(copy.deepcopy(o))
    assert deployed(model) == expected(config, NOON)
    jobs = of_kind(objects, "Job")
    assert len(jobs) == 1 and next(iter(jobs)).startswith("apply-")
    assert run(model, objects, NIGHT + timedelta(minutes=5), tmp_path) == 0
    assert deployed(model) == expected(config, NIGHT)
    changed = raw()
    changed["teams"][0]["guarantee"] = {"p4d.24xlarge": 3}
    renamed = of_kind(config_objects(C.parse_config(changed)), "Job")
    assert set(renamed) != set(jobs)  # another deploy that changes a quota runs it again


@pytest.mark.parametrize("instant", [
    datetime(2026, 3, 29, 1, 29, tzinfo=timezone.utc), datetime(2026, 3, 29, 1, 30, tzinfo=timezone.utc),
    datetime(2026, 10, 25, 0, 30, tzinfo=timezone.utc), datetime(2026, 10, 25, 1, 59, tzinfo=timezone.utc),
    datetime(2026, 10, 25, 2, 0, tzinfo=timezone.utc)])
def test_a_run_at_a_daylight_saving_change_applies_what_the_config_says(config, objects, tmp_path, instant):
    model = _model(objects)
    assert run(model, objects, instant, tmp_path) == 0
    assert deployed(model) == expected(config, instant)


def test_the_values_are_those_of_the_manifests_for_each_window(config, objects):
    (cm,) = of_kind(objects, "ConfigMap").values()
    settings = json.loads(cm["data"]["settings.json"])
    research = next(t for t in settings["targets"] if t["name"] == "research")
    section = config.backend("kueue")
    night = next(t for t in config_at(config, NIGHT).teams if t.name == "research")
    queue = cluster_queue(night, section, ["cpu", "memory", GPU])
    assert research["windows"]["night"] == {
        "p4d.24xlarge": {r["name"]: {k: r[k] for k in ("nominalQuota", "borrowingLimit") if k in r}
                         for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}}
    assert "early" not in research["windows"]  # research's values do not change early on Sundays


@pytest.mark.parametrize(("text", "value"), [(4, 4), ("4", 4), ("500m", 0.5), ("192Gi", 192 * 2**30),
                                             ("1e3", 1000), ("2k", 2000), ("1.5", 1.5)])
def test_quantities_compare_as_kubernetes_reads_them(text, value):
    assert S.quantity(text) == value


# -- the code the cluster runs -------------------------------------------------------------


def _materialize(objects, root: Path) -> Path:
    """The ConfigMap's files as the volume mounts them."""
    import base64

    (cm,) = of_kind(objects, "ConfigMap").values()
    volume = next(iter(of_kind(objects, "CronJob").values()))["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "volumes"][0]
    for item in volume["configMap"]["items"]:
        path = root / item["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        if item["key"] in cm["data"]:
            path.write_text(cm["data"][item["key"]])
        else:
            path.write_bytes(base64.b64decode(cm["binaryData"][item["key"]]))
    return root


def test_the_configmap_ships_the_packages_own_modules_verbatim(objects):
    (cm,) = of_kind(objects, "ConfigMap").values()
    src = ROOT / "src"
    for rel, text in shipped_modules().items():
        assert cm["data"][rel.replace("/", ".")] == text
        if text:
            assert (src / rel).read_text() == text
    assert "cdk_gpu_share/core/configuration/windows.py" in shipped_modules()


_DRIVER = """
import json, sys
from datetime import datetime, timezone
from cdk_gpu_share.backends.kueue.switcher import read_settings
from cdk_gpu_share.core.configuration.windows import window_at
_, windows, _ = read_settings(json.load(open(sys.argv[1])))
names = []
for line in sys.stdin:
    w = window_at(windows, datetime.fromtimestamp(int(line), timezone.utc))
    names.append(w.name if w else None)
outside = sorted(m.__file__ for m in list(sys.modules.values()) if getattr(m, "__file__", None)
                 and "cdk_gpu_share" in m.__file__ and not m.__file__.startswith(sys.argv[2]))
print(json.dumps({"names": names, "outside": outside}))
"""


def test_the_shipped_code_alone_reads_the_windows_as_the_config_does_for_two_years(config, objects, tmp_path):
    """Run with the standard library and the ConfigMap's files only (no site-packages, the
    ConfigMap's zone files), every hour of two years and a second either side of each boundary."""
    root = _materialize(objects, tmp_path / "mount")
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    end = start + timedelta(days=2 * 365)
    instants = [start + timedelta(hours=h) for h in range(0, 2 * 365 * 24)]
    for t, _ in boundaries(config.windows, start, end)[1:]:
        instants += [t - timedelta(seconds=1), t, t + timedelta(seconds=1)]
    stdin = "\n".join(str(int(t.timestamp())) for t in instants)
    env = {"PYTHONPATH": str(root / "lib"), "PYTHONTZPATH": str(root / "zoneinfo"), "PYTHONDONTWRITEBYTECODE": "1"}
    answer = subprocess.run([sys.executable, "-S", "-c", _DRIVER, str(root / "settings.json"), str(root / "lib")],
                            input=stdin, capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    shipped = json.loads(answer.stdout)
    assert shipped["outside"] == []
    core = [w.name if w else None for w in (window_at(config.windows, t) for t in instants)]
    assert shipped["names"] == core
    assert {"night", "early", None} <= set(core)


def test_the_switcher_namespace_cannot_be_a_teams():
    config = raw()
    config["teams"][1]["name"] = "gpu-share-windows"
    with pytest.raises(C.ConfigError) as err:
        C.parse_config(config)
    assert any(p.value == "gpu-share-windows" and "quota window switcher" in p.message for p in err.value.problems)
    assert switcher_namespace(C.parse_config(raw()).backend("kueue")) == "gpu-share-windows"


# -- deployed by the construct ------------------------------------------------------------------


def test_the_platform_stack_applies_the_switcher_after_the_queues_and_summary_lists_its_cronjobs():
    """A config with windows validates and synthesizes on Kueue: the switcher's objects are the
    manifests command's, applied after the ClusterQueues (the deploy's Job last), its namespace
    the platform's own (not kept as a team's)."""
    from aws_cdk.assertions import Template

    from cdk_gpu_share.backends.kueue import describe_resource
    from cdk_gpu_share.stacks.app import build_platform
    from tests.helpers import new_app, synth

    config = raw()
    config["kueue"]["kubectl_role_arn"] = "arn:aws:iam::111122223333:role/gpu-eks-kubectl"
    parsed = C.parse_config(config)
    assert C.check_config(parsed) == []
    app = new_app()
    platform = build_platform(app, parsed)
    synth(app)
    template = Template.from_stack(platform.platform)
    resources = template.find_resources("Custom::AWSCDK-EKS-KubernetesResource")
    by_kind: dict[str, tuple[str, dict]] = {}
    applied: list[dict] = []
    for lid, r in resources.items():
        objects = json.loads(r["Properties"]["Manifest"])
        applied += objects
        by_kind.setdefault(objects[0]["kind"], (lid, r))
    for o in applied:
        o["metadata"].get("labels", {}).pop(next((k for k in o["metadata"].get("labels", {})
                                                  if k.startswith("aws.cdk.eks/prune-")), ""), None)
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(applied, key=key) == sorted(config_objects(parsed), key=key)
    assert by_kind["CronJob"][1]["DependsOn"] == [by_kind["ConfigMap"][0]]
    assert by_kind["Job"][1]["DependsOn"] == [by_kind["CronJob"][0]]
    chain, at = [], by_kind["Job"][0]
    while "DependsOn" in resources[at] and len(resources[at]["DependsOn"]) == 1:
        at = resources[at]["DependsOn"][0]
        chain.append(json.loads(resources[at]["Properties"]["Manifest"])[0]["kind"])
    assert chain.index("CronJob") < chain.index("ClusterQueue")  # the Job runs after the queues are applied
    switcher_ns = [r for r in resources.values()
                   if json.loads(r["Properties"]["Manifest"])[0]["metadata"]["name"] == "gpu-share-windows"
                   and json.loads(r["Properties"]["Manifest"])[0]["kind"] == "Namespace"]
    assert len(switcher_ns) == 1 and switcher_ns[0]["DeletionPolicy"] == "Delete"
    [output] = [o for k, o in template.to_json()["Outputs"].items() if k.startswith("KueueQueuesKeptNamespaces")]
    assert output["Value"] == "research, training"
    lines = [line for r in resources.values() for line in describe_resource({**r, "Type": r["Type"]})]
    assert "CronJob gpu-share-windows/night-open: window night opens, 0 20 * * 1,2,3,4,5 Europe/Berlin" in lines
    assert "CronJob gpu-share-windows/early-open-dst: window early opens, 30 3 * * 0 Europe/Berlin" in lines
    assert any(line.startswith("ClusterRole gpu-share-windows.gpu-share: the quota window switcher may get and patch"
                               " research, training, gpu-share only") for line in lines)


def test_plan_lists_the_cronjobs_the_manifests_hold(config, objects):
    from cdk_gpu_share.core.plan import fleet_plan, format_plan

    plan = fleet_plan(config)
    lines = plan["windows"]["deployment"]["kueue"]
    crons = of_kind(objects, "CronJob")
    assert [line.split(":")[0] for line in lines] == [f"CronJob gpu-share-windows/{name}" for name in crons]
    for line, cron in zip(lines, crons.values(), strict=True):
        assert f": {cron['spec']['schedule']} {cron['spec']['timeZone']}," in line
    text = format_plan(plan)
    assert "  deployed on kueue:\n    CronJob gpu-share-windows/night-open: 0 20 * * 1,2,3,4,5 Europe/Berlin" in text
    assert "not yet on" not in text


def test_the_switcher_runs_in_the_image_the_section_names(objects):
    default = "public.ecr.aws/docker/library/python:3.12.8-slim-bookworm"
    templates = [o["spec"]["jobTemplate"]["spec"]["template"] for o in of_kind(objects, "CronJob").values()]
    templates += [o["spec"]["template"] for o in of_kind(objects, "Job").values()]
    assert {t["spec"]["containers"][0]["image"] for t in templates} == {default}
    mirrored = raw()
    mirrored["kueue"]["windows_image"] = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/python:3.12-slim"
    config = C.parse_config(mirrored)
    assert C.parse_config(C.config_mapping(config)).backend("kueue").windows_image == mirrored["kueue"]["windows_image"]
    images = {o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
              for o in config_objects(config) if o["kind"] == "CronJob"}
    assert images == {mirrored["kueue"]["windows_image"]}
    mirrored["kueue"]["windows_image"] = "Python 3"
    with pytest.raises(C.ConfigError) as err:
        C.parse_config(mirrored)
    [problem] = err.value.problems
    assert (problem.field, problem.value) == ("kueue.windows_image", "Python 3") and "image reference" in problem.fix


def test_with_groups_the_switcher_patches_the_queues_and_the_sections_cohort_not_the_groups(tmp_path):
    """A group's pool is the same at every hour: its Cohort is left as deployed; the section's
    Cohort (what neither a team nor a group guarantees) follows the teams' guarantees."""
    grouped = raw()
    grouped["kueue"]["capacity"] = {"p4d.24xlarge": 7}
    grouped["groups"] = [{"name": "science", "guarantee": {"p4d.24xlarge": 1}}]
    grouped["teams"][0]["group"] = "science"
    config = C.parse_config(grouped)
    assert [p.value for p in C.deploy_problems(config)] == []
    objects = config_objects(config)
    assert [e for o in objects for e in schema_errors(o) + cel_errors(o)] == []
    (role,) = of_kind(objects, "ClusterRole").values()
    assert role["rules"][1]["resourceNames"] == ["gpu-share"]
    model = _model(objects)
    assert run(model, objects, NIGHT, tmp_path) == 0
    at_night = config_objects(config_at(config, NIGHT))
    for o in at_night:
        if o["kind"] in ("ClusterQueue", "Cohort"):
            assert gpus(model.get(o["kind"], o["metadata"]["name"])) == gpus(o), o["metadata"]["name"]
    assert gpus(model.get("Cohort", "science")) == 8  # the group's own pool, at every hour
    assert gpus(model.get("Cohort", "gpu-share")) == 16  # 7 nodes less 1 (science), 1 (research), 3 (training)


def test_kueue_manifests_writes_the_switchers_files_in_the_order_they_apply(tmp_path, capsys):
    import yaml

    from cdk_gpu_share.cli import main

    path = tmp_path / "platform.yaml"
    path.write_text(yaml.safe_dump(raw()))
    assert main(["kueue", "manifests", str(path), "-o", str(tmp_path / "out")]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert [n for n in names if n >= "09"] == ["09-serviceaccount.yaml", "10-clusterrole.yaml", "11-clusterrolebinding.yaml",
                         "12-configmap.yaml", "13-cronjob.yaml", "14-job.yaml"]
    written = [o for name in names for o in yaml.safe_load_all((tmp_path / "out" / name).read_text())]
    assert sorted(json.dumps(o, sort_keys=True) for o in written) == sorted(
        json.dumps(o, sort_keys=True) for o in config_objects(C.parse_config(raw())))

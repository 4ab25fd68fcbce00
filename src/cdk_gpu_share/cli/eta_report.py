"""The backtest's HTML report: ``gpu-share eta --backtest --report OUT.html``.

:func:`render_eta_report` turns a backtest (its JSON document and each team's baseline
figures) into one self-contained page a person reads at a glance, on a desk or on a phone: per
team and overall, how often the band held the wait and how far its p50 was, beside the
baseline; then per team a plot of each predicted band against the wait the job got
(:func:`band_svg`). No scripts, no external resources.
"""

from __future__ import annotations

import datetime
import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from cdk_gpu_share.cli.advise_report import _ADVICE_CSS, _scroll
from cdk_gpu_share.cli.simulate_report import _REPORT_CSS
from cdk_gpu_share.core.text import html_table
from cdk_gpu_share.core.text import seconds_words as _s

__all__ = ["band_svg", "render_eta_report"]

#: The most jobs one team's plot draws; beyond it, evenly spaced by actual wait (the page stays small).
MAX_PLOTTED = 400

#: Axis ticks in seconds, with the words a person reads them in.
_TICKS = ((1, "1 s"), (10, "10 s"), (60, "1 min"), (600, "10 min"), (3600, "1 h"), (36000, "10 h"),
          (86400, "1 d"), (864000, "10 d"))

_ETA_CSS = """
.plots{display:flex;flex-wrap:wrap;gap:0 2rem}.plots figure{flex:0 1 420px;min-width:0}
figcaption{color:#57606a;font-size:0.9rem}
"""

_IN, _OUT = "#1a7f37", "#cf222e"


def _thinned(jobs: Sequence[Mapping[str, Any]], most: int) -> list[Mapping[str, Any]]:
    """At most ``most`` of ``jobs``, evenly spaced in the order of their actual wait."""
    ordered = sorted(jobs, key=lambda j: (float(j["actual_wait_s"]), str(j["job_id"])))
    if len(ordered) <= most:
        return ordered
    return [ordered[round(i * (len(ordered) - 1) / (most - 1))] for i in range(most)]


def _covered(j: Mapping[str, Any]) -> bool:
    return float(j["wait_p10_s"]) - 1e-9 <= float(j["actual_wait_s"]) <= float(j["wait_p90_s"]) + 1e-9


def band_svg(team: str, jobs: Sequence[Mapping[str, Any]]) -> str:
    """One team's jobs as an inline SVG on log axes: across, the wait each job got; up, its
    predicted band (a vertical bar from p10 to p90, a tick at p50). A bar that crosses the
    diagonal (predicted = actual) held the wait: green; one that missed it: red, above the
    diagonal when the prediction was too long. Waits under a second are drawn at one second."""
    shown = _thinned(jobs, MAX_PLOTTED)
    if not shown:
        return ""
    w, h = 420, 360
    left, right, top, bottom = 58, 16, 40, 46
    values = [max(1.0, float(j[k])) for j in shown for k in ("wait_p10_s", "wait_p90_s", "actual_wait_s")]
    lo = 10 ** math.floor(math.log10(min(values)))
    hi = 10 ** math.ceil(math.log10(max(values) * 1.0001))
    span = math.log10(hi) - math.log10(lo)

    def pos(s: float) -> float:
        return (math.log10(min(max(s, lo), hi)) - math.log10(lo)) / span

    def x(s: float) -> float:
        return left + pos(s) * (w - left - right)

    def y(s: float) -> float:
        return h - bottom - pos(s) * (h - top - bottom)

    e = html.escape
    tid = "band-" + "".join(c if c.isalnum() else "-" for c in team)
    held = sum(1 for j in shown if _covered(j))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" role="img" '
           f'aria-labelledby="{tid}" font-family="system-ui,sans-serif" font-size="13">',
           f"<title id=\"{tid}\">{e(team)}: predicted band against the actual wait, "
           f"{held} of {len(shown)} held</title>",
           f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="#fff" '
           'stroke="#d0d7de"/>']
    for s, label in _TICKS:
        if lo - 1e-9 <= s <= hi + 1e-9:
            out.append(f'<line x1="{left}" x2="{w - right}" y1="{y(s):.1f}" y2="{y(s):.1f}" stroke="#eaeef2"/>')
            out.append(f'<text x="{left - 6}" y="{y(s) + 4:.1f}" text-anchor="end">{label}</text>')
            out.append(f'<text x="{x(s):.1f}" y="{h - bottom + 16}" text-anchor="middle">{label}</text>')
    out.append(f'<line x1="{x(lo):.1f}" y1="{y(lo):.1f}" x2="{x(hi):.1f}" y2="{y(hi):.1f}" stroke="#6e7781" '
               'stroke-dasharray="5 4"/>')
    for j in shown:
        colour = _IN if _covered(j) else _OUT
        cx = x(float(j["actual_wait_s"]))
        p10, p50, p90 = (float(j[k]) for k in ("wait_p10_s", "wait_p50_s", "wait_p90_s"))
        tip = (f"{j['job_id']}: waited {_s(float(j['actual_wait_s']))}; predicted {_s(p10)} to {_s(p90)}, "
               f"most likely {_s(p50)}")
        out.append(f'<g stroke="{colour}"><title>{e(tip)}</title>'
                   f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(p10):.1f}" y2="{y(p90):.1f}" stroke-width="1.5" '
                   'stroke-opacity="0.6"/>'
                   f'<line x1="{cx - 3:.1f}" x2="{cx + 3:.1f}" y1="{y(p50):.1f}" y2="{y(p50):.1f}" '
                   'stroke-width="1.5"/></g>')
    out.append(f'<text x="{(left + w - right) / 2:.0f}" y="{h - 10}" text-anchor="middle">actual wait</text>')
    out.append(f'<text x="{left}" y="{top - 22}" fill="{_IN}">| band held the wait ({held})</text>')
    out.append(f'<text x="{left}" y="{top - 6}" fill="{_OUT}">| band missed it ({len(shown) - held}); '
               'dashed: predicted = actual</text>')
    out.append("</svg>")
    return "".join(out)


def _figures_table(summary: Mapping[str, Any], baseline_per_team: Mapping[str, Mapping[str, Any]]) -> str:
    rows = []
    for name, t in summary["per_team"].items():
        b = baseline_per_team.get(name, {})
        rows.append([name, str(t["sampled"]), f"{t['coverage_p10_p90']:.2f}", _s(t["mdae_p50_s"]),
                     f"{b['coverage_p10_p90']:.2f}" if b else "-", _s(b["mdae_p50_s"]) if b else "-"])
    base = summary["baseline"]
    rows.append(["overall", str(summary["sampled"]), f"{summary['coverage_p10_p90']:.2f}", _s(summary["mdae_p50_s"]),
                 f"{base['coverage_p10_p90']:.2f}", _s(base["mdae_p50_s"])])
    return _scroll(html_table(["team", "jobs", "in p10-p90", "p50 error (median)", "baseline in band",
                               "baseline error"], rows, caption="The band beside the baseline"))


def render_eta_report(doc: Mapping[str, Any], baseline_per_team: Mapping[str, Mapping[str, Any]], *,
                      described: str = "", trace: str = "") -> str:
    """The backtest (the JSON document of ``gpu-share eta --backtest --json`` and each team's
    baseline figures) as one self-contained HTML page. ``described``, ``trace``: where the input
    came from, for the header."""
    e = html.escape
    s = doc["summary"]
    by_team: dict[str, list[Mapping[str, Any]]] = {}
    for j in doc["jobs"]:
        by_team.setdefault(j["team"], []).append(j)
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>gpu-share eta: how well the predicted starts held</title>",
        f"<style>{_REPORT_CSS}{_ADVICE_CSS}{_ETA_CSS}</style></head><body>",
        "<h1>When will my job start: how well the predictions held</h1>",
        '<p class="meta">' + (f"Input {e(described)}; " if described else "") + (f"trace {e(trace)}; " if trace else "")
        + f"written {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by gpu-share eta --backtest.</p>",
        f'<p class="verdict">The band held the wait of <b>{s["coverage_p10_p90"]:.0%}</b> of {s["sampled"]:,} '
        f"waiting jobs (a calibrated band holds about 80 %); its most likely wait was off by "
        f"<b>{_s(s['mdae_p50_s'])}</b> (median), against {_s(s['baseline']['mdae_p50_s'])} for the baseline. "
        f"Median actual wait {_s(s['median_actual_wait_s'])}; {doc['samples']} replays per job, seed {doc['seed']}."
        + (f" {s['no_history']} jobs left out: no finished job to learn from yet." if s["no_history"] else "")
        + "</p>",
        "<p>Each waiting job's wait was predicted from what was known when it was submitted: the running and "
        "pending jobs and the durations of the jobs that had finished. The band runs from p10 to p90 of the "
        "replays; the baseline is one replay in which every unknown duration is its team's median, a single "
        "point that rarely holds the wait exactly.</p>",
        _figures_table(s, baseline_per_team),
        "<h2>Each team's predictions against the waits</h2>",
        "<p>One bar per job: across, the wait it got; up, its predicted band, with a tick at the most likely "
        "wait. Bars crossing the dashed diagonal held the wait. Both axes are logarithmic.</p>",
        '<div class="plots">',
    ]
    for team, jobs in by_team.items():
        note = f", {MAX_PLOTTED} of them drawn, evenly by wait" if len(jobs) > MAX_PLOTTED else ""
        parts.append(f"<figure>{band_svg(team, jobs)}<figcaption>{e(team)}: {len(jobs):,} jobs{note}"
                     "</figcaption></figure>")
    parts.append("</div>")
    if not by_team:
        parts.append("<p>No job had a prediction to draw.</p>")
    parts.append("</body></html>")
    return "\n".join(parts)

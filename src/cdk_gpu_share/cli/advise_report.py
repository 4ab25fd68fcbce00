"""The advisor's HTML report: ``gpu-share advise --report OUT.html``.

:func:`render_advice_report` turns the advice (the JSON object of ``advise --json``) into
one self-contained page a person can decide from, on a desk or on a phone: what changes
per team (guarantee, sharing, borrow limit, before and after), each objective's target and
value, the regret, with ``--fleet size`` the frontier (capacity against the worst objective
ratio and the regret, an inline SVG and its table), and after them the ``simulate`` report
of the advised configuration (:func:`cdk_gpu_share.cli.simulate_report.render_report`), so the
figures the advice rests on are on the same page. No scripts, no external resources.
"""

from __future__ import annotations

import datetime
import html
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cdk_gpu_share.cli.simulate_report import _REPORT_CSS
from cdk_gpu_share.core.configuration.objectives import OBJECTIVE_UNITS
from cdk_gpu_share.core.text import html_table

__all__ = ["advised_simulate_report", "frontier_svg", "render_advice_report", "write_advice_report"]

# Wide tables scroll inside their box, so the page itself never scrolls sideways on a phone.
_ADVICE_CSS = """
.scroll{overflow-x:auto;max-width:100%}.scroll table{margin-top:0}
td.met{background:#dafbe1}td.missed{background:#ffebe9;font-weight:600}
.verdict{font-size:1.1rem;padding:0.6rem 0.8rem;border-left:4px solid #1a7f37;background:#f6f8fa}
.verdict.no{border-color:#cf222e}
svg{max-width:100%;height:auto;display:block}figure{margin:1rem 0}
section.simulated{border-top:2px solid #d0d7de;margin-top:2.5rem}
@media (max-width:600px){body{margin:1rem auto;padding:0 0.6rem}th,td{padding:0.25rem 0.4rem}
h1{font-size:1.25rem}}
"""

_SHARING_WORDS = {"reserve": "reserve (keeps its idle GPUs)", "lend": "lend",
                  "lend_and_borrow": "lend and borrow"}


def _gpus(x: Any) -> str:
    return f"{float(x):g}"


def _borrow(d: Mapping[str, Any]) -> str:
    if d.get("sharing") != "lend_and_borrow":
        return "none"
    percent = d.get("borrow_limit_percent", -1)
    return "unlimited" if percent in (-1, None) else f"{percent:g} % of the guarantee"


def _change(was: str, now: str) -> str:
    return now if was == now else f"{was} \u2192 {now}"


def _figure(x: float) -> str:
    return f"{x:,.2f}".rstrip("0").rstrip(".") if not float(x).is_integer() else f"{x:,.0f}"


def _objective_cells(key: str, e: Mapping[str, Any]) -> tuple[str, str]:
    """(target, value) of one objective, in its unit."""
    unit = OBJECTIVE_UNITS.get(key, "")
    if key == "no_worse_than_private":
        value = float(e["value"])
        return "private + slack", f"{'+' if value > 0 else ''}{_figure(value)} s"
    sep = "" if unit.startswith("/") else " "
    return f"{_figure(float(e['target']))}{sep}{unit}", f"{_figure(float(e['value']))}{sep}{unit}"


def _scroll(table: str) -> str:
    return f'<div class="scroll">{table}</div>'


def entitled_differs(team: dict[str, Any]) -> bool:
    """Whether a team of the advice is entitled to other than its guarantee, before or after."""
    e = float(team["entitlement"]["gpu"])
    return any(abs(float(g["guarantee"]["gpu"]) - e) > 1e-9 for g in (team, team.get("was", team)))


def _teams_table(teams: Mapping[str, Any]) -> str:
    # The entitlement (fixed: what the team's promises are judged against) once some team's differs.
    promised = any("entitlement" in t and entitled_differs(dict(t)) for t in teams.values())
    headers = ["team", "guarantee (GPUs)", *(["entitled to (GPUs)"] if promised else []), "sharing", "may borrow"]
    rows = []
    for name, t in teams.items():
        was = t.get("was", t)
        rows.append([
            name,
            _change(_gpus(was["guarantee"]["gpu"]), _gpus(t["guarantee"]["gpu"])),
            *([_gpus(t["entitlement"]["gpu"])] if promised else []),
            _change(_SHARING_WORDS.get(was["sharing"], was["sharing"]), _SHARING_WORDS.get(t["sharing"], t["sharing"])),
            _change(_borrow(was), _borrow(t)),
        ])
    return _scroll(html_table(headers, rows, caption="Each team, before \u2192 after"))


def _objectives_table(teams: Mapping[str, Any]) -> str:
    """Each objective's target, value and verdict; the verdict cells carry ``met`` or ``missed``."""
    headers = ["team", "objective", "target", "value", "met"]
    rows: list[list[str]] = []
    for name, t in teams.items():
        for key, e in (t.get("objectives") or {}).items():
            target, value = _objective_cells(key, e)
            rows.append([name, key, target, value, "yes" if e["met"] else "NO"])
    if not rows:
        return "<p>No team has objectives: the advice keeps every configuration feasible and ranks by regret.</p>"
    table = html_table(headers, rows, caption="Objectives in the advised configuration")
    # Mark each verdict cell (the last of its row), in row order.
    verdicts = iter("met" if r[-1] == "yes" else "missed" for r in rows)
    table = re.sub(r"<td>(yes|NO)</td></tr>", lambda m: f'<td class="{next(verdicts)}">{m[1]}</td></tr>', table)
    return _scroll(table)


def _percent_text(d: Mapping[str, Any]) -> str:
    percent = d.get("borrow_limit_percent")
    return "none" if percent is None else "unlimited" if percent == -1 else f"{percent:g} % of the guarantee"


def _windows_section(advice: Mapping[str, Any]) -> list[str]:
    """An advice with time windows: a row per window (and the base) with each team's guarantee
    before and after and the sum, the best static advice beside, and the week's timeline."""
    teams = advice["teams"]
    names = list(teams)
    headers = ["window", "when", *(f"{n} (GPUs)" for n in names), "guaranteed (GPUs)"]
    rows = [["base", "outside every window",
             *(_change(_gpus(teams[n]["was"]["guarantee"]["gpu"]), _gpus(teams[n]["guarantee"]["gpu"])) for n in names),
             f"{_gpus(advice['base_guarantees']['gpu'])} of {_gpus(advice['capacity']['gpu'])}"]]
    for w in advice["windows"]:
        when = f"{', '.join(w['days'])} {w['start']}–{w['end']} {w.get('timezone', 'UTC')}"
        rows.append([w["name"] + ("" if w["advised"] else " (not advised)"), when,
                     *(_change(_gpus(teams[n]["was"]["windows"][w["name"]]["guarantee"]["gpu"]),
                               _gpus(teams[n]["windows"][w["name"]]["guarantee"]["gpu"])) for n in names),
                     f"{_gpus(w['guarantees']['gpu'])} of {_gpus(advice['capacity']['gpu'])}"])
    limits = [[w, n, _change(_percent_text(was), _percent_text(now))]
              for w, key in [("base", None), *((w["name"], w["name"]) for w in advice["windows"])]
              for n in names
              for was, now in [(teams[n]["was"] if key is None else teams[n]["was"]["windows"][key],
                                teams[n] if key is None else teams[n]["windows"][key])]
              if now.get("borrow_limit_percent") is not None or was.get("borrow_limit_percent") is not None]
    static = advice["static"]
    timeline = [[f"{datetime.datetime.fromisoformat(t['at']):%a %H:%M}", t["window"] or "base"]
                for t in advice["timeline"]]
    e = html.escape
    return [
        "<h2>Time windows</h2>",
        f"<p>The trace's second 0 is {e(advice['origin'])}. Each team's guarantee per window, before → after; "
        "a window's values hold while it is open, the base's the rest of the week. The best advice without "
        f"values in windows has a regret of <b>{float(static['regret_gpu_hours']):,.1f}</b> GPU-hours and "
        + ("meets every objective." if static["feasible"] else "does not meet every objective.") + "</p>",
        _scroll(html_table(headers, rows, caption="Guarantees per window")),
        *([_scroll(html_table(["window", "team", "may borrow"], limits, caption="Borrow limits per window"))]
          if limits else []),
        _scroll(html_table(["from (UTC)", "in force"], timeline,
                           caption="The week from the Monday before the trace's second 0")),
    ]


def _frontier_table(frontier: Sequence[Mapping[str, Any]], chosen: float) -> str:
    rows = []
    for f in sorted(frontier, key=lambda f: float(f["capacity"]["gpu"])):
        cap = float(f["capacity"]["gpu"])
        ratio = f.get("worst_ratio")
        rows.append([_gpus(cap) + (" (advised)" if math.isclose(cap, chosen) else ""),
                     "yes" if f["feasible"] else "no",
                     "never met (a zero target missed)" if ratio is None else f"{ratio:.2f}",
                     f"{float(f['regret_gpu_hours']):,.1f}"])
    return _scroll(html_table(["capacity (GPUs)", "feasible", "worst ratio", "regret (GPU-hours)"], rows,
                              caption="The best configuration found at each capacity tried"))


def _ticks(top: float, n: int = 4) -> list[float]:
    """About ``n`` round tick values from 0 to at least ``top``."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(math.ceil(top / step - 1e-9)) + 1)]


def frontier_svg(frontier: Sequence[Mapping[str, Any]], chosen: float | None = None) -> str:
    """The frontier as an inline SVG: per capacity tried, the worst objective ratio (left axis,
    filled when feasible, hollow when not; a dashed line at 1, below which every objective holds;
    a ratio that can never be met is drawn at the top as "never") and the regret in GPU-hours
    (right axis). ``chosen``: the advised capacity, marked."""
    pts = sorted(frontier, key=lambda f: float(f["capacity"]["gpu"]))
    if not pts:
        return ""
    # Narrow, with large type: drawn at a phone's width the labels stay readable.
    w, h = 480, 320
    left, right, top, bottom = 44, 52, 56, 44
    caps = [float(f["capacity"]["gpu"]) for f in pts]
    lo, hi = min(caps), max(caps)
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    finite = [float(f["worst_ratio"]) for f in pts if f.get("worst_ratio") is not None]
    r_ticks = _ticks(max([1.0, *finite]) * 1.1)
    r_top = r_ticks[-1]
    regrets = [float(f["regret_gpu_hours"]) for f in pts]
    g_ticks = _ticks(max([1.0, *regrets]) * 1.1)
    g_top = g_ticks[-1]

    def x(c: float) -> float:
        return left + (c - lo) / (hi - lo) * (w - left - right)

    def y_ratio(r: float | None) -> float:
        r = r_top if r is None else min(r, r_top)
        return h - bottom - r / r_top * (h - top - bottom)

    def y_regret(g: float) -> float:
        return h - bottom - g / g_top * (h - top - bottom)

    e = html.escape
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" role="img" '
           'aria-labelledby="frontier-title" font-family="system-ui,sans-serif" font-size="13">',
           '<title id="frontier-title">Capacity against the worst objective ratio and the regret</title>',
           f'<rect x="{left}" y="{top}" width="{w - left - right}" height="{h - top - bottom}" fill="#fff" '
           'stroke="#d0d7de"/>']
    for t in r_ticks:
        yy = y_ratio(t)
        out.append(f'<line x1="{left}" x2="{w - right}" y1="{yy:.1f}" y2="{yy:.1f}" stroke="#eaeef2"/>')
        out.append(f'<text x="{left - 6}" y="{yy + 4:.1f}" text-anchor="end" fill="#0969da">{t:g}</text>')
    for t in g_ticks:
        out.append(f'<text x="{w - right + 6}" y="{y_regret(t) + 4:.1f}" fill="#bc4c00">{t:,.0f}</text>')
    one = y_ratio(1.0)
    out.append(f'<line x1="{left}" x2="{w - right}" y1="{one:.1f}" y2="{one:.1f}" stroke="#1a7f37" '
               'stroke-dasharray="6 4"/>')
    out.append(f'<text x="{left + 4}" y="{one + 14:.1f}" fill="#1a7f37">every objective met below</text>')
    step = max(1, math.ceil(len(caps) / 10))
    for i, c in enumerate(caps):
        if i % step == 0 or i == len(caps) - 1:
            out.append(f'<text x="{x(c):.1f}" y="{h - bottom + 16}" text-anchor="middle">{c:g}</text>')
    if chosen is not None and lo - 1e-9 <= chosen <= hi + 1e-9:
        cx = x(chosen)
        out.append(f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{h - bottom}" stroke="#6e7781" '
                   'stroke-dasharray="2 3"/>')
        out.append(f'<text x="{cx + 4:.1f}" y="{top + 12}" fill="#6e7781">advised</text>')
    ratio_line = " ".join(f"{x(c):.1f},{y_ratio(f.get('worst_ratio')):.1f}" for c, f in zip(caps, pts))
    regret_line = " ".join(f"{x(c):.1f},{y_regret(g):.1f}" for c, g in zip(caps, regrets))
    out.append(f'<polyline points="{regret_line}" fill="none" stroke="#bc4c00" stroke-width="1.5"/>')
    out.append(f'<polyline points="{ratio_line}" fill="none" stroke="#0969da" stroke-width="1.5"/>')
    for c, f, g in zip(caps, pts, regrets):
        ratio = f.get("worst_ratio")
        fill = "#0969da" if f["feasible"] else "#fff"
        label = "never" if ratio is None else f"{ratio:.2f}"
        out.append(f'<circle cx="{x(c):.1f}" cy="{y_ratio(ratio):.1f}" r="4.5" fill="{fill}" stroke="#0969da" '
                   f'stroke-width="1.5"><title>{e(f"{c:g} GPUs: worst ratio {label}")}</title></circle>')
        out.append(f'<rect x="{x(c) - 3.5:.1f}" y="{y_regret(g) - 3.5:.1f}" width="7" height="7" fill="#bc4c00">'
                   f'<title>{e(f"{c:g} GPUs: regret {g:,.1f} GPU-hours")}</title></rect>')
    out.append(f'<text x="{(left + w - right) / 2:.0f}" y="{h - 10}" text-anchor="middle">capacity (GPUs)</text>')
    out.append(f'<text x="{left}" y="{top - 32}" fill="#0969da">\u25cf worst objective ratio, left (filled: feasible)'
               '</text>')
    out.append(f'<text x="{left}" y="{top - 14}" fill="#bc4c00">\u25a0 regret in GPU-hours, right</text>')
    out.append("</svg>")
    return "".join(out)


def _embedded(page: str) -> str:
    """A report page as a part of this one: its body, headings one level down, tables that scroll."""
    body = page
    if "<body" in page:
        body = page.split("<body", 1)[1].split(">", 1)[1]
        body = body.rsplit("</body>", 1)[0]
    body = re.sub(r"<(/?)h([1-5])\b", lambda m: f"<{m[1]}h{int(m[2]) + 1}", body)
    return body.replace("<table>", '<div class="scroll"><table>').replace("</table>", "</table></div>")


def render_advice_report(advice: Mapping[str, Any], simulate_report_html: str | None = None, *,
                         described: str = "", trace: str = "") -> str:
    """The advice (the JSON object of ``gpu-share advise --json``) as one self-contained HTML page.

    ``simulate_report_html``: the ``simulate`` report of the advised configuration (a whole page
    from :func:`~cdk_gpu_share.cli.simulate_report.render_report`, or a part of one), shown after
    the advice; None: left out. ``described``, ``trace``: where the input came from, for the header.
    """
    e = html.escape
    feasible = bool(advice["feasible"])
    capacity = float(advice["capacity"]["gpu"])
    inp = advice.get("input", {})
    worst = inp.get("worst_ratio")
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>gpu-share advise: the quotas that meet each team's objectives</title>",
        f"<style>{_REPORT_CSS}{_ADVICE_CSS}</style></head><body>",
        "<h1>Which quotas meet what each team needs, at the least cost?</h1>",
        '<p class="meta">' + (f"Input {e(described)}; " if described else "") + (f"trace {e(trace)}; " if trace else "")
        + f"written {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by gpu-share advise.</p>",
        f'<p class="verdict{"" if feasible else " no"}">'
        + (f"Every objective holds with <b>{_gpus(capacity)} GPUs</b>" if feasible
           else f"No configuration found meets every objective; the closest, with <b>{_gpus(capacity)} GPUs</b>,"
                " is shown and its missed objectives are marked")
        + f" ({e(str(advice.get('fleet', 'fixed')))} fleet). Regret: <b>{float(advice['regret_gpu_hours']):,.1f}"
        f"</b> GPU-hours waited or thrown away, against {float(inp.get('regret_gpu_hours', 0.0)):,.1f} as given"
        + (" (which met every objective)" if inp.get("feasible") else
           f" (which did not meet every objective; worst ratio {'never met' if worst is None else f'{worst:.2f}'})")
        + f"; {int(advice.get('simulations', 0)):,} simulations.</p>",
        *(f'<p class="verdict no">Warning: {e(line)}.</p>' for line in advice.get("warnings") or ()),
        "<h2>What changes</h2>",
        _teams_table(advice["teams"]),
        "<h2>Objectives</h2>",
        "<p>A wait is in minutes, stops and lost GPU-hours per day of the trace; <i>no_worse_than_private</i> "
        "is how much longer (+) or shorter (-) the team's jobs that fit its entitlement waited than in a private "
        "cluster of that entitlement, beyond the allowed slack, and <i>guarantee_wait_p99_minutes</i> counts the "
        "time jobs waited while their team's unused entitlement could hold them. A team's entitlement is what "
        "it was promised (its guarantee as given, "
        "unless the input says otherwise): the advice changes guarantees, never entitlements.</p>",
        _objectives_table(advice["teams"]),
    ]
    if "windows" in advice:
        parts += _windows_section(advice)
    frontier = advice.get("frontier") or []
    if frontier:
        parts += [
            "<h2>The frontier</h2>",
            "<p>Each capacity the advisor tried, with the best configuration it found there: the worst ratio of "
            "value to target over every objective (1 is the boundary; for no_worse_than_private, 1 + the "
            "difference in hours) and the regret. Fewer GPUs cost less; the advice is the least capacity "
            "where every objective holds.</p>",
            f"<figure>{frontier_svg(frontier, capacity)}</figure>",
            _frontier_table(frontier, capacity),
        ]
    if simulate_report_html:
        parts += ['<section class="simulated"><h2>The advised configuration, simulated</h2>',
                  "<p>The report of <code>gpu-share simulate</code> on the advised configuration: the figures "
                  "above come from its simulation.</p>",
                  _embedded(simulate_report_html), "</section>"]
    parts.append("</body></html>")
    return "\n".join(parts)


def advised_simulate_report(scenario_data: Mapping[str, Any], jobs: Sequence[Any], *, poll: float,
                            described: str = "", trace: str = "", origin: Any = None) -> str:
    """The ``simulate --report`` page of the advised configuration (``scenario_data``, as ``-o``
    writes it) on ``jobs``: every mode side by side, as ``simulate --compare --report`` makes it.
    ``origin``: the clock time of the trace's second 0, for a configuration with time windows."""
    import dataclasses

    from cdk_gpu_share.cli.simulate_cmd import _run_compare
    from cdk_gpu_share.cli.simulate_report import render_report
    from cdk_gpu_share.core import simulate as sim
    from cdk_gpu_share.core.simulate.compare import compare

    scenario = sim.parse_scenario(dict(scenario_data), source="the advised configuration")
    scenario = dataclasses.replace(scenario, origin=origin)
    runs, notes, verdict = _run_compare(scenario, jobs, poll, None, trace or "trace")
    cmp = compare(runs, jobs, notes=notes)
    cmp.victim_order = verdict
    return render_report(cmp, runs, jobs, described=described, trace=trace, poll_seconds=poll)


def write_advice_report(path: str, text: str) -> None:
    """Write the page to ``path``; an unwritable path is a ConfigError naming ``--report``."""
    from cdk_gpu_share.cli._files import write_output

    write_output(path, text, "--report")

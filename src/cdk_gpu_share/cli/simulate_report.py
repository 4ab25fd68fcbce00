"""What ``gpu-share simulate`` draws and writes besides its tables: the comparison's tables, the
usage plot (``--plot``) and the HTML report (``--report``), which ``gpu-share advise`` writes too.

matplotlib (the ``plot`` extra) is imported when a figure is drawn, never at import time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cdk_gpu_share.core.errors import ConfigError, GpuShareError, Problem
from cdk_gpu_share.core.text import format_table, html_table

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from cdk_gpu_share.core.simulate import Job, SimResult
    from cdk_gpu_share.core.simulate.compare import Comparison

__all__ = [
    "GAP_COLUMNS", "GAP_HEADERS", "GAP_MODE", "comparison_tables", "format_value", "gap_figure", "gap_rows",
    "human_seconds", "render_compare", "render_gap", "render_report", "usage_figure", "waiting_series",
    "write_plot", "write_report",
]

#: The mode ``--compare`` replays the tree and its compilation in: the one the backends deploy.
GAP_MODE = "share+reclaim"


#: (column, key, unit) of the compilation gap's table, per team and per group.
GAP_COLUMNS = (("wait p50", "wait_p50_s", "s"), ("p95", "wait_p95_s", "s"), ("p99", "wait_p99_s", "s"),
               ("preempted", "preempted", "count"), ("lost GPU-h", "lost_gpu_seconds", "h"))


def gap_rows(gap: dict[str, dict[str, Any]]) -> list[list[str]]:
    """Each team, then each group, under the tree, compiled, and the difference (compiled less tree)."""
    def cell(value: float, unit: str, sign: bool = False) -> str:
        prefix = ("+" if value > 0 else "-" if value < 0 else "") if sign else ""
        if unit == "s":
            return prefix + human_seconds(abs(value))
        if unit == "h":
            return prefix + f"{abs(value) / 3600:,.1f}"
        return prefix + f"{abs(int(value))}"

    rows = []
    tree, compiled = gap["tree"], gap["compiled"]
    for kind in ("teams", "groups"):
        for name, t in tree.get(kind, {}).items():
            c = compiled[kind][name]
            label = name if kind == "teams" else f"{name}/"
            rows.append([label, "tree", *(cell(t[k], u) for _, k, u in GAP_COLUMNS)])
            rows.append(["", "compiled", *(cell(c[k], u) for _, k, u in GAP_COLUMNS)])
            rows.append(["", "gap", *(cell(c[k] - t[k], u, sign=True) for _, k, u in GAP_COLUMNS)])
    return rows


GAP_HEADERS = ["team or group/", "hierarchy", *(c for c, _, _ in GAP_COLUMNS)]


def render_gap(gap: dict[str, dict[str, Any]]) -> str:
    """The compilation gap as text: per team and per group (``name/``), the tree's figures, the
    compiled configuration's, and the gap between them."""
    lines = [f"compilation gap ({GAP_MODE}): the tree against the flat configuration the backend deploys"]
    lines += format_table(GAP_HEADERS, gap_rows(gap), indent="  ", right=set(range(2, len(GAP_HEADERS))))
    lines.append("gap: compiled less tree (a + wait is longer compiled)")
    return "\n".join(lines)


def human_seconds(s: float) -> str:
    """Compact duration: 0s, 45s, 12m, 3.4h, 2.1d."""
    s = float(s)
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{s / 60:.0f}m"
    if s < 86400:
        return f"{s / 3600:.1f}h"
    return f"{s / 86400:.1f}d"


# ---------------------------------------------------------------------------
# --compare and --report


def format_value(value: float | None, unit: str) -> str:
    """One cell of the comparison: ``-`` for a mode that did not run."""
    if value is None:
        return "-"
    if unit == "s":
        return human_seconds(value)
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "count":
        return f"{int(round(value)):,}"
    if unit.startswith("of "):
        return f"{int(round(value))} {unit}"
    return f"{value:,.1f}"


def _gpus(n: float) -> str:
    return f"{n:.3g} GPU" + ("" if n == 1 else "s")


def comparison_tables(cmp: Comparison) -> list[tuple[str, list[str], list[list[str]], set[tuple[int, int]]]]:
    """(title, headers, rows, best cells) of the pool and of each team: the text and the HTML alike."""
    headers = ["", *cmp.modes]
    out = []
    groups = [("pool", f"pool: {_gpus(cmp.capacity)}", cmp.pool)]
    groups += [(name, f"team {name}: guarantee {_gpus(cmp.guarantees[name])}"
                + (f", entitled to {_gpus(cmp.entitlements[name])}" if name in cmp.entitlements else ""), rows)
               for name, rows in cmp.teams.items()]
    for _, title, rows in groups:
        cells, best = [], set()
        for i, row in enumerate(rows):
            cells.append([row.label, *(format_value(v, row.unit) for v in row.values)])
            best |= {(i, j + 1) for j in row.best}
        out.append((title, headers, cells, best))
    return out


def render_compare(cmp: Comparison, *, described: str = "", trace: str = "") -> str:
    """The comparison as text: one table for the pool, one per team; * marks the best value of a row."""
    lines = []
    if described:
        lines.append(f"scenario  {described}")
    if trace:
        lines.append(f"trace     {trace}")
    for title, headers, rows, best in comparison_tables(cmp):
        marked = [[c + ("*" if (i, j) in best else (" " if j else "")) for j, c in enumerate(r)]
                  for i, r in enumerate(rows)]
        lines += ["", title, *format_table([h + (" " if j else "") for j, h in enumerate(headers)], marked,
                                           indent="  ")]
    lines += ["", "* best value of the row (lowest; highest for utilization and GPU-hours borrowed)"]
    lines += [f"note: {n}" for n in cmp.notes]
    return "\n".join(lines)


def _check_target(flag: str, path: str, suffix: str) -> None:
    from cdk_gpu_share.cli._files import check_output

    check_output(path, flag)
    if not path.lower().endswith(suffix):
        raise ConfigError(Problem(field=flag, value=path, message=f"is not a {suffix} file name",
                                  fix=f"give a path ending in {suffix}"))


def _pyplot(flag: str) -> Any:
    """matplotlib's pyplot on the Agg backend (headless), imported only when a plot is asked for."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise GpuShareError(
            f"{flag} needs matplotlib: install it with  pip install 'cdk-gpu-share[plot]'"
        ) from None
    return plt


def waiting_series(result: SimResult, jobs: Sequence[Job] = ()) -> tuple[list[float], list[tuple[float, ...]]]:
    """Per team, the GPUs of its pending jobs over time, as a step function: the simulator's own
    pending set (:attr:`~cdk_gpu_share.core.simulate.SimResult.series_waiting`), so a job stopped by
    a preemption counts again from its stop to its restart, and not while it ran. ``jobs`` is
    accepted for callers of the earlier signature and not needed."""
    times, values = result.series_waiting
    return list(times), list(values)


def usage_figure(result: SimResult, jobs: Sequence[Job] = (), *, label: str | None = None) -> Figure:
    """Each team's usage against its guarantee on one shared GPU scale, its waiting demand and its
    preemptions over time, then the pool's busy share. The legend sits above the data."""
    plt = _pyplot("--plot")
    names = result.team_names
    n = len(names)
    times = list(result.series_t)
    usage = list(result.series_usage)
    w0, w1 = result.window
    if not times:
        times, usage = [w0], [tuple(0.0 for _ in names)]
    if times[-1] < w1:
        times.append(w1)
        usage.append(usage[-1])
    days = [t / 86400.0 for t in times]
    wt, wv = waiting_series(result)
    wdays = [t / 86400.0 for t in wt]
    if wt and wt[-1] < w1:
        wdays.append(w1 / 86400.0)
        wv.append(wv[-1])
    fig, axes = plt.subplots(n + 1, 1, sharex=True, figsize=(10, 1.7 * (n + 1) + 1.2), squeeze=False)
    team_axes = [axes[k][0] for k in range(n)]
    # One scale for every team, the pool's size: usage and guarantees compare at a glance.
    # Waiting demand can exceed the pool many times over; it is clipped and its peak written.
    top = max([result.capacity, *result.guarantees, *(max(u) for u in usage if u)]) or 1.0
    preempt_days: list[list[float]] = [[] for _ in names]
    for t, k in result.preemption_events:
        preempt_days[k].append(t / 86400.0)
    handles: dict = {}
    for k, name in enumerate(names):
        ax = team_axes[k]
        if wdays:
            h = ax.fill_between(wdays, [v[k] for v in wv], step="post", color="tab:orange", alpha=0.35,
                                linewidth=0, label="waiting: GPUs of pending jobs")
            handles.setdefault("waiting", h)
        (h,) = ax.step(days, [u[k] for u in usage], where="post", linewidth=0.8, color="tab:blue",
                       label="usage (GPUs)")
        handles.setdefault("usage", h)
        h = ax.axhline(result.guarantees[k], color="tab:red", linestyle="--", linewidth=0.9, label="guarantee")
        handles.setdefault("guarantee", h)
        if preempt_days[k]:
            (h,) = ax.plot(preempt_days[k], [top * 1.02] * len(preempt_days[k]), linestyle="none", marker="v",
                           markersize=3, color="black", label="preemption of the team's job")
            handles.setdefault("preemption", h)
        peak = max((v[k] for v in wv), default=0.0)
        if peak > top:
            ax.text(0.005, 0.95, f"waiting peaks at {peak:,.0f} GPUs", transform=ax.transAxes,
                    fontsize="x-small", va="top", color="tab:orange")
        ax.set_ylabel(f"{name}\nGPUs")
        ax.set_ylim(0, top * 1.08)
        ax.grid(axis="y", linewidth=0.3, alpha=0.5)
    ax = axes[n][0]
    (h,) = ax.step(days, [100.0 * sum(u) / result.capacity if result.capacity else 0.0 for u in usage],
                   where="post", linewidth=0.8, color="tab:green", label="pool busy (%)")
    handles["pool"] = h
    ax.set_ylabel("pool\n% busy")
    ax.set_ylim(0, 105)
    ax.set_xlabel("days since the first submit" if w0 == 0 else "days")
    fig.suptitle(f"{label or result.mode}: utilization {result.utilization * 100:.1f}%, "
                 f"queued {result.wait_gpu_hours:,.0f} GPU-h, {result.preemptions} preemptions",
                 fontsize="medium", y=0.995)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / fig.get_figheight()))
    fig.legend(list(handles.values()), [h.get_label() for h in handles.values()], loc="upper center",
               ncol=len(handles), fontsize="small", frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.25 / fig.get_figheight()))
    return fig


def write_plot(result: SimResult, path: str, *, jobs: Sequence[Job] = (), label: str | None = None) -> None:
    """A PNG of :func:`usage_figure`. matplotlib is imported here, with the Agg backend."""
    import io

    from cdk_gpu_share.cli._files import write_output

    plt = _pyplot("--plot")
    fig = usage_figure(result, jobs, label=label)
    png = io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=110)
    finally:
        plt.close(fig)
    write_output(path, png.getvalue(), "--plot")


_REPORT_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1b1f24;padding:0 1rem}
h1{font-size:1.5rem}h2{font-size:1.15rem;margin-top:2rem}
table{border-collapse:collapse;margin:0.6rem 0 1.2rem;font-variant-numeric:tabular-nums}
caption{text-align:left;font-weight:600;padding:0.3rem 0}
th,td{border:1px solid #d0d7de;padding:0.3rem 0.7rem;text-align:right}
thead th{background:#f6f8fa}tbody th{text-align:left;font-weight:normal}
td.best{background:#dafbe1;font-weight:600}td.best::after{content:" \\2605";color:#1a7f37}
.meta{color:#57606a}.tables{display:flex;flex-wrap:wrap;gap:0 2rem}
img{max-width:100%;border:1px solid #d0d7de;margin:0.5rem 0}
"""


def render_report(cmp: Comparison, runs: Sequence[tuple[str, SimResult | None]], jobs: Sequence[Job], *,
                  described: str = "", trace: str = "",
                  poll_seconds: float | None = None, plots: bool = True,
                  gap: dict[str, dict[str, Any]] | None = None) -> str:
    """The comparison as one self-contained HTML page: tables, then each mode's usage plot as an
    embedded PNG (no scripts, no external resources); with ``gap`` (:func:`_run_gap`), the
    compilation gap's table and its chart per team."""
    import datetime
    import html

    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        "<title>gpu-share simulate: policies side by side</title>",
        f"<style>{_REPORT_CSS}</style></head><body>",
        "<h1>What would each policy do to our teams?</h1>",
        f"<p class=\"meta\">Scenario {e(described)}; trace {e(trace)} ({len(jobs):,} jobs); "
        f"written {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC by gpu-share simulate.</p>",
        "<p>Modes: <b>static</b> (no team runs beyond its guarantee), <b>share</b> (teams borrow idle "
        "capacity within their limits; nothing is preempted), <b>share+reclaim</b> (the reclaim planner "
        "stops borrowers so lenders get their guarantee back"
        + (f", every {poll_seconds:g} s" if poll_seconds else "") + "). "
        "&#9733; marks the best value of a row: the lowest, or the highest for utilization and "
        "GPU-hours borrowed. <i>Wait for own guarantee</i> is the p99 of the time jobs waited while their "
        "team's unused guarantee could hold them (its entitlement, for a team entitled to other than its "
        "guarantee), over the jobs that waited so at all: a wait behind the team's own jobs does not count.</p>",
    ]
    tables = comparison_tables(cmp)
    parts.append("<h2>Pool</h2>")
    title, headers, rows, best = tables[0]
    parts.append(html_table(headers, rows, best=best, caption=title))
    parts.append("<h2>Teams</h2><div class=\"tables\">")
    for title, headers, rows, best in tables[1:]:
        parts.append(html_table(headers, rows, best=best, caption=title))
    parts.append("</div>")
    if cmp.notes:
        parts.append("<ul>" + "".join(f"<li>{e(n)}</li>" for n in cmp.notes) + "</ul>")
    if gap:
        parts.append("<h2>Compilation gap</h2>")
        parts.append(f"<p>{e(GAP_MODE)} under the tree of groups, and under the flat configuration the "
                     "backend deploys (each group's pool split to its teams, borrow limits from the groups' "
                     "bounds). <i>gap</i> is compiled less tree: a positive wait is longer compiled. "
                     "A group's figures (<i>name/</i>) are over the jobs of every team below it.</p>")
        parts.append(html_table(GAP_HEADERS, gap_rows(gap), caption="per team and per group"))
        if plots:
            parts.append(_png_figure(gap_figure(gap), "compilation gap per team: wait p95 and preemptions, "
                                     "tree against compiled", "the compilation gap per team"))
    if plots:
        parts.append("<h2>Usage over time</h2>")
        for label, result in runs:
            if result is None:
                continue
            parts.append(_png_figure(usage_figure(result, jobs, label=label), f"usage per team, {label}", label))
    parts.append("</body></html>")
    return "\n".join(parts)


def _png_figure(fig: Figure, alt: str, caption: str) -> str:
    """``fig`` as an HTML figure with an embedded PNG; the figure is closed."""
    import base64
    import html
    import io

    plt = _pyplot("--report")
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=90)
    finally:
        plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return (f"<figure><img alt=\"{html.escape(alt)}\" src=\"data:image/png;base64,{data}\">"
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def gap_figure(gap: dict[str, dict[str, Any]]) -> Figure:
    """Per team, bars of the tree's and the compiled configuration's wait p95 (minutes) and
    preemptions, side by side: the compilation gap at a glance."""
    plt = _pyplot("--report")
    names = list(gap["tree"]["teams"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), squeeze=False)
    width = 0.4
    for ax, (key, title, scale) in zip(axes[0], (("wait_p95_s", "wait p95 (minutes)", 60.0),
                                                 ("preempted", "preemptions", 1.0))):
        for k, (mode, color) in enumerate((("tree", "tab:blue"), ("compiled", "tab:orange"))):
            values = [gap[mode]["teams"][n][key] / scale for n in names]
            ax.bar([i + (k - 0.5) * width for i in range(len(names))], values, width, label=mode, color=color)
        ax.set_xticks(range(len(names)), names, rotation=30 if len(names) > 6 else 0, fontsize="small")
        ax.set_title(title, fontsize="medium")
        ax.grid(axis="y", linewidth=0.3, alpha=0.5)
    axes[0][0].legend(fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def write_report(cmp: Comparison, runs: Sequence[tuple[str, SimResult | None]], jobs: Sequence[Job], path: str,
                 **kwargs: Any) -> None:
    from cdk_gpu_share.cli._files import write_output

    write_output(path, render_report(cmp, runs, jobs, **kwargs), "--report")

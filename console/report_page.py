"""``ReportData`` as one self-contained HTML page: inline CSS, SVG charts drawn here, one small script that
sorts tables. Nothing is fetched (a Content-Security-Policy forbids it), and every memory text and
identifier is HTML-escaped, since memory content is untrusted."""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import math
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from importlib import resources

from console.report import (
    ClusterView,
    CorroborationSection,
    FeedbackImpact,
    ReportData,
)
from retrieval.text import clip, listed, shown_safely
from tools.drift import ContradictionView

PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7")
LIFTED, LOWERED, UNCHANGED = "#2f9e44", "#d9480f", "#adb5bd"
OPEN, RESOLVED = "#e8590c", "#2b8a3e"
MAX_HISTOGRAM_BARS = 41
MAX_TIMELINE_PAIRS = 25

SECTIONS = (
    ("feedback", "Feedback impact"),
    ("drift", "Drift"),
    ("clusters", "Corroboration clusters"),
    ("health", "Store health"),
)

# The page's frame, its style and its one script are files of this package; the sections are drawn here.
# The script sorts a table by the header clicked (by each cell's data-v when it has one, numerically when
# both parse); it runs inline, allowed by its hash, so the frame puts it between its tags byte for byte.
ASSETS = resources.files("console")
PAGE = string.Template((ASSETS / "templates" / "report.html").read_text(encoding="utf-8"))
STYLE = (ASSETS / "static" / "report.css").read_text(encoding="utf-8")
SCRIPT = (ASSETS / "static" / "report.js").read_text(encoding="utf-8")


def render_report(data: ReportData) -> str:
    """The whole page, one string of HTML (write it to a ``.html`` file and open it in a browser)."""
    script_hash = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{script_hash}'; base-uri 'none'; form-action 'none'"
    )
    title = f"memoria report — {data.org_id}/{data.project_id}"
    contents = "".join(f'<li><a href="#{key}">{_e(name)}</a></li>' for key, name in SECTIONS)
    sections = (
        _feedback_section(data.feedback),
        _drift_section(data),
        _clusters_section(data.corroboration),
        _health_section(data),
    )
    return PAGE.substitute(
        policy=_e(policy),
        title=_e(title),
        style=STYLE,
        header=_header(data),
        contents=contents,
        sections="\n".join(sections),
        generated_at=_e(data.generated_at),
        script=SCRIPT,
    )


def _header(data: ReportData) -> str:
    rows = [
        ("Store", f"<code>{_e(data.store_uri)}</code>"),
        ("Scope", f"org <code>{_e(data.org_id)}</code> / project <code>{_e(data.project_id)}</code>"),
        ("Generated", _e(data.generated_at)),
        *((f"Backend: {name}", _e(value)) for name, value in data.backends.items()),
    ]
    items = "".join(f"<dt>{_e(label)}</dt><dd>{value}</dd>" for label, value in rows)
    return f"<header><h1>memoria report</h1><dl>{items}</dl></header>"


# ---------------------------------------------------------------------------------------- feedback impact


def _feedback_section(feedback: FeedbackImpact) -> str:
    parts = [
        '<section id="feedback"><h2>Feedback impact</h2>',
        '<p class="lede">What outcome-driven feedback weights did to rankings over the newest '
        f"{feedback.retrievals_requested:,} recalls of this scope: rank delta = unweighted rank − weighted "
        "rank, so a positive delta means feedback lifted the memory. The weight applied is each memory's "
        "weight for the query (the reports of sessions with close queries); the global weight, over every "
        "report, is the baseline shown beside it.</p>",
    ]
    if feedback.retrievals == 0:
        parts.append(
            _empty(
                "No recalls are logged in this scope yet. Call <code>recall</code> during a task and "
                "<code>report_outcome</code> when it ends; later recalls then show how the weights reorder "
                "results."
            )
        )
    else:
        window = f"{feedback.first_at} → {feedback.last_at}"
        parts.append(
            _kpis(
                [
                    (f"{feedback.retrievals:,}", "recalls analysed", window),
                    (f"{feedback.retrievals_top_k_changed:,}", "with top-k changed by weighting", None),
                    (f"{feedback.retrievals_reordered:,}", "with any rank changed", None),
                    (f"{feedback.mean_abs_delta:.2f}", "mean |rank delta|", None),
                    (
                        f"{feedback.moved_candidates:,} / {feedback.candidates:,}",
                        "candidates moved",
                        None,
                    ),
                    (
                        f"{feedback.global_retrievals_top_k_changed:,}",
                        "with top-k the global weights would have changed",
                        f"{feedback.global_moved_candidates:,} candidates moved",
                    ),
                ]
            )
        )
        notes = []
        if feedback.weighting_disabled_retrievals:
            notes.append(
                f"{feedback.weighting_disabled_retrievals:,} of these recalls ran with feedback weighting "
                "disabled for the org (ranks unchanged by design)."
            )
        if feedback.retrievals_without_top_k:
            notes.append(
                f"{feedback.retrievals_without_top_k:,} recalls have no recorded retrieval (and so no top_k): "
                "left out of the top-k count."
            )
        parts.extend(f'<p class="lede">{_e(note)}</p>' for note in notes)
        parts.append(
            '<div class="charts">'
            + _figure(
                _delta_histogram(feedback),
                "Rank deltas of every candidate (hover a bar for its count).",
            )
            + _figure(
                _rank_scatter(feedback),
                "Unweighted vs weighted rank (0 = first); above the line: lifted, below: lowered. "
                "Bigger dots: more candidates.",
            )
            + "</div>"
        )
        parts.append("<h3>Memories moved most</h3>")
        if feedback.most_moved:
            parts.append(_most_moved_table(feedback))
        else:
            parts.append(
                _empty("Weighting has not changed any rank yet: every weight is still neutral or tied.")
            )
    parts.append(_weight_histories(feedback))
    parts.append("</section>")
    return "".join(parts)


def _delta_histogram(feedback: FeedbackImpact) -> str:
    counts = {item.delta: item.count for item in feedback.delta_histogram}
    bins = _delta_bins(counts)
    chart = _Chart(460, 340, left=52, bottom=46)
    top = _nice_max(max(count for _, _, count in bins))
    out = [chart.open("Histogram of rank deltas")]
    out += chart.y_axis(0, top, lambda v: f"{v:,.0f}", integer=True)
    slot = chart.plot_w / len(bins)
    label_every = math.ceil(len(bins) / 9)  # about 9 labels fit under the bars
    zero = next(i for i, (first, _, _) in enumerate(bins) if first == 0)
    for index, (first, last, count) in enumerate(bins):
        x = chart.left + index * slot
        height = chart.plot_h * count / top
        colour = LIFTED if first > 0 else LOWERED if last < 0 else UNCHANGED
        label = f"{first:+d}" if first else "0"
        if first != last:
            label = f"{min(first, last):+d}…{max(first, last):+d}"
        out.append(
            f'<rect x="{x + slot * 0.1:.1f}" y="{chart.bottom_y - height:.1f}" width="{slot * 0.8:.1f}" '
            f'height="{height:.1f}" fill="{colour}"><title>{_e(f"delta {label}: {count:,} candidates")}'
            "</title></rect>"
        )
        if (index - zero) % label_every == 0:  # 0 always has its label
            short = f"{first:+d}" if first else "0"  # a grouped bin by its delta nearest 0
            out.append(
                f'<text x="{x + slot / 2:.1f}" y="{chart.bottom_y + 14:.1f}" text-anchor="middle">'
                f"{_e(short)}</text>"
            )
    out.append(chart.x_title("rank delta (unweighted − weighted)"))
    out.append(chart.close())
    return "".join(out)


def _delta_bins(counts: dict[int, int]) -> list[tuple[int, int, int]]:
    """(delta nearest 0, delta farthest from 0, count) per bar, ascending: 0 alone, then equal-width groups
    on either side, so that at most ``MAX_HISTOGRAM_BARS`` bars are drawn."""
    reach = max(abs(delta) for delta in [*counts, 0])
    width = max(1, math.ceil(reach / (MAX_HISTOGRAM_BARS // 2)))
    groups = math.ceil(reach / width)
    bins = []
    for sign in (-1, 1):
        for group in range(groups):
            near, far = sign * (group * width + 1), sign * (group + 1) * width
            low, high = min(near, far), max(near, far)
            bins.append((near, far, sum(c for d, c in counts.items() if low <= d <= high)))
    bins.append((0, 0, counts.get(0, 0)))
    return sorted(bins, key=lambda item: item[0])


def _rank_scatter(feedback: FeedbackImpact) -> str:
    points = feedback.rank_points
    top = max(1, *(max(p.unweighted_rank, p.weighted_rank) for p in points))
    low, high = -0.5, top + 0.5  # half a rank of room, so the dots at the ends are whole
    chart = _Chart(460, 420, left=52, bottom=46)
    biggest = max(point.count for point in points)
    out = [chart.open("Scatter of unweighted against weighted ranks")]

    def x(rank: float) -> float:
        return chart.left + chart.plot_w * (rank - low) / (high - low)

    def y(rank: float) -> float:  # rank 0 at the top: "above the line" is "ranked higher"
        return chart.top + chart.plot_h * (rank - low) / (high - low)

    for tick in _ticks(0, top, integer=True):
        out.append(
            f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{y(low):.1f}" y2="{y(high):.1f}"/>'
        )
        out.append(
            f'<line class="grid" x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
        )
        out.append(
            f'<text x="{x(tick):.1f}" y="{chart.bottom_y + 14:.1f}" text-anchor="middle">{tick:g}</text>'
        )
        out.append(f'<text x="{chart.left - 6:.1f}" y="{y(tick) + 4:.1f}" text-anchor="end">{tick:g}</text>')
    out.append(
        f'<line x1="{x(low):.1f}" y1="{y(low):.1f}" x2="{x(high):.1f}" y2="{y(high):.1f}" stroke="#8c959f" '
        'stroke-dasharray="4 3"/>'
    )
    for point in points:
        radius = 2.5 + 5.5 * math.sqrt(point.count / biggest)
        delta = point.unweighted_rank - point.weighted_rank
        colour = LIFTED if delta > 0 else LOWERED if delta < 0 else UNCHANGED
        tip = (
            f"unweighted {point.unweighted_rank} → weighted {point.weighted_rank} "
            f"(delta {delta:+d}): {point.count:,} candidates"
        )
        out.append(
            f'<circle cx="{x(point.unweighted_rank):.1f}" cy="{y(point.weighted_rank):.1f}" r="{radius:.1f}" '
            f'fill="{colour}" fill-opacity="0.7"><title>{_e(tip)}</title></circle>'
        )
    out.append(
        f'<rect x="{x(low):.1f}" y="{y(low):.1f}" width="{x(high) - x(low):.1f}" '
        f'height="{y(high) - y(low):.1f}" fill="none" class="axis"/>'
    )
    out.append(chart.x_title("unweighted rank"))
    out.append(chart.y_title("weighted rank"))
    out.append(chart.close())
    return "".join(out)


def _most_moved_table(feedback: FeedbackImpact) -> str:
    rows = []
    for memory in feedback.most_moved:
        weight = f"{memory.weight:.3f}" if memory.weight is not None else "—"
        applied = f"{memory.applied_weight:.3f}"
        rows.append(
            "<tr>"
            f'<td class="id">{_e(memory.id)}</td>'
            f'<td class="preview">{_e(memory.preview) or "<em>not in the store</em>"}</td>'
            f'<td class="num">{memory.appearances:,}</td>'
            f'<td class="num" style="color:{LIFTED}">{memory.lifted:,}</td>'
            f'<td class="num" style="color:{LOWERED}">{memory.lowered:,}</td>'
            f'<td class="num">{memory.total_abs_delta:,}</td>'
            f'<td class="num" data-v="{memory.mean_delta:.6f}">{memory.mean_delta:+.2f}</td>'
            f'<td class="num">{applied}</td>'
            f'<td class="num">{weight}</td>'
            f"<td>{_e(memory.status or 'gone')}</td>"
            "</tr>"
        )
    head = _head(
        [
            "memory",
            "content",
            "#recalls",
            "lifted",
            "lowered",
            "Σ|delta|",
            "mean delta",
            "weight applied (mean)",
            "global weight now",
            "status",
        ],
        numeric={2, 3, 4, 5, 6, 7, 8},
    )
    return f'<table class="sortable">{head}<tbody>{"".join(rows)}</tbody></table>'


def _weight_histories(feedback: FeedbackImpact) -> str:
    intro = (
        f'<h3>Weight history</h3><p class="lede">{feedback.weight_events:,} weight changes (one per '
        f"memory an outcome report moved) on {feedback.memories_with_weight_events:,} memories so far (all time, "
        f"those since superseded or forgotten too). Each memory starts at 1.0; "
        f"weights stay within [{feedback.min_weight:g}, {feedback.max_weight:g}].</p>"
    )
    if not feedback.weight_histories:
        return intro + _empty(
            "No weight has moved yet. Weights move when a session that recalled memories calls "
            "<code>report_outcome</code>: success raises the memories it used, failure lowers them."
        )
    series = [
        [(_time(point.at), point.weight, point.session_id) for point in history.points]
        for history in feedback.weight_histories
    ]
    times = [t for line in series for t, _, _ in line]
    weights = [w for line in series for _, w, _ in line] + [1.0]
    first, last = min(times), max(times)
    span = (last - first).total_seconds() or 1.0
    low, high = min(weights), max(weights)
    pad = max(0.05, (high - low) * 0.1)
    low, high = low - pad, high + pad
    chart = _Chart(900, 320, left=52, bottom=46, right=24)
    out = [chart.open("Line chart of the weight history of the memories whose weight moved most")]
    out += chart.y_axis(low, high, lambda v: f"{v:.2f}")

    def x(moment: datetime) -> float:
        offset = (moment - first).total_seconds()
        return chart.left + chart.plot_w * (offset / span if last > first else 0.5)

    def y(weight: float) -> float:
        return chart.bottom_y - chart.plot_h * (weight - low) / (high - low)

    out.append(
        f'<line x1="{chart.left}" x2="{chart.left + chart.plot_w}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" '
        'stroke="#8c959f" stroke-dasharray="4 3"><title>neutral weight 1.0</title></line>'
    )
    out += _time_labels(chart, x, first, last)
    legend = []
    for index, (history, line) in enumerate(zip(feedback.weight_histories, series, strict=True)):
        colour = PALETTE[index % len(PALETTE)]
        # A weight holds until the next report moves it: a step line.
        start_at, start_weight, _ = line[0]
        path = f"M{x(start_at):.1f} {y(start_weight):.1f}" + "".join(
            f"H{x(moment):.1f}V{y(weight):.1f}" for moment, weight, _ in line[1:]
        )
        out.append(
            f'<path d="{path}" fill="none" stroke="{colour}" stroke-width="2">'
            f"<title>{_e(history.id)}</title></path>"
        )
        for moment, weight, session in line:
            tip = f"{history.id}: {weight:.3f} at {moment:%Y-%m-%d %H:%M:%S}" + (
                f" (report of session {session})" if session else " (stored)"
            )
            out.append(
                f'<circle cx="{x(moment):.1f}" cy="{y(weight):.1f}" r="3.5" fill="{colour}">'
                f"<title>{_e(tip)}</title></circle>"
            )
        legend.append(
            f'<li><span class="swatch" style="background:{colour}"></span><span><code>{_e(history.id)}</code> '
            f"{_reports_moved(line)} moved it {history.movement:.3f} in all, now {line[-1][1]:.3f} (from "
            f"{start_weight:.3f}) — "
            f'<span class="preview">{_e(history.preview) or "<em>not in the store</em>"}</span></span></li>'
        )
    out.append(chart.x_title("time of the outcome report"))
    out.append(chart.close())
    return (
        intro
        + _figure("".join(out), "Weight after each outcome report, for the memories whose weight moved most.")
        + f'<ul class="legend">{"".join(legend)}</ul>'
    )


# ---------------------------------------------------------------------------------------- drift


def _reports_moved(line: Sequence[tuple[datetime, float, str | None]]) -> str:
    """How many reports moved a memory's weight (not those that credited it and left it where it was): the
    legend's sum of every step is "in all", not the distance from where it started (a trial read "moved
    0.474, now 1.174" of a weight that went 1.0, 0.85, 1.03, 1.174)."""
    reports = sum(
        1
        for (_, before, _), (_, after, session) in itertools.pairwise(line)
        if session and abs(after - before) > 1e-9  # a report writes an event for each credit, moved or not
    )
    return f"{reports} report{'' if reports == 1 else 's'}"


def _drift_section(data: ReportData) -> str:
    view = data.drift
    parts = [
        '<section id="drift"><h2>Drift</h2>',
        '<p class="lede">Where beliefs conflict or changed: contradiction pairs (same subject, opposite '
        "claims) and what superseded what.</p>",
    ]
    if not view.contradictions and not view.changes:
        parts.append(
            _empty(
                "No contradictions or revisions in this scope yet. They appear when a newer memory states the "
                "opposite of an older one (for example <em>enabled</em> then <em>disabled</em>), or revises, "
                "versions or consolidates it."
            )
        )
        parts.append("</section>")
        return "".join(parts)
    resolved = sum(1 for pair in view.contradictions if pair.status != "open")
    parts.append(
        _kpis(
            [
                (f"{view.open_contradictions:,}", "open contradictions", None),
                (f"{resolved:,}", "resolved (shown)", None),
                (f"{len(view.changes):,}", "recent changes", None),
            ]
        )
    )
    caption = (
        "Each row is a contradiction pair: the older memory (grey) to the newer one (orange while open, "
        "green once resolved), ◆ when it was detected."
    )
    if view.changes:
        caption += " The bottom strip marks revisions and consolidations (hover for what replaced what)."
    parts.append(_figure(_drift_timeline(data), caption))
    parts.append("<h3>Contradiction pairs</h3>")
    if view.contradictions:
        parts.append('<div class="pairs">')
        for number, pair in enumerate(view.contradictions, 1):
            parts.append(_pair_card(number, pair))
        parts.append("</div>")
    else:
        parts.append(_empty("No contradiction pairs: the memories of this scope agree with each other."))
    parts.append("<h3>What superseded what</h3>")
    if view.changes:
        rows = []
        for change in view.changes:
            event = change.event
            replaced = change.replaced.preview if change.replaced else ""
            by = change.by.preview if change.by else ""
            rows.append(
                "<tr>"
                f"<td>{_e(event.at)}</td><td>{_e(event.action)}</td>"
                f'<td><span class="id">{_e(event.memory_id)}</span><div class="preview">{_e(replaced)}</div></td>'
                f'<td><span class="id">{_e(event.related_id or "")}</span><div class="preview">{_e(by)}</div></td>'
                f"<td>{_e(event.resolver)}</td><td>{_e(event.reason)}</td><td>{_e(event.by_agent)}</td>"
                "</tr>"
            )
        head = _head(["when", "action", "replaced", "by", "decided by", "reason", "agent"])
        parts.append(f'<table class="sortable">{head}<tbody>{"".join(rows)}</tbody></table>')
    else:
        parts.append(_empty("No revisions or consolidations yet."))
    parts.append("</section>")
    return "".join(parts)


def _pair_card(number: int, pair: ContradictionView) -> str:
    badge = f'<span class="badge {"open" if pair.status == "open" else "resolved"}">{_e(pair.status)}</span>'
    resolution = f" — {_e(pair.resolution)}" if pair.resolution else ""
    sides = "".join(
        f'<div class="side"><small>{label} · <span class="id">{_e(brief.id)}</span> · {_e(brief.agent_id)} · '
        f"{_e(brief.created_at)} · {_e(brief.status)}</small>"
        f'<div class="preview">{_e(brief.preview)}</div></div>'
        for label, brief in (("older", pair.older), ("newer", pair.newer))
    )
    return (
        f'<div class="pair"><h4>#{number} {badge} {_e(pair.kind)}: {_e(pair.detail)} · detected '
        f"{_e(pair.detected_at)}{resolution}</h4>{sides}</div>"
    )


def _drift_timeline(data: ReportData) -> str:
    pairs = data.drift.contradictions[:MAX_TIMELINE_PAIRS]
    changes = data.drift.changes
    moments = [_time(t) for p in pairs for t in (p.older.created_at, p.newer.created_at, p.detected_at)]
    moments += [_time(change.event.at) for change in changes]
    first, last = min(moments), max(moments)
    span = (last - first).total_seconds() or 1.0
    row_height = 22
    height = 40 + row_height * (len(pairs) + (1 if changes else 0)) + 40
    chart = _Chart(900, height, left=64, bottom=40, right=24, top=16)
    out = [chart.open("Timeline of contradiction pairs and changes")]

    def x(moment: datetime) -> float:
        offset = (moment - first).total_seconds()
        return chart.left + chart.plot_w * (offset / span if last > first else 0.5)

    out.append(
        f'<line class="axis" x1="{chart.left}" x2="{chart.left + chart.plot_w}" y1="{chart.bottom_y}" '
        f'y2="{chart.bottom_y}"/>'
    )
    out += _time_labels(chart, x, first, last)
    for row, pair in enumerate(pairs):
        y = chart.top + row_height * (row + 0.5)
        older, newer, detected = (
            _time(pair.older.created_at),
            _time(pair.newer.created_at),
            _time(pair.detected_at),
        )
        colour = OPEN if pair.status == "open" else RESOLVED
        tip = f"#{row + 1} {pair.status}: “{pair.older.preview}” vs “{pair.newer.preview}”"
        out.append(f'<text x="{chart.left - 8}" y="{y + 4:.1f}" text-anchor="end">#{row + 1}</text>')
        out.append(
            f"<g><title>{_e(tip)}</title>"
            f'<line x1="{x(older):.1f}" x2="{x(newer):.1f}" y1="{y:.1f}" y2="{y:.1f}" stroke="{colour}" '
            'stroke-width="3" stroke-opacity="0.5"/>'
            f'<circle cx="{x(older):.1f}" cy="{y:.1f}" r="5" fill="#8c959f"/>'
            f'<circle cx="{x(newer):.1f}" cy="{y:.1f}" r="5" fill="{colour}"/>'
            f'<path d="M{x(detected):.1f} {y - 6:.1f}l5 6l-5 6l-5 -6z" fill="#1f2328" fill-opacity="0.6"/></g>'
        )
    if changes:
        y = chart.top + row_height * (len(pairs) + 0.5)
        out.append(f'<text x="{chart.left - 8}" y="{y + 4:.1f}" text-anchor="end">changes</text>')
        actions = sorted({change.event.action for change in changes})
        for change in changes:
            colour = PALETTE[actions.index(change.event.action) % len(PALETTE)]
            replaced = change.replaced.preview if change.replaced else change.event.memory_id
            by = change.by.preview if change.by else change.event.related_id or ""
            tip = f"{change.event.action} at {change.event.at}: “{replaced}” → “{by}”"
            at = x(_time(change.event.at))
            out.append(
                f'<rect x="{at - 2:.1f}" y="{y - 8:.1f}" width="4" height="16" fill="{colour}">'
                f"<title>{_e(tip)}</title></rect>"
            )
    out.append(chart.close())
    return "".join(out)


# ---------------------------------------------------------------------------------------- clusters


def _clusters_section(section: CorroborationSection) -> str:
    parts = [
        '<section id="clusters"><h2>Corroboration clusters</h2>',
        '<p class="lede">Near-duplicate memories (SimHash) and exact restatements by several agents: each '
        "cluster's members rank with a boost of log2(1 + corroborating agents) × 0.1 (at most 0.3).</p>",
    ]
    if not section.clusters:
        parts.append(
            _empty(
                "No clusters yet. One forms when two or more agents remember the same conclusion (or one "
                "agent states it in near-identical words); the aggregation job finds them."
            )
        )
        parts.append("</section>")
        return "".join(parts)
    if section.aggregation is not None:
        last = section.aggregation
        parts.append(
            f"<p>Last aggregation pass: {last.clusters:,} clusters, {last.contradictions:,} contradictions, "
            f"{last.corroboratedCount:,} corroborated, over {last.rows:,} memories in {last.elapsedMs:,.0f} ms"
            f"{' (' + html.escape(last.finished_at) + ')' if last.finished_at else ''}.</p>"
        )
    parts.append(
        _kpis(
            [
                (f"{section.clusters:,}", "clusters", None),
                (f"{section.corroborated:,}", "corroborated by another agent", None),
                (f"{section.memories_in_clusters:,}", "memories in clusters", None),
            ]
        )
    )
    parts.append(
        _figure(
            _cluster_bars(section.shown),
            f"The {len(section.shown)} biggest clusters: bar = members, label = agents and boost.",
        )
    )
    for cluster in section.shown:
        parts.append(_cluster_details(cluster))
    parts.append("</section>")
    return "".join(parts)


def _cluster_bars(clusters: Sequence[ClusterView]) -> str:
    items = [
        _Bar(
            label=clip(_canonical_preview(cluster) or cluster.canonical_id, 34),
            value=cluster.size,
            note=f"{cluster.size} · {len(cluster.agents)} agents · +{cluster.boost:.3f}",
            tip=f"{cluster.canonical_id}: {_canonical_preview(cluster)} — agents {', '.join(cluster.agents)}",
            colour=PALETTE[0] if cluster.corroboration_score else UNCHANGED,
        )
        for cluster in clusters
    ]
    return _hbars(items, "Bar chart of cluster sizes", label_width=230)


def _canonical_preview(cluster: ClusterView) -> str:
    return next((member.preview for member in cluster.members if member.canonical), "")


def _cluster_details(cluster: ClusterView) -> str:
    members = "".join(
        f'<div class="member{" canonical" if member.canonical else ""}"><small>'
        f'{"canonical · " if member.canonical else ""}<span class="id">{_e(member.id)}</span> · '
        f"{_e(member.agent_id)} · weight {member.weight:.3f}</small>"
        f'<div class="preview">{_e(member.preview)}</div></div>'
        for member in cluster.members
    )
    summary = (
        f"<b>{cluster.size}</b> {'member' if cluster.size == 1 else 'members'} · "
        f"agents {_e(', '.join(cluster.agents))} · corroboration "
        f"{cluster.corroboration_score} · boost +{cluster.boost:.3f} — "
        f'<span class="preview">{_e(clip(_canonical_preview(cluster), 90))}</span>'
    )
    return f'<details class="cluster"><summary>{summary}</summary>{members}</details>'


# ---------------------------------------------------------------------------------------- store health


def _health_section(data: ReportData) -> str:
    health = data.health
    disk = _bytes(health.disk_bytes) if health.disk_bytes is not None else "n/a (not a local folder)"
    parts = [
        '<section id="health"><h2>Store health</h2>',
        f'<p class="lede">Schema version {health.schema_version}, {health.vector_dim}-dimensional vectors, '
        f"{_e(disk)} on disk. Many small fragments or many unindexed rows slow reads down until maintenance "
        "compacts the table and folds the rows into its indexes.</p>",
        _kpis(
            [
                (f"{health.memories:,}", "memories in this scope", None),
                (f"{health.by_status.get('active', 0):,}", "active", None),
                (f"{sum(t.rows for t in health.tables):,}", "rows in all tables", None),
                (f"{sum(t.small_fragments for t in health.tables):,}", "small fragments", None),
            ]
        ),
    ]
    parts.append("<h3>Memories in this scope</h3>")
    if health.memories == 0 and health.elsewhere:
        shown = listed([html.escape(name) for name in health.elsewhere], 10)
        parts.append(
            _empty(
                f"This scope holds no memories; these scopes of the store do: {shown}. Run "
                "<code>memoria report --org ORG --project PROJECT</code> for one of them."
            )
        )
    elif health.memories == 0:
        parts.append(_empty("This scope holds no memories yet: call <code>remember</code> to store one."))
    else:
        charts = []
        for title, counts in (
            ("by status", health.by_status),
            ("by kind", health.by_kind),
            ("by protection tier", health.by_tier),
            ("by embedder", health.by_embedder),
        ):
            bars = [
                _Bar(
                    label=clip(name, 28),
                    value=count,
                    note=f"{count:,}",
                    tip=f"{name}: {count:,}",
                    colour=PALETTE[0],
                )
                for name, count in counts.items()
            ]
            charts.append(
                _figure(_hbars(bars, f"Memories {title}", label_width=170, width=520), f"Memories {title}.")
            )
        parts.append(f'<div class="charts">{"".join(charts)}</div>')
    parts.append("<h3>Tables</h3>")
    rows_chart = _hbars(
        [
            _Bar(
                label=t.name,
                value=t.rows,
                note=f"{t.rows:,}",
                tip=f"{t.name}: {t.rows:,} rows",
                colour=PALETTE[0],
            )
            for t in health.tables
        ],
        "Bar chart of rows per table",
        label_width=150,
        width=520,
    )
    fragments_chart = _hbars(
        [
            _Bar(
                label=t.name,
                value=t.fragments,
                note=f"{t.fragments:,} ({t.small_fragments:,} small)",
                tip=f"{t.name}: {t.fragments:,} fragments, {t.small_fragments:,} small",
                colour=PALETTE[4],
                part=t.small_fragments,
            )
            for t in health.tables
        ],
        "Bar chart of fragments per table, small ones highlighted",
        label_width=150,
        width=520,
    )
    parts.append(
        '<div class="charts">'
        + _figure(rows_chart, "Rows per table.")
        + _figure(fragments_chart, "Fragments per table; the small ones (orange) are what compaction merges.")
        + "</div>"
    )
    table_rows = "".join(
        "<tr>"
        f'<td class="id">{_e(t.name)}</td><td class="num">{t.rows:,}</td><td class="num">{t.fragments:,}</td>'
        f'<td class="num">{t.small_fragments:,}</td><td class="num">{t.version:,}</td>'
        f'<td class="num" data-v="{t.data_bytes}">{_bytes(t.data_bytes)}</td>'
        f'<td class="num" data-v="{t.disk_bytes or 0}">{_bytes(t.disk_bytes) if t.disk_bytes is not None else "—"}</td>'
        f'<td class="num">{len(t.indexes)}</td>'
        "</tr>"
        for t in health.tables
    )
    head = _head(
        ["table", "rows", "fragments", "small", "version", "data", "on disk", "indexes"],
        numeric={1, 2, 3, 4, 5, 6, 7},
    )
    parts.append(f'<table class="sortable">{head}<tbody>{table_rows}</tbody></table>')
    parts.append("<h3>Indexes</h3>")
    index_rows = "".join(
        "<tr>"
        f'<td class="id">{_e(t.name)}</td><td class="id">{_e(index.name)}</td><td>{_e(index.index_type)}</td>'
        f'<td class="id">{_e(", ".join(index.columns))}</td><td class="num">{index.indexed_rows:,}</td>'
        f'<td class="num">{index.unindexed_rows:,}</td>'
        "</tr>"
        for t in health.tables
        for index in t.indexes
    )
    if index_rows:
        head = _head(["table", "index", "type", "columns", "indexed rows", "unindexed rows"], numeric={4, 5})
        parts.append(f'<table class="sortable">{head}<tbody>{index_rows}</tbody></table>')
    else:
        parts.append(_empty("No indexes yet: the store builds them as tables grow."))
    parts.append("</section>")
    return "".join(parts)


# ---------------------------------------------------------------------------------------- building blocks


@dataclass(frozen=True)
class _Chart:
    """An SVG canvas with a plot area inside margins (user units; the SVG scales to its container)."""

    width: int
    height: int
    left: int = 48
    bottom: int = 40
    right: int = 16
    top: int = 16

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom

    @property
    def bottom_y(self) -> float:
        return self.height - self.bottom

    def open(self, label: str) -> str:
        return (
            f'<svg class="chart" viewBox="0 0 {self.width} {self.height}" width="{self.width}" '
            f'height="{self.height}" role="img" aria-label="{_e(label)}" xmlns="http://www.w3.org/2000/svg">'
        )

    def close(self) -> str:
        return "</svg>"

    def y_axis(
        self, low: float, high: float, label: Callable[[float], str], *, integer: bool = False
    ) -> list[str]:
        out = []
        for tick in _ticks(low, high, integer=integer):
            y = self.bottom_y - self.plot_h * (tick - low) / (high - low)
            out.append(
                f'<line class="grid" x1="{self.left}" x2="{self.left + self.plot_w}" y1="{y:.1f}" y2="{y:.1f}"/>'
            )
            out.append(
                f'<text x="{self.left - 6}" y="{y + 4:.1f}" text-anchor="end">{_e(label(tick))}</text>'
            )
        out.append(
            f'<line class="axis" x1="{self.left}" x2="{self.left + self.plot_w}" y1="{self.bottom_y}" '
            f'y2="{self.bottom_y}"/>'
        )
        return out

    def x_title(self, text: str) -> str:
        return (
            f'<text x="{self.left + self.plot_w / 2:.1f}" y="{self.height - 8}" text-anchor="middle">'
            f"{_e(text)}</text>"
        )

    def y_title(self, text: str) -> str:
        middle = self.top + self.plot_h / 2
        return (
            f'<text x="14" y="{middle:.1f}" text-anchor="middle" transform="rotate(-90 14 {middle:.1f})">'
            f"{_e(text)}</text>"
        )


@dataclass(frozen=True)
class _Bar:
    label: str
    value: int
    note: str
    tip: str
    colour: str
    part: int = 0  # a highlighted first part of the bar (small fragments)


def _hbars(bars: Sequence[_Bar], label: str, *, label_width: int, width: int = 900) -> str:
    row = 24
    chart = _Chart(width, 16 + row * len(bars) + 8, left=label_width, bottom=8, right=140, top=16)
    top = max(1, *(bar.value for bar in bars)) if bars else 1
    out = [chart.open(label)]
    for index, bar in enumerate(bars):
        y = chart.top + index * row
        length = chart.plot_w * bar.value / top
        part = chart.plot_w * min(bar.part, bar.value) / top
        out.append(f"<g><title>{_e(bar.tip)}</title>")
        out.append(f'<text x="{chart.left - 8}" y="{y + 15}" text-anchor="end">{_e(bar.label)}</text>')
        out.append(
            f'<rect x="{chart.left}" y="{y + 3}" width="{max(length, 1):.1f}" height="{row - 8}" rx="2" '
            f'fill="{bar.colour}"/>'
        )
        if part:
            out.append(
                f'<rect x="{chart.left}" y="{y + 3}" width="{part:.1f}" height="{row - 8}" rx="2" fill="{PALETTE[1]}"/>'
            )
        out.append(f'<text x="{chart.left + max(length, 1) + 6:.1f}" y="{y + 15}">{_e(bar.note)}</text></g>')
    out.append(chart.close())
    return "".join(out)


def _time_labels(chart: _Chart, x: Callable[[datetime], float], first: datetime, last: datetime) -> list[str]:
    """The first and last moment under the x axis (one label when they are the same)."""
    moments = (first, last) if last > first else (first,)
    anchors = ("start", "end") if last > first else ("middle",)
    return [
        f'<text x="{x(moment):.1f}" y="{chart.bottom_y + 14:.1f}" text-anchor="{anchor}">'
        f"{_e(moment.strftime('%Y-%m-%d %H:%M'))} UTC</text>"
        for moment, anchor in zip(moments, anchors, strict=True)
    ]


def _step(span: float, count: int, integer: bool) -> float:
    """A round tick step giving about ``count`` ticks over ``span`` (whole numbers for counts and ranks)."""
    raw = span / count
    magnitude = 10 ** math.floor(math.log10(raw))
    multipliers = (1, 2, 5, 10) if integer else (1, 2, 2.5, 5, 10)
    step = next(m * magnitude for m in multipliers if m * magnitude >= raw)
    return max(1.0, step) if integer else step


def _ticks(low: float, high: float, count: int = 5, *, integer: bool = False) -> list[float]:
    if high <= low:
        return [low]
    step = _step(high - low, count, integer)
    ticks = []
    value = math.ceil(low / step) * step
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _nice_max(value: int) -> float:
    """The first whole tick at or above ``value`` (a count), so the tallest bar stays inside the axis."""
    step = _step(max(value, 1), 5, integer=True)
    return math.ceil(max(value, 1) / step) * step


def _kpis(items: Sequence[tuple[str, str, str | None]]) -> str:
    cards = "".join(
        f'<div class="kpi"{f" title={_q(tip)}" if tip else ""}><b>{_e(value)}</b><span>{_e(label)}</span></div>'
        for value, label, tip in items
    )
    return f'<div class="kpis">{cards}</div>'


def _head(names: Sequence[str], numeric: set[int] | frozenset[int] = frozenset()) -> str:
    cells = "".join(
        f"<th{' class=num' if index in numeric else ''}>{_e(name)}</th>" for index, name in enumerate(names)
    )
    return f"<thead><tr>{cells}</tr></thead>"


def _figure(svg: str, caption: str) -> str:
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


def _empty(message_html: str) -> str:
    """``message_html`` is markup written here, never data."""
    return f'<div class="empty"><strong>Nothing yet</strong> — {message_html}</div>'


def _e(value: object) -> str:
    """``value`` as page text: its control and hidden characters written as ``<U+001B>``, as the terminal
    shows them (a new user's trial found an escape and a bell raw in the page), then escaped."""
    return html.escape(shown_safely(str(value)), quote=True)


def _q(value: str) -> str:
    return f'"{_e(value)}"'


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _bytes(count: int | None) -> str:
    if count is None:
        return "—"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"

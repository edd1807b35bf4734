"""Plotly figures of the Python API's DataFrames (``Overview.plot()``) and of the HTML report: one palette for the
step-breakdown categories everywhere, the plugin's own (``frontend/src/views/common/stepCategories.ts``;
``tests/unit/test_report.py`` keeps the two equal), so a category has one colour in every bar, pie and page.

plotly is imported here only, on first use: ``tb_plugin.open`` never loads it for a script that draws nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    import plotly.graph_objects as go

CATEGORY_COLORS = {
    "Kernel": "#4e79a7",
    "Memcpy": "#e15759",
    "Memset": "#edc948",
    "Communication": "#59a14f",
    "Runtime": "#b07aa1",
    "DataLoader": "#f28e2b",
    "CPU Exec": "#76b7b2",
    "Other": "#9e9e9e",
}


def step_bars(steps: pd.DataFrame, categories: list[str], title: str = "Step time breakdown (ms)") -> go.Figure:
    """Stacked bars, one per step (``Overview.steps``: a ``<category>_us`` column each), in ms, the categories in
    the breakdown's order and colours."""
    import plotly.express as px

    columns = {c.lower().replace(" ", "_") + "_us": c for c in categories}
    per_step = steps[list(columns)].rename(columns=columns) / 1000.0
    long = per_step.reset_index().melt(id_vars=steps.index.name or "index", var_name="category", value_name="ms")
    x = steps.index.name or "index"
    figure: go.Figure = px.bar(long, x=x, y="ms", color="category", title=title,
                               color_discrete_map=CATEGORY_COLORS, category_orders={"category": categories})
    return figure


def share_pie(breakdown: pd.DataFrame, title: str = "Average step, by category") -> go.Figure:
    """A pie of the average step's categories (``Overview.breakdown``: ``time_us`` by category), same colours."""
    import plotly.express as px

    shown = breakdown[breakdown["time_us"] > 0].reset_index()
    figure: go.Figure = px.pie(shown, names="category", values="time_us", title=title, color="category",
                               color_discrete_map=CATEGORY_COLORS,
                               category_orders={"category": list(breakdown.index)})
    figure.update_traces(sort=False)
    return figure

"""``render_html``, the HTML report of a summary (it lives in ``analysis/html_report.py``)."""
from torch_xxnpu.profiler.analysis.html_report import render_html

__all__ = ["render_html"]

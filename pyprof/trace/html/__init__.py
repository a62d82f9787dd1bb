"""One self-contained HTML file a person opens: the report of a trace, or of two compared.

``pyprof report TRACE [TRACE2] -o report.html`` is :func:`report_html`; :mod:`.build` assembles
the page from the summaries and the difference pyprof already computes, :mod:`.columns` turns a
trace into the timeline's columns (a session's step marks among them), :mod:`.roofview` gives
the roofline of a trace with FLOPs (``pyprof roofline``'s points), and ``assets/`` holds the
page's code (hand-written timeline on a canvas, the tables) and the vendored uPlot for the
memory and roofline charts.
"""

from .build import CSP, UPLOT_VERSION, ReportResult, report_html
from .columns import timeline

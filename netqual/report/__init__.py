"""Reports for people: the self-contained HTML report and the CSV export."""

from netqual.report.csv import write_csv
from netqual.report.html import render_html, write_html

__all__ = ["render_html", "write_csv", "write_html"]

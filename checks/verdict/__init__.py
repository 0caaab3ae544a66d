"""Verdicts (plain frozen data) and their renderers: a table, JSON and JUnit XML."""

from kvsched.checks.verdict.machine import render_json, render_junit_xml
from kvsched.checks.verdict.render import render_table
from kvsched.checks.verdict.report import AllocatorVerdict, Report, Verdict, build_verdict

__all__ = [
    "AllocatorVerdict",
    "Report",
    "Verdict",
    "build_verdict",
    "render_json",
    "render_junit_xml",
    "render_table",
]

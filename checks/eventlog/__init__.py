"""JSONL event logs (spec/eventlog.md): the way an engine in any language is checked."""

from kvsched.checks.eventlog.jsonl import check_log, log_lines, read_log, read_run, write_log
from kvsched.checks.eventlog.lines import EventLogError

__all__ = ["EventLogError", "check_log", "log_lines", "read_log", "read_run", "write_log"]

"""The normative semantics of kvsched as data: workloads, the scheduler protocol, events and the
invariant catalogue. The prose is semantics.md beside this file. Imports nothing else of kvsched.
"""

"""Comparing the asv suite of two commits offline, for ``kvsched bench``.

- :mod:`.checkout`: a throwaway clone, commits exported and laid out as the package kvsched;
- :mod:`.asv`: asv's configuration, runs and ``compare`` table;
- :mod:`.verdict`: which rows are gated, and whether the candidate got worse.
"""

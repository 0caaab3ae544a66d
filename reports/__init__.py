"""``kvsched report``: figures from runs or asv results, as Markdown, HTML and PNG, and the gate.

One job per module, in pipeline order: :mod:`.collect` runs workloads under policies
(:mod:`.series` reads spans and per-iteration figures off the events; :mod:`.progress` shows a
bar on a terminal), or :mod:`.sources` reads a previous report's ``results.json``
(:mod:`.results`, with :mod:`.provenance`: version, commit, time) or asv results
(:mod:`.asv_results`); :mod:`.compare` sets a baseline against the candidate and :mod:`.gate`
checks ``--fail-on`` thresholds. :mod:`.gantt` (a row per request) and :mod:`.crowd` (counts
over time and a zoom, for large workloads) draw the timeline, :mod:`.plots` the pages and waits
(:mod:`.figures` keeps the PNGs byte-stable); :mod:`.observations` says what a run shows (memory
binds, a growing queue, what idle slots are); :mod:`.story` and :mod:`.handover` tell the
lesson's story from the runs; :mod:`.numbers` writes every number one way. :mod:`.document` lays
the report out, verdict first (:mod:`.banner`), then :mod:`.overview` for several workloads and
:mod:`.comparison_view`; :mod:`.render` writes it. :mod:`.build` ties them together for the
command, :mod:`kvsched.commands.report`. :mod:`.history` and :mod:`.history_view` draw figures
over commits (``--history``); :mod:`.bench` backs ``kvsched bench``.
"""

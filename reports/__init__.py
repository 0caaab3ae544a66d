"""``kvsched report``: figures from runs or asv results, as Markdown, HTML and PNG, and the gate.

One job per module, in pipeline order: :mod:`.collect` runs workloads under policies
(:mod:`.series` reads spans and per-iteration figures off the events; :mod:`.progress` shows a
bar on a terminal), or :mod:`.sources` reads a previous report's ``results.json``
(:mod:`.results`) or asv results (:mod:`.asv_results`); :mod:`.compare` sets a baseline against
the candidate and :mod:`.gate` checks ``--fail-on`` thresholds; :mod:`.gantt` and :mod:`.plots`
draw (:mod:`.figures` keeps the PNGs byte-stable); :mod:`.story` and :mod:`.handover` tell the
lesson's story from the runs; :mod:`.document` lays the report out and :mod:`.render` writes it.
:mod:`.build` ties them together for the command, :mod:`kvsched.commands.report`.
"""

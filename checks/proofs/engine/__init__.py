"""A bounded Z3 model of the reference engine scheduler with recompute preemption
(spec/proofs.md, section 8).

:mod:`.system` holds the symbolic workload, design and state, :mod:`.slots` the ordered lists
(the running batch and the waiting queue), :mod:`.step` one iteration as
``reference/engine_scheduler/scheduler.py`` runs it, :mod:`.claims` the safety layer and LIVE-3
as Z3 facts, :mod:`.induction` the safety layer for every iteration, :mod:`.liveness` LIVE-3 for
every iteration of the designs that admit nobody after a preemption (and of mixed batching
either way), :mod:`.unroll` bounded model checking over every workload within the bounds (the
thrash witnesses),
:mod:`.replay` the model on a concrete workload and its cross-check with the reference and the
monitor, :mod:`.scope` what the model covers, :mod:`.results` the lines ``kvsched prove
--engine`` prints.
"""

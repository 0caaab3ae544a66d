"""Z3 proofs and synthesis.

- :mod:`.model`, :mod:`.workload`, :mod:`.invariant`, :mod:`.pages`, :mod:`.query`: the symbolic
  model of the reference policies and the questions asked of it; :mod:`.budgets`: every Z3
  budget, in resource units (never seconds, so a verdict does not depend on the load);
- :mod:`.induction`, :mod:`.bmc`, :mod:`.compare`, :mod:`.replay`: the proofs;
- :mod:`.catalogue`: the claims ``kvsched prove`` checks; :mod:`.evidence`: which invariants a
  verdict may cite as proved;
- :mod:`.synthesis`, :mod:`.searches`: ``kvsched synth``;
- :mod:`.teaching`: the reconstruction of the lesson's teaching trace.

The root imports nothing: z3 is loaded only when a proof is asked for.
"""

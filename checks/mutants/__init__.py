"""Planted bugs and the mutation score.

- :mod:`.zoo`: the zoo, every mutant with the invariant id that must catch it;
- :mod:`.paging`, :mod:`.batching`, :mod:`.hostile`: broken schedulers and allocators, importable
  as targets (``kvsched check kvsched.checks.mutants.paging:LeakOnFinish``) and shared by tests;
- ``learner/``: broken learner solutions, package data written out as files when checked;
- :mod:`.run`: checks a mutant as ``kvsched check`` would and computes the score.
"""

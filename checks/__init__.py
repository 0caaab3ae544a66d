"""checks/: everything that judges a scheduler against spec/, in rooms by job.

- :mod:`.monitor`: the runtime monitor and its ledgers (needs neither Hypothesis nor Z3);
- :mod:`.eventlog`: reading and writing JSONL event logs;
- :mod:`.search`: the Hypothesis search (strategies, profiles, shrinking, the state machine);
- :mod:`.proofs`: Z3 proofs and synthesis, including the teaching-trace reconstruction;
- :mod:`.targets`: loading targets, the learner adapter, the host process and deadlines;
- :mod:`.verdict`: verdicts and their renderers (table, JSON, JUnit);
- :mod:`.judge`: combines the rooms above into a :class:`~.verdict.Report`;
- :mod:`.mutants`: the planted-bug zoo and the mutation score;
- :mod:`.pytest_plugin`: the same judge as pytest tests.

A new invariant check goes into :mod:`.monitor` (registered by its catalogue id), a new target
kind into :mod:`.targets`, a new proof into :mod:`.proofs`.
"""

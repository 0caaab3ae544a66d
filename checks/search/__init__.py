"""The Hypothesis search: workload strategies, profiles, the id-locked search and shrinking,
and a stateful test that runs a target in step with the reference.

Import the modules you need (:mod:`.explore`, :mod:`.strategies`, :mod:`.stateful`, ...): this
package's root imports nothing, so that loading one of them does not pull in the others.
"""

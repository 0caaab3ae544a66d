"""Planted bugs and the mutation score: how many of them ``kvsched check`` catches with the
right invariant id (:mod:`.run`)."""

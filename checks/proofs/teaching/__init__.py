"""The lesson's teaching trace, reconstructed with Z3: :mod:`.model` writes both schedules in
closed form over the unknown workload, :mod:`.reconstruct` searches it (``kvsched reconstruct``)."""

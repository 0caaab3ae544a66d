"""Recorders: drive a real engine's scheduler over a kvsched workload and write its event log."""

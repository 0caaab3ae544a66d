"""kvsched: verify and benchmark the schedulers of LLM-serving engines."""

from kvsched.reference.pages import allocate_kv_pages

__all__ = ["allocate_kv_pages"]
__version__ = "0.1.0"

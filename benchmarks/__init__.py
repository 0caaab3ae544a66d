"""kvsched's asv benchmark suite (see README.md here). Not part of the kvsched package."""

"""Shells: each wraps one library or the file system (RocksDB, hnswlib, MiniLM, BPE, files, certs)."""

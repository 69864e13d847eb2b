"""Governed access: who may read what, and retrieval that filters before it ranks."""

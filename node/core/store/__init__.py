"""The sealed store: KV and blob interfaces, vector indexes, views, the lexical index."""

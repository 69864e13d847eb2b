"""The pure core: the node, its service, hydration, replication objects; no I/O, no bindings."""

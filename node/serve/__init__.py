"""Transports: the gRPC daemon and servicer, the client, the replicator."""

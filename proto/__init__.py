"""Wire schemas (protobuf) and their conversions to the domain types."""

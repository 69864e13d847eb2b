"""Text in: records, parsers, the envelope, extraction and the privacy classifier."""

"""Memory over time: ingestion into the journal, curation, tiers and the level-of-detail ladder."""

"""One module per ingest stage. Each declares what it needs, the tables it owns and its params;
the pipeline (ingest/pipeline.py) handles hashing, skipping, commits and resume, and
ingest/registry.py names the stages by dotted path."""

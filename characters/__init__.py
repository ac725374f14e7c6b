"""Who is who in a film: voice clusters (Resemblyzer), face clusters (dlib), names read from the
dialogue, captions and on-screen text, and the registry that links them. The ingest stages that
run this live in ingest/stages/; the naming rules here read rows and lines, not the pipeline."""

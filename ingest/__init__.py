"""Turning a film into memory: the pipeline, the stage types (stage.py), one module per stage
(stages/), and the media readers they call (probe, frames, shots, ASR, OCR, subtitles, captioner).
The narrative graph's builders live in graph/, who-is-who in characters/."""

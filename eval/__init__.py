"""Measuring policies and retrievers: benchmarks in, scored run directories and reports out.

`formats.py` reads benchmark files (a plug-in format or adapter adds one) and `tasks.py` scores their
items; `runner.py` answers every item with every policy and backbone into a resumable run directory
whose lines `records.py` types; `metrics.py`, `compare.py` and `report.py` (the inspector) read it back.
`retrieval_eval.py` measures retrieval alone against gold evidence spans, with no model.
"""

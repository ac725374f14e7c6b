"""A film's memory: the LanceDB tables the ingest stages write, and the views policies read.

`schema.py` holds the row models and which stage owns each table (`register_table` adds a plug-in
stage's own); `store.py` is the only module that opens LanceDB; `view.py`'s `FilmMemory` shows one
film's finished rows, optionally cut to a window or to what is shown by a time; `search.py`,
`bm25.py` and `vector_pack.py` rank a film's text rows in process; `catalog.py` and `bundle.py` save
listings and move films between libraries.
"""

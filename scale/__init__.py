"""Scale-out on Ray: many films ingested at once, benchmark grids answered by a pool of workers.

Nothing here is imported by the rest of moviemem, and Ray itself is imported only when one of
these modules is: `moviemem ingest/bench --ray ADDRESS` is the way in.

- cluster.py       `--ray` addresses, connecting, what the cluster offers
- ray_ingest.py    one chain of Ray tasks per film (resources declared per stage group)
- ray_bench.py     the benchmark runner with its answers made by Ray actors
- remote_cache.py  the replay cache served by one actor, so workers on any node share it
"""

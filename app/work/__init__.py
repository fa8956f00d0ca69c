"""How the window's work is scheduled so that the UI thread never stalls: jobs off the UI thread (jobs.py), the
model's own worker thread (worker.py), the garbage-collector guard (gc_guard.py), recomputes made ahead
(warmup.py) and widgets built on idle turns (prebuild.py)."""

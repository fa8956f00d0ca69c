"""Recording a forward pass: the trace of named steps (trace.py), what a lazy trace keeps in place of large tensors
and recomputes on demand (lazy.py), non-finite values found and named (nonfinite.py), and the context through
which interventions reach each named point (intervention_context.py). The bottom layer: it imports nothing of the
model, and every module of the model records through it."""

"""The tabs of the centre area. Each view draws from the window's current run, step, batch item and head."""

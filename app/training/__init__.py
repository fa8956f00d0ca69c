"""File › Train…: the form, the estimate of time and size, the process that trains (training_runner.py), and what
closing the window does to a training run."""

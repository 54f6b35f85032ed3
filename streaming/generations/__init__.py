"""This process's generations: the registry (created, streaming, just finished) and resume."""

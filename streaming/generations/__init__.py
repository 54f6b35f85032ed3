"""This process's generations: the registry and their answers (log, readers, grace, retention)."""

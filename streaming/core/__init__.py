"""The vocabulary, free of Django: a generation request, its token stream and counters, errors,
latency."""

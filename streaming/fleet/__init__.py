"""Everything REDIS_URL adds: the web↔worker protocol, the web process's engine, the model worker,
the relay between web processes, the Redis store."""

"""Everything REDIS_URL adds: the web↔worker protocol, the web process's engine, the model worker,
answers' logs in Redis and their replicas in other web processes, the Redis store."""

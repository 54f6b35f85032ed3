"""Who used what (docs/usage.md): the tokens each person used, from the log; token budgets, the
counters they are checked on, a generation's claim and its settling; the rate limits and stream
slots. In the database, or with REDIS_URL in Redis, through scripts beside the code that runs
them (the deployment picks once). http/ asks before an answer starts; ops/ reports."""

"""Client-side programs (stream client, load test, lab, diagnosis, live server); the server never
imports them."""

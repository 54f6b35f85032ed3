"""Pure byte formats, for the server and the tools alike: SSE frames, OpenAI's shapes, a base
URL, the kernel's sock_diag answers."""

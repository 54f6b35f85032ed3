"""The web face: admission, the event-stream response, both APIs' endpoints, validation, auth,
limits, middleware, stalled readers, system checks."""

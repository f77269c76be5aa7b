"""The HTTP edge: authenticate, limit, validate, append to the log, answer."""

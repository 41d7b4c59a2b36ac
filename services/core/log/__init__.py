"""The log (NATS JetStream): connection, identities, streams and durables, publishing, reading
back, the worker pool, and the secrets a job carries sealed on it.
"""

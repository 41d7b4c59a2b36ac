"""Pressroom for its users: the Python client (`pressroom.client`) and the command line
(`pressroom.cli`: `pressroom render|batch|jobs`). The services live in `services/`."""

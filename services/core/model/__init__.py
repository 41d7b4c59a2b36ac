"""The vocabulary every room speaks: events, subjects, statuses, error types and errors,
options. Imports nothing of the project's.
"""

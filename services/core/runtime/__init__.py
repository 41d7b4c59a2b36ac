"""What every service runs on: settings, start-up and shutdown, logs, metrics, traces, the
error boundary.
"""

"""Tests of services/core/sandbox/."""

"""Tests of services/core/secrets/."""

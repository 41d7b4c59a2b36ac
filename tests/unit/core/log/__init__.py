"""Tests of services/core/log/."""

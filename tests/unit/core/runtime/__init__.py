"""Tests of services/core/runtime/."""
